"""Datasets (sources of domains) and partitioners, each in a name -> class registry; importing this package
registers the built-in ones and installed plugins (entry-point groups `fdabench.datasets`,
`fdabench.partitioners`; `fdabench.core.plugins`)."""

from fdabench.core.plugins import load_plugins
from fdabench.core.shipped_members import record_shipped
from fdabench.data import (  # noqa: F401  (register the datasets and partitioners)
    amazon,
    digits,
    image_folders,
    office_caltech,
    partitioners,
    synthetic,
    tabular,
    torchvision_sets,
)
from fdabench.data.base import DATASETS, DatasetSource, DomainArrays, PreparedDataset, get_dataset
from fdabench.data.partition import PARTITIONERS, Partition, get_partitioner, partition_options

# before any plugin loads: what a plugin replaces is found (fdabench.cell.plugin_scope)
record_shipped(DATASETS)
record_shipped(PARTITIONERS)
load_plugins(DATASETS)
load_plugins(PARTITIONERS)

__all__ = [
    "DATASETS",
    "PARTITIONERS",
    "DatasetSource",
    "DomainArrays",
    "Partition",
    "PreparedDataset",
    "get_dataset",
    "get_partitioner",
    "partition_options",
]
