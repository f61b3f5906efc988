"""Auto-weighting estimators (docs/design/methods.md, Auto-weighting): unbiased on Gaussian updates with known
σ² and d², betas in closed form, the streaming form equal to the stored one, and the Delta-error closed forms."""

import pytest
import torch

from estimators import reference_auto_weights
from fdabench.tensor_math.aggregation import StreamingAutoWeights, auto_weights, delta_error


def _truth(mean_target: torch.Tensor, source: torch.Tensor, noise_variance: float, batches: int):
    unit = source / source.norm()
    orthogonal = mean_target - (mean_target @ unit) * unit
    return {
        "sigma2": noise_variance / batches,
        "d2": float((mean_target - source).square().sum()),
        "tau2d2": float(orthogonal.square().sum()),
    }


def test_estimators_are_unbiased_on_gaussian_updates():
    generator = torch.Generator().manual_seed(0)
    m, B, draws, noise_variance = 40, 8, 2000, 4.0
    mean_target = torch.randn(m, generator=generator, dtype=torch.float64) * 0.5
    shift = torch.randn(m, generator=generator, dtype=torch.float64)
    source = mean_target + shift * (6.0 / shift.square().sum()).sqrt()  # d² = 6
    truth = _truth(mean_target, source, noise_variance, B)
    sums = {"sigma2": 0.0, "d2": 0.0, "tau2d2": 0.0}
    clamped = 0
    for _ in range(draws):
        noise = torch.randn(B, m, generator=generator, dtype=torch.float64) * (noise_variance / m) ** 0.5
        betas, estimates = auto_weights(mean_target + noise, source[None], rule="fedda")
        for key in sums:
            value = estimates[key].reshape(-1)[0].item()
            sums[key] += value
            clamped += int(key != "sigma2" and value == 0.0)
        # the betas are the closed form of the estimates
        assert betas[0].item() == pytest.approx(
            estimates["sigma2"].item() / (estimates["sigma2"].item() + estimates["d2"][0].item())
        )
    assert clamped < draws * 0.005  # the max(., 0) guard almost never acts here, so no clamping bias
    for key, total in sums.items():
        assert total / draws == pytest.approx(truth[key], rel=0.03), key


@pytest.mark.parametrize("rule", ["fedda", "fedgp", "fedgp_threshold"])
def test_betas_closed_form(rule):
    generator = torch.Generator().manual_seed(1)
    batches = torch.randn(5, 30, generator=generator) + 0.2
    sources = torch.randn(3, 30, generator=generator) * 0.3 + 0.2
    betas, e = auto_weights(batches, sources, rule=rule)
    if rule == "fedda":
        expected = e["sigma2"] / (e["sigma2"] + e["d2"])
    elif rule == "fedgp":
        expected = e["sigma2"] / (e["sigma2"] + e["tau2d2"])
    else:
        expected = e["sigma2"] / (
            e["sigma2"] + e["delta_prime"] * e["tau2d2"] + (1 - e["delta_prime"]) * e["target_mean_norm2"]
        )
        assert torch.allclose(e["delta_prime"], 1 - (1 - e["delta"]) / 5)
    assert torch.allclose(betas, expected)
    assert ((betas >= 0) & (betas <= 1)).all()


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("rule", ["fedda", "fedgp", "fedgp_threshold"])
def test_streaming_equals_stored(seed, rule):
    generator = torch.Generator().manual_seed(seed)
    B, N, m = 4 + seed, 1 + seed % 3, 1000
    batches = torch.randn(B, m, generator=generator) * 0.01 + 0.003 * torch.randn(m, generator=generator)
    sources = torch.randn(N, m, generator=generator) * 0.05
    scale = torch.rand(N, generator=generator) + 0.1
    betas, stored = auto_weights(batches, sources, rule=rule, source_scale=scale)
    streaming = StreamingAutoWeights(sources, source_scale=scale)
    for batch in batches:
        streaming.add(batch)
    streamed_betas, streamed = streaming.result(rule)
    assert torch.allclose(streamed_betas, betas, rtol=1e-5, atol=0)
    for key in ("sigma2", "d2", "tau2d2", "delta", "target_mean_norm2"):
        assert torch.allclose(streamed[key], stored[key], rtol=1e-5, atol=0), key


@pytest.mark.parametrize("noise_ratio", [1e-2, 1e-3])
def test_streaming_sigma2_stays_exact_for_nearly_deterministic_steps(noise_ratio):
    """Per-step noise small against the mean step (e.g. full-batch target training): the one-pass
    Σ‖G_b‖² − B‖Ḡ‖² in float32 cancels (wrong sign at 1e-3); Welford's update keeps σ̂² within 1e-3 of a
    two-pass float64 reference, and d̂², τ̂²d̂² too. Crosses several scratch chunks (m > 2^18)."""
    generator = torch.Generator().manual_seed(0)
    B, m = 25, 600_000
    mean_step = torch.randn(m, generator=generator)
    batches = mean_step + noise_ratio * torch.randn(B, m, generator=generator)
    sources = mean_step + 0.3 * torch.randn(2, m, generator=generator)
    streaming = StreamingAutoWeights(sources)
    for batch in batches:
        streaming.add(batch)
    _, ours = streaming.result("fedgp")
    exact = batches.double()
    centred = exact - exact.mean(0)
    sigma2 = centred.square().sum() / (B - 1) / B
    assert torch.allclose(ours["sigma2"], sigma2, rtol=1e-3, atol=0)
    distance2 = (exact[:, None, :] - sources.double()[None]).square().sum(dim=(0, 2)) / B - sigma2 * B
    assert torch.allclose(ours["d2"], distance2, rtol=1e-3, atol=0)
    units = sources.double() / sources.double().norm(dim=1, keepdim=True)
    residuals = exact[:, None, :] - (exact @ units.T)[..., None] * units[None]
    spread = (residuals - residuals.mean(0)).square().sum(dim=(0, 2))
    tau2d2 = residuals.square().sum(dim=(0, 2)) / B - spread / (B - 1)
    assert torch.allclose(ours["tau2d2"], tau2d2, rtol=1e-3, atol=0)


def test_source_scale_is_the_same_as_scaled_sources():
    generator = torch.Generator().manual_seed(3)
    batches, sources = torch.randn(6, 50, generator=generator), torch.randn(2, 50, generator=generator)
    scaled_betas, scaled = auto_weights(batches, sources, source_scale=[0.5, 3.0])
    direct_betas, direct = auto_weights(batches, sources * torch.tensor([[0.5], [3.0]]))
    assert torch.allclose(scaled_betas, direct_betas) and torch.allclose(scaled["d2"], direct["d2"])


def test_one_batch_is_refused():
    with pytest.raises(ValueError, match="at least 2 target batches"):
        auto_weights(torch.randn(1, 5), torch.randn(1, 5))
    streaming = StreamingAutoWeights(torch.randn(1, 5))
    streaming.add(torch.randn(5))
    with pytest.raises(ValueError, match="at least 2 target batches"):
        streaming.result()


def test_zero_over_zero_gives_half():
    identical = torch.ones(3, 4)
    betas, estimates = auto_weights(identical, torch.ones(1, 4))
    assert estimates["sigma2"] == 0 and estimates["d2"][0] == 0 and betas[0] == 0.5


def test_delta_error_closed_forms():
    sigma2, d2, tau2d2 = 0.4, 1.6, 0.3
    assert delta_error("target_only", sigma2) == sigma2
    assert delta_error("source_only", sigma2, d2=d2) == d2
    assert delta_error("fedda", sigma2, d2=d2, beta=0.0) == pytest.approx(sigma2)
    assert delta_error("fedda", sigma2, d2=d2, beta=1.0) == pytest.approx(d2)
    best = sigma2 / (sigma2 + d2)  # the minimiser of (1-β)²σ² + β²d²
    grid = [delta_error("fedda", sigma2, d2=d2, beta=b / 100) for b in range(101)]
    assert min(grid) >= delta_error("fedda", sigma2, d2=d2, beta=best) - 1e-12
    assert delta_error("fedda", sigma2, d2=d2, beta=best) == pytest.approx(sigma2 * d2 / (sigma2 + d2))
    assert delta_error("fedgp", sigma2, tau2d2=tau2d2, beta=0.5) == pytest.approx(0.25 * sigma2 + 0.25 * tau2d2)
    with_dim = delta_error("fedgp", sigma2, tau2d2=tau2d2, beta=0.5, model_dim=10)
    assert with_dim == pytest.approx((0.25 + 0.75 / 10) * sigma2 + 0.25 * tau2d2)
    # the thresholded form equals FedGP's when every projection is kept (δ = 1)
    assert delta_error(
        "fedgp_threshold", sigma2, tau2d2=tau2d2, beta=0.5, delta=1.0, target_norm2=9.0
    ) == pytest.approx(0.25 * sigma2 + 0.25 * tau2d2)
    filtered = delta_error("fedgp_threshold", sigma2, tau2d2=tau2d2, beta=0.5, delta=0.0, target_norm2=9.0)
    assert filtered == pytest.approx(0.25 * sigma2 + 0.25 * 9.0)


@pytest.mark.parametrize("true_beta", [0.2, 0.8])
def test_streaming_beta_recovers_planted_sigma2_and_d2(true_beta):
    """A round whose σ² and d² are known: B batch updates g_T + noise (σ² = m τ² / B, the variance of their
    mean) and two sources at distance d from g_T, one shifted orthogonally to g_T (τ²d² ≈ d²) and one along
    it (τ²d² = 0). β_FedDA must come out near σ²/(σ² + d²) for both; β_FedGP near it for the first and near
    1 for the second. A constant β, or a rule that ignored σ² or d², fails for one of the planted values."""
    generator = torch.Generator().manual_seed(1)
    B, m, tau = 16, 200_000, 0.1
    sigma2 = m * tau**2 / B
    d2 = sigma2 * (1 - true_beta) / true_beta
    g_target = torch.randn(m, generator=generator)
    direction = torch.randn(m, generator=generator)
    direction -= (direction @ g_target) / (g_target @ g_target) * g_target  # orthogonal to g_T
    shifted = g_target + direction * (d2**0.5 / direction.norm())
    along = g_target * (1 + d2**0.5 / g_target.norm())  # the same distance, along g_T: τ²d² = 0
    streaming = StreamingAutoWeights(torch.stack([shifted, along]))
    for _ in range(B):
        streaming.add(g_target + tau * torch.randn(m, generator=generator))
    fedda_betas, estimates = streaming.result("fedda")
    assert torch.allclose(estimates["sigma2"], torch.tensor(sigma2, dtype=torch.float64), rtol=0.05)
    assert torch.allclose(estimates["d2"], torch.tensor([d2, d2], dtype=torch.float64), rtol=0.1)
    assert torch.allclose(fedda_betas, torch.tensor([true_beta] * 2, dtype=torch.float64), atol=0.05)
    fedgp_betas, _ = streaming.result("fedgp")
    assert fedgp_betas[1] > 0.95 and abs(fedgp_betas[0] - true_beta) < 0.05


def test_a_zero_source_update_gives_finite_estimates():
    """A source that did not move (g_i = 0) has no direction: τ²d² is the whole target term, no batch counts
    as agreeing with it (δ = 0), and every estimate is finite, streaming or stored."""
    generator = torch.Generator().manual_seed(11)
    batches = torch.randn(5, 30, generator=generator, dtype=torch.float64) + 1.0
    sources = torch.stack([torch.zeros(30, dtype=torch.float64), torch.ones(30, dtype=torch.float64)])
    betas, estimates = auto_weights(batches, sources, rule="fedgp_threshold")
    B = batches.shape[0]
    mean = batches.mean(0)
    s2 = (batches - mean).square().sum() / (B - 1)
    assert torch.isfinite(betas).all() and estimates["batches"] == B
    assert torch.allclose(estimates["tau2d2"][0], batches.square().sum(1).mean() - s2)
    assert estimates["delta"][0] == 0 and estimates["delta"][1] == 1
    streaming = StreamingAutoWeights(sources)
    for batch in batches:
        streaming.add(batch)
    streamed_betas, streamed = streaming.result("fedgp_threshold")
    assert torch.allclose(streamed_betas, betas) and torch.equal(streamed["delta"], estimates["delta"])


def test_two_batches_are_enough_and_a_source_scale_keeps_float64():
    batches = torch.tensor([[1.0, 0.0], [1.2, 0.0]], dtype=torch.float64)
    sources = torch.tensor([[30.0, 10.0]], dtype=torch.float64)
    betas, estimates = auto_weights(batches, sources, source_scale=0.1)
    # by hand: ḡ = (1.1, 0), s² = 0.02, σ̂² = 0.01; c g = (3, 1); mean_b ‖G_b − c g‖² = (5 + 4.24) / 2
    sigma2, d2 = 0.01, (5 + 4.24) / 2 - 0.02
    assert estimates["batches"] == 2 and abs(float(estimates["sigma2"]) - sigma2) < 1e-15
    assert abs(float(estimates["d2"][0]) - d2) < 1e-12 and abs(float(betas[0]) - sigma2 / (sigma2 + d2)) < 1e-15


@pytest.mark.parametrize("rule", ["fedda", "fedgp", "fedgp_threshold"])
@pytest.mark.parametrize("magnitude", [1e-3, 1.0, 30.0])
def test_betas_equal_the_independent_numpy_estimators_at_every_scale(rule, magnitude):
    """β and the estimates from the stored and the streaming forms equal the formulas written separately in
    numpy (tests/estimators.py), for updates small enough that σ² + D < 1 and large enough that it is > 1."""
    generator = torch.Generator().manual_seed(21)
    batches = magnitude * (torch.randn(7, 40, generator=generator, dtype=torch.float64) + 0.3)
    sources = magnitude * torch.randn(3, 40, generator=generator, dtype=torch.float64)
    scale = [0.5, 1.0, 2.0]
    expected, reference = reference_auto_weights(batches.numpy(), sources.numpy(), rule, scale)
    betas, estimates = auto_weights(batches, sources, rule=rule, source_scale=scale)
    streaming = StreamingAutoWeights(sources, scale)
    for batch in batches:
        streaming.add(batch)
    streamed, _ = streaming.result(rule)
    assert betas.numpy() == pytest.approx(expected, rel=1e-10) and streamed.numpy() == pytest.approx(expected, rel=1e-8)
    assert float(estimates["sigma2"]) == pytest.approx(reference["sigma2"], rel=1e-12)
    assert estimates["d2"].numpy() == pytest.approx(reference["d2"], rel=1e-10)
    assert estimates["tau2d2"].numpy() == pytest.approx(reference["tau2d2"], rel=1e-10)
    assert estimates["delta_prime"].numpy() == pytest.approx(reference["delta_prime"])


def test_an_unknown_rule_is_refused_with_the_allowed_ones():
    with pytest.raises(
        ValueError, match=r"^unknown auto-weighting rule 'fedprox'; allowed: fedda, fedgp, fedgp_threshold$"
    ):
        auto_weights(torch.randn(3, 4), torch.randn(1, 4), rule="fedprox")


def test_streaming_works_from_two_batches_and_defaults_to_fedda():
    batches = torch.tensor([[1.0, 0.0], [1.2, 0.0]], dtype=torch.float64)
    sources = torch.tensor([[3.0, 1.0]], dtype=torch.float64)
    streaming = StreamingAutoWeights(sources)
    for batch in batches:
        streaming.add(batch)
    betas, estimates = streaming.result()
    stored, _ = auto_weights(batches, sources, rule="fedda")
    assert estimates["batches"] == 2 and torch.allclose(betas, stored)
    assert not torch.allclose(stored, auto_weights(batches, sources, rule="fedgp")[0])  # the default is visible


def test_streaming_counts_agreement_on_the_scaled_source():
    """δ counts batches with ⟨G_b, c_i g_i⟩ > 0: a source scaled by 0 agrees with no batch, as in the stored
    form (dividing by the scale instead would count every batch with ⟨G_b, g_i⟩ > 0)."""
    batches = torch.tensor([[1.0, 0.5], [2.0, -0.5], [0.5, 0.1]], dtype=torch.float64)
    sources = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    streaming = StreamingAutoWeights(sources, [0.0, 1.0])
    for batch in batches:
        streaming.add(batch)
    _, stored = auto_weights(batches, sources, source_scale=[0.0, 1.0])
    assert streaming.estimates()["delta"].tolist() == stored["delta"].tolist() == [0.0, 1.0]


def test_streaming_refuses_sources_that_are_not_a_matrix():
    with pytest.raises(ValueError, match=r"^source_updates must be an \(N, m\) tensor$"):
        StreamingAutoWeights(torch.ones(3))


def test_delta_error_messages_and_the_thresholded_form_with_the_model_dimension():
    with pytest.raises(ValueError, match=r"^delta_error\('fedda'\) needs beta$"):
        delta_error("fedda", 0.1, d2=0.2)
    with pytest.raises(
        ValueError, match=r"^unknown rule 'fedprox'; allowed: target_only, source_only, fedda, fedgp, fedgp_threshold$"
    ):
        delta_error("fedprox", 0.1, beta=0.5)
    sigma2, tau2d2, beta, delta, norm2, m = 0.4, 0.3, 0.5, 0.25, 9.0, 10
    expected = (
        ((1 - beta) ** 2 + (2 * beta - beta**2) * delta / m) * sigma2
        + beta**2 * delta * tau2d2
        + beta**2 * (1 - delta) * norm2
    )
    got = delta_error("fedgp_threshold", sigma2, tau2d2=tau2d2, beta=beta, delta=delta, target_norm2=norm2, model_dim=m)
    assert got == pytest.approx(expected, rel=1e-14)
