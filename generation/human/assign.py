"""Who answers which level: disjoint annotator groups per level, and the `assignment.json` record."""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import FAMILIES, LEVEL_NAMES, LEVELS
from hvcu_tasks.core.names import check_name as check_path_name
from hvcu_tasks.core.schema import Sample
from hvcu_tasks.data import jsonio

DEFAULT_PER_LEVEL = 3
"""The paper recruited three students per level."""

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
FORMAT = "hvcu-human-assignment/1"

Groups = dict[int, tuple[str, ...]]


def parse_level(text: str | int) -> int:
    """Return the level number named by 1/2/3, L1..L3 or perc/bridge/conn; ValueError otherwise."""
    key = str(text).strip().lower()
    for level, name in LEVEL_NAMES.items():
        if key in {str(level), f"l{level}", f"level{level}", name}:
            return level
    raise ValueError(f"unknown level {text!r}; use 1, 2, 3 or {', '.join(LEVEL_NAMES.values())}")


def check_name(name: str) -> str:
    """Return an annotator name if it is usable in file names (letters, digits, '_', '.', '-')."""
    check_path_name(name, "annotator name")  # one path component: never '..', a separator or a hidden file
    if not NAME.match(name):
        raise ValueError(f"annotator name {name!r}: use letters, digits, '_', '.' or '-' (it names their sheet files)")
    return name


def check_groups(groups: Mapping[int, Sequence[str]], per_level: int = DEFAULT_PER_LEVEL) -> Groups:
    """Validate one group per level: names usable, `per_level` members each, nobody in two groups."""
    if per_level < 1:
        raise ValueError(f"annotators per level must be at least 1, got {per_level}")
    missing = [LEVEL_NAMES[lv] for lv in LEVELS if lv not in groups]
    if missing or set(groups) - set(LEVELS):
        raise ValueError(f"need exactly one group per level ({', '.join(LEVEL_NAMES.values())}); missing {missing}")
    seen: dict[str, int] = {}
    for level in LEVELS:
        members = list(groups[level])
        if len(members) != per_level:
            raise ValueError(
                f"group {LEVEL_NAMES[level]} has {len(members)} annotator(s), expected {per_level} "
                "(--annotators-per-level); every level needs the same number"
            )
        for name in members:
            check_name(name)
            if name in seen:
                where = (
                    "twice in group " + LEVEL_NAMES[level]
                    if seen[name] == level
                    else f"in groups {LEVEL_NAMES[seen[name]]} and {LEVEL_NAMES[level]}"
                )
                raise ValueError(f"annotator {name!r} is {where}; one person may answer only one level")
            seen[name] = level
    return {lv: tuple(groups[lv]) for lv in LEVELS}


def deal_groups(names: Sequence[str], per_level: int = DEFAULT_PER_LEVEL, seed: int = 0) -> Groups:
    """Shuffle the names with `seed` and deal `per_level` to each level, in level order."""
    if per_level < 1:
        raise ValueError(f"annotators per level must be at least 1, got {per_level}")
    twice = sorted({n for n in names if list(names).count(n) > 1})
    if twice:
        raise ValueError(f"annotator name(s) {twice} given twice; one person may answer only one level")
    need = per_level * len(LEVELS)
    if len(names) != need:
        raise ValueError(
            f"got {len(names)} annotator name(s); {len(LEVELS)} levels x {per_level} annotators need exactly {need}"
        )
    order = list(names)
    random.Random(seed).shuffle(order)
    return check_groups({lv: order[i * per_level : (i + 1) * per_level] for i, lv in enumerate(LEVELS)}, per_level)


def parse_group_specs(specs: Iterable[str]) -> dict[int, list[str]]:
    """Parse 'LEVEL=a,b,c' specs (LEVEL as in `parse_level`) into level -> names, in the order given."""
    groups: dict[int, list[str]] = {}
    for spec in specs:
        level_text, sep, names = spec.partition("=")
        if not sep or not names.strip():
            raise ValueError(f"--group {spec!r}: expected LEVEL=name,name,... (e.g. perc=ann1,ann2,ann3)")
        level = parse_level(level_text)
        if level in groups:
            raise ValueError(f"--group: level {LEVEL_NAMES[level]} given twice")
        groups[level] = [n.strip() for n in names.split(",") if n.strip()]
    return groups


def item_digest(sample: Sample) -> str:
    """Return a short hash of what annotators see of a sample: its id and every level's question and options."""
    shown = [[lv.level, lv.question, [list(o) for o in lv.options]] for lv in sample.levels]
    text = json.dumps([sample.family, sample.id, shown], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class AssignedItem:
    """One sample on the sheets: where it is in the bench and a digest of its questions."""

    family: str
    id: str
    aspect: str
    digest: str

    @property
    def key(self) -> tuple[str, str]:
        """Return (family, sample id)."""
        return (self.family, self.id)


@dataclass(frozen=True)
class Assignment:
    """The plan handed out: bench, seed, one ordered group per level and the items on every sheet."""

    bench: str
    seed: int
    groups: Groups
    items: tuple[AssignedItem, ...]

    @property
    def per_level(self) -> int:
        """Return the number of annotators in each level's group."""
        return len(self.groups[LEVELS[0]])

    def level_of(self, annotator: str) -> int | None:
        """Return the level an annotator answers, or None for a name not in the assignment."""
        return next((lv for lv, members in self.groups.items() if annotator in members), None)

    def virtual_annotators(self) -> list[dict[int, str]]:
        """Return virtual annotator k = {level: k-th member of that level's group}, for every k."""
        return [{lv: self.groups[lv][k] for lv in LEVELS} for k in range(self.per_level)]

    def to_json(self) -> str:
        """Return the `assignment.json` text (stable for the same inputs)."""
        data = {
            "format": FORMAT,
            "bench": self.bench,
            "seed": self.seed,
            "groups": {LEVEL_NAMES[lv]: list(self.groups[lv]) for lv in LEVELS},
            "items": [{"family": i.family, "id": i.id, "aspect": i.aspect, "digest": i.digest} for i in self.items],
        }
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> Assignment:
        """Read `assignment.json` text; unknown or missing keys are errors naming `source`."""
        try:
            data = jsonio.loads(text, source=source)
        except jsonio.JsonReadError as exc:
            raise ValueError(f"{source}: not JSON ({exc.reason})") from exc
        _expect_keys(data, {"format", "bench", "seed", "groups", "items"}, source)
        if data["format"] != FORMAT:
            raise ValueError(f"{source}: format {data['format']!r} is not {FORMAT!r}")
        groups_raw = data["groups"]
        _expect_keys(groups_raw, set(LEVEL_NAMES.values()), f"{source}: groups")
        groups = {lv: [str(n) for n in groups_raw[LEVEL_NAMES[lv]]] for lv in LEVELS}
        try:
            checked = check_groups(groups, len(groups[LEVELS[0]]))
        except ValueError as exc:
            raise ValueError(f"{source}: groups: {exc}") from exc
        items = []
        for n, raw in enumerate(data["items"]):
            _expect_keys(raw, {"family", "id", "aspect", "digest"}, f"{source}: items[{n}]")
            if raw["family"] not in FAMILIES:
                raise ValueError(f"{source}: items[{n}]: family: unknown family {raw['family']!r}")
            items.append(AssignedItem(str(raw["family"]), str(raw["id"]), str(raw["aspect"]), str(raw["digest"])))
        if len({i.key for i in items}) != len(items):
            raise ValueError(f"{source}: items: a (family, id) is listed twice")
        return cls(bench=str(data["bench"]), seed=int(data["seed"]), groups=checked, items=tuple(items))


def _expect_keys(data: Any, keys: set[str], where: str) -> None:
    """Raise ValueError naming `where` unless `data` is an object with exactly `keys`."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected an object")
    unknown, missing = sorted(set(data) - keys), sorted(keys - set(data))
    if unknown or missing:
        raise ValueError(f"{where}: unknown key(s) {unknown}, missing key(s) {missing}")


def make_assignment(samples: Sequence[Sample], groups: Groups, bench: str, seed: int) -> Assignment:
    """Return the assignment of validated groups to every sample of the bench, in bench order."""
    items = tuple(AssignedItem(s.family, s.id, s.aspect, item_digest(s)) for s in samples)
    if len({i.key for i in items}) != len(items):
        raise ValueError(f"{bench}: a sample id appears twice in one family")
    if not items:
        raise ValueError(f"{bench}: no samples")
    per_level = len(next(iter(groups.values()), ()))
    return Assignment(bench=bench, seed=seed, groups=check_groups(groups, per_level), items=items)


def read_assignment(path: Path) -> Assignment:
    """Read an `assignment.json` file (or the one in a sheets folder)."""
    path = Path(path)
    if path.is_dir():
        path = path / "assignment.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (run `hvcu human sheets` first)")
    return Assignment.from_json(path.read_text(encoding="utf-8"), str(path))
