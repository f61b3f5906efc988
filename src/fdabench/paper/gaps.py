"""Measured causes of the gaps between published rows and fdabench's runs of their recorded protocol.

Keys: (published table, target, method key). Each entry says what was varied, on which cells, and what it
changed: a cause is recorded here only when a run measured it, never as a guess. The runs are the `paper_cpu`
suite's marked variants (`fed_heart_switzerland_100pct`, `fed_heart_pooled_scaler`, `fed_heart_fdabench`,
`fmnist_noise_target_lr_half`) and the per-round accuracies every cell file keeps (for the statistic).
`paper_vs_ours` names the cause beside each of the largest gaps; a gap with no entry reads "no cause measured
yet". Numbers are means over the published seeds of `paper_cpu` (5 for Fed-Heart, 3 for Fashion-MNIST).
"""

from __future__ import annotations

_HEART_STATISTIC = "the best round instead of the mean of the last 5"
_HEART_NO_SETTING = "no recorded setting reaches the published number"

MEASURED_CAUSES: dict[tuple[str, str, str], str] = {
    # Table 12, noise 0.4 (measured in the earlier run of the same code; `fmnist_noise_target_lr_half` reruns it)
    ("fmnist_noise", "noise0.4", "fedgp_0.5"): (
        "varied: the target lr halved to 0.0025 gives 70.10 (ours 67.34 at the code's 0.005; published 71.09): the "
        "cosine-scaled source term is about 0.002 cos g_i here, so the row follows the target's own step"
    ),
    ("fmnist_noise", "noise0.4", "source_only"): (
        "varied: the seed; FedAvg decays from 58-66% at round 6 to 18-25% at the end and seeds differ by up to 7 "
        "points (sd 3.91): the gap (+3.60) is within one sd"
    ),
    # Table 17, cleveland: neither the scaler, fdabench's earlier batches, nor the statistic closes the gap.
    ("fed_heart", "cleveland", "fedda_auto"): (
        f"varied: one pooled scaler 74.00, batches 32/8 with 2 warm-up rounds 73.92, {_HEART_STATISTIC} 76.54 "
        f"(ours 73.58); {_HEART_NO_SETTING} (80.77)"
    ),
    ("fed_heart", "cleveland", "fedgp_auto"): (
        f"varied: one pooled scaler 74.35, batches 32/8 with 2 warm-up rounds 74.15, {_HEART_STATISTIC} 76.73 "
        f"(ours 73.62); {_HEART_NO_SETTING} (80.77)"
    ),
    ("fed_heart", "cleveland", "fedda_0.5"): (
        f"varied: one pooled scaler 76.62, {_HEART_STATISTIC} 76.54 (ours 75.46); {_HEART_NO_SETTING} (79.81)"
    ),
    ("fed_heart", "cleveland", "fedgp_0.5"): (
        f"varied: one pooled scaler 76.35, {_HEART_STATISTIC} 75.38 (ours 74.92); {_HEART_NO_SETTING} (78.85)"
    ),
    # Table 17, va: FLamby's per-centre scaling is what brings va to the published level at all.
    ("fed_heart", "va", "fedda_auto"): (
        f"varied: one pooled scaler 75.91 (published 71.11, Source only 76.71 vs 55.56), {_HEART_STATISTIC} 67.56 "
        "(ours 63.64); per-centre scaling reproduces Source only (54.67 vs 55.56), the FDA rows stay 5-8 under"
    ),
    ("fed_heart", "va", "fedgp_auto"): (
        f"varied: one pooled scaler 76.27 (published 69.78), {_HEART_STATISTIC} 67.11 (ours 63.82); {_HEART_NO_SETTING}"
    ),
    ("fed_heart", "va", "fedda_0.5"): (
        f"varied: one pooled scaler 77.69 (published 62.22), {_HEART_STATISTIC} 64.00 (ours 57.07): the best round "
        "would close it; the paper states the last-5 mean for its DomainBed tables only"
    ),
    ("fed_heart", "va", "fedgp_0.5"): (
        f"varied: one pooled scaler 76.09 (published 65.33), {_HEART_STATISTIC} 62.22 (ours 59.56); {_HEART_NO_SETTING}"
    ),
    ("fed_heart", "switzerland", "fedgp_0.5"): (
        "varied: centre 2 labelled in full (the paper's text) 80.25; at the code's 20% 64.00 (published 68.75; "
        "FedDA, FedDA_Auto, FedGP_Auto and Source only are within 1.3 at 20%): 16 test patients, one patient = 6.25"
    ),
}
