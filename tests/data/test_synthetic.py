"""The appendix-B synthetic regression: shapes, shared inputs law, shift growing with the level."""

import numpy as np

from fdabench.data.synthetic import _rbf_outputs


def test_domains_and_shapes(synthetic_small):
    assert list(synthetic_small.domains) == ["target"] + [f"s{k}" for k in range(9)]
    assert synthetic_small.task == "regression" and synthetic_small.num_outputs == 10
    for arrays in synthetic_small.domains.values():
        assert arrays.x.shape == (600, 50) and arrays.y.shape == (600, 10)
        assert np.isfinite(arrays.y).all()


def test_rbf_outputs_match_the_formula():
    rng = np.random.default_rng(0)
    x, centres = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    widths, mixing, bias = rng.uniform(1, 2, size=5), rng.normal(size=(2, 5)), rng.normal(size=2)
    expected = np.array(
        [
            [
                sum(mixing[o, j] * np.exp(-np.sum((x[n] - centres[j]) ** 2) / widths[j]) for j in range(5)) + bias[o]
                for o in range(2)
            ]
            for n in range(4)
        ]
    )
    assert np.allclose(_rbf_outputs(x, centres, widths, mixing, bias), expected)


def test_shift_grows_with_level(synthetic_small):
    """Inputs share one law across domains, so the gap between mean labels measures the function shift."""
    target = synthetic_small.domains["target"].y
    gaps = [np.abs(synthetic_small.domains[f"s{k}"].y.mean(0) - target.mean(0)).sum() for k in range(9)]
    assert gaps[0] < 0.2  # level 0: same function, independent inputs
    assert gaps[-1] > 3 * gaps[0]
    assert np.corrcoef(np.arange(9), gaps)[0, 1] > 0.8
