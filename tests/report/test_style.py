"""Method styles: every method has a family; a method's look depends on the suite, not on the figure."""

from itertools import combinations

import pytest

from fdabench.core.families import FAMILIES
from fdabench.methods import METHODS, get_method
from fdabench.report.style import FAMILY_COLORMAPS, families_in_order, method_styles


@pytest.mark.parametrize("name", METHODS.names())
def test_every_registered_method_has_a_known_family(name):
    assert get_method(name).family in FAMILIES


def test_every_family_has_a_colormap():
    assert set(FAMILY_COLORMAPS) == set(FAMILIES)


ALGORITHMS = {
    "source_only": "source_only",
    "target_only": "target_only",
    "oracle": "oracle",
    "fedda": "fedda",
    "fedgp": "fedgp",
    "fedgp_cosine": "fedgp",
    "fedda_auto": "fedda_auto",
    "fedgp_auto": "fedgp_auto",
    "finetune_offline": "finetune_offline",
    "fedprox": "fedprox",
    "ditto": "ditto",
    "kd3a": "kd3a",
}
SUITE = {method: get_method(algorithm).family for method, algorithm in ALGORITHMS.items()}


def test_methods_of_a_family_share_its_hue_and_differ_in_shade_and_dashes():
    styles = method_styles(SUITE)
    assert styles["fedgp_cosine"].family == "fda" and styles["finetune_offline"].family == "baseline"
    for family in FAMILIES:
        members = [m for m in SUITE if styles[m].family == family]
        for a, b in combinations(members, 2):
            assert styles[a].colour != styles[b].colour and styles[a].dashes != styles[b].dashes
    # blues for the fixed-β rules, reds for the auto rules: blue > red in every FDA colour, the reverse in auto
    assert all(styles[m].colour[2] > styles[m].colour[0] for m in ("fedda", "fedgp", "fedgp_cosine"))
    assert all(styles[m].colour[0] > styles[m].colour[2] for m in ("fedda_auto", "fedgp_auto"))


def test_a_method_looks_the_same_in_every_figure_of_the_suite():
    """Styles are computed from the whole suite, so a figure showing a subset keeps every method's look."""
    full = method_styles(SUITE)
    assert method_styles(dict(SUITE)) == full
    subset = ["fedgp", "kd3a", "source_only"]
    families = families_in_order(full, subset)
    assert families == {"baseline": ["source_only"], "fda": ["fedgp"], "unsupervised": ["kd3a"]}
    assert list(families) == [f for f in FAMILIES if f in families]  # rows in FAMILIES order


def test_the_first_of_a_family_is_its_darkest_and_solid():
    styles = method_styles(SUITE)
    assert styles["fedda"].dashes == () and sum(styles["fedda"].colour) < sum(styles["fedgp"].colour)


def test_an_unknown_family_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown family 'magic'; known: baseline, fda"):
        method_styles({"mine": "magic"})
