"""Benchmarks: aggregation kernels against the memory-bandwidth floor, and one cell's rounds against centralised
training."""
