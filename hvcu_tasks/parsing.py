"""Turn a model's free-text reply to a multiple-choice question into the option key it commits to."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence

__all__ = ["parse_choice", "strip_reasoning"]

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```[\w+-]*\n?(.*?)```", re.S)
_BOXED = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
_LATEX_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")
_EMPHASIS = re.compile(r"(\*\*|__|\*|`)")
# Punctuation that NFKC leaves alone but models writing CJK text use.
_CJK_PUNCT = str.maketrans({"。": ".", "、": ",", "【": "[", "】": "]", "「": '"', "」": '"'})

_NEGATION = re.compile(
    r"(?:\bnot|n't|\bno|\bexclude|\brule out|\bruled out|\beliminate|\bisn't|\bwrong)\W*(?:\w+\W+){0,2}$",
    re.I,
)

# "A" followed by a lower-case word reads as the article ("A man ...") unless that word links options.
_NOT_ARTICLE = r"(?<!A)|(?<=A)(?!\s+(?!(?:or|and|nor|vs|versus|is|was|seems|looks|because|since|as|then|but)\b)[a-z])"


def strip_reasoning(text: str) -> str:
    """Remove <think> blocks: closed ones, a dangling close (opened in the prompt) and an unclosed one."""
    text = _THINK_BLOCK.sub(" ", text)
    lowered = text.lower()
    if "</think>" in lowered:  # opening tag was part of the prompt: keep what follows the last close
        text = text[lowered.rfind("</think>") + len("</think>") :]
        lowered = text.lower()
    if "<think>" in lowered:  # unclosed reasoning: only what precedes it can be an answer
        text = text[: lowered.find("<think>")]
    return text.strip()


def _normalise(text: str) -> str:
    """Strip reasoning, unwrap fences and LaTeX, and fold full-width characters."""
    text = strip_reasoning(unicodedata.normalize("NFKC", text).translate(_CJK_PUNCT))
    text = _FENCE.sub(lambda m: "\n" + m.group(1) + "\n", text)
    text = _LATEX_WRAPPERS.sub(r"\1", text)
    text = _EMPHASIS.sub("", text)
    return text.strip()


def _key_of_text(text: str, options: Mapping[str, str]) -> str | None:
    """Return the key whose option text the whole reply repeats (ignoring case and end punctuation)."""
    cleaned = re.sub(r"[\s.!,;:\"'()\[\]]+$", "", text.strip()).strip("\"'([ ").casefold()
    cleaned = re.sub(r"\s+", " ", cleaned)
    if not cleaned:
        return None
    hits = [k for k, t in options.items() if t and re.sub(r"\s+", " ", t.strip()).casefold() == cleaned]
    return hits[0] if len(hits) == 1 else None


def _key_mentioned_by_text(text: str, options: Mapping[str, str]) -> str | None:
    """Return the single key whose option text appears in the reply as a phrase, if exactly one does."""
    folded = " " + re.sub(r"\s+", " ", text.casefold()) + " "
    found: dict[str, str] = {}
    for key, opt in options.items():
        phrase = re.sub(r"\s+", " ", opt.strip()).casefold().rstrip(".")
        if len(phrase) >= 2 and re.search(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", folded):
            found[key] = phrase
    # Drop hits that are contained in a longer hit ("sad" inside "deeply sad").
    keep = [k for k, p in found.items() if not any(p != q and p in q for q in found.values())]
    return keep[0] if len(keep) == 1 else None


def _strip_echoed_options(text: str, keys: str, options: Mapping[str, str]) -> str:
    """Remove lines that re-list the options ("A. text") when two or more of them are echoed."""
    line_re = re.compile(r"^\s*[(\[]?([" + keys + r"])[)\].:]\s*(.+?)\s*$")
    lines = text.splitlines()
    echoed = []
    for i, line in enumerate(lines):
        m = line_re.match(line)
        if (
            m
            and options.get(m.group(1))
            and m.group(2).casefold().rstrip(".") == options[m.group(1)].casefold().rstrip(".")
        ):
            echoed.append(i)
    if len(echoed) < 2:
        return text
    return "\n".join(line for i, line in enumerate(lines) if i not in set(echoed))


def _phrase_patterns(keys: str) -> list[re.Pattern[str]]:
    """Build the explicit-commitment patterns for the given option keys (index 3: corrections)."""
    upper = r"(?-i:[" + keys + r"])(?![\w'])"
    paren_any = r"[(\[](?:[" + keys + keys.lower() + r"])[)\]]"
    lower_at_end = r"(?-i:[" + keys.lower() + r"])(?=[\s.!)\]\"']*$)"  # "answer - d", never "answer is a cat"
    key = r"(?P<key>" + upper + "|" + paren_any + "|" + lower_at_end + r")"
    quoted = r"[\"'“”‘’]?"
    verbs = r"(?:answer|option|choice|choose|chose|select|selected|pick|picked|go with|going with|opt for)"
    return [
        re.compile(
            r"\b(?:final\s+)?answer\s*(?:is|would be|should be|will be|=|:|-)?\s*(?:option\s*)?:?\s*" + quoted + key,
            re.I,
        ),
        re.compile(
            r"\b(?:correct|best|right|most likely|most appropriate)\s+(?:answer|option|choice)\s*(?:is|would be|:)?\s*"
            + quoted
            + key,
            re.I,
        ),
        re.compile(r"\b" + verbs + r"\s*(?:is|:)?\s*" + quoted + key, re.I),
        re.compile(
            r"\b(?:actually|rather|instead|correction|on second thought|wait)\b[\s,:;-]*"
            r"(?:it'?s\s+|the answer is\s+)?" + key,
            re.I,
        ),
        re.compile(r"\b(?:so|therefore|thus|hence)\b[\s,:]*(?:it'?s\s+|the answer is\s+)?" + key + r"[\s.!]*$", re.I),
        re.compile(
            r"(?<![\w'])(?P<key>(?-i:[" + keys + r"]))\s+(?:is\s+|seems\s+|looks\s+)?(?:the\s+)?"
            r"(?:best|correct|right|most likely|most fitting)\b(?!\s+(?:than|if))|(?<![\w'])(?P<key2>(?-i:["
            + keys
            + r"]))\s+fits\s+best\b",
            re.I,
        ),
    ]


def _clean_key(raw: str) -> str:
    """Return the bare upper-case letter from a matched key such as '(b)'."""
    return raw.strip("()[] ").upper()


_AMBIGUOUS = "?"


def _explicit_answer(text: str, keys: str) -> str | None:
    """Return the key of the last explicit, non-negated answer statement, '?' when it names two keys."""
    best: tuple[int, str] | None = None
    alternative = re.compile(r"\s*(?:or|/|and/or)\s*[(\[]?(?-i:[" + keys + r"])(?![\w'])")
    for pattern in _phrase_patterns(keys):
        for m in pattern.finditer(text):
            if _NEGATION.search(text[max(0, m.start() - 30) : m.start()]):
                continue
            raw = m.groupdict().get("key") or m.groupdict().get("key2")
            key = _AMBIGUOUS if alternative.match(text, m.end()) else _clean_key(raw)
            if best is None or m.start() > best[0]:
                best = (m.start(), key)
    return best[1] if best else None


def parse_choice(response: str | None, options: Mapping[str, str] | Sequence[str]) -> str | None:
    """Return the option key a reply commits to, or None when it commits to no single option."""
    opts: dict[str, str] = (
        {str(k).strip().upper(): str(v) for k, v in options.items()}
        if isinstance(options, Mapping)
        else {str(k).strip().upper(): "" for k in options}
    )
    opts = {k: v for k, v in opts.items() if len(k) == 1 and k.isalpha()}
    if not opts or response is None:
        return None
    keys = "".join(re.escape(k) for k in opts)
    text = _normalise(str(response))
    if not text:
        return None

    boxed = _BOXED.findall(text)
    if boxed:
        inner = boxed[-1].strip().strip("$ ").strip("()[]. ")
        if inner.upper() in opts and len(inner) == 1:
            return inner.upper()
        return _key_of_text(inner, opts)

    bare = re.fullmatch(r"[\s(\[\"']*([" + keys + keys.lower() + r"])[\s)\].:,!\"']*", text)
    if bare:
        return bare.group(1).upper()

    text = _strip_echoed_options(text, keys, opts)
    if not text.strip():
        return None

    leading = re.match(r"^\s*[(\[]?(?-i:([" + keys + r"]))(?:[)\]]|\s*[.:\-–—,])(?!\w)", text)
    if leading:
        later = [
            _clean_key(m.group("key"))
            for m in _phrase_patterns(keys)[3].finditer(text[leading.end() :])
            if not _NEGATION.search(text[max(0, leading.end() + m.start() - 30) : leading.end() + m.start()])
        ]
        return later[-1] if later else leading.group(1)

    explicit = _explicit_answer(text, keys)
    if explicit:
        return None if explicit == _AMBIGUOUS else explicit

    whole = _key_of_text(text, opts)
    if whole:
        return whole

    # Standalone capital letters; "A" followed by a lower-case word is the article, not an answer.
    tokens = {
        m.group(1)
        for m in re.finditer(r"(?<![\w'])(?-i:([" + keys + r"]))(?![\w'])(?:" + _NOT_ARTICLE + ")", text)
        if not _NEGATION.search(text[max(0, m.start() - 30) : m.start()])
    }
    if len(tokens) == 1:
        return tokens.pop()
    if tokens:
        return None
    return _key_mentioned_by_text(text, opts)
