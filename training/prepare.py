"""Turn MCTS / direct-baseline chains into LLaMA-Factory ShareGPT datasets (the compositions of the paper's Table 4).

Input: `chains.jsonl` files written by `hvcu mcts` / `hvcu direct` (generation/runner.py), one chain a line:
`{"image", "method": "mcts"|"direct", "path_score", "levels": [{"level", "question", "answer", "score"} x 3]}`.
Output in DIR: `<name>.json` (a list of `{"messages": [...], "images": [abs path]}`) and an entry for it in
`DIR/dataset_info.json` (other entries kept). Compositions:
- full-data: every chain as one three-turn conversation, L1 -> L2 -> L3, `<image>` in the first user turn;
- full-hierarchy: the same for a seeded random third (ceil(n / 3)) of the chains, kept in input order;
- l3-only: every chain's L3 question and answer alone, with the image.
Exact duplicate chains (same image, method and three question/answer pairs) are dropped and counted; every other
defect stops the run with `file:line: field: message` lines (each distinct image is opened once with PIL). Chains of
different methods (mcts and direct) are only merged into one dataset when `name` is given.
"""

from __future__ import annotations

import functools
import json
import math
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvcu_tasks.core.names import check_name
from hvcu_tasks.data import files, jsonio
from hvcu_tasks.data.files import ImageError, check_folder, inside, make_folder, write_atomic

COMPOSITIONS = ("full-data", "full-hierarchy", "l3-only")
METHODS = ("mcts", "direct")
CHAIN_KEYS = {"image", "method", "path_score", "levels"}
LEVEL_KEYS = {"level", "question", "answer", "score"}
IMAGE_PLACEHOLDER = "<image>"
# Placeholders LLaMA-Factory expands in any message: text holding one would break the image count.
RESERVED = ("<image>", "<video>", "<audio>")
# Chat-template special tokens (`<|im_start|>`, `<|im_end|>`, `<|vision_start|>`, ...): text holding one would forge
# turn or image boundaries once the template renders it.
SPECIAL_TOKEN = re.compile(r"<\|[^\s<>|]+\|>")
DATASET_INFO = "dataset_info.json"


@dataclass(frozen=True)
class LineProblem:
    """One defect of an input line, located by file, line number and field."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        """Render as `file:line: field: message`."""
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class ChainError(ValueError):
    """Raised when chain files or a prepared dataset are invalid; the message lists every problem found."""

    def __init__(self, problems: Sequence[LineProblem | str]):
        self.problems = [str(p) for p in problems]
        shown = "\n".join(self.problems[:20])
        more = len(self.problems) - 20
        super().__init__(shown + (f"\n... and {more} more problem(s)" if more > 0 else ""))


@dataclass(frozen=True)
class QA:
    """One open-ended question and its answer."""

    question: str
    answer: str


@dataclass(frozen=True)
class Chain:
    """One validated three-level chain: L1 perception, L2 bridge, L3 connotation, with its image."""

    image: Path
    method: str
    levels: tuple[QA, QA, QA]
    origin: str

    def key(self) -> tuple:
        """Return what makes two chains duplicates: the image, the method and the three question/answer pairs."""
        return (str(self.image), self.method, tuple((qa.question, qa.answer) for qa in self.levels))


@dataclass
class Chains:
    """Chains read from one or more files, after dropping exact duplicates."""

    chains: list[Chain]
    duplicates: int = 0
    by_method: dict[str, int] = field(default_factory=dict)


def _check_text(value: Any, where: str, problems: list[tuple[str, str]]) -> str | None:
    """Return a non-empty string without reserved placeholders, or record why not."""
    if not isinstance(value, str) or not value.strip():
        problems.append((where, f"must be a non-empty string, got {value!r}"))
        return None
    for token in RESERVED:
        if token in value:
            problems.append((where, f"contains {token!r}, which LLaMA-Factory reads as a media placeholder"))
            return None
    special = SPECIAL_TOKEN.search(value)
    if special:
        problems.append((where, f"contains the chat special token {special.group()!r}"))
        return None
    return value.strip()


def image_problem(path: Path) -> str | None:
    """Return why a file is not a usable image (missing, truncated, undecodable, a decompression bomb), or None."""
    if not path.is_file():
        return f"no file {path} (relative paths resolve against --image-root)"
    try:
        files.check_image(path)
    except ImageError as exc:
        return str(exc)
    return None


def parse_chain(
    obj: Any, image_root: Path, origin: str = "", check_image: Callable[[Path], str | None] = image_problem
) -> tuple[Chain | None, list[tuple[str, str]]]:
    """Validate one decoded chain line; return the chain (or None) and (field, message) problems."""
    problems: list[tuple[str, str]] = []
    if not isinstance(obj, dict):
        return None, [("line", f"must be a JSON object, got {type(obj).__name__}")]
    unknown = sorted(set(obj) - CHAIN_KEYS)
    if unknown:
        problems.append(("line", f"unknown key(s) {unknown}; a chain has {sorted(CHAIN_KEYS)}"))
    missing = sorted(CHAIN_KEYS - {"path_score"} - set(obj))
    if missing:
        problems.append(("line", f"missing key(s) {missing}"))
    image = None
    raw = obj.get("image")
    if "image" in obj:
        if not isinstance(raw, str) or not raw.strip():
            problems.append(("image", f"must be a non-empty path, got {raw!r}"))
        elif "\x00" in raw:
            problems.append(("image", f"holds a NUL byte, which no file path can: {raw!r}"[:300]))
        else:
            path = Path(raw)
            try:
                image = (path if path.is_absolute() else image_root / path).resolve()
                bad = check_image(image)
            except (OSError, ValueError) as exc:  # a name the OS refuses (too long, undecodable, ...)
                image, bad = None, f"cannot be opened as a path ({exc}): {raw!r}"[:300]
            if bad:
                problems.append(("image", bad))
    method = obj.get("method")
    if "method" in obj and method not in METHODS:
        problems.append(("method", f"must be one of {list(METHODS)}, got {method!r}"))
    levels = obj.get("levels")
    qas: list[QA] = []
    if "levels" in obj:
        if not isinstance(levels, list) or len(levels) != 3:
            problems.append(("levels", "must be a list of three levels (1, 2, 3)"))
        else:
            for i, lv in enumerate(levels):
                where = f"levels[{i}]"
                if not isinstance(lv, dict):
                    problems.append((where, "must be an object"))
                    continue
                extra = sorted(set(lv) - LEVEL_KEYS)
                if extra:
                    problems.append((where, f"unknown key(s) {extra}"))
                if type(lv.get("level")) is not int or lv.get("level") != i + 1:
                    problems.append((f"{where}.level", f"must be {i + 1} (order L1, L2, L3), got {lv.get('level')!r}"))
                question = _check_text(lv.get("question"), f"{where}.question", problems)
                answer = _check_text(lv.get("answer"), f"{where}.answer", problems)
                if question is not None and answer is not None:
                    qas.append(QA(question, answer))
    if problems or image is None or len(qas) != 3:
        return None, problems
    return Chain(image=image, method=str(method), levels=(qas[0], qas[1], qas[2]), origin=origin), []


def read_chains(paths: Sequence[Path], image_root: Path | None = None) -> Chains:
    """Read and validate chain files; raise ChainError listing every bad line; drop exact duplicates."""
    root = Path(image_root) if image_root is not None else Path.cwd()
    problems: list[LineProblem] = []
    chains: list[Chain] = []
    seen: set[tuple] = set()
    duplicates = 0
    check_image = functools.cache(image_problem)  # each distinct image is opened once
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such chains file")
        for number, raw in enumerate(path.read_bytes().splitlines(), start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                why = f"not UTF-8 text ({exc.reason} at byte {exc.start} of the line)"
                problems.append(LineProblem(str(path), number, "line", why))
                continue
            if not text.strip():
                continue
            try:
                obj = jsonio.loads(text, source=path, line=number)
            except jsonio.JsonReadError as exc:
                problems.append(LineProblem(str(path), number, "line", exc.reason))
                continue
            chain, found = parse_chain(obj, root, f"{path}:{number}", check_image)
            problems += [LineProblem(str(path), number, f, m) for f, m in found]
            if chain is None:
                continue
            key = chain.key()
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            chains.append(chain)
    if problems:
        raise ChainError(problems)
    if not chains:
        raise ChainError([f"{', '.join(str(p) for p in paths)}: no chains"])
    by_method = {m: sum(c.method == m for c in chains) for m in METHODS if any(c.method == m for c in chains)}
    return Chains(chains=chains, duplicates=duplicates, by_method=by_method)


def conversation(qas: Iterable[QA], image: Path) -> dict[str, Any]:
    """Return one ShareGPT sample: the turns in order, `<image>` opening the first user turn."""
    messages = []
    for i, qa in enumerate(qas):
        messages.append({"role": "user", "content": (IMAGE_PLACEHOLDER if i == 0 else "") + qa.question})
        messages.append({"role": "assistant", "content": qa.answer})
    return {"messages": messages, "images": [str(image)]}


def select_third(n: int, seed: int) -> list[int]:
    """Return the sorted indices of a seeded random ceil(n / 3) of n chains."""
    return sorted(random.Random(seed).sample(range(n), math.ceil(n / 3)))


def compose(chains: Sequence[Chain], composition: str, seed: int = 0) -> list[dict[str, Any]]:
    """Return the samples of one composition of Table 4 (see the module docstring)."""
    if composition == "full-data":
        return [conversation(c.levels, c.image) for c in chains]
    if composition == "full-hierarchy":
        return [conversation(chains[i].levels, chains[i].image) for i in select_third(len(chains), seed)]
    if composition == "l3-only":
        return [conversation(c.levels[2:], c.image) for c in chains]
    raise ValueError(f"unknown composition {composition!r}; choose from {list(COMPOSITIONS)}")


def check_sample(sample: Any) -> list[str]:
    """Return what makes a sample unfit for LLaMA-Factory (turn order, image count, files, empty text)."""
    if not isinstance(sample, dict) or set(sample) != {"messages", "images"}:
        return ["must be an object with exactly 'messages' and 'images'"]
    problems = []
    messages, images = sample["messages"], sample["images"]
    if not isinstance(messages, list) or not messages or len(messages) % 2:
        return ["messages: need user/assistant pairs"]
    for i, m in enumerate(messages):
        role = "user" if i % 2 == 0 else "assistant"
        if not isinstance(m, dict) or m.get("role") != role:
            problems.append(f"messages[{i}].role: expected {role!r} (turns alternate, user first)")
        elif not isinstance(m.get("content"), str) or not m["content"].replace(IMAGE_PLACEHOLDER, "").strip():
            problems.append(f"messages[{i}].content: empty")
    if not isinstance(images, list) or not all(isinstance(p, str) for p in images):
        return [*problems, "images: must be a list of paths"]
    placeholders = sum(str(m.get("content", "")).count(IMAGE_PLACEHOLDER) for m in messages if isinstance(m, dict))
    if placeholders != len(images):
        problems.append(f"images: {len(images)} image(s) but {placeholders} {IMAGE_PLACEHOLDER} placeholder(s)")
    problems += [f"images[{i}]: no file {p}" for i, p in enumerate(images) if not Path(p).is_file()]
    return problems


def check_samples(samples: Sequence[dict[str, Any]], name: str) -> None:
    """Raise ChainError naming the dataset, sample index and field of every unfit sample."""
    problems = [f"{name}[{i}]: {p}" for i, s in enumerate(samples) for p in check_sample(s)]
    if problems:
        raise ChainError(problems)


@dataclass(frozen=True)
class Counts:
    """What a prepared dataset holds."""

    samples: int
    qa_pairs: int
    images: int

    @classmethod
    def of(cls, samples: Sequence[dict[str, Any]]) -> Counts:
        """Count samples, question/answer pairs and distinct images."""
        return cls(
            samples=len(samples),
            qa_pairs=sum(len(s["messages"]) // 2 for s in samples),
            images=len({p for s in samples for p in s["images"]}),
        )


def dataset_entry(file_name: str) -> dict[str, Any]:
    """Return the dataset_info.json entry of a role/content ShareGPT file with images."""
    return {
        "file_name": file_name,
        "formatting": "sharegpt",
        "columns": {"messages": "messages", "images": "images"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"},
    }


def dataset_name(method: str, composition: str) -> str:
    """Return the default dataset name, e.g. `hvcu_mcts_full_data`."""
    return f"hvcu_{method}_{composition.replace('-', '_')}"


def _dump(obj: Any) -> str:
    """Serialise JSON byte-stably."""
    return json.dumps(obj, ensure_ascii=False, indent=2) + "\n"


def load_dataset_info(path: Path) -> dict[str, Any]:
    """Read a dataset_info.json (a JSON object of dataset entries); anything else is an error naming the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such dataset_info.json")
    try:
        info = jsonio.read_json(path)
    except jsonio.JsonReadError as exc:
        raise ValueError(f"{path}: not a JSON file ({exc.reason}); fix or remove it") from exc
    if not isinstance(info, dict):
        raise ValueError(f"{path}: must be a JSON object of dataset entries")
    return info


def dataset_files(dataset: str, dataset_dir: Path) -> dict[str, Path]:
    """Return each comma-separated dataset name's data file, from DATASET_DIR/dataset_info.json (entries checked)."""
    info_path = Path(dataset_dir) / DATASET_INFO
    if not info_path.is_file():
        raise FileNotFoundError(f"{info_path}: no dataset_info.json (run `hvcu train prepare --out {dataset_dir}`)")
    info = load_dataset_info(info_path)
    names = [n.strip() for n in dataset.split(",") if n.strip()]
    missing = [n for n in names if n not in info]
    if missing or not names:
        raise ValueError(f"{info_path}: no entry for dataset(s) {missing or [dataset]}; it has {sorted(info)}")
    files = {}
    for n in names:
        entry = info[n]
        file_name = entry.get("file_name") if isinstance(entry, dict) else None
        if not isinstance(file_name, str) or not file_name.strip():
            raise ValueError(f"{info_path}: entry {n!r}: file_name must name the data file, got {file_name!r}")
        try:
            file = inside(dataset_dir, file_name)
        except ValueError:
            raise ValueError(
                f"{info_path}: entry {n!r}: file_name {file_name!r} lies outside {dataset_dir}; "
                "keep the data files in the dataset folder"
            ) from None
        if not file.is_file():
            raise FileNotFoundError(f"{info_path}: entry {n!r}: no data file {file}")
        files[n] = file
    return files


def update_dataset_info(out: Path, entries: dict[str, dict[str, Any]]) -> None:
    """Add or replace entries in OUT/dataset_info.json, keeping every other dataset's entry."""
    path = Path(out) / DATASET_INFO
    info = load_dataset_info(path) if path.exists() else {}
    info.update(entries)
    write_atomic(path, _dump(dict(sorted(info.items()))))


@dataclass(frozen=True)
class Prepared:
    """One written dataset: its dataset_info name, file and counts."""

    name: str
    composition: str
    file: Path
    counts: Counts


def prepare(
    chain_files: Sequence[Path],
    out: Path,
    compositions: Sequence[str],
    seed: int = 0,
    image_root: Path | None = None,
    name: str | None = None,
) -> tuple[list[Prepared], Chains]:
    """Read chains, build and validate every composition, then write the files and dataset_info entries."""
    unknown = [c for c in compositions if c not in COMPOSITIONS]
    if unknown:
        raise ValueError(f"unknown composition(s) {unknown}; choose from {list(COMPOSITIONS)}")
    if name is not None:
        check_name(name, "--name")
        if len(compositions) > 1:
            raise ValueError("--name names one dataset: give a single --composition with it")
    check_folder(out)
    chains = read_chains(chain_files, image_root)
    if len(chains.by_method) > 1 and name is None:
        mix = ", ".join(f"{m} {n}" for m, n in chains.by_method.items())
        raise ValueError(
            f"{', '.join(str(p) for p in chain_files)}: chains of different methods ({mix}); prepare each method "
            "on its own, or give --name (with one --composition) to train on the mixture on purpose"
        )
    method = next(iter(chains.by_method)) if len(chains.by_method) == 1 else "mixed"
    built = []
    for composition in dict.fromkeys(compositions):
        samples = compose(chains.chains, composition, seed)
        ds_name = name or dataset_name(method, composition)
        check_samples(samples, f"{ds_name} ({composition})")
        check_name(f"{ds_name}.json", "--name" if name else "dataset file name")  # fits, with its suffix
        built.append((ds_name, composition, samples))
    out = make_folder(out)
    written = []
    for ds_name, composition, samples in built:
        file = inside(out, f"{ds_name}.json")
        write_atomic(file, _dump(samples))
        written.append(Prepared(ds_name, composition, file, Counts.of(samples)))
    update_dataset_info(out, {p.name: dataset_entry(p.file.name) for p in written})
    return written, chains
