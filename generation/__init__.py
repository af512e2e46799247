"""Benchmark construction and MCTS instruction-data synthesis (not built yet: see the open issues)."""
