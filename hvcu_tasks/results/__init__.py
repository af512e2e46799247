"""Readers of run outputs: lmms-eval results and sample logs, the authors' result files."""
