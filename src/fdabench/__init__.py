"""fdabench: a reproducible experiment pipeline for federated domain adaptation."""

__version__ = "0.1.0"
