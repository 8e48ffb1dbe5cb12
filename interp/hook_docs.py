"""Markdown tables of every model class's hooks, read off the hook declarations (``interp.hooks``) of each registered
family's example models (``interp.families``): a family registered is a family documented.

A model class whose variants differ in their hooks (a ``variant`` attribute, e.g. the encoder's) gets one table per
variant. README.md's section is generated from it (``python -m poslens.readme``; one test keeps every section current).
"""

from __future__ import annotations


def models() -> list:
    """Every example model of every registered family, in registration order (a class may have several: variants
    whose configs give it different hooks)."""
    from interp.families import families

    return [model for family in families() for model in (family.examples() if family.examples else [])]


def sections() -> dict[tuple[type, str | None], list]:
    """Each model class's hooks per variant (``model.variant``, None for a class without variants): the union of its
    examples' tables, in forward order."""
    from interp.hooks import forward_rank

    out: dict[tuple, dict] = {}
    for model in models():
        rows = out.setdefault((type(model), getattr(model, "variant", None)), {})
        for row in model.hook_table():
            rows.setdefault(row.pattern, row)
    return {key: sorted(rows.values(), key=lambda h: forward_rank(h.pattern)) for key, rows in out.items()}


def tables() -> dict[type, list]:
    """Each model class's hooks, its variants' together."""
    from interp.hooks import forward_rank

    out: dict[type, dict] = {}
    for (cls, _), rows in sections().items():
        for row in rows:
            out.setdefault(cls, {}).setdefault(row.pattern, row)
    return {cls: sorted(rows.values(), key=lambda h: forward_rank(h.pattern)) for cls, rows in out.items()}


def table(cls, rows, family: str, variant: str | None = None) -> str:
    where = f"`{cls.__module__}`" + (f", variant `{variant}`" if variant is not None else "")
    lines = [f"**{family}: {cls.__name__}** ({where})", "", "| hook | shape | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{h.pattern}` | `{h.shape}` | {h.meaning.replace('|', chr(92) + '|')} |" for h in rows]
    return "\n".join(lines)


def matrix() -> str:
    """The family x TransformerLens hook matrix (``interp.tl.TL_HOOKS``): yes, or why the hook is absent (the model's
    ``tl_absent``), numbered under the table."""
    from interp.tl import TL_HOOKS

    columns: dict[tuple, list] = {}
    for model in models():
        columns.setdefault((type(model), getattr(model, "variant", None)), []).append(model)
    reasons: list[str] = []
    head = [f"{cls.family}" + (f" ({variant})" if variant else "") for cls, variant in columns]
    lines = ["| hook | " + " | ".join(head) + " |", "| --- |" + " --- |" * len(head)]
    for hook in TL_HOOKS:
        cells = []
        for examples in columns.values():
            if any(hook in {row.pattern for row in m.hook_table()} for m in examples):
                cells.append("yes")
                continue
            why = next((m.tl_absent().get(hook) for m in examples if m.tl_absent().get(hook)), "(no reason given)")
            if why not in reasons:
                reasons.append(why)
            cells.append(f"no ({reasons.index(why) + 1})")
        lines.append(f"| `{hook}` | " + " | ".join(cells) + " |")
    notes = [f"{i}. {why.replace('|', chr(92) + '|')}" for i, why in enumerate(reasons, 1)]
    return "\n".join(["**Every family x TransformerLens' hooks** (`interp.tl.TL_HOOKS`; no: absent, and why)", "",
                      *lines, "", *notes])


def markdown() -> str:
    return "\n\n".join([matrix()] + [table(cls, rows, cls.family, variant)
                                     for (cls, variant), rows in sections().items()])
