"""Which source a task reads, and reading it: the hub (parquet or the authors' JSON + images) or a local copy."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.core.names import IMAGE_EXTENSIONS
from hvcu_tasks.core.records import ASPECT_COLUMNS, record_to_sample
from hvcu_tasks.core.schema import DataError, ImageRef, Problem, Sample
from hvcu_tasks.data import jsonio
from hvcu_tasks.settings import HUB_DATASET, hub_spec

# Column names we accept for each field of a row of a user's local parquet file, most likely first; the authors'
# own names come first, and the hub source reads only those (hvcu_tasks.data.hub checks the footer first).
ID_COLUMNS = ("id", "sample_id", "image_id", "uid", "idx", "index")
IMAGE_COLUMNS = ("image", "img", "image_bytes", "picture")
LEVELS_COLUMNS = ("qa_levels", "levels", "qa", "questions")
COLUMNS = (ID_COLUMNS, IMAGE_COLUMNS, LEVELS_COLUMNS)
FLAT_PREFIXES = ("l{n}_", "level{n}_", "level_{n}_", "L{n}_")
"""Prefixes of flat level columns (l1_question, level_2_options, L3_answer, ...)."""
EXPECTED_COLUMNS = (
    f"an id column (one of {list(ID_COLUMNS)}), an image column (one of {list(IMAGE_COLUMNS)}) and "
    f"either a levels column (one of {list(LEVELS_COLUMNS)}) holding the authors' qa_levels list or "
    "flat columns l1_question/l1_options/l1_answer ... l3_answer; optionally an aspect column "
    f"(one of {list(ASPECT_COLUMNS)}, else the aspect is read from the id's prefix)"
)


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


def _file_problem(path: Path, message: str) -> LoadResult:
    """Return the result of a file that cannot be read at all: one problem naming it."""
    return LoadResult(problems=[Problem(str(path), "-", "file", message)])


def load_official_json(
    path: Path, family: str | None = None, fetch_images: Callable[[list[str]], None] | None = None
) -> LoadResult:
    """Load one authors'-format JSON file, each image the first `Image/<stem>/<id>.<ext>` in the authors' order.

    `fetch_images(ids)`, when given, runs before the images are looked up (the hub source downloads only those).
    """
    path = Path(path)
    family = family or family_from_name(path.stem)
    if family is None:
        return _file_problem(path, f"cannot tell the task family from the file name {path.name!r}")
    try:
        records = jsonio.read_json(path, unique_keys=True)
    except jsonio.JsonReadError as exc:
        return _file_problem(path, f"cannot read JSON{'' if exc.line is None else f' (line {exc.line})'}: {exc.reason}")
    except OSError as exc:
        return _file_problem(path, f"cannot read JSON: {exc}")
    if not isinstance(records, list):
        return _file_problem(path, "expected a JSON array of items")
    result = LoadResult() if records else _file_problem(path, "holds no items (an empty JSON array)")
    mapped = [
        record_to_sample(record, family, str(path), None, index, jsonio.loads_field)
        if isinstance(record, Mapping)
        else (None, [Problem(str(path), f"#{index}", "item", "expected a JSON object")])
        for index, record in enumerate(records)
    ]
    if fetch_images is not None:
        fetch_images([s.id for s, _ in mapped if s is not None])
    image_dir = path.parent / "Image" / path.stem
    for sample, problems in mapped:
        if sample is not None:
            found = next((p for e in IMAGE_EXTENSIONS if (p := image_dir / f"{sample.id}{e}").is_file()), None)
            result.samples.append(replace(sample, image=ImageRef(path=found) if found else None))
            problems = [p for p in problems if p.field != "image"]
            if found is None:
                exts = ",".join(IMAGE_EXTENSIONS)
                problems.append(Problem(str(path), sample.id, "image", f"no file {image_dir}/{sample.id}{{{exts}}}"))
        result.problems.extend(problems)
    return result


def _image_cell(value: Any) -> ImageRef | None:
    """Read an image cell from parquet: a {'bytes', 'path'} struct, raw bytes or a path."""
    if isinstance(value, (bytes, bytearray)):
        return ImageRef(data=bytes(value))
    if isinstance(value, Mapping) and value.get("bytes"):
        return ImageRef(data=bytes(value["bytes"]))
    path = value.get("path") if isinstance(value, Mapping) else value
    return ImageRef(path=Path(path)) if isinstance(path, str) and path and Path(path).is_file() else None


def _flat_levels(row: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """Rebuild qa_levels from flat columns such as l1_question / level_1_options / l1_answer (None: not that layout)."""
    levels = []
    for n in (1, 2, 3):
        for prefix in (p.format(n=n) for p in FLAT_PREFIXES):
            answer = next((prefix + a for a in ("answer", "correct_answer_key") if prefix + a in row), None)
            if answer and prefix + "question" in row and prefix + "options" in row:
                question, options = row[prefix + "question"], row[prefix + "options"]
                levels.append({"level": n, "question": question, "options": options, "correct_answer_key": row[answer]})
                break
        else:
            return None
    return levels


def rows_to_samples(rows: Iterable[Mapping[str, Any]], family: str, source: str) -> LoadResult:
    """Map parquet rows to Samples, failing clearly (DataError) when the columns are not ones we know.

    Each field's column is the first of its names (COLUMNS) a row has; the hub's rows hold only the authors' own.
    """
    result = LoadResult()
    for index, row in enumerate(rows):
        id_col, img_col, lv_col = (next((n for n in names if n in row), None) for names in COLUMNS)
        levels = row[lv_col] if lv_col else _flat_levels(row)  # by column names: a null cell is the record's problem
        found = {"id column": id_col, "image column": img_col, "levels column or flat level columns": lv_col or levels}
        missing = [what for what, column in found.items() if column is None]
        if missing:
            why = f"unrecognised layout (no {', no '.join(missing)}): expected {EXPECTED_COLUMNS}"
            raise DataError([Problem(source, f"#{index}", "columns", f"{why}; found columns {sorted(row)}")])
        record = {**row, "id": row[id_col], "qa_levels": levels}
        sample, problems = record_to_sample(
            record, family, source, _image_cell(row[img_col]), index, jsonio.loads_field
        )
        result.samples += [] if sample is None else [sample]
        result.problems += problems
    if not (result.samples or result.problems):
        result.problems.append(Problem(source, "-", "rows", "holds no items (no rows)"))
    return result


def parquet_family(path: Path) -> str | None:
    """Return the family a parquet file holds, judged by its name (any case, '-'/'_' alike)."""
    name = path.stem.lower().replace("-", "_")
    return next((f for f, (split, _stem, _short) in FAMILIES.items() if split.lower() in name), None)


def load_parquet(path: Path, family: str | None = None) -> LoadResult:
    """Load one parquet file of a family split (a local copy of the hub data)."""
    import pyarrow.parquet as pq

    path = Path(path)
    family = family or parquet_family(path)
    if family is None:
        return _file_problem(path, f"cannot tell the task family from {path.name!r}")
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises many types for a bad file
        return _file_problem(path, f"cannot read parquet: {exc}")
    try:
        return rows_to_samples(rows, family, str(path))
    except DataError as exc:  # unknown columns: reported for this file, the other files still load
        return LoadResult(problems=list(exc.problems))


def load_hub(family: str, repo: str = HUB_DATASET, revision: str | None = None) -> LoadResult:
    """Load one family of a hub dataset at one revision, from a layout known for certain (see `hvcu_tasks.data.hub`)."""
    import pyarrow.parquet as pq

    from hvcu_tasks.data import hub

    rev = hub.resolve(repo, revision)
    chosen = hub.layout(rev, family)
    if chosen.kind == hub.JSON:
        stem = FAMILIES[family][1]
        result = load_official_json(hub.json_file(rev, stem, chosen), family, lambda i: hub.fetch_images(rev, stem, i))
        local = str(rev.folder)  # files are named by repo@commit/<path>, not by their place in the cache
        result.samples = [replace(s, source=s.source.replace(local, rev.where)) for s in result.samples]
        result.problems = [
            replace(p, source=p.source.replace(local, rev.where), message=p.message.replace(local, rev.where))
            for p in result.problems
        ]
        return result
    rows: list[dict[str, Any]] = []
    for shard, path in zip(chosen.shards, hub.fetch(rev, chosen.shards), strict=True):
        try:
            rows.extend(pq.read_table(path, columns=list(hub.AUTHORS_COLUMNS)).to_pylist())
        except Exception as exc:  # pyarrow raises many types for a bad file
            raise hub.fail(f"{rev.where}/{shard}", "file", f"cannot read parquet: {hub.cause_text(exc)}") from exc
    return rows_to_samples(rows, family, f"{repo}[{FAMILIES[family][0]}]@{rev.commit}")


def load_path(path: Path, families: Iterable[str] | None = None) -> LoadResult:
    """Load a local dataset: a family JSON/parquet file, or a folder holding them (authors' or hub layout).

    In a folder each family is read from the authors' JSON when it is there, else from its parquet shards below it.
    """
    path = Path(path)
    wanted = [f for f in FAMILIES if families is None or f in families]
    if path.is_file():
        loaded = (load_parquet if path.suffix == ".parquet" else load_official_json)(path)
        loaded.samples = [s for s in loaded.samples if s.family in wanted]
        return loaded
    if not path.is_dir():
        return LoadResult(problems=[Problem(str(path), "-", "path", "no such file or folder")])
    result, shards = LoadResult(), sorted(path.rglob("*.parquet"))
    for family in wanted:
        split, stem, _ = FAMILIES[family]
        json_file = path / f"{stem}.json"
        files = [json_file] if json_file.is_file() else [p for p in shards if parquet_family(p) == family]
        for file in files:
            result.extend((load_parquet if file.suffix == ".parquet" else load_official_json)(file, family))
        if not files:
            why = f"no data for family {family!r}: expected {stem}.json or {split}*.parquet"
            result.problems.append(Problem(str(path), "-", "files", why))
    return result


def load_source(source: str, family: str) -> LoadResult:
    """Load one family from a source string: 'hub' / 'hub:REPO[@REV]', 'smoke', or a local path."""
    spec = hub_spec(source)
    if spec is not None:
        return load_hub(family, *spec)
    if source == "smoke":
        from hvcu_tasks.dev.smoke import SMOKE_DIR

        return load_path(SMOKE_DIR, [family])
    return load_path(Path(source).expanduser(), [family])


def family_counts(samples: Iterable[Sample]) -> dict[str, dict[str, int]]:
    """Count samples per family and aspect, in the benchmark's canonical order (other aspects last)."""
    counts = Counter((s.family, s.aspect) for s in samples)
    known = [(f, a) for f in ASPECTS for a in ASPECTS[f]]
    result: dict[str, dict[str, int]] = {}
    for f, a in sorted(counts, key=lambda fa: (list(ASPECTS).index(fa[0]), known.index(fa) if fa in known else 99)):
        result.setdefault(f, {})[a] = counts[(f, a)]
    return result
