"""Named training recipes, one module per model family: a size, a config and the data each learns from."""

from __future__ import annotations

from poslens.train.loop import TrainSpec
from poslens.train.recipes import decoders, encoders, increments

FAMILIES = (increments, decoders, encoders)


def all_recipes() -> list[str]:
    return [name for family in FAMILIES for name in family.RECIPES]


def sizes() -> list[str]:
    return sorted({size for family in FAMILIES for size in family.SIZES})


def make_spec(recipe: str, *, size: str = "small", overrides: dict | None = None, seed: int = 0,
              n_validation: int = 64) -> TrainSpec:
    for family in FAMILIES:
        if recipe in family.RECIPES:
            if size not in family.SIZES:
                raise KeyError(f"recipe '{recipe}' comes in sizes {sorted(family.SIZES)}, not '{size}'")
            return family.spec(recipe, size=size, overrides=overrides, seed=seed, n_validation=n_validation)
    raise KeyError(f"unknown recipe '{recipe}' (known: {', '.join(all_recipes())})")
