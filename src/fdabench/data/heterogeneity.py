"""Splitting one domain's samples over several clients, with the heterogeneity FL benchmarks use.

`dirichlet_label_split`: label skew (Hsu, Qi and Brown, "Measuring the effects of non-identical data distribution
for federated visual classification", 2019): for each class, the class's samples are dealt to the clients in
proportions p ~ Dir(α·1). α → ∞ gives every client the domain's label mix, small α gives each client few classes.
`quantity_split`: quantity skew: client sizes in proportions q ~ Dir(β·1) of the domain's samples, labels mixed as
the domain's. Both deal every sample to exactly one client, are seeded by the caller's generator, and keep at least
`min_size` samples per client (redrawing the proportions, as the benchmarks do, up to a bound).
"""

from __future__ import annotations

import numpy as np

MAX_REDRAWS = 1000


def _cuts(count: int, proportions: np.ndarray) -> np.ndarray:
    """Where `count` items split in `proportions` (cumulative, rounded down; the last part takes the rest)."""
    return (np.cumsum(proportions)[:-1] * count).astype(np.int64)


def dirichlet_label_split(
    labels: np.ndarray, clients: int, alpha: float, rng: np.random.Generator, min_size: int = 1
) -> list[np.ndarray]:
    """Positions into `labels` for each of `clients` clients (sorted), the classes dealt in Dir(α) proportions."""
    if clients < 1 or alpha <= 0:
        raise ValueError(f"need clients >= 1 and alpha > 0, got {clients} and {alpha}")
    if len(labels) < clients * min_size:
        raise ValueError(f"{len(labels)} samples cannot give {clients} clients {min_size} each")
    classes = np.unique(labels)
    for _ in range(MAX_REDRAWS):
        parts: list[list[np.ndarray]] = [[] for _ in range(clients)]
        for label in classes:
            members = rng.permutation(np.flatnonzero(labels == label))
            shares = rng.dirichlet(np.full(clients, alpha))
            for client, chunk in enumerate(np.split(members, _cuts(len(members), shares))):
                parts[client].append(chunk)
        split = [np.sort(np.concatenate(chunks)) for chunks in parts]
        if min(len(part) for part in split) >= min_size:
            return split
    raise ValueError(
        f"no Dirichlet({alpha}) label split in {MAX_REDRAWS} draws gives each of {clients} clients {min_size} "
        "samples; raise alpha or lower the number of clients"
    )


def quantity_split(
    count: int, clients: int, beta: float, rng: np.random.Generator, min_size: int = 1
) -> list[np.ndarray]:
    """Positions 0..count-1 dealt to `clients` clients in Dir(β) proportions of the samples (a random order)."""
    if clients < 1 or beta <= 0:
        raise ValueError(f"need clients >= 1 and beta > 0, got {clients} and {beta}")
    if count < clients * min_size:
        raise ValueError(f"{count} samples cannot give {clients} clients {min_size} each")
    for _ in range(MAX_REDRAWS):
        shares = rng.dirichlet(np.full(clients, beta))
        split = np.split(rng.permutation(count), _cuts(count, shares))
        if min(len(part) for part in split) >= min_size:
            return [np.sort(part) for part in split]
    raise ValueError(
        f"no Dirichlet({beta}) quantity split in {MAX_REDRAWS} draws gives each of {clients} clients {min_size} "
        "samples; raise beta or lower the number of clients"
    )


def client_positions(
    labels: np.ndarray,
    clients: int,
    rng: np.random.Generator,
    label_skew: float | None = None,
    quantity_skew: float | None = None,
) -> list[np.ndarray]:
    """One domain's samples (their `labels`) over `clients` clients: Dirichlet label skew, Dirichlet quantity skew,
    or (neither) a uniform random deal in near-equal parts. Positions into `labels`, sorted, each sample once."""
    if label_skew is not None and quantity_skew is not None:
        raise ValueError("label_skew and quantity_skew exclude each other (label skew already sets the sizes)")
    if clients == 1:
        return [np.arange(len(labels))]
    if label_skew is not None:
        return dirichlet_label_split(labels, clients, label_skew, rng)
    if quantity_skew is not None:
        return quantity_split(len(labels), clients, quantity_skew, rng)
    if len(labels) < clients:
        raise ValueError(f"{len(labels)} samples cannot give {clients} clients one each")
    return [np.sort(part) for part in np.array_split(rng.permutation(len(labels)), clients)]


def label_mix(labels: np.ndarray, part: np.ndarray, classes: int) -> np.ndarray:
    """A client's label distribution (class frequencies of `labels[part]`)."""
    counts = np.bincount(labels[part], minlength=classes).astype(float)
    return counts / max(counts.sum(), 1.0)
