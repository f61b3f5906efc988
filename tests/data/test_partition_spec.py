"""Partitioners, clause by clause, on datasets small enough to read: the size rules at their boundaries,
every field of the returned `Partition`, the manifest round trip, and the exact indices of one seed.

The pinned indices state that a seed's partition never changes between versions: cached cells, DVC
outputs and published reproductions are keyed by (dataset, target, seed), so a silent change of the
random draws would mix two different splits under one name. Each pin's sizes are checked by hand in a
comment; if a change to the draws is intended, re-pin and say so in the changelog."""

import numpy as np
import pytest

from fdabench.data import Partition, PreparedDataset, get_dataset, get_partitioner
from fdabench.data.base import DomainArrays
from fdabench.data.partition import PARTITIONERS, ClientIndices, fraction_or_count, partition_options
from fdabench.data.partitioners.feature_noise import _class_holders, _split_clients
from fdabench.data.partitioners.leave_one_domain_out import flamby_split


def tiny(sizes: dict[str, int], classes: int = 3, name: str = "tiny") -> PreparedDataset:
    """Domains of the given sizes; sample i of a domain has label i % classes."""
    domains = {d: DomainArrays(np.zeros((n, 1), np.float32), np.arange(n) % classes) for d, n in sizes.items()}
    return PreparedDataset(name, "classification", classes, (1,), domains)


def layout(partition: Partition) -> list[tuple[str, str, str, list[int]]]:
    return [(role, c.name, c.domain, c.indices.tolist()) for role, c in partition.splits()]


def assert_identity(partition: Partition, dataset: str, target: str, seed: int, partitioner: str) -> None:
    assert (partition.dataset, partition.target, partition.seed, partition.partitioner) == (
        dataset,
        target,
        seed,
        partitioner,
    )


def assert_int64(partition: Partition) -> None:
    for role, client in partition.splits():
        assert client.indices.dtype == np.int64, (role, client.name, client.indices.dtype)


# --- counts and fractions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, total, count",
    [
        (1, 10, 1),  # the integer 1 is one sample, not "all"
        (10, 10, 10),  # every sample may be labelled
        (1.0, 10, 10),  # the float 1.0 is the whole split
        (0.5, 10, 5),
        (0.26, 10, 3),  # rounded to the nearest count
        (2.0, 10, 2),  # a float above 1 is a count
        (1.5, 10, 1),  # ... truncated like int()
    ],
)
def test_a_count_is_an_integer_or_a_float_above_one_and_a_fraction_is_at_most_one(value, total, count):
    assert fraction_or_count(value, total, "target_labelled") == count


@pytest.mark.parametrize("value, total, selected", [(11, 10, 11), (0.04, 10, 0), (0, 10, 0)])
def test_counts_outside_one_to_total_are_refused_naming_the_option(value, total, selected):
    with pytest.raises(ValueError, match=rf"^my_option = {value} selects {selected} of {total} samples; need between"):
        fraction_or_count(value, total, "my_option")


# --- leave one domain out -------------------------------------------------------------------------------

LODO = {"holdout_fraction": 0.2, "target_labelled": 4}


def test_leave_one_domain_out_seed_0_is_pinned():
    prepared = tiny({"a": 10, "b": 10, "c": 20})
    partition = get_partitioner("leave_one_domain_out").split(prepared, "c", 0, LODO)
    # a, b: 2 of 10 held out; c: 4 of 20 for test, 4 of the 16 'in' labelled, 12 unlabelled
    assert layout(partition) == [
        ("source", "a", "a", [0, 1, 2, 3, 5, 7, 8, 9]),
        ("source", "b", "b", [0, 1, 3, 4, 5, 6, 7, 8]),
        ("target_labelled", "target_labelled", "c", [2, 3, 13, 15]),
        ("target_unlabelled", "target_unlabelled", "c", [0, 1, 6, 7, 8, 9, 10, 11, 12, 14, 16, 19]),
        ("target_test", "target_test", "c", [4, 5, 17, 18]),
        ("holdout", "a_out", "a", [4, 6]),
        ("holdout", "b_out", "b", [2, 9]),
    ]
    assert_identity(partition, "tiny", "c", 0, "leave_one_domain_out")
    assert partition.options == LODO and partition.options is not LODO
    assert partition.transforms == {}
    assert_int64(partition)


def test_leave_one_domain_out_refuses_a_target_that_is_not_a_domain():
    with pytest.raises(ValueError, match=r"^target 'd' is not a domain of tiny: a, c$"):
        get_partitioner("leave_one_domain_out").split(tiny({"a": 10, "c": 10}), "d", 0, LODO)


def test_standardize_is_a_transform_only_when_asked():
    prepared = tiny({"a": 10, "c": 10})
    split = get_partitioner("leave_one_domain_out").split
    assert split(prepared, "c", 0, {**LODO, "standardize": True}).transforms == {"standardize": {}}
    assert split(prepared, "c", 0, {**LODO, "standardize": False}).transforms == {}


def test_target_labelled_overrides_apply_to_their_target_only():
    prepared = tiny({"a": 10, "c": 20})
    split = get_partitioner("leave_one_domain_out").split
    options = {**LODO, "target_labelled_overrides": {"c": 1.0, "a": 2}}
    assert len(split(prepared, "c", 0, options).target_labelled.indices) == 16  # all of c's 'in' split
    assert len(split(prepared, "a", 0, options).target_labelled.indices) == 2
    assert len(split(prepared, "a", 0, {**LODO, "target_labelled_overrides": {"c": 1}}).target_labelled.indices) == 4


def test_flamby_holdout_is_fixed_per_domain_and_seeds_pick_only_the_labelled_samples():
    prepared = tiny({"a": 20, "c": 30}, classes=2)
    split = get_partitioner("leave_one_domain_out").split
    options = {**LODO, "holdout_split": "flamby"}
    first, second = split(prepared, "c", 0, options), split(prepared, "c", 1, options)
    for partition in (first, second):
        in_a, out_a = flamby_split(prepared.domains["a"].y, 0.2)
        in_c, out_c = flamby_split(prepared.domains["c"].y, 0.2)
        assert partition.holdout[0].indices.tolist() == sorted(out_a.tolist())
        assert partition.sources[0].indices.tolist() == sorted(in_a.tolist())
        assert partition.target_test.indices.tolist() == sorted(out_c.tolist())
        labelled_and_not = np.concatenate([partition.target_labelled.indices, partition.target_unlabelled.indices])
        assert sorted(labelled_and_not.tolist()) == sorted(in_c.tolist())
    assert first.target_labelled.indices.tolist() != second.target_labelled.indices.tolist()
    # the seeded split (the default when holdout_split is absent) moves the test set with the seed
    seeded = [split(prepared, "c", seed, LODO).target_test.indices.tolist() for seed in (0, 1)]
    assert seeded[0] != seeded[1]
    assert split(prepared, "c", 0, {**LODO, "holdout_split": "seeded"}).target_test.indices.tolist() == seeded[0]


def test_flamby_split_is_stratified_when_every_class_has_more_than_two_samples():
    labels = np.array([0] * 10 + [1] * 10)
    train, test = flamby_split(labels, 0.2)
    assert np.bincount(labels[test]).tolist() == [2, 2]
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(20))
    assert train.dtype.kind == test.dtype.kind == "i"
    assert np.array_equal(flamby_split(labels, 0.2)[1], test)  # no seed: the same split every time
    assert not np.array_equal(flamby_split(labels[::-1].copy(), 0.2)[1], test)  # shuffled by the label order


@pytest.mark.parametrize(
    "labels, stratified",
    [
        ([0] * 9 + [1] * 2, False),  # a class of two: plain shuffle
        ([0] * 12, False),  # one class: plain shuffle
        ([0] * 9 + [1] * 3, True),  # every class above two: stratified
        ([0] * 3 + [1] * 9, True),
    ],
)
def test_flamby_split_stratifies_only_when_every_one_of_several_classes_has_more_than_two(labels, stratified):
    from sklearn.model_selection import train_test_split

    labels = np.array(labels)
    train, test = flamby_split(labels, 0.25)
    assert len(test) == 3 and len(train) == len(labels) - 3
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(len(labels)))
    positions = np.arange(len(labels))
    expected = train_test_split(positions, test_size=0.25, random_state=43, stratify=labels if stratified else None)
    assert [train.tolist(), test.tolist()] == [part.tolist() for part in expected]
    other = train_test_split(positions, test_size=0.25, random_state=43, stratify=None if stratified else labels)
    if len(np.unique(labels)) > 1:
        assert [train.tolist(), test.tolist()] != [part.tolist() for part in other]  # the choice shows


def test_flamby_split_shuffles_with_random_state_43_like_flamby():
    from sklearn.model_selection import train_test_split

    labels = np.array([0, 1] * 15)
    expected = train_test_split(np.arange(30), test_size=0.2, random_state=43, shuffle=True, stratify=labels)
    assert [part.tolist() for part in flamby_split(labels, 0.2)] == [part.tolist() for part in expected]


# --- labelled target (Amazon) ---------------------------------------------------------------------------


def test_labelled_target_seed_0_is_pinned():
    partition = get_partitioner("labelled_target").split(tiny({"a": 6, "b": 12}), "b", 0, {"target_labelled": 4})
    # a trains on all 6; b labels 4 and is tested on the other 8; nothing is unlabelled-only
    assert layout(partition) == [
        ("source", "a", "a", [0, 1, 2, 3, 4, 5]),
        ("target_labelled", "target_labelled", "b", [2, 4, 7, 9]),
        ("target_unlabelled", "target_unlabelled", "b", []),
        ("target_test", "target_test", "b", [0, 1, 3, 5, 6, 8, 10, 11]),
    ]
    assert_identity(partition, "tiny", "b", 0, "labelled_target")
    assert partition.options == {"target_labelled": 4} and partition.holdout == [] and partition.transforms == {}
    assert_int64(partition)


def test_labelled_target_keeps_at_least_one_test_sample():
    split = get_partitioner("labelled_target").split
    prepared = tiny({"a": 6, "b": 12})
    assert len(split(prepared, "b", 0, {"target_labelled": 11}).target_test.indices) == 1
    assert len(split(prepared, "b", 0, {"target_labelled": 0.5}).target_labelled.indices) == round(0.5 * 11)
    with pytest.raises(ValueError, match="target_labelled = 12 selects 12 of 11 samples"):
        split(prepared, "b", 0, {"target_labelled": 12})
    with pytest.raises(ValueError, match=r"^target 'z' is not a domain of tiny: a, b$"):
        split(prepared, "z", 0, {"target_labelled": 4})


def test_labelled_target_draws_with_the_seed():
    split = get_partitioner("labelled_target").split
    prepared = tiny({"a": 6, "b": 40})
    draws = [split(prepared, "b", seed, {"target_labelled": 5}).target_labelled.indices.tolist() for seed in (0, 0, 1)]
    assert draws[0] == draws[1] != draws[2]


# --- shift and subsample (the synthetic theory check) ----------------------------------------------------

SHIFT = {"test_fraction": 0.2, "target_sizes": [3]}


def test_shift_and_subsample_seed_0_is_pinned():
    prepared = tiny({"s0": 5, "s1": 6, "target": 10})
    partition = get_partitioner("shift_and_subsample").split(prepared, "s1-n3", 0, SHIFT)
    # the chosen source whole (s0 left out); target: 2 of 10 for test, the first 3 of the pool of 8 labelled
    assert layout(partition) == [
        ("source", "s1", "s1", [0, 1, 2, 3, 4, 5]),
        ("target_labelled", "target_labelled", "target", [2, 3, 7]),
        ("target_unlabelled", "target_unlabelled", "target", [0, 1, 5, 8, 9]),
        ("target_test", "target_test", "target", [4, 6]),
    ]
    assert_identity(partition, "tiny", "s1-n3", 0, "shift_and_subsample")
    assert partition.options == SHIFT and partition.options is not SHIFT
    assert_int64(partition)


@pytest.mark.parametrize("size, ok", [(1, False), (2, True), (8, True), (9, False)])
def test_shift_target_size_is_between_two_and_the_pool(size, ok):
    prepared = tiny({"s0": 5, "target": 10})
    split = get_partitioner("shift_and_subsample").split
    if ok:
        assert len(split(prepared, f"s0-n{size}", 0, SHIFT).target_labelled.indices) == size
    else:
        with pytest.raises(ValueError, match=rf"^target size {size} must be between 2 and the training pool size 8$"):
            split(prepared, f"s0-n{size}", 0, SHIFT)


@pytest.mark.parametrize("target", ["s0", "s7-n3", "x-n3"])
def test_shift_targets_that_do_not_name_a_source_and_size_are_refused(target):
    prepared = tiny({"s0": 5, "target": 10})
    with pytest.raises(ValueError, match=rf"^target '{target}' must look like 's<k>-n<size>' with s<k> a source"):
        get_partitioner("shift_and_subsample").split(prepared, target, 0, SHIFT)


# --- clients dealt iid or by label ----------------------------------------------------------------------


def test_label_split_gives_each_of_fewer_clients_than_classes_one_whole_class():
    labels = np.arange(50) % 10
    parts = _split_clients(labels, 3, "label1", np.random.default_rng(0))
    held = [np.unique(labels[part]).tolist() for part in parts]
    assert all(len(classes) == 1 for classes in held) and len({c[0] for c in held}) == 3
    for part, (label,) in zip(parts, held):
        assert part.tolist() == np.flatnonzero(labels == label).tolist()  # sole holder: all of its class


def test_label_split_with_every_class_per_client_shares_each_class_equally():
    labels = np.arange(24) % 4
    parts = _split_clients(labels, 3, "label4", np.random.default_rng(0))
    for part in parts:
        assert np.bincount(labels[part], minlength=4).tolist() == [2, 2, 2, 2]
    assert sorted(np.concatenate(parts).tolist()) == list(range(24))


def test_label_split_assigns_consecutive_classes_of_one_seeded_cycle():
    labels = np.arange(60) % 10
    parts = _split_clients(labels, 4, "label3", np.random.default_rng(0))
    # classes are relabelled by one seeded permutation, then dealt in windows of 3 around the cycle
    cycle = np.random.default_rng(0).permutation(10).tolist()
    expected = [sorted(cycle[(3 * client + j) % 10] for j in range(3)) for client in range(4)]
    assert [np.unique(labels[part]).tolist() for part in parts] == expected


def test_niid_bench_assignment_gives_client_i_class_i_and_random_others():
    labels = np.arange(120) % 10
    for seed in range(20):
        parts = _split_clients(labels, 9, "label3", np.random.default_rng(seed), "niid_bench")
        held = [np.unique(labels[part]).tolist() for part in parts]
        assert all(len(classes) == 3 and client in classes for client, classes in enumerate(held))
        holders = {c: [client for client, classes in enumerate(held) if c in classes] for c in range(10)}
        for label, owners in holders.items():  # each class split equally among its holders, in client order
            sizes = [int(np.sum(labels[parts[owner]] == label)) for owner in owners]
            assert sizes == [len(share) for share in np.array_split(np.arange(12), len(owners))] if owners else True
        dealt = np.concatenate(parts)
        assert len(set(dealt.tolist())) == len(dealt)  # no sample twice
        # a class no client drew (possibly class 9: no client's own) goes to no client
        assert sorted(set(labels[dealt].tolist())) == [c for c in range(10) if holders[c]]


def _first_niid_bench_deal(classes, clients, per_client, rng):
    """The deal's first draw, as NIID-Bench draws it: client i holds class i mod K and per_client - 1 others."""
    holders = {int(c): [] for c in classes}
    for client in range(clients):
        own = classes[client % len(classes)]
        for label in [int(own), *rng.choice(classes[classes != own], size=per_client - 1, replace=False).tolist()]:
            holders[label].append(client)
    return holders


def test_niid_bench_redraws_a_deal_that_leaves_a_class_unheld_and_keeps_every_other():
    """The FedGP code raises on a deal in which no source holds some class (np.array_split(idx, 0)): such a deal is
    drawn again from the same stream; a deal that holds every class is the first draw, unchanged."""
    classes = np.arange(10)
    redrawn = 0
    for seed in range(150):
        holders = _class_holders(classes, 9, 3, "niid_bench", np.random.default_rng(seed))
        assert all(holders.values()), seed
        first = _first_niid_bench_deal(classes, 9, 3, np.random.default_rng(seed))
        if all(first.values()):
            assert holders == first, seed
        else:
            redrawn += 1
    assert 5 <= redrawn <= 30  # about 10% of 3-label deals over 9 sources leave class 9 unheld
    labels = np.arange(40) % 4
    with pytest.raises(
        ValueError,
        match="^2 clients with 1 classes each left some class unheld in 1000 deals: use more clients or more classes "
        "per client$",
    ):
        _split_clients(labels, 2, "label1", np.random.default_rng(0), "niid_bench")
    every = _split_clients(labels, 3, "label4", np.random.default_rng(0), "niid_bench")
    # every client holds all 4 classes; each class of 10 is split 4, 3, 3 in client order
    assert [np.bincount(labels[part], minlength=4).tolist() for part in every] == [[4] * 4, [3] * 4, [3] * 4]


def test_cyclic_holders_take_consecutive_windows_of_one_seeded_cycle():
    holders = _class_holders(np.arange(10), 4, 3, "cyclic", np.random.default_rng(0))
    cycle = np.random.default_rng(0).permutation(10).tolist()
    windows = [[cycle[(3 * client + j) % 10] for j in range(3)] for client in range(4)]
    assert holders == {c: [client for client in range(4) if c in windows[client]] for c in range(10)}


def test_an_unknown_label_assignment_is_refused():
    with pytest.raises(ValueError, match="^unknown label assignment 'random'; use cyclic or niid_bench$"):
        _split_clients(np.arange(30) % 10, 3, "label2", np.random.default_rng(0), "random")


@pytest.mark.parametrize("share", ["all", "iid", "split"])
def test_feature_noise_deals_label_subset_sources_by_the_assignment_asked(share):
    prepared = tiny({"train": 300, "test": 5}, classes=10)
    options = {**NOISE, "target_share": share, "clients": 6, "split": "iid"}
    labels = prepared.domains["train"].y

    def held(assignment):
        chosen = {**options, "label_assignment": assignment} if assignment else options
        partition = get_partitioner("feature_noise").split(prepared, "noise0.4-label2", 0, chosen)
        return [np.unique(labels[source.indices]).tolist() for source in partition.sources]

    niid = held("niid_bench")
    assert len(niid) == 5 and all(client in classes and len(classes) == 2 for client, classes in enumerate(niid))
    cyclic = held(None)  # unset: the cyclic deal, as "cyclic" spelled out
    assert cyclic == held("cyclic") != niid and all(len(classes) == 2 for classes in cyclic)


@pytest.mark.parametrize(
    "split, message",
    [
        ("label0", "^label0: need between 1 and 10 classes per client$"),
        ("label11", "^label11: need between 1 and 10 classes per client$"),
        ("labels", "^unknown split 'labels'; use iid or label<k>$"),
    ],
)
def test_bad_splits_are_refused(split, message):
    with pytest.raises(ValueError, match=message):
        _split_clients(np.arange(30) % 10, 3, split, np.random.default_rng(0))


def test_iid_split_deals_equal_random_shares():
    parts = _split_clients(np.zeros(10, dtype=np.int64), 3, "iid", np.random.default_rng(0))
    assert [len(part) for part in parts] == [4, 3, 3]
    assert sorted(np.concatenate(parts).tolist()) == list(range(10))
    assert all(np.array_equal(part, np.sort(part)) for part in parts)


# --- feature noise --------------------------------------------------------------------------------------

NOISE = {"clients": 4, "split": "label2", "target_labelled": 3, "target_test": "rest", "noise_mode": "fixed"}


def test_feature_noise_seed_0_is_pinned():
    prepared = tiny({"train": 24, "test": 5}, classes=4)
    partition = get_partitioner("feature_noise").split(prepared, "noise0.2-n2", 0, NOISE)
    # 4 clients x 2 classes of 4 (each class of 6 shared by 2 clients); the target's 6: 2 labelled (-n2
    # overrides target_labelled), 4 for test (target_test: rest)
    assert layout(partition) == [
        ("source", "client0", "train", [2, 8, 10, 12, 14, 20]),
        ("source", "client1", "train", [9, 11, 17, 19, 21, 23]),
        ("source", "client2", "train", [0, 4, 6, 16, 18, 22]),
        ("target_labelled", "target_labelled", "train", [13, 15]),
        ("target_unlabelled", "target_unlabelled", "train", []),
        ("target_test", "target_test", "train", [1, 3, 5, 7]),
    ]
    assert_identity(partition, "tiny", "noise0.2-n2", 0, "feature_noise")
    assert partition.options == NOISE and partition.options is not NOISE
    assert partition.transforms == {"target_noise": {"std": 0.2, "mode": "fixed"}}
    assert_int64(partition)


def test_feature_noise_tested_on_the_test_domain():
    prepared = tiny({"train": 24, "test": 5}, classes=4)
    options = {**NOISE, "target_test": "test_domain", "noise_mode": "redraw"}
    partition = get_partitioner("feature_noise").split(prepared, "noise0.6", 0, options)
    assert (partition.target_unlabelled.name, partition.target_unlabelled.domain) == ("target_unlabelled", "train")
    assert len(partition.target_labelled.indices) == 3 and len(partition.target_unlabelled.indices) == 3
    assert (partition.target_test.name, partition.target_test.domain) == ("target_test", "test")
    assert partition.target_test.indices.tolist() == [0, 1, 2, 3, 4]
    assert partition.transforms == {"target_noise": {"std": 0.6, "mode": "redraw"}}
    with pytest.raises(ValueError, match="^target_labelled = 7 selects 7 of 6 samples"):
        get_partitioner("feature_noise").split(prepared, "noise0.6-n7", 0, options)


def test_feature_noise_iid_target_share_holds_every_class_and_the_sources_split_the_rest():
    prepared = tiny({"train": 40, "test": 5}, classes=4)
    options = {**NOISE, "target_share": "iid", "split": "label1", "target_labelled": 1.0}
    partition = get_partitioner("feature_noise").split(prepared, "noise0.4", 0, options)
    labels = prepared.domains["train"].y
    target = partition.target_labelled.indices
    assert len(target) == 40 // 4 and len(partition.target_test.indices) == 0
    assert len(partition.sources) == 3 and [c.name for c in partition.sources] == ["client0", "client1", "client2"]
    held = [np.unique(labels[c.indices]).tolist() for c in partition.sources]
    assert all(len(classes) == 1 for classes in held)  # label1 applies to the sources
    used = np.concatenate([target] + [c.indices for c in partition.sources])
    assert len(np.unique(used)) == len(used)
    # the three single-class sources hold all the remaining samples of their class
    for client, (label,) in zip(partition.sources, held):
        assert sorted(client.indices.tolist()) == sorted(set(np.flatnonzero(labels == label)) - set(target.tolist()))
    draws = {
        tuple(get_partitioner("feature_noise").split(prepared, "noise0.4", s, options).target_labelled.indices)
        for s in (0, 1, 2)
    }
    assert len(draws) == 3
    assert len(np.unique(labels[target])) >= 2  # an iid share, not one dealt by label


@pytest.mark.parametrize("target", ["noise", "noise0.4-n", "eta0.1"])
def test_feature_noise_targets_are_named_by_their_noise(target):
    partitioner = get_partitioner("feature_noise")
    source = get_dataset("fashion_mnist")
    assert partitioner.validate_target(source, target, {}) == (
        f"{target!r} is not a target of fashion_mnist; "
        "use 'noise<std>', 'noise<std>-n<labelled>' or either with '-label<k>' (e.g. noise0.4, noise0.4-n200, "
        "noise0.4-label3)"
    )
    with pytest.raises(ValueError, match=rf"^target '{target}' must look like noise<std>"):
        partitioner.split(tiny({"train": 24, "test": 5}), target, 0, NOISE)
    assert partitioner.validate_target(source, "noise0.4-n200", {}) is None
    assert partitioner.target_names(source, {}) == ["noise0", "noise0.2", "noise0.4", "noise0.6", "noise0.8"]


# --- label shift ----------------------------------------------------------------------------------------

SHIFT_LABELS = {"clients": 3, "minority_classes": [3], "target_labelled": 0.5, "deal": "pooled"}


def test_label_shift_seed_0_is_pinned():
    prepared = tiny({"train": 20}, classes=4)
    partition = get_partitioner("label_shift").split(prepared, "eta0.25", 0, SHIFT_LABELS)
    # minority class 3 has 5 samples: round(0.25 x 5) = 1 goes to the sources, 4 to the target; of the other
    # 15, round(0.75 x 15) = 11 to the sources. Sources: 12 over 2 clients; target: 8, half labelled
    assert layout(partition) == [
        ("source", "client0", "train", [0, 1, 11, 12, 13, 18]),
        ("source", "client1", "train", [2, 4, 5, 6, 9, 16]),
        ("target_labelled", "target_labelled", "train", [3, 7, 8, 15]),
        ("target_unlabelled", "target_unlabelled", "train", []),
        ("target_test", "target_test", "train", [10, 14, 17, 19]),
    ]
    assert_identity(partition, "tiny", "eta0.25", 0, "label_shift")
    assert partition.options == SHIFT_LABELS and partition.options is not SHIFT_LABELS
    assert_int64(partition)


def test_label_shift_is_deterministic_per_seed_and_names_its_targets():
    prepared = tiny({"train": 60}, classes=4)
    partitioner = get_partitioner("label_shift")
    draws = [layout(partitioner.split(prepared, "eta0.1", seed, SHIFT_LABELS)) for seed in (5, 5, 6)]
    assert draws[0] == draws[1] != draws[2]
    with pytest.raises(ValueError, match="^target 'noise0.1' must look like eta<η>$"):
        partitioner.split(prepared, "noise0.1", 0, SHIFT_LABELS)
    source = get_dataset("fashion_mnist")
    for bad in ("eta1.5", "eta", "noise0.1"):
        assert partitioner.validate_target(source, bad, {}) == (
            f"{bad!r} is not a target of fashion_mnist; use 'eta<η>' with 0 <= η <= 1 (e.g. eta0.15)"
        )
    with pytest.raises(ValueError, match=r"^target_labelled = 0.01 selects 0 of \d+ samples"):
        partitioner.split(prepared, "eta0.1", 0, {**SHIFT_LABELS, "target_labelled": 0.01})
    for good in ("eta0", "eta1", "eta0.45"):
        assert partitioner.validate_target(source, good, {}) is None
    assert partitioner.target_names(source, {}) == ["eta0.45", "eta0.3", "eta0.15", "eta0.1", "eta0.05", "eta0"]


CODE_DEAL = {"clients": 4, "minority_classes": [3], "target_labelled": 0.15, "deal": "per_class"}


def test_label_shift_per_class_deal_floors_each_class_and_splits_it_evenly_over_the_sources():
    # 4 classes of 10 samples (labels i % 4 of 40); η = 0.35: the minority class 3 gives floor(3.5) = 3 samples to the
    # sources (round would give 4), every other class floor(3.5) = 3 to the target; each class's source share is
    # split 3 ways by np.array_split (7 -> 3, 2, 2; 3 -> 1, 1, 1); the target holds 7 + 3 x 3 = 16 and labels
    # floor(0.15 x 16) = 2 (round would give 2.4 -> 2; 0.3 x 16 = 4.8 -> 4, not 5)
    prepared = tiny({"train": 40}, classes=4)
    labels = prepared.domains["train"].y
    partition = get_partitioner("label_shift").split(prepared, "eta0.35", 0, CODE_DEAL)
    per_source = [np.bincount(labels[c.indices], minlength=4).tolist() for c in partition.sources]
    assert per_source == [[3, 3, 3, 1], [2, 2, 2, 1], [2, 2, 2, 1]]
    target = np.concatenate([partition.target_labelled.indices, partition.target_test.indices])
    assert np.bincount(labels[target], minlength=4).tolist() == [3, 3, 3, 7]
    assert len(partition.target_labelled.indices) == 2
    wider = get_partitioner("label_shift").split(prepared, "eta0.35", 0, {**CODE_DEAL, "target_labelled": 0.3})
    assert len(wider.target_labelled.indices) == 4
    one = get_partitioner("label_shift").split(prepared, "eta0.35", 0, {**CODE_DEAL, "target_labelled": 0.07})
    assert len(one.target_labelled.indices) == 1  # floor(1.12)
    with pytest.raises(ValueError, match=r"^target_labelled = 0.05 selects 0 of 16 samples; need at least 1$"):
        get_partitioner("label_shift").split(prepared, "eta0.35", 0, {**CODE_DEAL, "target_labelled": 0.05})
    everything = np.concatenate([idx for _, c in partition.splits() for idx in [c.indices]])
    assert sorted(everything.tolist()) == list(range(40))
    assert_int64(partition)


def test_label_shift_per_class_deal_gives_every_source_the_same_class_mix_and_pooled_does_not():
    prepared = tiny({"train": 900}, classes=10)
    labels = prepared.domains["train"].y
    options = {"clients": 10, "minority_classes": [8, 6, 9], "target_labelled": 0.15}
    for deal, even in (("per_class", True), ("pooled", False)):
        partition = get_partitioner("label_shift").split(prepared, "eta0.3", 3, {**options, "deal": deal})
        counts = np.array([np.bincount(labels[c.indices], minlength=10) for c in partition.sources])
        assert (counts.max(axis=0) - counts.min(axis=0) <= 1).all() == even, deal
    # η = 0: the sources hold no minority sample and the target nothing else (Table 13's last column)
    none = get_partitioner("label_shift").split(prepared, "eta0", 0, {**options, "deal": "per_class"})
    source_labels = labels[np.concatenate([c.indices for c in none.sources])]
    target_labels = labels[np.concatenate([none.target_labelled.indices, none.target_test.indices])]
    assert not np.isin(source_labels, [8, 6, 9]).any() and np.isin(target_labels, [8, 6, 9]).all()
    assert get_partitioner("label_shift").default_options["deal"] == "per_class"


# --- targets, defaults and option merging ---------------------------------------------------------------


def test_targets_default_to_the_datasets_domains_and_unknown_ones_list_them():
    source = get_dataset("colored_digits")
    partitioner = get_partitioner("leave_one_domain_out")
    assert partitioner.target_names(source, {}) == list(source.domains)
    assert partitioner.validate_target(source, source.domains[0], {}) is None
    assert partitioner.validate_target(source, "+45", {}) == (
        f"'+45' is not a target of colored_digits; allowed: {', '.join(source.domains)}"
    )


class _SourceOfTargetsFromOptions:
    """A dataset source whose target names depend on both option sets (like manifest datasets and the
    synthetic check), to show that the partitioner hands both over."""

    name = "from_options"

    def target_names(self, partition_options, dataset_options=None):
        return [f"{partition_options['prefix']}{domain}" for domain in (dataset_options or {}).get("domains", [])]


def test_default_targets_come_from_the_source_given_both_option_sets():
    partitioner, source = get_partitioner("leave_one_domain_out"), _SourceOfTargetsFromOptions()
    assert partitioner.target_names(source, {"prefix": "d-"}, {"domains": ["x", "y"]}) == ["d-x", "d-y"]
    assert partitioner.validate_target(source, "d-y", {"prefix": "d-"}, {"domains": ["x", "y"]}) is None
    assert partitioner.validate_target(source, "d-z", {"prefix": "d-"}, {"domains": ["x", "y"]}) == (
        "'d-z' is not a target of from_options; allowed: d-x, d-y"
    )


def test_shift_targets_are_validated_against_the_source_domains():
    source = get_dataset("synthetic_regression")
    partitioner = get_partitioner("shift_and_subsample")
    first = next(d for d in source.domains if d != "target")
    assert partitioner.validate_target(source, f"{first}-n14", {}) is None
    sources = ", ".join(d for d in source.domains if d != "target")
    for bad in ("s99-n14", "target-n14", f"{first}"):
        assert partitioner.validate_target(source, bad, {}) == (
            f"{bad!r} is not a target of synthetic_regression; use '<source>-n<size>' with source in {sources}"
        )


def test_every_partitioner_defaults_are_its_schema_defaults():
    for name in PARTITIONERS.names():
        cls = PARTITIONERS.get(name)
        expected = {key: spec["default"] for key, spec in cls.options_schema.items() if "default" in spec}
        assert cls.default_options == expected and expected, name


def test_partition_options_merge_schema_defaults_then_the_datasets_then_the_experiments():
    source = get_dataset("colored_digits")  # leave_one_domain_out; its default_partition labels 48
    merged = partition_options(source, None, {"holdout_fraction": 0.3})
    assert merged == {
        **get_partitioner("leave_one_domain_out").default_options,
        "target_labelled": 48,
        "holdout_fraction": 0.3,
    }
    # the dataset's own defaults are for its own partitioner only
    other = partition_options(source, "labelled_target", {})
    assert other == get_partitioner("labelled_target").default_options == {"target_labelled": 400}
    # the result is a copy: editing it leaves the registries and the overrides alone
    overrides = {"target_labelled_overrides": {"-90": 2}}
    merged = partition_options(source, "leave_one_domain_out", overrides)
    merged["target_labelled_overrides"]["-90"] = 5
    merged["holdout_fraction"] = 0.9
    assert overrides == {"target_labelled_overrides": {"-90": 2}}
    assert get_partitioner("leave_one_domain_out").default_options["holdout_fraction"] == 0.2
    assert source.default_partition["target_labelled"] == 48
    nested = partition_options(source, "label_shift", {})
    nested["minority_classes"].append(0)
    assert get_partitioner("label_shift").default_options["minority_classes"] == [8, 6, 9]


# --- the manifest ---------------------------------------------------------------------------------------


def test_manifest_round_trip_restores_every_field():
    prepared = tiny({"a": 10, "b": 10, "c": 20})
    partition = get_partitioner("leave_one_domain_out").split(prepared, "c", 3, {**LODO, "standardize": True})
    restored = Partition.from_json(partition.to_json(prepared))
    for field in ("dataset", "target", "seed", "partitioner", "options", "transforms"):
        assert getattr(restored, field) == getattr(partition, field), field
    assert layout(restored) == layout(partition)
    assert_int64(restored)


def test_manifest_round_trip_of_an_empty_split_keeps_integer_indices():
    prepared = tiny({"a": 6, "b": 12})
    partition = get_partitioner("labelled_target").split(prepared, "b", 0, {"target_labelled": 4})
    restored = Partition.from_json(partition.to_json(prepared))
    assert restored.target_unlabelled.indices.dtype == np.int64 and len(restored.target_unlabelled.indices) == 0
    assert restored.holdout == [] and restored.transforms == {}


def test_manifests_without_sources_holdout_or_transforms_read_as_empty():
    payload = {
        "dataset": "d",
        "target": "t",
        "seed": 0,
        "partitioner": "p",
        "options": {},
        "clients": [
            {"role": role, "name": role, "domain": "t", "indices": [index]}
            for index, role in enumerate(["target_labelled", "target_unlabelled", "target_test"])
        ],
    }
    restored = Partition.from_json(payload)
    assert restored.sources == [] and restored.holdout == [] and restored.transforms == {}
    assert [c.indices.tolist() for _, c in restored.splits()] == [[0], [1], [2]]


def test_manifest_records_roles_counts_full_histograms_and_transforms():
    prepared = tiny({"a": 10, "c": 20}, classes=5)
    partition = get_partitioner("leave_one_domain_out").split(prepared, "c", 0, {**LODO, "standardize": True})
    partition.sources = [ClientIndices("a", "a", np.array([0, 5], dtype=np.int64))]  # labels 0 and 0
    payload = partition.to_json(prepared)
    assert payload["transforms"] == {"standardize": {}}
    assert [c["role"] for c in payload["clients"]] == [
        "source",
        "target_labelled",
        "target_unlabelled",
        "target_test",
        "holdout",
    ]
    source = payload["clients"][0]
    assert source["class_histogram"] == [2, 0, 0, 0, 0]  # every class, the absent last ones too
    assert source["count"] == 2 and source["indices"] == [0, 5]


def test_empty_clients_names_sources_and_target_splits_without_samples():
    prepared = tiny({"a": 6, "b": 12})
    partition = get_partitioner("labelled_target").split(prepared, "b", 0, {"target_labelled": 4})
    assert partition.empty_clients() == []  # an empty unlabelled split is fine
    empty = np.array([], dtype=np.int64)
    partition.sources.append(ClientIndices("c", "a", empty))
    partition.target_test = ClientIndices("target_test", "b", empty)
    assert partition.empty_clients() == ["source c", "target_test target_test"]
    partition.target_labelled = ClientIndices("target_labelled", "b", empty)
    assert partition.empty_clients() == ["source c", "target_labelled target_labelled", "target_test target_test"]


def test_manifest_records_the_prepared_data_it_was_made_from(tmp_path):
    prepared = tiny({"a": 6, "b": 12})
    prepared.save(tmp_path / "prepared")
    loaded = PreparedDataset.load(tmp_path / "prepared")
    partition = get_partitioner("labelled_target").split(loaded, "b", 0, {"target_labelled": 4})
    assert loaded.content_hash and partition.to_json(loaded)["prepared_hash"] == loaded.content_hash
    assert partition.to_json(prepared)["prepared_hash"] is None  # built in memory, never saved


def test_feature_noise_label_target_sets_the_sources_classes_and_all_lets_the_target_draw_from_every_sample():
    """Table 14's set-up: `-label<k>` deals the sources k classes each whatever `split` says; with
    target_share: all the sources split the whole training set and the target draws from all of it."""
    prepared = tiny({"train": 60, "test": 5}, classes=5)
    options = {
        **NOISE,
        "clients": 6,
        "split": "iid",
        "target_share": "all",
        "target_labelled": 10,
        "target_test": "test_domain",
    }
    labels = prepared.domains["train"].y
    for classes in (1, 2, 4):
        partition = get_partitioner("feature_noise").split(prepared, f"noise0.4-label{classes}", 0, options)
        assert len(partition.sources) == options["clients"] - 1
        assert all(len(np.unique(labels[c.indices])) == classes for c in partition.sources)
        dealt = np.sort(np.concatenate([c.indices for c in partition.sources]))
        assert dealt.tolist() == list(range(60))  # the sources split all of train
        target = np.concatenate([partition.target_labelled.indices, partition.target_unlabelled.indices])
        assert np.sort(target).tolist() == list(range(60)) and len(partition.target_labelled.indices) == 10
        assert partition.transforms == {"target_noise": {"std": 0.4, "mode": "fixed"}}
    iid = get_partitioner("feature_noise").split(prepared, "noise0.4", 0, options)
    assert any(len(np.unique(labels[c.indices])) == 5 for c in iid.sources)  # no -label<k>: the split option
    with pytest.raises(ValueError, match="between 1 and 5 classes"):
        get_partitioner("feature_noise").split(prepared, "noise0.4-label6", 0, options)
