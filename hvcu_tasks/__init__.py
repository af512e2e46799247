"""HVCU-Bench for lmms-eval: data loading, prompts, answer parsing and the paper's metrics."""

from hvcu_tasks.core.metrics import Outcome, overall_score, score_family
from hvcu_tasks.core.parsing import parse_choice
from hvcu_tasks.core.schema import DataError, Level, Problem, Sample

__all__ = ["DataError", "Level", "Outcome", "Problem", "Sample", "overall_score", "parse_choice", "score_family"]
