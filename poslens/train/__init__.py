"""``poslens train RECIPE``: seeded, resumable training of the bundled model families."""

from poslens.train.loop import TrainSpec, train
from poslens.train.recipes import all_recipes, make_spec

__all__ = ["TrainSpec", "train", "all_recipes", "make_spec"]
