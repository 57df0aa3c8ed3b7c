"""Scripts that measure hpsearch and print their figures (run from the repository root: python benchmarks/X.py)."""
