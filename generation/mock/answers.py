"""What the mock endpoint replies: recognise a toolkit prompt, then write a seeded reply in the format its parser reads.

Recognised prompts (the last user turn's text):
- the shipped synthesis templates (`generation/prompts/*.txt`): MCTS generation (`level_1..3`) and judge, the
  direct baseline, the build-bench stages (`bench_level_1..3`) and validators (`bench_validate*`): matched
  against the template itself, so an edited template is still recognised;
- multiple-choice questions: a question followed by option lines `A. text` (HVCU-Bench's `Options:` layout,
  the context setting's prefix, any system prompt) or `A) text`, `(A) text`, `A: text`.

Every reply is a pure function of (mock seed, request): per-request randomness comes from a SHA-256 of the
request and the seed, never from arrival order, so concurrent clients get the same replies as serial ones.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from generation.mock.styles import DEFAULT_STYLES, MC_STYLES, parse_styles
from generation.policy import prompt
from hvcu_tasks.core.prompts import CONTEXT_PREFIX, level_text

# Templates the mock answers, each with the reply writer for it (below).
TEMPLATES: tuple[str, ...] = (
    "level_1",
    "level_2",
    "level_3",
    "judge",
    "direct",
    "bench_level_1",
    "bench_level_2",
    "bench_level_3",
    "bench_validate",
    "bench_validate_top",
)


class Unrecognised(ValueError):
    """A request the mock has no answer for; the message says what it did not recognise."""


@dataclass(frozen=True)
class MockSettings:
    """The mock's knobs: the seed every reply derives from and the multiple-choice accuracy."""

    seed: int = 0
    accuracy: float = 0.6
    styles: tuple[tuple[str, int], ...] = parse_styles(DEFAULT_STYLES)
    """The multiple-choice reply styles (MC_STYLES names) with their weights."""


@dataclass
class GoldIndex:
    """Gold keys of known multiple-choice questions, keyed by the exact level text the tasks send.

    The level text holds the question and its options, so one question asked with other options is another
    key; the same text with another gold (two images the mock cannot see) is refused: a reply could not know
    which gold `--accuracy` should aim at.
    """

    gold: dict[str, str] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    origin: dict[str, str] = field(default_factory=dict)

    def add(self, text: str, key: str, where: str) -> None:
        """Record one question's gold key (`where` names its source and sample); refuse another gold for the text."""
        old = self.gold.setdefault(text, key)
        first = self.origin.setdefault(text, where)
        if old != key:
            question = text.splitlines()[0][:80]
            raise ValueError(
                f"--gold: question {question!r} with the same options has gold {old} in {first} but gold {key} in "
                f"{where}; the mock sees only the text, not the image, so it cannot tell them apart (leave one of "
                "the two out of the --gold data)"
            )


def load_gold(sources: Sequence[str]) -> GoldIndex:
    """Index the gold keys of every level of the given datasets ('smoke', 'hub[:REPO@REV]' or a local path)."""
    from hvcu_tasks.core.families import FAMILIES
    from hvcu_tasks.data.loaders import load_source

    index = GoldIndex(sources=list(sources))
    for source in sources:
        found = 0
        for family in FAMILIES:
            result = load_source(source, family)
            missing = [p for p in result.problems if p.field == "files" and "no data for family" in p.message]
            if missing and not result.samples and len(missing) == len(result.problems):
                continue  # a folder may hold only some families (a build-bench output)
            for sample in result.raise_for_problems():
                for lv in sample.levels:
                    where = f"{source}: {family}/{sample.id} L{lv.level}"
                    index.add(level_text(lv.question, lv.options), lv.answer, where)
                found += 1
        if not found:
            raise ValueError(f"--gold {source}: no HVCU-Bench samples found there")
    return index


# ---------------------------------------------------------------------------------------------------------------
# Requests


def _text_of(content: Any, where: str) -> str:
    """Return the text of a message's content (a string or a list of parts); raise Unrecognised otherwise."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict):
                raise Unrecognised(f"{where}: a content part is not an object")
            if part.get("type") == "text":
                if not isinstance(part.get("text"), str):
                    raise Unrecognised(f"{where}: a text part has no text")
                parts.append(part["text"])
        return "\n".join(parts)
    if content is None:
        return ""
    raise Unrecognised(f"{where}: content is neither text nor a list of parts")


def turns(body: Any) -> list[tuple[str, str]]:
    """Return the request's (role, text) turns; raise Unrecognised when it is not a chat-completions body."""
    if not isinstance(body, dict):
        raise Unrecognised("the request body is not a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Unrecognised("the request has no 'messages' list")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise Unrecognised(f"messages[{i}] is not an object with a 'role'")
        out.append((message["role"], _text_of(message.get("content"), f"messages[{i}]")))
    if out[-1][0] != "user":
        raise Unrecognised(f"the last message is from {out[-1][0]!r}, not 'user'")
    return out


def request_rng(settings: MockSettings, kind: str, payload: Any) -> random.Random:
    """Return a random generator seeded by a SHA-256 of the mock seed, the prompt kind and the request."""
    blob = json.dumps([settings.seed, kind, payload], sort_keys=True, ensure_ascii=False, default=str)
    return random.Random(int.from_bytes(hashlib.sha256(blob.encode()).digest()[:8], "big"))


# ---------------------------------------------------------------------------------------------------------------
# Synthesis and build-bench templates


@cache
def template_pattern(name: str) -> re.Pattern[str]:
    """Return a regex that matches exactly the texts a shipped prompt template renders to (fields captured)."""
    parts, seen = [], set()
    for literal, name_field, _spec, _conv in string.Formatter().parse(prompt(name).strip()):
        parts.append(re.escape(literal))
        if name_field is None:
            continue
        if name_field in seen:
            parts.append(f"(?P={name_field})")
        else:
            seen.add(name_field)
            parts.append(f"(?P<{name_field}>.*?)")
    return re.compile("".join(parts), re.S)


def match_template(text: str) -> tuple[str, dict[str, str]] | None:
    """Return (template name, captured fields) for a rendered toolkit prompt, or None."""
    stripped = text.strip()
    for name in TEMPLATES:
        if m := template_pattern(name).fullmatch(stripped):
            return name, m.groupdict()
        if stripped == prompt(name).strip():  # a template sent without .format() (`{{` left doubled)
            return name, {}
    return None


COLOURS = ("red", "blue", "green", "yellow", "black", "white", "orange", "purple", "grey", "pink", "golden", "brown")
THINGS = (
    "umbrella",
    "clock",
    "bicycle",
    "lamp",
    "chair",
    "tree",
    "bird",
    "door",
    "ladder",
    "balloon",
    "window",
    "boat",
    "key",
    "candle",
)
PLACES = (
    "in the upper left",
    "in the centre",
    "along the bottom edge",
    "on the right side",
    "in the background",
    "in the foreground",
    "near the top",
    "beside the main figure",
)
SHAPES = ("circle", "triangle", "square", "spiral", "arch", "stripe band", "diagonal line")
WORDS = ("HOPE", "SALE", "STOP", "HOME", "FREE", "OPEN", "NOW", "LOVE", "EXIT", "YES")
COUNTS = ("two", "three", "four", "five", "six", "seven")
EFFECTS = ("isolation", "warmth", "tension", "calm", "urgency", "nostalgia", "playfulness", "danger", "balance")
MECHANISMS = (
    "its contrast with the muted surroundings",
    "the way it leads the eye across the frame",
    "its unusual size next to everything else",
    "repeating a familiar symbol out of place",
    "the empty space left around it",
    "echoing a colour used elsewhere",
    "breaking the otherwise regular pattern",
    "the soft light that falls on it",
)
MEANINGS = (
    "that small choices shape a whole life",
    "a longing for a simpler time",
    "that progress has a hidden cost",
    "quiet joy in everyday routine",
    "the fragility of safety",
    "that attention is a scarce resource",
    "hope surviving in a harsh place",
    "the pressure of being watched",
    "a clean, confident modern style",
    "a restless, uneasy mood",
)


def _level_one(rng: random.Random) -> tuple[str, str]:
    """Return a perception question and answer."""
    colour, thing, place = rng.choice(COLOURS), rng.choice(THINGS), rng.choice(PLACES)
    forms = (
        (f"What {colour} object stands {place}?", f"A {colour} {thing} stands {place}."),
        (f"Which shape is drawn {place}?", f"A {colour} {rng.choice(SHAPES)} is drawn {place}."),
        (f"What word is written {place}?", f"The word '{rng.choice(WORDS)}' appears {place} in {colour} letters."),
        (f"How many {thing}s can be counted {place}?", f"There are {rng.choice(COUNTS)} {thing}s {place}."),
        (
            f"What is the {thing} {place} made of?",
            f"It looks like {colour} painted {rng.choice(('metal', 'wood', 'paper', 'glass'))}.",
        ),
    )
    return rng.choice(forms)


def _level_two(rng: random.Random) -> tuple[str, str]:
    """Return a bridge question and answer."""
    effect, mechanism = rng.choice(EFFECTS), rng.choice(MECHANISMS)
    forms = (
        (f"How does that detail create a feeling of {effect}?", f"It creates {effect} through {mechanism}."),
        ("Why does the artist place that detail where it is?", f"To stress {effect}, using {mechanism}."),
        (
            f"What role does the detail play in the image's {rng.choice(('story', 'design', 'mood'))}?",
            f"It anchors the {effect} of the scene by {mechanism}.",
        ),
        ("Which visual device links the detail to a meaning?", f"The device is {mechanism}, which suggests {effect}."),
    )
    return rng.choice(forms)


def _level_three(rng: random.Random) -> tuple[str, str]:
    """Return a connotation question and answer."""
    meaning, effect = rng.choice(MEANINGS), rng.choice(EFFECTS)
    forms = (
        ("What message does the image convey overall?", f"It conveys {meaning}, carried by a sense of {effect}."),
        ("What emotion does the image most likely evoke?", f"It evokes {effect}, hinting {meaning}."),
        ("What aesthetic judgement fits the image best?", f"Its design expresses {meaning} with deliberate {effect}."),
        ("What idea lies beneath the literal scene?", f"Beneath it lies {meaning}; the {effect} makes that felt."),
    )
    return rng.choice(forms)


QA_WRITERS: Mapping[int, Callable[[random.Random], tuple[str, str]]] = {1: _level_one, 2: _level_two, 3: _level_three}


def _generation(level: int, rng: random.Random) -> str:
    """Reply to an MCTS generation prompt: one JSON object with question and answer."""
    question, answer = QA_WRITERS[level](rng)
    return json.dumps({"question": question, "answer": answer})


def _judge(rng: random.Random) -> str:
    """Reply to the judge: a score in [0.35, 1] (about half pass the default 0.65 threshold) and a reason."""
    score = round(0.35 + 0.65 * rng.random(), 2)
    reason = (
        "builds on the previous answer and fits the level" if score >= 0.65 else "only loosely tied to the level above"
    )
    return json.dumps({"score": score, "reason": f"mock judge: {reason}"})


def _direct(rng: random.Random) -> str:
    """Reply to the direct baseline: three levels in one JSON object."""
    levels = [dict(zip(("question", "answer"), QA_WRITERS[k](rng), strict=True)) for k in (1, 2, 3)]
    return json.dumps({"levels": levels})


_ANCHOR = re.compile(r'reference concept: "(.*)"\.', re.S)


def _bench_stage(level: int, fields: Mapping[str, str], rng: random.Random) -> str:
    """Reply to a build-bench stage: a question, the correct option and three distinct distractors."""
    pools = {
        1: [f"A {c} {t}" for c in COLOURS[:6] for t in THINGS[:6]],
        2: [f"{m[0].upper()}{m[1:]} suggests {e}" for m in MECHANISMS for e in EFFECTS[:4]],
        3: [f"{m[0].upper()}{m[1:]}" for m in MEANINGS],
    }
    questions = {
        1: "What is shown most prominently in the image?",
        2: "How does the image's main visual device support its meaning?",
        3: "What does the image convey beyond its literal content?",
    }
    options = rng.sample(pools[level], 4)
    if level == 3 and (anchor := _ANCHOR.search(fields.get("anchor", ""))):
        options[0] = f"It expresses {anchor.group(1)}"
        if options[0].casefold() in {o.casefold() for o in options[1:]}:
            options[1:] = [o for o in pools[3] if o.casefold() != options[0].casefold()][:3]
    reply = {"question": questions[level], "answer": options[0], "distractors": options[1:]}
    return json.dumps(reply)


CHECK_FAILURES = {
    "dependency": "the lower answer does not help with the higher question",
    "progression": "the lower question is as abstract as the higher one",
    "single_answer": "two options could both be right",
}


def _validator(top: bool, rng: random.Random) -> str:
    """Reply to a build-bench validator: the whole verdict passes with probability 0.85, else one check fails."""
    names = ("single_answer",) if top else ("dependency", "progression", "single_answer")
    verdict = dict.fromkeys(names, True)
    reason = "mock validator: every check passes"
    if rng.random() >= 0.85:
        failed = rng.choice(names)
        verdict[failed] = False
        reason = f"mock validator: {CHECK_FAILURES[failed]}"
    return json.dumps({**verdict, "reason": reason})


def template_reply(name: str, fields: Mapping[str, str], rng: random.Random) -> str:
    """Return the reply to a recognised toolkit template, in the format its parser reads."""
    if name.startswith("level_"):
        return _generation(int(name[-1]), rng)
    if name == "judge":
        return _judge(rng)
    if name == "direct":
        return _direct(rng)
    if name.startswith("bench_level_"):
        return _bench_stage(int(name[-1]), fields, rng)
    return _validator(name == "bench_validate_top", rng)


# ---------------------------------------------------------------------------------------------------------------
# Multiple choice

_OPTION_LINE = re.compile(r"^\s*\(?([A-J])(?:\)|\.|:)\s*(\S.*?)\s*$")


def option_keys(text: str) -> list[tuple[str, str]] | None:
    """Return the (key, text) option lines of a multiple-choice question (A, B, ... in order), or None."""
    found: list[tuple[str, str]] = []
    for line in text.splitlines():
        if m := _OPTION_LINE.match(line):
            key = m.group(1)
            if key == "A":
                found = []  # a new list starts (a question may quote an earlier one)
            elif not found or ord(key) != ord(found[-1][0]) + 1:
                continue
            found.append((key, m.group(2)))
    return found if len(found) >= 2 else None


def mc_reply(text: str, history: Iterable[str], settings: MockSettings, gold: GoldIndex) -> tuple[str, bool] | None:
    """Return (reply, gold known) for a multiple-choice question, or None when the text is not one.

    With a known gold key the reply names it with probability `settings.accuracy`, else one of the other
    keys; with no known gold every key is equally likely.
    """
    question = text[len(CONTEXT_PREFIX) :] if text.startswith(CONTEXT_PREFIX) else text
    options = option_keys(question)
    if options is None:
        return None
    keys = [k for k, _ in options]
    rng = request_rng(settings, "mc", [*history, text])
    answer = gold.gold.get(question.strip()) or gold.gold.get(question)
    if answer is not None and answer in keys:
        right = rng.random() < settings.accuracy
        key = answer if right else rng.choice([k for k in keys if k != answer])
    else:
        key = rng.choice(keys)
    (style,) = rng.choices([name for name, _ in settings.styles], [weight for _, weight in settings.styles])
    return MC_STYLES[style](key, dict(options)[key]), answer is not None and answer in keys


# ---------------------------------------------------------------------------------------------------------------
# Dispatch


@dataclass(frozen=True)
class Reply:
    """The mock's reply to one request: the text and what kind of prompt it answered."""

    text: str
    kind: str
    gold_known: bool = True


def reply_to(body: Any, settings: MockSettings, gold: GoldIndex) -> Reply:
    """Return the reply to one chat-completions request body; raise Unrecognised for anything else."""
    chat = turns(body)
    text = chat[-1][1]
    if (found := match_template(text)) is not None:
        name, fields = found
        payload = {"messages": body["messages"], "seed": body.get("seed"), "temperature": body.get("temperature")}
        return Reply(template_reply(name, fields, request_rng(settings, name, payload)), name)
    history = [f"{role}: {t}" for role, t in chat[:-1] if role != "system"]
    if (mc := mc_reply(text, history, settings, gold)) is not None:
        return Reply(mc[0], "multiple-choice", mc[1])
    shown = " ".join(text.split())[:160]
    raise Unrecognised(
        f"unrecognised prompt (not a toolkit synthesis/build-bench template, nor a multiple-choice question "
        f"with option lines 'A. ...'): {shown!r}"
    )
