"""The settings of one audit (audit.json), fixed when it starts, and the annotator list they hold."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from generation.audit.review import DEFAULT_MIN_ANNOTATORS, DEFAULT_THRESHOLD, check_threshold
from generation.audit.verdicts import check_annotator_name
from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.data import jsonio

AUDIT_FILE = "audit.json"


@dataclass(frozen=True)
class AuditConfig:
    """Settings of one audit, fixed when it starts (audit.json)."""

    annotators: tuple[str, ...]
    families: tuple[str, ...]
    seed: int = 0
    rounds: int = 3
    min_annotators: int = DEFAULT_MIN_ANNOTATORS
    threshold: float = DEFAULT_THRESHOLD
    max_side: int = 0

    def __post_init__(self) -> None:
        for name in self.annotators:
            check_annotator_name(name)
        if len(set(self.annotators)) != len(self.annotators):
            raise ValueError(f"annotators: names repeat in {list(self.annotators)}")
        if self.min_annotators < 2:
            raise ValueError(f"min_annotators {self.min_annotators}: agreement needs at least 2 annotators")
        if len(self.annotators) < self.min_annotators:
            raise ValueError(
                f"annotators: {len(self.annotators)} given, but every item needs at least {self.min_annotators} "
                "(the paper uses 5; lower it with --min-annotators)"
            )
        if self.rounds < 1:
            raise ValueError(f"rounds {self.rounds}: need at least 1")
        if self.max_side < 0:
            raise ValueError(f"max_side {self.max_side}: must be 0 (embed images as they are) or a size in pixels")
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown or not self.families:
            raise ValueError(f"families: {list(self.families)}; expected some of {list(FAMILIES)}")
        check_threshold(self.threshold)

    @classmethod
    def from_file(cls, path: Path) -> AuditConfig:
        """Read audit.json; unknown or missing keys are errors naming the file."""
        try:
            data = jsonio.read_json(path)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: not an audit folder (no {AUDIT_FILE}; start one with export)") from None
        except jsonio.JsonReadError as exc:
            raise ValueError(f"{path}: {exc.reason}") from exc
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names) if isinstance(data, dict) else []
        if not isinstance(data, dict) or unknown:
            raise ValueError(f"{path}: unknown key(s) {unknown}; expected {sorted(names)}")
        try:
            return cls(**{**data, "annotators": tuple(data["annotators"]), "families": tuple(data["families"])})
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: {exc}") from exc

    def to_json(self) -> str:
        """Render as the text of audit.json."""
        return json.dumps(
            {**asdict(self), "annotators": list(self.annotators), "families": list(self.families)}, indent=2
        )


def parse_annotators(values: Sequence[str]) -> tuple[str, ...]:
    """Turn `--annotators 5` into a1..a5, or take the names given (separated by spaces or commas)."""
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    if len(names) == 1 and names[0].isdigit():
        return tuple(f"a{i}" for i in range(1, int(names[0]) + 1))
    return tuple(names)
