"""How methods look in every figure of a suite: a hue per family (FAMILIES), a shade and a dash pattern per
method within its family, legends in the order of the tables.

Styles depend only on the suite's ordered method -> family map, so a method keeps its colour in every figure
of the suite, whichever subset of methods a figure shows."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fdabench.core.families import FAMILIES

#: a sequential matplotlib colormap per family (its dark end first)
FAMILY_COLORMAPS = {
    "baseline": "Greys",
    "fda": "Blues",
    "auto": "Reds",
    "federated": "Greens",
    "unsupervised": "Purples",
    "weakly_supervised": "YlOrBr",
}
#: matplotlib dash patterns ((on, off) lengths; empty: solid), one per rank within a family, cycled
DASHES = ((), (5, 2), (1.5, 1.5), (6, 2, 1.5, 2), (3, 1), (8, 3))
#: methods drawn as thin grey references in other families' panels of the rounds figure
REFERENCE_METHODS = ("source_only", "target_only")


@dataclass(frozen=True)
class MethodStyle:
    family: str
    colour: tuple[float, float, float]
    dashes: tuple[float, ...]


def method_styles(families: Mapping[str, str]) -> dict[str, MethodStyle]:
    """Style of every method in `families` (method -> its family, in table order): the k-th of n methods of a
    family takes the family colormap at 0.9 − 0.5·k/max(n − 1, 1) (dark to light) and DASHES[k]."""
    from matplotlib import colormaps

    by_family: dict[str, list[str]] = {}
    for method, family in families.items():
        if family not in FAMILY_COLORMAPS:
            raise ValueError(f"method {method!r}: unknown family {family!r}; known: {', '.join(FAMILY_COLORMAPS)}")
        by_family.setdefault(family, []).append(method)
    styles = {}
    for family, methods in by_family.items():
        colormap = colormaps[FAMILY_COLORMAPS[family]]
        for rank, method in enumerate(methods):
            shade = 0.9 - 0.5 * rank / max(len(methods) - 1, 1)
            styles[method] = MethodStyle(family, tuple(colormap(shade)[:3]), DASHES[rank % len(DASHES)])
    return styles


def families_in_order(styles: Mapping[str, MethodStyle], methods: Iterable[str]) -> dict[str, list[str]]:
    """family -> its methods among `methods`; families in FAMILIES order, methods in the given order."""
    present = list(methods)
    return {
        family: [method for method in present if styles[method].family == family]
        for family in FAMILIES
        if any(styles[method].family == family for method in present)
    }
