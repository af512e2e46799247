"""leaderboard.json: the board's file format, written in version 4 and read in versions 1 to 4 (`--base`).

The reader checks a file against pydantic models, one per version; the first problem found stops it in one line
naming the file, the entry and the field. The writer lays the file out two spaces per level, with each entry's
chain verdicts and each comparison on one line of their own (a board of 20 rows has 190 comparisons).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, fields
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    StrictBool,
    StrictStr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.data import jsonio
from hvcu_tasks.data.public import name_problem
from hvcu_tasks.report import stats
from hvcu_tasks.report.board import (
    BENCHMARK_SIZES,
    FAILED_LIMIT,
    RANKED_SOURCES,
    Board,
    Entry,
    entry_key,
    ranked,
    verdicts_problem,
)
from hvcu_tasks.report.uncertainty import Pair
from hvcu_tasks.results.general import HEADLINES, TABLE_ORDER
from hvcu_tasks.results.runs import ReportError, finite, number_text

SCHEMA = "hvcu-leaderboard"
SCHEMA_VERSION = 4
READ_VERSIONS = (1, 2, 3, 4)
"""Versions `--base` reads: 1 (before intervals: its runs carry no verdicts, so they are compared unpaired), 2 (its
bootstrap intervals and groups are recomputed), 3 (before the general benchmarks were kept) and 4."""
LARGEST = 10**9
"""The largest count or rank a board holds."""
METHODS = {
    "score_interval": "each family's exact (Clopper-Pearson) interval of its Acc_full, combined by MOVER",
    "paired": "two runs logged on the same samples: Bonett-Price adjusted Wald interval per family, variances summed",
    "unpaired": "any other two rows: Agresti-Caffo adjusted Wald interval per family, variances summed",
    "p_value": "two-sided z-test of the adjusted difference (the 95% interval excludes 0 exactly when p < 0.05); "
    f"p-values below {stats.P_FLOOR:g} are stored as {stats.P_FLOOR:g}",
    "adjustment": f"{stats.ADJUSTMENT}, over each family of comparisons; significant: p_adjusted < 0.05",
    "rank_range": "1 + rows significantly above, to the number of ranked rows - rows significantly below",
    "letters": "compact letter display: two rows share a letter exactly when their difference is not significant",
}


# ---- the reader's models ------------------------------------------------------------------------------------


def _percent(value: Any) -> float | None:
    """Return a percentage or None (null: n/a or not measured); refuse NaN, infinity and a huge integer too."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not finite(value):
        raise ValueError(f"{number_text(value)} is not a number or null")
    if not 0 <= value <= 100:
        raise ValueError(f"{number_text(value)} is outside 0-100 (a percentage)")
    return float(value)


def _bound(value: Any) -> float:
    """Return one bound of an interval: a percentage, not null."""
    if value is None:
        raise ValueError("a bound is not null")
    return _percent(value)  # type: ignore[return-value]


def _one_line(value: str) -> str:
    """Return a text that is one line of printable text."""
    problem = name_problem(value) if value else None
    if problem:
        raise ValueError(f"text {problem}; a text is one line of text: fix the file")
    return value


def _keys(allowed: tuple[str, ...], exact: bool = True, null: bool = False) -> BeforeValidator:
    """Return a check that a value is an object whose keys are `allowed` (or among them), or null when `null`."""

    def check(value: Any) -> Any:
        bad = not isinstance(value, dict) or (set(value) != set(allowed) if exact else not set(value) <= set(allowed))
        if bad and not (null and value is None):
            among = "" if exact else "among "
            raise ValueError(f"expected {'null or ' * null}an object with keys {among}{', '.join(allowed)}")
        return value

    return BeforeValidator(check)


def _ordered(bounds: list | None) -> list | None:
    """Return [low, high] when low is not above high."""
    if bounds is not None and bounds[0] > bounds[1]:
        raise ValueError(f"low {bounds[0]} is above high {bounds[1]}")
    return bounds


def _failed(counts: list[int]) -> list[int]:
    """Return [failed, requests] when failed is not above requests."""
    if len(counts) != 2 or counts[0] > counts[1]:
        raise ValueError("expected [failed, requests] with failed <= requests")
    return counts


def _pair(bound: Any) -> Any:
    """Return the type of null or [low, high], both of type `bound`, low first."""
    return Annotated[list[bound] | None, Field(min_length=2, max_length=2), AfterValidator(_ordered)]


Percent = Annotated[float | None, BeforeValidator(_percent)]
Text = Annotated[StrictStr, Field(min_length=1), AfterValidator(_one_line)]
AnyText = Annotated[StrictStr, AfterValidator(_one_line)]
Count = Annotated[int, Field(strict=True, ge=0, le=LARGEST)]
Size = Annotated[int, Field(strict=True, ge=1, le=LARGEST)]
FAMILY_KEYS = _keys(tuple(FAMILIES))
SETTING_KEYS = _keys(("base", "context"), exact=False)
ENTRY_FIELDS = {f.name for f in fields(Entry)}


class Chains(BaseModel):
    """One family's chain verdicts: the sorted sample ids and a string of 0 and 1, one per id."""

    ids: Annotated[list[Text], Field(min_length=1)]
    chains: StrictStr

    @field_validator("ids")
    @classmethod
    def _unique(cls, ids: list[str]) -> list[str]:
        if len(set(ids)) != len(ids):
            raise ValueError("a sample id appears twice")
        return ids

    @field_validator("chains")
    @classmethod
    def _one_per_id(cls, chains: str, info: ValidationInfo) -> str:
        ids = info.data.get("ids", [])
        if len(chains) != len(ids) or set(chains) - {"0", "1"}:
            raise ValueError(f"expected a string of 0 and 1, one per id ({len(ids)})")
        return chains


class EntryV1(BaseModel):
    """An entry of version 1: the scores, the model and where its row comes from (unknown fields left out)."""

    model: Text
    label: Text
    data: Text
    source: Literal["paper", "human", "chance", "run"]
    score_base: Percent
    score_context: Percent
    score_base_hvcu: Percent
    score_context_hvcu: Percent
    rankable: StrictBool
    acc_full: Annotated[dict[str, Percent], FAMILY_KEYS]
    interval_base: _pair(Annotated[float, BeforeValidator(_bound)])
    notes: list[AnyText]

    @field_validator("rankable")
    @classmethod
    def _ranks(cls, rankable: bool, info: ValidationInfo) -> bool:
        if rankable and info.data.get("score_base", 0) is None:
            raise ValueError("true, but score_base is null (only a model with a base Score ranks)")
        if rankable and info.data.get("source") not in (None, *RANKED_SOURCES):
            raise ValueError(f"true, but source is {info.data['source']!r} (only {' and '.join(RANKED_SOURCES)} rank)")
        return rankable

    recomputed: ClassVar[frozenset[str]] = frozenset()
    """The board's fields this version stores otherwise: left at their defaults, recomputed."""

    def entry(self) -> Entry:
        """Return the board's entry (the fields of later versions, and those recomputed, at their defaults)."""
        found = {k: getattr(self, k) for k in type(self).model_fields if k in ENTRY_FIELDS - self.recomputed}
        return Entry(**found | ({"verdicts": _verdicts(found["verdicts"])} if "verdicts" in found else {}))


class EntryV2(EntryV1):
    """An entry of version 2: chain verdicts, family sizes, the intervals of context and gain, a rank range."""

    family_sizes: Annotated[dict[str, Size] | None, _keys(tuple(FAMILIES), null=True)]
    fingerprint: AnyText
    verdicts: Annotated[dict[str, Annotated[dict[str, Chains], FAMILY_KEYS]], SETTING_KEYS]
    interval_context: _pair(Annotated[float, BeforeValidator(_bound)])
    interval_gain: _pair(Annotated[float, Field(strict=True, ge=-100, le=100, allow_inf_nan=False)])
    interval_method: Literal["paired bootstrap", "binomial"] | None
    rank_range: _pair(Size)
    rank_group: Any
    """Read and dropped: the letters are recomputed."""
    recomputed: ClassVar[frozenset[str]] = frozenset({"interval_method"})

    @field_validator("verdicts")
    @classmethod
    def _behind_the_scores(cls, verdicts: dict[str, dict[str, Chains]], info: ValidationInfo) -> dict:
        if verdicts and info.data.get("source") != "run":
            raise ValueError(f"only a run has chain verdicts (source is {info.data.get('source')!r})")
        for setting, key in (("base", "score_base"), ("context", "score_context")):
            problem = setting in verdicts and verdicts_problem(_verdicts(verdicts)[setting], score=info.data.get(key))
            if problem:
                raise ValueError(f".{setting}: {problem} ({key})")
        return verdicts


class EntryV3(EntryV2):
    """An entry of version 3: the letters, the failed requests and why a run is not ranked."""

    interval_method: Literal["chains", "counts"] | None
    rank_group: Any = None
    recomputed: ClassVar[frozenset[str]] = frozenset()
    letters: Annotated[StrictStr, Field(pattern=r"^[A-Za-z ]{1,200}$")] | None
    failed_requests: Annotated[dict[str, Annotated[list[Count], AfterValidator(_failed)]], SETTING_KEYS]
    unranked_because: Text | None

    @field_validator("unranked_because")
    @classmethod
    def _not_ranked(cls, because: str | None, info: ValidationInfo) -> str | None:
        if because is not None and info.data.get("rankable"):
            raise ValueError("set, but rankable is true")
        return because


class EntryV4(EntryV3):
    """An entry of version 4: the general benchmarks (Table 7 columns, percent), their headlines' intervals."""

    general: Annotated[dict[str, Percent], _keys(TABLE_ORDER, exact=False)]
    general_ci: Annotated[dict[str, _pair(Annotated[float, BeforeValidator(_bound)])], _keys(tuple(HEADLINES), False)]
    general_partial: StrictBool


ENTRIES = {1: TypeAdapter(list[EntryV1]), 2: TypeAdapter(list[EntryV2]), 3: TypeAdapter(list[EntryV3])}
ENTRIES[4] = TypeAdapter(list[EntryV4])


def _verdicts(stored: dict[str, dict[str, Chains]]) -> dict[str, dict[str, dict[str, bool]]]:
    """Return checked stored verdicts as the board holds them: per setting and family, sample id -> right."""
    return {
        setting: {f: dict(zip(c.ids, (v == "1" for v in c.chains), strict=True)) for f, c in fams.items()}
        for setting, fams in stored.items()
    }


def _problem(error: Any) -> str:
    """Return one pydantic error as `entries[N].field: why` (a why starting `.part: ` or `[N]: ` names a part)."""
    where = "entries" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
    if error["type"] == "missing":
        return f"{where}: missing"
    if error["type"] == "value_error":
        why = str(error["ctx"]["error"])
        return f"{where}{why}" if re.match(r"(\.\w+|\[\d+\]): ", why) else f"{where}: {why}"
    shown = number_text(error["input"]) if isinstance(error["input"], (int, float)) else f"{error['input']!r:.60}"
    return f"{where}: {error['msg']} (got {shown})"


def read_leaderboard(path: Path) -> list[Entry]:
    """Read and check a published leaderboard.json; a wrong schema, version or field stops naming file and field."""
    try:
        data = jsonio.read_json(path)
    except OSError as exc:
        raise ReportError(f"{path}: cannot read it ({exc})") from exc
    except jsonio.JsonReadError as exc:
        raise ReportError(f"{path}: not JSON ({exc.reason})") from exc
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a leaderboard object, got {type(data).__name__}")
    if data.get("schema") != SCHEMA:
        raise ReportError(f"{path}: schema: expected {SCHEMA!r}, got {data.get('schema')!r} (not a leaderboard.json)")
    version = data.get("version")
    if version not in READ_VERSIONS or isinstance(version, bool):
        raise ReportError(
            f"{path}: version: expected one of {', '.join(map(str, READ_VERSIONS))}, got {version!r} (written by "
            "another release)"
        )
    if not isinstance(data.get("entries"), list):
        raise ReportError(f"{path}: entries: expected a list")
    try:
        entries = [e.entry() for e in ENTRIES[version].validate_python(data["entries"])]
    except ValidationError as exc:
        raise ReportError(f"{path}: {_problem(exc.errors()[0])}") from None
    seen: dict[tuple[str, str], int] = {}
    for i, e in enumerate(entries):
        key = (e.source, e.model)
        if key in seen:
            raise ReportError(f"{path}: entries[{i}].model: {e.model!r} ({e.source}) is also entries[{seen[key]}]")
        seen[key] = i
    return entries


# ---- the writer ---------------------------------------------------------------------------------------------


class _OneLine(str):
    """JSON text the layout keeps on one line."""


def _layout(value: Any, indent: str = "") -> str:
    """Return JSON text indented two spaces per level; a `_OneLine` value is written as it is."""
    inner = indent + "  "
    if isinstance(value, _OneLine):
        return str(value)
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {_layout(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list) and value:
        return "[\n" + ",\n".join(inner + _layout(v, inner) for v in value) + f"\n{indent}]"
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _verdicts_json(verdicts: dict[str, dict[str, dict[str, bool]]]) -> _OneLine:
    """Return an entry's verdicts as stored: per setting and family, the sorted ids and a string of 0/1."""
    stored = {
        setting: {
            family: {"ids": sorted(chains), "chains": "".join("1" if chains[s] else "0" for s in sorted(chains))}
            for family, chains in fams.items()
        }
        for setting, fams in verdicts.items()
    }
    return _OneLine(json.dumps(stored, ensure_ascii=False, separators=(",", ":")))


def _pair_json(pair: Pair, by_key: dict[str, Entry]) -> _OneLine:
    """Return one comparison as stored in leaderboard.json."""
    a, b = by_key[pair.a], by_key[pair.b]
    stored = {
        "a": {"model": a.model, "source": a.source},
        "b": {"model": b.model, "source": b.source},
        "delta": pair.delta,
        "interval": list(pair.interval),
        "p_value": pair.p_value,
        "p_adjusted": pair.p_adjusted,
        "significant": pair.significant,
        "paired": pair.paired,
        "family": pair.family,
    }
    return _OneLine(json.dumps(jsonio.json_safe(stored), ensure_ascii=False, allow_nan=False))


def leaderboard_json(board: Board) -> str:
    """Return `leaderboard.json`: schema and version, what ranks, how the intervals were made, every entry best
    first (rank and intervals included; runs with their chain verdicts, so a later `--base` pairs them again) and
    every comparison (Δ = Score(b) - Score(a), base setting, authors' parser)."""
    u = board.uncertainty
    by_key = {entry_key(e): e for e in board.entries}
    data = {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "ranked_by": "score_base: Overall Score, base setting, authors' parser (Score (official))",
        "failed_limit": FAILED_LIMIT,
        "uncertainty": {
            "level": stats.LEVEL,
            "methods": METHODS,
            "detectable_difference": {
                "independent": u.detectable_independent,
                "significant_independent": u.significant_independent,
                "paired": u.detectable_paired,
                "family_sizes": dict(BENCHMARK_SIZES),
                "power": stats.POWER,
            },
        },
        "entries": [
            {"rank": rank, **asdict(e), "verdicts": _verdicts_json(e.verdicts)} for rank, e in ranked(board.entries)
        ],
        "pairs": [_pair_json(pair, by_key) for pair in u.pairs],
    }
    return _layout(jsonio.json_safe(data)) + "\n"
