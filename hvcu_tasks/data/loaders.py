"""Read HVCU-Bench from the hub parquet splits, the authors' JSON + image folders, or a local copy."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.core.names import IMAGE_EXTENSIONS, check_name
from hvcu_tasks.core.records import ASPECT_COLUMNS, record_to_sample
from hvcu_tasks.core.schema import DataError, ImageRef, Problem, Sample
from hvcu_tasks.data import jsonio

HUB_DATASET = "Chime316/HVCU-Bench"

# Column names we accept for each field of a flat row of a user's local parquet file, most likely first (the hub
# source reads only the authors' own field names: hvcu_tasks.data.hub).
ID_COLUMNS = ("id", "sample_id", "image_id", "uid", "idx", "index")
IMAGE_COLUMNS = ("image", "img", "image_bytes", "picture")
LEVELS_COLUMNS = ("qa_levels", "levels", "qa", "questions")


@dataclass
class LoadResult:
    """Samples read from one source plus every problem found on the way."""

    samples: list[Sample] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def extend(self, other: LoadResult) -> None:
        """Append another result's samples and problems."""
        self.samples.extend(other.samples)
        self.problems.extend(other.problems)

    def raise_for_problems(self) -> list[Sample]:
        """Return the samples, or raise DataError listing every problem."""
        if self.problems:
            raise DataError(self.problems)
        return self.samples


def family_from_name(name: str) -> str | None:
    """Return the canonical family id for a split name, JSON stem or family id, else None."""
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    for family, (split, stem, short) in FAMILIES.items():
        if key in {family, split.lower(), stem.lower().replace("-", "_"), short}:
            return family
    return None


def find_image(image_dir: Path, sid: str) -> Path | None:
    """Return the first existing `<image_dir>/<id><ext>` in the authors' extension order (id: one safe name)."""
    check_name(sid, "id")
    for ext in IMAGE_EXTENSIONS:
        candidate = image_dir / f"{sid}{ext}"
        if candidate.is_file():
            return candidate
    return None


def load_official_json(path: Path, family: str | None = None, image_dir: Path | None = None) -> LoadResult:
    """Load one authors'-format JSON file, resolving images under `Image/<stem>/<id>.<ext>`."""
    path = Path(path)
    family = family or family_from_name(path.stem)
    result = LoadResult()
    if family is None:
        result.problems.append(
            Problem(str(path), "-", "file", f"cannot tell the task family from the file name {path.name!r}")
        )
        return result
    image_dir = image_dir or path.parent / "Image" / path.stem
    try:
        records = jsonio.read_json(path, unique_keys=True)
    except jsonio.JsonReadError as exc:
        at = "" if exc.line is None else f" (line {exc.line})"
        result.problems.append(Problem(str(path), "-", "file", f"cannot read JSON{at}: {exc.reason}"))
        return result
    except OSError as exc:
        result.problems.append(Problem(str(path), "-", "file", f"cannot read JSON: {exc}"))
        return result
    if not isinstance(records, list):
        result.problems.append(Problem(str(path), "-", "file", "expected a JSON array of items"))
        return result
    if not records:
        result.problems.append(Problem(str(path), "-", "file", "holds no items (an empty JSON array)"))
    for index, record in enumerate(records):
        if not isinstance(record, Mapping):
            result.problems.append(Problem(str(path), f"#{index}", "item", "expected a JSON object"))
            continue
        sample, problems = record_to_sample(record, family, str(path), None, index, jsonio.loads_field)
        if sample is not None:
            found = find_image(image_dir, sample.id)
            sample = replace(sample, image=ImageRef(path=found) if found else None)
            problems = [p for p in problems if p.field != "image"]
            if found is None:
                exts = ",".join(IMAGE_EXTENSIONS)
                problems.append(Problem(str(path), sample.id, "image", f"no file {image_dir}/{sample.id}{{{exts}}}"))
            result.samples.append(sample)
        result.problems.extend(problems)
    return result


def _image_cell(value: Any) -> ImageRef | None:
    """Read an image cell from parquet: PIL image, {'bytes', 'path'} struct, raw bytes or a path."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return ImageRef(data=bytes(value))
    if isinstance(value, Mapping):
        if value.get("bytes"):
            return ImageRef(data=bytes(value["bytes"]))
        if value.get("path") and Path(value["path"]).is_file():
            return ImageRef(path=Path(value["path"]))
        return None
    if isinstance(value, str):
        return ImageRef(path=Path(value)) if Path(value).is_file() else None
    if hasattr(value, "save"):  # a decoded PIL image
        buffer = io.BytesIO()
        value.save(buffer, format="PNG")
        return ImageRef(data=buffer.getvalue())
    return None


def _first(row: Mapping[str, Any], names: Iterable[str]) -> str | None:
    """Return the first of `names` that is a column of `row`."""
    return next((n for n in names if n in row), None)


FLAT_PREFIXES = ("l{n}_", "level{n}_", "level_{n}_", "L{n}_")
"""Prefixes of flat level columns (l1_question, level_2_options, L3_answer, ...)."""


def _flat_prefix(columns: Iterable[str], n: int) -> str | None:
    """Return the prefix under which level `n` has question, options and answer columns, if any."""
    names = set(columns)
    for prefix in (p.format(n=n) for p in FLAT_PREFIXES):
        answer = prefix + "answer" in names or prefix + "correct_answer_key" in names
        if prefix + "question" in names and prefix + "options" in names and answer:
            return prefix
    return None


def _flat_levels(row: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """Rebuild qa_levels from flat columns such as l1_question / level_1_options / l1_answer (None: not that layout)."""
    levels = []
    for n in (1, 2, 3):
        prefix = _flat_prefix(row, n)
        if prefix is None:
            return None
        answer = row.get(prefix + "answer", row.get(prefix + "correct_answer_key"))
        levels.append(
            {
                "level": n,
                "question": row[prefix + "question"],
                "options": row[prefix + "options"],
                "correct_answer_key": answer,
            }
        )
    return levels


def describe_expected_columns() -> str:
    """Explain the parquet layouts this loader understands."""
    return (
        f"an id column (one of {list(ID_COLUMNS)}), an image column (one of {list(IMAGE_COLUMNS)}) and "
        f"either a levels column (one of {list(LEVELS_COLUMNS)}) holding the authors' qa_levels list or "
        "flat columns l1_question/l1_options/l1_answer ... l3_answer; optionally an aspect column "
        f"(one of {list(ASPECT_COLUMNS)}, else the aspect is read from the id's prefix)"
    )


def _add_record(result: LoadResult, mapped: tuple[Sample | None, list[Problem]]) -> None:
    """Add one mapped record's sample (when usable) and problems to `result`."""
    sample, problems = mapped
    result.problems.extend(problems)
    if sample is not None:
        result.samples.append(sample)


def _checked_nonempty(result: LoadResult, last_index: int, source: str) -> LoadResult:
    """Return `result`, with a problem when the source held no rows (`last_index` < 0)."""
    if last_index < 0:
        result.problems.append(Problem(source, "-", "rows", "holds no items (no rows)"))
    return result


def rows_to_samples(rows: Iterable[Mapping[str, Any]], family: str, source: str) -> LoadResult:
    """Map the rows of a user's local parquet file to Samples, failing clearly when the columns are not ones we know.

    The id, image and levels columns are looked up among the names above (ID_COLUMNS, ...), for copies people
    made themselves; the hub source never guesses (`authors_rows_to_samples`, `hvcu_tasks.data.hub`).
    """
    result = LoadResult()
    index = -1
    for index, row in enumerate(rows):
        id_col = _first(row, ID_COLUMNS)
        img_col = _first(row, IMAGE_COLUMNS)
        lv_col = _first(row, LEVELS_COLUMNS)
        levels = row[lv_col] if lv_col else _flat_levels(row)  # by column names: a null cell is the record's problem
        missing = [
            what
            for what, absent in (
                ("id column", id_col is None),
                ("image column", img_col is None),
                ("levels column or flat level columns", lv_col is None and levels is None),
            )
            if absent
        ]
        if missing:
            raise DataError(
                [
                    Problem(
                        source,
                        f"#{index}",
                        "columns",
                        f"unrecognised layout (no {', no '.join(missing)}): expected {describe_expected_columns()}; "
                        f"found columns {sorted(row)}",
                    )
                ]
            )
        record = {**row, "id": row[id_col], "qa_levels": levels}
        _add_record(
            result, record_to_sample(record, family, source, _image_cell(row[img_col]), index, jsonio.loads_field)
        )
    return _checked_nonempty(result, index, source)


def load_parquet(path: Path, family: str | None = None) -> LoadResult:
    """Load one parquet file of a family split (a local copy of the hub data)."""
    import pyarrow.parquet as pq

    path = Path(path)
    family = family or parquet_family(path)
    if family is None:
        return LoadResult(problems=[Problem(str(path), "-", "file", f"cannot tell the task family from {path.name!r}")])
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises many types for a bad file
        return LoadResult(problems=[Problem(str(path), "-", "file", f"cannot read parquet: {exc}")])
    try:
        return rows_to_samples(table.to_pylist(), family, str(path))
    except DataError as exc:  # unknown columns: reported for this file, the other files still load
        return LoadResult(problems=list(exc.problems))


def load_hub(family: str, repo: str = HUB_DATASET, revision: str | None = None) -> LoadResult:
    """Load one family of a hub dataset at one revision, from a layout known for certain (see `hvcu_tasks.data.hub`)."""
    import pyarrow.parquet as pq

    from hvcu_tasks.data import hub

    rev = hub.resolve(repo, revision)
    chosen = hub.layout(rev, family)
    if chosen.kind == hub.JSON:  # named by repo@commit/<path>, not by their place in the cache
        json_file, image_dir = hub.json_files(rev, family, chosen)
        result = load_official_json(json_file, family, image_dir)
        result.samples = [replace(s, source=s.source.replace(str(rev.folder), rev.where)) for s in result.samples]
        result.problems = [_relabel(p, str(rev.folder), rev.where) for p in result.problems]
        return result
    rows: list[dict[str, Any]] = []
    for shard, path in zip(chosen.shards, hub.fetch(rev, chosen.shards), strict=True):
        try:
            rows.extend(pq.read_table(path, columns=list(hub.AUTHORS_COLUMNS)).to_pylist())
        except Exception as exc:  # pyarrow raises many types for a bad file
            raise DataError(
                [Problem(f"{rev.where}/{shard}", "-", "file", f"cannot read parquet: {hub.cause_text(exc)}")]
            ) from exc
    return authors_rows_to_samples(rows, family, f"{repo}[{FAMILIES[family][0]}]@{rev.commit}")


def _relabel(problem: Problem, local: str, where: str) -> Problem:
    """Name a hub file of a problem by repo@commit/<path> instead of its place in the local cache."""
    return replace(problem, source=problem.source.replace(local, where), message=problem.message.replace(local, where))


def authors_rows_to_samples(rows: Iterable[Mapping[str, Any]], family: str, source: str) -> LoadResult:
    """Map rows whose columns are the authors' record fields (id, qa_levels, image) to Samples; nothing guessed."""
    result = LoadResult()
    index = -1
    for index, row in enumerate(rows):
        _add_record(
            result, record_to_sample(row, family, source, _image_cell(row.get("image")), index, jsonio.loads_field)
        )
    return _checked_nonempty(result, index, source)


def parquet_family(path: Path) -> str | None:
    """Return the family a parquet file holds, judged by its name (any case, '-'/'_' alike)."""
    name = path.stem.lower().replace("-", "_")
    return next((f for f, (split, _stem, _short) in FAMILIES.items() if split.lower() in name), None)


def _family_files(root: Path) -> Iterator[tuple[str, Path]]:
    """Yield (family, file): the authors' JSON at `root` when present, else that family's parquet shards below it."""
    shards = sorted(root.rglob("*.parquet"))
    for family, (_split, stem, _short) in FAMILIES.items():
        json_file = root / f"{stem}.json"
        if json_file.is_file():
            yield family, json_file
            continue
        for p in shards:
            if parquet_family(p) == family:
                yield family, p


def load_path(path: Path, families: Iterable[str] | None = None) -> LoadResult:
    """Load a local dataset: a family JSON/parquet file, or a folder holding them (authors' or hub layout)."""
    path = Path(path)
    wanted = set(families) if families is not None else set(FAMILIES)
    result = LoadResult()
    if path.is_file():
        loader = load_parquet if path.suffix == ".parquet" else load_official_json
        loaded = loader(path)
        loaded.samples = [s for s in loaded.samples if s.family in wanted]
        return loaded
    if not path.is_dir():
        result.problems.append(Problem(str(path), "-", "path", "no such file or folder"))
        return result
    seen = set()
    for family, file in _family_files(path):
        if family in wanted:
            seen.add(family)
            loader = load_parquet if file.suffix == ".parquet" else load_official_json
            result.extend(loader(file, family))
    for family in sorted(wanted - seen):
        split, stem, _ = FAMILIES[family]
        result.problems.append(
            Problem(str(path), "-", "files", f"no data for family {family!r}: expected {stem}.json or {split}*.parquet")
        )
    return result


def load_source(source: str, family: str) -> LoadResult:
    """Load one family from a source string: 'hub' / 'hub:REPO[@REV]', 'smoke', or a local path."""
    if source == "hub" or source.startswith("hub:"):
        spec = source[4:] or HUB_DATASET
        repo, _, revision = spec.partition("@")
        return load_hub(family, repo, revision or None)
    if source == "smoke":
        from hvcu_tasks.dev.smoke import SMOKE_DIR

        return load_path(SMOKE_DIR, [family])
    return load_path(Path(source).expanduser(), [family])


def family_counts(samples: Iterable[Sample]) -> dict[str, dict[str, int]]:
    """Count samples per family and aspect, in the benchmark's canonical order."""
    counts: dict[str, dict[str, int]] = {}
    for s in samples:
        counts.setdefault(s.family, {}).setdefault(s.aspect, 0)
        counts[s.family][s.aspect] += 1
    order = {f: i for i, f in enumerate(ASPECTS)}
    return {
        f: dict(sorted(c.items(), key=lambda kv: list(ASPECTS[f]).index(kv[0]) if kv[0] in ASPECTS[f] else 99))
        for f, c in sorted(counts.items(), key=lambda kv: order.get(kv[0], 99))
    }
