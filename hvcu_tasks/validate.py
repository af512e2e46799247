"""Dataset checks behind `hvcu data validate`: structure, images, duplicate ids, counts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from hvcu_tasks.families import FAMILIES
from hvcu_tasks.loaders import family_counts, load_path, load_source
from hvcu_tasks.schema import DataError, Problem, Sample


@dataclass
class ValidationReport:
    """Everything `hvcu data validate` prints: problems and family/aspect counts."""

    problems: list[Problem] = field(default_factory=list)
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether the dataset has no problems."""
        return not self.problems


def image_problems(samples: list[Sample]) -> list[Problem]:
    """Return one problem per sample whose image is missing or cannot be decoded."""
    problems = []
    for s in samples:
        if s.image is None:
            continue  # already reported by the loader
        try:
            s.image.open().load()
        except Exception as exc:  # PIL raises many types for a broken file
            problems.append(Problem(s.source, s.id, "image", f"cannot decode {s.image.describe()}: {exc}"))
    return problems


def duplicate_problems(samples: list[Sample]) -> list[Problem]:
    """Return one problem per id that occurs more than once within a family."""
    seen = Counter((s.family, s.id) for s in samples)
    sources = {(s.family, s.id): s.source for s in samples}
    return [
        Problem(sources[key], key[1], "id", f"duplicate id ({n} items) in family {key[0]!r}")
        for key, n in seen.items()
        if n > 1
    ]


def validate(source: str, decode_images: bool = True) -> ValidationReport:
    """Check a dataset given as a local path, 'hub[:REPO]' or 'smoke' and return the report."""
    report = ValidationReport()
    samples: list[Sample] = []
    try:
        if source == "hub" or source.startswith("hub:") or source == "smoke":
            for family in FAMILIES:
                loaded = load_source(source, family)
                samples.extend(loaded.samples)
                report.problems.extend(loaded.problems)
        else:
            from pathlib import Path

            loaded = load_path(Path(source).expanduser())
            samples.extend(loaded.samples)
            report.problems.extend(loaded.problems)
    except DataError as exc:
        report.problems.extend(exc.problems)
    report.problems.extend(duplicate_problems(samples))
    if decode_images:
        report.problems.extend(image_problems(samples))
    report.counts = family_counts(samples)
    return report
