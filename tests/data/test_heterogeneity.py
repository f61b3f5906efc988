"""Splitting a domain over several clients: every sample dealt once, seeded, and the skew its parameter asks for."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fdabench.data.heterogeneity import dirichlet_label_split, label_mix, quantity_split

LABELS = np.repeat(np.arange(10), 60)  # 600 samples, 10 balanced classes


def _mixes(parts):
    return np.array([label_mix(LABELS, part, 10) for part in parts])


@settings(max_examples=30, deadline=None)
@given(
    clients=st.integers(1, 8),
    alpha=st.floats(0.05, 1000),
    seed=st.integers(0, 2**31),
)
@example(clients=7, alpha=0.05078125, seed=945)  # no quantity split in 1000 draws: the clear error, not a failure
def test_every_sample_is_dealt_to_exactly_one_client(clients, alpha, seed):
    parts = dirichlet_label_split(LABELS, clients, alpha, np.random.default_rng(seed))
    assert len(parts) == clients and all(len(part) >= 1 for part in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(LABELS)))
    try:
        sizes = quantity_split(len(LABELS), clients, alpha, np.random.default_rng(seed))
    except ValueError as error:
        # Dir(β) shares this small leave some of 7-8 clients under one sample of 600 in nearly every draw (a share
        # under 1/1200 has probability about 0.27 per client even at β = 0.2, where a draw in 1000 still succeeds)
        assert alpha < 0.2 and "raise beta or lower the number of clients" in str(error)
    else:
        assert np.array_equal(np.sort(np.concatenate(sizes)), np.arange(len(LABELS)))


def test_splits_are_seeded():
    first = dirichlet_label_split(LABELS, 4, 0.5, np.random.default_rng(3))
    again = dirichlet_label_split(LABELS, 4, 0.5, np.random.default_rng(3))
    other = dirichlet_label_split(LABELS, 4, 0.5, np.random.default_rng(4))
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_a_large_alpha_gives_every_client_the_domains_label_mix_and_a_small_one_concentrates_it():
    uniform = np.full(10, 0.1)
    wide = _mixes(dirichlet_label_split(LABELS, 5, 1e4, np.random.default_rng(0)))
    assert np.abs(wide - uniform).max() < 0.03
    narrow = _mixes(dirichlet_label_split(LABELS, 5, 0.05, np.random.default_rng(0)))
    # small α: each client holds few classes, its largest class far above a tenth
    assert narrow.max(axis=1).mean() > 0.5
    entropy = lambda m: -(m * np.log(np.where(m > 0, m, 1))).sum(axis=1).mean()
    assert entropy(narrow) < entropy(wide) - 1.0


def test_quantity_skew_moves_sizes_not_label_mixes():
    equal = [len(p) for p in quantity_split(600, 5, 1e4, np.random.default_rng(0))]
    assert max(equal) - min(equal) <= 12
    skewed = [len(p) for p in quantity_split(600, 5, 0.1, np.random.default_rng(0))]
    assert max(skewed) > 3 * min(skewed)


def test_impossible_splits_are_refused():
    with pytest.raises(ValueError, match="cannot give"):
        dirichlet_label_split(LABELS[:3], 4, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="alpha > 0"):
        dirichlet_label_split(LABELS, 4, 0.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="no Dirichlet"):
        dirichlet_label_split(LABELS, 8, 0.001, np.random.default_rng(0), min_size=70)


def test_leave_one_domain_out_deals_each_source_domain_over_its_clients(colored_digits):
    from fdabench.data import get_partitioner
    from fdabench.federation.problem import build_problem

    partitioner = get_partitioner("leave_one_domain_out")
    base = {"holdout_fraction": 0.2, "target_labelled": 48}
    plain = partitioner.split(colored_digits, "-90", 0, base)
    skewed = partitioner.split(colored_digits, "-90", 0, {**base, "clients_per_domain": 3, "label_skew": 0.1})
    assert [c.name for c in skewed.sources] == [f"{s.domain}_c{j}" for s in plain.sources for j in range(3)]
    for domain in plain.sources:
        dealt = np.concatenate([c.indices for c in skewed.sources if c.domain == domain.domain])
        assert np.array_equal(np.sort(dealt), domain.indices)  # the domain's 'in' samples, each to one client
    # the in/out split, the holdout and the target are the one-client partition's
    assert [h.indices.tolist() for h in skewed.holdout] == [h.indices.tolist() for h in plain.holdout]
    assert np.array_equal(skewed.target_labelled.indices, plain.target_labelled.indices)
    again = partitioner.split(colored_digits, "-90", 0, {**base, "clients_per_domain": 3, "label_skew": 0.1})
    assert all(np.array_equal(a.indices, b.indices) for a, b in zip(skewed.sources, again.sources))
    problem = build_problem(colored_digits, skewed, "cpu")
    assert len(problem.sources) == len(problem.source_validation) == 6  # each client scores its domain's holdout
    with pytest.raises(ValueError, match="exclude each other"):
        partitioner.split(
            colored_digits, "-90", 0, {**base, "clients_per_domain": 2, "label_skew": 1, "quantity_skew": 1}
        )


@pytest.mark.parametrize(
    ("options", "problems"),
    [
        ({"clients_per_domain": 3}, []),
        ({"clients_per_domain": 2, "label_skew": 1.0}, []),
        ({"clients_per_domain": 2, "quantity_skew": 1.0}, []),
        (
            {"clients_per_domain": 3, "label_skew": 1.0, "quantity_skew": 1.0},
            ["label_skew and quantity_skew exclude each other (label skew already sets the sizes)"],
        ),
        ({"label_skew": 1.0}, ["label_skew and quantity_skew deal a domain over clients: set clients_per_domain >= 2"]),
        (
            {"quantity_skew": 1.0, "clients_per_domain": 1},
            ["label_skew and quantity_skew deal a domain over clients: set clients_per_domain >= 2"],
        ),
    ],
)
def test_options_that_contradict_each_other_are_named(options, problems):
    from fdabench.data import get_partitioner

    assert get_partitioner("leave_one_domain_out").option_problems(options) == problems


def test_split_dataset_selection_counts_as_the_fed_heart_code():
    """int(fraction x n) (a floor), a count taken as is (an int, or a float above 1), and a count that leaves no
    labelled sample or more than there are refused with the numbers."""
    from fdabench.data.partitioners.leave_one_domain_out import split_dataset_selection

    pool = np.arange(100, 299)  # 199 samples, Cleveland's training rows
    assert [len(split_dataset_selection(pool, wanted, 0)[0]) for wanted in (0.2, 1.0, 5, 2.0, 1, 199)] == [
        39,
        199,
        5,
        2,
        1,
        199,
    ]
    keys = list(range(199))
    np.random.RandomState(3).shuffle(keys)
    labelled, unlabelled = split_dataset_selection(pool, 0.2, 3)
    assert labelled.tolist() == pool[keys[:39]].tolist() and unlabelled.tolist() == sorted(pool[keys[39:]].tolist())
    for wanted, count in ((0.001, 0), (200, 200), (0, 0)):
        with pytest.raises(ValueError, match=f"^target_labelled: {wanted} gives {count} of 199 samples$"):
            split_dataset_selection(pool, wanted, 0)
