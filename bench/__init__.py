"""Benchmarks: fieldtrust beside the baselines a user would otherwise write (docs/benchmarks.md)."""
