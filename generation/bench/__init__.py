"""Benchmark construction: manifest -> top-down L3/L2/L1 generation with validation -> benchmark folder."""
