"""The chain browser: every logged chain of every model, both settings side by side, filterable, one static page.

`write_browser(logs, site)` writes `site/chains.html` from the `--log_samples` files `results.runs` read: one card
per sample and model (image, questions, gold keys, each setting's raw reply and parsed letters), filters in the
URL hash, and the two-model view (report/pairs.py). Images come only from data the user passes whose fingerprint
is the run's, never from a path a log names; each distinct image is written once as a thumbnail and a view.
What the page shows and why: docs/reports.md, "leaderboard.json, the chain browser, model pages".
"""

from __future__ import annotations

import hashlib
import html
import io
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.core.names import LONE_SURROGATE
from hvcu_tasks.data.files import ImageError, make_folder, open_image, write_atomic
from hvcu_tasks.report.page_assets import asset
from hvcu_tasks.results.run_record import shown_path, shown_paths
from hvcu_tasks.results.runs import SampleLog

PAGE = "chains.html"
THUMBS = "thumbs"
VIEWS = "images"
THUMB_PX = 240
VIEW_PX = 1024
MAX_REPLY_CHARS = 10_000
"""Longer replies are cut on the page (the card says by how much and names the samples file and line)."""
SHOWN_IN_WARNING = 5
"""How many sample names a warning line lists before it says how many more share its reason."""
SETTINGS = ("base", "context")
TITLE = "HVCU-Bench chain browser"


def split_question(text: str) -> tuple[str, list[list[str]] | None]:
    """Return (question, [[key, option text], ...]) from a logged level text; (text, None) in any other layout."""
    head, marker, tail = text.rpartition("\nOptions:\n")
    if not marker:
        return text, None
    options = []
    for line in tail.split("\n"):
        found = re.fullmatch(r"([A-Z])\. (.*)", line, re.S)
        if not found:
            return text, None
        options.append([found.group(1), found.group(2)])
    return head, options


def first_wrong_level(correct: Sequence[bool]) -> str:
    """Return a chain's first wrong level ('L1'-'L3'), 'none' when all three are right, 'incomplete' if cut."""
    if len(correct) != 3:
        return "incomplete"
    return next((f"L{k}" for k, right in enumerate(correct, start=1) if not right), "none")


def embed_json(value: Any) -> str:
    """Return JSON text safe in a <script> element and as UTF-8: '<', '>', '&' and lone surrogates escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


@dataclass
class Card:
    """One sample as one model answered it: its chain record per setting and the samples file it came from."""

    model: str
    family: str | None
    sample_id: str
    aspect: str | None
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)


def read_cards(logs: Sequence[SampleLog]) -> list[Card]:
    """Return one card per (model, family, sample) of the sample logs (`RunFolders.logs`), both settings on it."""
    cards: dict[tuple[str, str | None, str], Card] = {}
    for log in logs:
        for record in log.chains:
            family, sid = record["family"], record["sample_id"]
            card = cards.setdefault((log.model, family, sid), Card(log.model, family, sid, record["aspect"]))
            if log.setting in card.records:
                raise ValueError(
                    f"{log.path}: {log.model} has {log.setting} {family}/{sid} also in {card.files[log.setting]}; "
                    "pass one run per model and setting"
                )
            card.records[log.setting] = record
            card.files[log.setting] = log.path
    return sorted(cards.values(), key=_card_order)


def _card_order(card: Card) -> tuple:
    """Sort key: family, then aspect in the benchmark's order, sample id, model."""
    families = list(FAMILIES)
    aspects = list(ASPECTS.get(card.family or "", {}))
    return (
        families.index(card.family) if card.family in families else len(families),
        aspects.index(card.aspect) if card.aspect in aspects else len(aspects),
        str(card.aspect),
        card.sample_id,
        card.model,
    )


@dataclass(frozen=True)
class DataImages:
    """The images of the data a run read, by sample id; or why they cannot be used (`changed`: not the same data)."""

    images: dict[str, Any] | None
    why: str | None = None
    changed: bool = False


def load_data_images(source: str, family: str, expected: Any) -> DataImages:
    """Load one family of a data source the user passed and return its images when its fingerprint is `expected`."""
    from hvcu_tasks.core.fingerprint import fingerprint
    from hvcu_tasks.core.schema import DataError, problem_lines
    from hvcu_tasks.data.loaders import load_source
    from hvcu_tasks.data.validate import image_sha256

    where = source if source in {"smoke", "hub"} or source.startswith("hub:") else str(Path(source).expanduser())
    try:
        loaded = load_source(source, family)
        problems = loaded.problems
        if not problems:
            found = fingerprint(loaded.samples, lambda s: image_sha256(s.image))
    except DataError as exc:
        problems = exc.problems
    except OSError as exc:
        return DataImages(None, f"the data at {where} cannot be read: {exc}")
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        return DataImages(None, f"the data at {where} cannot be loaded: {problem_lines(problems)[0]}{more}")
    if found != expected:
        return DataImages(
            None,
            f"the data at {where} is not what the run read: it has changed since the run or is other data (its "
            f"fingerprint is {found[:19]}…, the run read {str(expected)[:19]}…)",
            changed=True,
        )
    return DataImages({s.id: s.image for s in loaded.samples})


def _rgb(image: Any) -> Any:
    """Return an RGB copy of a decoded image, transparent parts on white."""
    from PIL import Image

    if image.mode in {"RGBA", "LA", "PA"} or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        canvas = Image.new("RGB", rgba.size, "white")
        canvas.paste(rgba, mask=rgba.getchannel("A"))
        return canvas
    return image.convert("RGB")


def _jpeg(image: Any, longest: int, quality: int) -> bytes:
    """Return an RGB image shrunk to at most `longest` px on its long side, as JPEG bytes."""
    from PIL import Image

    copy = image.copy()
    copy.thumbnail((longest, longest), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    copy.save(out, "JPEG", quality=quality, optimize=True)
    return out.getvalue()


def write_image(data: bytes, name: str, label: str, site: Path) -> str | None:
    """Write an image's thumbnail and view under the site unless both are there; return why it cannot, or None."""
    thumb, view = site / THUMBS / f"{name}.jpg", site / VIEWS / f"{name}.jpg"
    if thumb.is_file() and view.is_file():  # named by content: written from these very bytes before
        return None
    try:
        image = open_image(data, label)
        rgb = _rgb(image)
        image.close()
    except ImageError as exc:
        return str(exc)
    except (OSError, ValueError) as exc:  # a mode PIL cannot turn into RGB
        return f"{label}: cannot be converted to RGB ({exc})"
    write_atomic(view, _jpeg(rgb, VIEW_PX, 85))
    write_atomic(thumb, _jpeg(rgb, THUMB_PX, 80))
    return None


@dataclass(frozen=True)
class Located:
    """Where a card's image is (a file or the bytes of a data cell), or why it has none; `path`: its samples file."""

    label: str
    path: str
    source: Path | bytes | None = None
    why: str | None = None


class DataSources:
    """The data the user passed (`hvcu report --data`) and the bundled smoke sample: the only places images come from.

    A samples log names the data its run read (a folder, a hub repository); that name is input the report does not
    control, so it is never loaded nor searched. A source is used for a run when its recorded fingerprint matches.
    """

    def __init__(self, data: Sequence[str] = ()) -> None:
        self.passed = list(dict.fromkeys(str(d) for d in data))
        self.loaded: dict[tuple[str, str, str], DataImages] = {}

    def _load(self, source: str, family: str, expected: str) -> DataImages:
        """Return one source's images for a family when its fingerprint is `expected`, each load done once."""
        key = (source, family, expected)
        if key not in self.loaded:
            self.loaded[key] = load_data_images(source, family, expected)
        return self.loaded[key]

    def images(self, identity: dict[str, Any]) -> DataImages:
        """Return the images of the passed data whose fingerprint is the one an identity recorded, else why none."""
        from hvcu_tasks.data.provenance import location_text

        family, expected = identity.get("family"), identity.get("fingerprint")
        if family not in FAMILIES or not isinstance(expected, str):
            return DataImages(None, "the logged data identity names no known family and fingerprint")
        bundled = ["smoke"] if identity.get("kind") == "smoke" and "smoke" not in self.passed else []
        whys = []
        for source in [*self.passed, *bundled]:  # the bundled smoke sample is the toolkit's own, not a log's
            found = self._load(source, family, expected)
            if found.images is not None:
                return found
            whys.append(found)
        if whys:
            return DataImages(None, "; ".join(str(w.why) for w in whys), changed=all(w.changed for w in whys))
        return DataImages(
            None,
            f"the run read {location_text(identity)}, which was not passed: images are shown only from data given "
            "with `hvcu report --data`, checked against the fingerprint the run recorded",
        )


@dataclass
class Warnings:
    """What could not be shown, gathered per samples file and reason, printed as few lines as possible."""

    samples: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def unshown(self, located: Located, why: str | None) -> str:
        """Record a card whose image cannot be shown; return the note its placeholder shows."""
        why = why or "unknown reason"
        self.samples.setdefault((located.path, why), []).append(located.label)
        return f"image not shown: {why}"

    def lines(self, place: Callable[[str], str] = str) -> list[str]:
        """Return the warning lines: one per samples file (named by `place`) and reason."""
        out = []
        for (where, why), names in self.samples.items():
            path = place(where)
            if len(names) == 1:
                out.append(f"{path}: {names[0]}: image not shown ({why})")
                continue
            listed = ", ".join(names[:SHOWN_IN_WARNING])
            more = f" and {len(names) - SHOWN_IN_WARNING} more" if len(names) > SHOWN_IN_WARNING else ""
            out.append(f"{path}: {len(names)} samples ({listed}{more}): image not shown ({why})")
        return out


def locate_image(card: Card, sources: DataSources) -> Located:
    """Find a card's image: only in data the user passed whose fingerprint is the one its run recorded.

    The image file a samples log names (`input_media`) is never read: a picture replaced after the run would be
    published in place of the one the model saw, and a log may name any file on the machine.
    """
    setting = next(s for s in SETTINGS if s in card.records)
    record, path = card.records[setting], str(card.files[setting])
    label = f"{card.family}/{card.sample_id}"
    identity = record.get("data_identity")
    if not isinstance(identity, dict) or not identity:
        why = "the run recorded no data identity, so no data can be checked as the one it read"
        return Located(label, path, why=why)
    data = sources.images(identity)
    if data.images is None:
        return Located(label, path, why=data.why)
    ref = data.images.get(card.sample_id)
    if ref is None:
        return Located(label, path, why=f"the data the run read has no sample {card.sample_id!r}")
    return Located(label, path, ref.path if ref.path is not None else ref.data)


def _read(source: Path | bytes) -> bytes:
    """Return an image's stored bytes (OSError when its file cannot be read)."""
    return source.read_bytes() if isinstance(source, Path) else source


def _name(entry: Located) -> tuple[str | None, str | None]:
    """Return (content name, None) of a located image, or (None, why its file cannot be read)."""
    try:
        return hashlib.sha256(_read(entry.source)).hexdigest()[:32], None  # type: ignore[arg-type]
    except OSError as exc:
        return None, f"{entry.label}: cannot read {entry.source} ({exc.strerror or exc})"


def _write(entry: Located, name: str, site: Path) -> str | None:
    """Write one image's thumbnail and view; return why it cannot be shown, or None."""
    where = f" {entry.source}" if isinstance(entry.source, Path) else ""
    try:
        data = _read(entry.source)  # type: ignore[arg-type]
    except OSError as exc:
        return f"{entry.label}: cannot read {entry.source} ({exc.strerror or exc})"
    return write_image(data, name, f"{entry.label} image{where}", site)


def write_images(located: list[Located], site: Path, workers: int) -> list[tuple[str | None, str | None]]:
    """Write each distinct image once, in parallel; return (image name, None) or (None, why) per entry.

    Images are told apart by the SHA-256 of their stored bytes; no more than `workers` images are held at once.
    """
    key = lambda entry: str(entry.source) if isinstance(entry.source, Path) else entry.source  # noqa: E731
    unique = list({key(e): e for e in located if e.source is not None}.values())
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:  # reading, decoding, encoding release the GIL
        names = dict(zip(map(key, unique), pool.map(_name, unique), strict=True))
        first = {}
        for entry in unique:
            name = names[key(entry)][0]
            if name is not None:
                first.setdefault(name, entry)
        written = dict(zip(first, pool.map(lambda n: _write(first[n], n, site), first), strict=True))
    results: list[tuple[str | None, str | None]] = []
    for entry in located:
        name, why = names[key(entry)] if entry.source is not None else (None, entry.why)
        why = why or (written[name] if name else None)
        results.append((None, why) if why else (name, None))
    return results


class Questions:
    """Interns the logged level texts, split into question and options, so models and settings share them."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.items: list[list[Any]] = []

    def add(self, text: Any) -> int:
        """Return the index of a level text, adding it when new."""
        text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
        if text not in self.index:
            self.index[text] = len(self.items)
            self.items.append(list(split_question(text)))
        return self.index[text]


def _reply_text(reply: Any) -> str | None:
    """Return a logged reply as text (None when no reply was logged)."""
    if reply is None or isinstance(reply, str):
        return reply
    return json.dumps(reply, ensure_ascii=False)


def setting_json(record: dict[str, Any], path: Path, questions: Questions, runs: Sequence[Path] = ()) -> dict[str, Any]:
    """Return what the page shows of one chain in one setting (its samples file named from the run folders)."""
    replies = [_reply_text(r) for r in record["replies"]]
    return {
        "questions": [questions.add(q) for q in record["questions"]],
        "gold": record["gold"],
        "replies": [r[:MAX_REPLY_CHARS] if r else r for r in replies],
        "cut": [max(0, len(r) - MAX_REPLY_CHARS) if r else 0 for r in replies],
        "parsed": record["parsed"],
        "official": record["parsed_official"],
        "correct": record["correct"],
        "correct_official": record["correct_official"],
        "failed": record["failed"],
        "first": first_wrong_level(record["correct"]),
        "first_official": first_wrong_level(record["correct_official"]),
        "full": record["chain_correct"],
        "source": f"{published_path(path, runs)}:{','.join(map(str, record['lines']))}",
    }


def published_path(path: Path | str, runs: Sequence[Path]) -> str:
    """Return a file's path as the page shows it: from the run folder holding it, nothing else of the machine."""
    return shown_path(os.path.abspath(path), runs) if runs else str(path)


def page_data(
    cards: list[Card],
    site: Path,
    warnings: Warnings,
    workers: int,
    data: Sequence[str] = (),
    runs: Sequence[Path] = (),
) -> dict[str, Any]:
    """Return the JSON the page embeds (models, families, aspects, interned questions, one entry per card).

    `runs`: the run folders; the paths the page shows are shown from them (results.run_record.shown_path).
    """
    models = sorted({c.model for c in cards})
    sources = DataSources(data)
    located = [locate_image(card, sources) for card in cards]
    images = write_images(located, site, workers)
    questions = Questions()
    entries = []
    for card, where, (image, why) in zip(cards, located, images, strict=True):
        entry = {
            "model": models.index(card.model),
            "family": card.family,
            "aspect": card.aspect,
            "id": card.sample_id,
            "image": image,
            "note": None if image else shown_paths(warnings.unshown(where, why), runs),
        }
        for setting in SETTINGS:
            record = card.records.get(setting)
            entry[setting] = setting_json(record, card.files[setting], questions, runs) if record else None
        entries.append(entry)
    families = [f for f in FAMILIES if any(c.family == f for c in cards)]
    aspects = list(dict.fromkeys((c.family, c.aspect) for c in cards if c.aspect))
    return {
        "models": models,
        "families": [[f, FAMILIES[f][1].replace("-", " ")] for f in families],
        "aspects": [list(a) for a in aspects],
        "questions": questions.items,
        "cards": entries,
    }


def no_pairs_note(models: Sequence[str]) -> str:
    """Return why a page of fewer than two models has no two-model view."""
    has = f"one model ({models[0]})" if models else "no model"
    return f"No two-model view: it compares two models' chains, and this page has {has}."


def render_page(data: dict[str, Any], notes: list[str]) -> str:
    """Return the whole page: controls, notes, the embedded data and the script that renders the cards."""
    note_items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    models = len(data["models"])
    summary = (
        f"{len(data['cards'])} cards: {models} model(s) × the samples each logged. Each card shows the image (click it "
        "for a larger view), the three questions with their options (✓ marks the gold key), and per setting the raw "
        "reply and the letter each parsing rule read (ours, and the authors' in brackets; — where a rule read no "
        "letter). Cards and filters use our parser, the two-model view the rule chosen there; filters are kept in "
        "the address, so a filtered view can be shared as a link."
    )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{TITLE}</title><style>\n{STYLE}</style></head><body>"
        f"<header><h1>{TITLE}</h1><p class='lede'>{html.escape(summary)}</p>"
        + (f"<ul class='warnings'>{note_items}</ul>" if note_items else "")
        + "\n"
        + (PAIRS if models >= 2 else f"<p id='pairs-none'>{html.escape(no_pairs_note(data['models']))}</p>\n")
        + CONTROLS
        + "</header><main id='cards'></main><nav class='pager' id='pager-bottom'></nav>"
        "<div id='lightbox' hidden><img alt=''></div>"
        "<noscript><p>This page renders its cards with JavaScript; please enable it.</p></noscript>"
        f'<script type="application/json" id="chain-data">{embed_json(data)}</script>'
        f"<script>\n{SCRIPT}</script></body></html>\n"
    )


def write_browser(
    logs: Sequence[SampleLog], site: Path, data: Sequence[str] = (), runs: Sequence[Path] = ()
) -> Path | None:
    """Write `site/chains.html` (+ thumbnails) for the sample logs (`RunFolders.logs`); None when there are none.

    `data`: the data sources (`hvcu report --data`: a folder, hub[:REPO[@REV]], smoke) images may come from; `runs`:
    the run folders the page's paths are shown from (else the logs' own folders).
    """
    if not logs:
        return None
    runs = list(runs) or list(dict.fromkeys(log.root for log in logs))
    cards = read_cards(logs)
    site = make_folder(site)
    (site / THUMBS).mkdir(exist_ok=True)
    (site / VIEWS).mkdir(exist_ok=True)
    warnings = Warnings()
    embedded = page_data(cards, site, warnings, workers=min(8, os.cpu_count() or 1), data=data, runs=runs)
    for line in warnings.lines():
        print(f"warning: {line}", file=sys.stderr)
    notes = [shown_paths(line, runs) for line in warnings.lines(lambda where: published_path(where, runs))]
    page = site / PAGE
    write_atomic(page, render_page(embedded, notes))
    return page


CONTROLS = asset("browser-controls.html")
"""The filter form, the count and the top pager (static markup)."""

PAIRS = asset("browser-pairs.html")
"""The two-model view's form and summary table, shown on a page of two or more models (static markup)."""

STYLE = asset("browser.css")

# Renders the cards from the embedded data with DOM calls and textContent only (never markup from the data).
# Filters and the page are read from and written to the URL hash: #model=M&family=F&aspect=A&base=L1&context=none
# &delta=base-only|context-only&id=TEXT&page=N&per=N; the two-model view: &a=MODEL&b=MODEL&setting=base|context
# &rule=official|ours&pair=a-holds|b-holds[-L1|-L2|-L3].
SCRIPT = asset("browser.js")
