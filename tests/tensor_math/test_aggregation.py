"""Aggregation rules on hand-computed tensors (docs/design/methods.md, Fixed-β rules)."""

import pytest
import torch

from fdabench.tensor_math.aggregation import fedavg, fedda, fedgp, flatten_updates


def test_fedavg_is_sample_weighted_mean():
    sources = torch.tensor([[1.0, 2.0], [3.0, 6.0]])
    assert torch.allclose(fedavg(sources, [1, 3]), torch.tensor([2.5, 5.0]))


def test_fedda_hand_computed():
    target = torch.tensor([1.0, 2.0])
    sources = torch.tensor([[3.0, 4.0], [5.0, 6.0]])
    # w = (.25, .75): .25 (.8 t + .2 g1) + .75 (.4 t + .6 g2) = .5 t + .05 g1 + .45 g2
    out = fedda(target, sources, betas=[0.2, 0.6], weights=[1, 3])
    assert torch.allclose(out, torch.tensor([2.9, 3.9]))


def test_fedda_beta0_is_target_update():
    target, sources = torch.randn(7), torch.randn(3, 7)
    assert torch.allclose(fedda(target, sources, 0.0, [1, 2, 3]), target)


def test_fedda_beta1_is_weighted_source_average():
    target, sources = torch.randn(7), torch.randn(3, 7)
    assert torch.allclose(fedda(target, sources, 1.0, [1, 2, 3]), fedavg(sources, [1, 2, 3]))


@pytest.mark.parametrize("mode", ["projection", "cosine_scaled"])
def test_rules_return_g_when_every_input_is_g(mode):
    g = torch.randn(11)
    sources = torch.stack([g, g, g])
    assert torch.allclose(fedda(g, sources, [0.1, 0.5, 0.9], [1, 1, 2]), g)
    assert torch.allclose(fedgp(g, sources, [0.1, 0.5, 0.9], [1, 1, 2], mode=mode, layer_sizes=[4, 7]), g)


def test_fedgp_projection_hand_computed():
    # layers of sizes 2 and 1; source 1 agrees on layer 1 only, source 2 on layer 2 only
    target = torch.tensor([1.0, 0.0, 2.0])
    sources = torch.tensor([[1.0, 1.0, -1.0], [0.0, 2.0, 4.0]])
    out = fedgp(target, sources, 0.5, [1, 1], layer_sizes=[2, 1])
    # layer 1: .5 t + .5 (.5 * Proj(t|g1)) with Proj = (1/2)[1, 1]; layer 2: .5 t + .5 (.5 * (8/16) 4)
    assert torch.allclose(out, torch.tensor([0.625, 0.125, 1.5]))


def test_fedgp_cosine_scaled_hand_computed():
    target = torch.tensor([1.0, 0.0, 2.0])
    sources = torch.tensor([[1.0, 1.0, -1.0], [0.0, 2.0, 4.0]])
    out = fedgp(target, sources, 0.5, [1, 1], mode="cosine_scaled", scale=[2.0, 1.0], layer_sizes=[2, 1])
    # layer 1: .5 t + .5 (.5 * 2 * cos(t, g1) g1), cos = 1/sqrt(2); layer 2: .5 t + .5 (.5 * 1 * 1 * g2)
    c = 0.5 * 0.5 * 2 / 2**0.5
    assert torch.allclose(out, torch.tensor([0.5 + c, c, 1.0 + 1.0]))


def test_fedgp_drops_exactly_negative_layers_and_projects_elsewhere():
    generator = torch.Generator().manual_seed(0)
    sizes = [5, 3, 8, 1, 4]
    target = torch.randn(sum(sizes), generator=generator)
    sources = torch.randn(4, sum(sizes), generator=generator)
    betas = torch.tensor([0.3, 0.5, 0.7, 0.9])
    weights = torch.tensor([1.0, 2.0, 3.0, 4.0])
    out = fedgp(target, sources, betas, weights, layer_sizes=sizes)
    w = weights / weights.sum()
    start = 0
    dropped = 0
    for size in sizes:
        t, s = target[start : start + size], sources[:, start : start + size]
        expected = torch.zeros(size)
        for i in range(4):
            inner = torch.dot(t, s[i])
            projection = inner / torch.dot(s[i], s[i]) * s[i] if inner > 0 else torch.zeros(size)
            dropped += int(inner <= 0)
            expected += w[i] * ((1 - betas[i]) * t + betas[i] * projection)
        assert torch.allclose(out[start : start + size], expected)
        start += size
    assert 0 < dropped < 4 * len(sizes)  # the case exercises both branches


def test_per_layer_and_flat_forms_agree():
    shapes = [(3, 2), (2,), (4, 1, 2)]
    target = [torch.randn(shape) for shape in shapes]
    sources = [[torch.randn(shape) for shape in shapes] for _ in range(3)]
    out_layers = fedgp(target, sources, 0.5, [1, 2, 3])
    flat = flatten_updates(target, sources)
    out_flat = fedgp(flat.target, flat.sources, 0.5, [1, 2, 3], layer_sizes=flat.layer_sizes)
    assert [layer.shape for layer in out_layers] == [torch.Size(shape) for shape in shapes]
    assert torch.allclose(torch.cat([layer.flatten() for layer in out_layers]), out_flat)
    out_fedda = fedda(target, sources, 0.3, [1, 2, 3])
    assert torch.allclose(
        torch.cat([layer.flatten() for layer in out_fedda]), fedda(flat.target, flat.sources, 0.3, [1, 2, 3])
    )


def test_zero_source_layer_is_filtered_not_nan():
    target = torch.ones(4)
    sources = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    out = fedgp(target, sources, 0.5, [1], layer_sizes=[2, 2])
    assert torch.isfinite(out).all()
    assert torch.allclose(out, torch.tensor([0.5, 0.5, 1.0, 1.0]))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: fedda(torch.ones(3), torch.ones(2, 3), 0.5, [1]), "expected 2 weights"),
        (lambda: fedda(torch.ones(3), torch.ones(2, 3), [0.5, 0.5, 0.5], [1, 1]), "expected 2 betas"),
        (lambda: fedgp(torch.ones(3), torch.ones(2, 3), 0.5, [1, 1], layer_sizes=[1, 1]), "sum to m=3"),
        (lambda: fedgp(torch.ones(3), torch.ones(2, 3), 0.5, [1, 1], mode="nope"), "unknown FedGP mode"),
        (lambda: fedavg(torch.ones(2, 3), [0, 0]), "^weights must be non-negative with a positive sum$"),
        (lambda: fedavg(torch.ones(2, 3), [-1, 2]), "^weights must be non-negative with a positive sum$"),
        (
            lambda: fedavg(torch.ones(2, 3), [1, 1], layer_sizes=[2, 2]),
            r"layer_sizes \(2, 2\) must be positive and sum to m=3",
        ),
        (lambda: fedda(torch.ones(3), torch.ones(2, 3), 0.5, [1, 1], layer_sizes=[4]), "sum to m=3"),
        (lambda: fedavg(torch.ones(2, 3), [1, 1], layer_sizes=[0, 3]), "must be positive"),
        (lambda: fedavg(torch.ones(2, 3, 1), [1, 1]), r"flat source updates must be \(N, m\); got shape \(2, 3, 1\)"),
        (
            lambda: fedda(torch.ones(4), torch.ones(2, 3), 0.5, [1, 1]),
            r"flat target update must have shape \(3,\); got \(4,\)",
        ),
        (
            lambda: fedda(
                [torch.ones(2), torch.ones(1)], [[torch.ones(2), torch.ones(1)]], 0.5, [1], layer_sizes=[2, 1]
            ),
            "^layer_sizes is only for flat updates; per-layer updates carry their own$",
        ),
        (
            lambda: fedgp([torch.ones(2), torch.ones(1)], [[torch.ones(1), torch.ones(2)]], 0.5, [1]),
            "^every source update must have the target update's layer shapes$",
        ),
        (
            lambda: fedgp([torch.ones(2), torch.ones(1)], torch.ones(1, 3), 0.5, [1]),
            "^every source update must have the target update's layer shapes$",
        ),
    ],
)
def test_bad_arguments_are_rejected(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_fedavg_takes_sources_per_layer_as_a_list_or_stacked():
    """Sources alone (no target update) may come per layer, as a list of flat tensors, or stacked; one source
    is a valid federation."""
    generator = torch.Generator().manual_seed(5)
    flat = torch.randn(3, 5, generator=generator)
    per_layer = [[source[:2].reshape(2, 1), source[2:]] for source in flat]
    expected = (1 * flat[0] + 2 * flat[1] + 3 * flat[2]) / 6
    out = fedavg(per_layer, [1, 2, 3])
    assert [tuple(layer.shape) for layer in out] == [(2, 1), (3,)]
    assert torch.allclose(torch.cat([out[0].flatten(), out[1]]), expected)
    assert torch.allclose(fedavg(list(flat), [1, 2, 3]), expected)
    single = fedavg(per_layer[:1], [4])
    assert torch.equal(torch.cat([single[0].flatten(), single[1]]), flat[0])


def test_a_zero_weight_leaves_a_source_out_and_fractional_weights_are_valid():
    sources = torch.tensor([[1.0, 2.0], [3.0, 5.0]])
    assert torch.equal(fedavg(sources, [0, 7]), sources[1])
    assert torch.allclose(fedavg(sources, [0.25, 0.75]), torch.tensor([2.5, 4.25]))


def test_weights_and_betas_take_the_updates_precision():
    """Weights given as integers and β as Python floats are applied in the updates' dtype (float64 here),
    not rounded through float32."""
    target = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    sources = torch.tensor([[0.3, 0.7, -1.1], [2.0, 0.1, 0.9]], dtype=torch.float64)
    out = fedavg(sources, [1, 3])
    assert out.dtype == torch.float64 and torch.equal(out, (sources[0] + 3 * sources[1]) / 4)
    out = fedda(target, sources, 0.3, [1, 1])
    expected = 0.7 * target + 0.3 * (sources[0] + sources[1]) / 2
    assert out.dtype == torch.float64 and torch.allclose(out, expected, rtol=1e-15, atol=1e-16)


def test_no_sources_is_refused_clearly():
    with pytest.raises(ValueError, match="^no source updates to aggregate$"):
        fedavg([], [])


def test_fedgp_without_filter_keeps_the_negative_layers_as_the_ablation_defines():
    """filtered=False: Proj(g_T|g_i) = <g_T,g_i> g_i/||g_i||^2 and cos instead of max(cos, 0), per layer."""
    target = torch.tensor([1.0, 0.0, 2.0, 1.0])
    # source 0's first layer has <g_T, g_i> = 1 exactly, source 1's second layer a negative one
    sources = torch.tensor([[1.0, 1.0, 1.0, 0.0], [2.0, 0.0, -1.0, -1.0]])
    sizes, beta, weights = [2, 2], 0.5, torch.tensor([0.25, 0.75])
    expected = torch.zeros(4)
    expected_filtered = torch.zeros(4)
    for i, w in enumerate(weights):
        for start, stop in ((0, 2), (2, 4)):
            t, s = target[start:stop], sources[i, start:stop]
            projection = (t @ s) / (s @ s) * s
            expected[start:stop] += w * ((1 - beta) * t + beta * projection)
            expected_filtered[start:stop] += w * ((1 - beta) * t + beta * projection * (t @ s > 0))
    unfiltered = fedgp(target, sources, beta, weights, mode="projection", layer_sizes=sizes, filtered=False)
    torch.testing.assert_close(unfiltered, expected)
    torch.testing.assert_close(fedgp(target, sources, beta, weights, layer_sizes=sizes), expected_filtered)
    assert not torch.allclose(expected, expected_filtered)  # the example has negative layers to keep
    cosine = fedgp(target, sources, beta, weights, mode="cosine_scaled", scale=2.0, layer_sizes=sizes, filtered=False)
    by_hand = torch.zeros(4)
    for i, w in enumerate(weights):
        for start, stop in ((0, 2), (2, 4)):
            t, s = target[start:stop], sources[i, start:stop]
            by_hand[start:stop] += w * ((1 - beta) * t + beta * 2.0 * (t @ s) / (t.norm() * s.norm()) * s)
    torch.testing.assert_close(cosine, by_hand)
