"""Datasets (sources of domains) and partitioners, each in a name -> class registry."""

from fdabench.data import amazon, digits, images, office_caltech, synthetic, tabular, vision  # noqa: F401  (register the datasets)
from fdabench.data.base import DATASETS, DatasetSource, DomainArrays, PreparedDataset, get_dataset
from fdabench.data.partition import PARTITIONERS, Partition, get_partitioner, partition_options

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
