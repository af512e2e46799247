"""Turn a model's free-text reply to a multiple-choice question into the option key it commits to.

The reply is normalised (think blocks, code fences, LaTeX wrappers and emphasis removed, full-width
characters folded), then read by the rules of `RULES` in priority order. Each rule either decides (a key, or
None: no single option) or passes to the next; the first decision is the answer. The rules' patterns
depend on the option keys (`_patterns`: built per call, the `re` module keeps what it compiled; a memo of
our own measured no faster).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["parse_choice", "strip_reasoning"]

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"```[\w+-]*\n?(.*?)```", re.S)
_BOXED = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
_LATEX_WRAPPERS = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")
_EMPHASIS = re.compile(r"(\*\*|__|\*|`)")
# Punctuation that NFKC leaves alone but models writing CJK text use.
_CJK_PUNCT = str.maketrans({"。": ".", "、": ",", "【": "[", "】": "]", "「": '"', "」": '"'})

# A negation word, then at most two words up to the key, with no clause end (. , ; ! ?) on the way: "not option A",
# "it can't be A", "wrong: A"; in "not A, B" and "A is not right; C" the negation stops before B / C.
_NEGATION = re.compile(
    r"(?:(?:\bnot|n't|\bno|\bisn't)\b"
    r"|(?:\bexclude|\bexcluding|\brule out|\brules out|\bruled out|\bruling out|\beliminate|\beliminating|\bwrong))"
    r"[^\w.,;!?]*(?:\w+[^\w.,;!?]+){0,2}$",
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


def _phrase_patterns(keys: str) -> tuple[re.Pattern[str], ...]:
    """Build the explicit-commitment patterns for the given option keys (index 3: corrections)."""
    upper = r"(?-i:[" + keys + r"])(?![\w'])"
    paren_any = r"[(\[](?:[" + keys + keys.lower() + r"])[)\]]"
    lower_at_end = r"(?-i:[" + keys.lower() + r"])(?=[\s.!)\]\"']*$)"  # "answer - d", never "answer is a cat"
    key = r"(?P<key>" + upper + "|" + paren_any + "|" + lower_at_end + r")"
    quoted = r"[\"'“”‘’]?"
    verbs = r"(?:answer|option|choice|choose|chose|select|selected|pick|picked|go with|going with|opt for)"
    return (
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
    )


@dataclass(frozen=True)
class _Patterns:
    """Every key-dependent pattern of the rules, for one set of option keys."""

    bare: re.Pattern[str]
    echoed_line: re.Pattern[str]
    leading: re.Pattern[str]
    phrases: tuple[re.Pattern[str], ...]
    correction: re.Pattern[str]
    alternative: re.Pattern[str]
    token: re.Pattern[str]


def _patterns(keys: str) -> _Patterns:
    """Compile the rules' patterns for a key set (`keys`: the escaped keys, in option order)."""
    phrases = _phrase_patterns(keys)
    return _Patterns(
        bare=re.compile(r"[\s(\[\"']*([" + keys + keys.lower() + r"])[\s)\].:,!\"']*"),
        echoed_line=re.compile(r"^\s*[(\[]?([" + keys + r"])[)\].:]\s*(.+?)\s*$"),
        leading=re.compile(r"^\s*[(\[]?(?-i:([" + keys + r"]))(?:[)\]]|\s*[.:\-–—,])(?!\w)"),
        phrases=phrases,
        correction=phrases[3],
        alternative=re.compile(r"\s*(?:or|/|and/or)\s*[(\[]?(?-i:[" + keys + r"])(?![\w'])"),
        token=re.compile(r"(?<![\w'])(?-i:([" + keys + r"]))(?![\w'])(?:" + _NOT_ARTICLE + ")"),
    )


def _clean_key(raw: str) -> str:
    """Return the bare upper-case letter from a matched key such as '(b)'."""
    return raw.strip("()[] ").upper()


def _negated(text: str, at: int) -> bool:
    """Whether the 30 characters before position `at` negate what follows ("not B", "rule out C")."""
    return bool(_NEGATION.search(text[max(0, at - 30) : at]))


_AMBIGUOUS = "?"


def _explicit_answer(text: str, p: _Patterns) -> str | None:
    """Return the key of the last explicit, non-negated answer statement, '?' when it names two keys."""
    best: tuple[int, str] | None = None
    for pattern in p.phrases:
        for m in pattern.finditer(text):
            if _negated(text, m.start()):
                continue
            raw = m.groupdict().get("key") or m.groupdict().get("key2")
            key = _AMBIGUOUS if p.alternative.match(text, m.end()) else _clean_key(raw)
            if best is None or m.start() > best[0]:
                best = (m.start(), key)
    return best[1] if best else None


class _Next:
    """A rule's result meaning "no decision: ask the next rule"."""


NEXT = _Next()
Decision = str | None | _Next
"""A rule's result: an option key, None (decided: no single option), or NEXT."""


@dataclass
class _Reply:
    """A normalised reply being read: its text (the echo rule rewrites it), the options and their patterns."""

    text: str
    options: dict[str, str]
    patterns: _Patterns


def _rule_boxed(r: _Reply) -> Decision:
    """The last \\boxed{...} decides: a single key in it, else the option whose text it repeats, else none."""
    boxed = _BOXED.findall(r.text)
    if not boxed:
        return NEXT
    inner = boxed[-1].strip().strip("$ ").strip("()[]. ")
    if inner.upper() in r.options and len(inner) == 1:
        return inner.upper()
    return _key_of_text(inner, r.options)


def _rule_bare(r: _Reply) -> Decision:
    """A reply that is one key alone, any case, bracketed or punctuated ("b", "(C)", "D.")."""
    bare = r.patterns.bare.fullmatch(r.text)
    return bare.group(1).upper() if bare else NEXT


def _rule_echo(r: _Reply) -> Decision:
    """Not a decision: drop lines re-listing two or more options ("A. text"); nothing left means no answer."""
    lines = r.text.splitlines()
    echoed = set()
    for i, line in enumerate(lines):
        m = r.patterns.echoed_line.match(line)
        option = r.options.get(m.group(1)) if m else None
        if m and option and m.group(2).casefold().rstrip(".") == option.casefold().rstrip("."):
            echoed.add(i)
    if len(echoed) >= 2:
        r.text = "\n".join(line for i, line in enumerate(lines) if i not in echoed)
    return NEXT if r.text.strip() else None


def _rule_leading(r: _Reply) -> Decision:
    """A reply opening with a key ("B. because ...", "(C) ..."): that key, unless a later correction names another."""
    leading = r.patterns.leading.match(r.text)
    if not leading:
        return NEXT
    rest, offset = r.text[leading.end() :], leading.end()
    later = [
        _clean_key(m.group("key"))
        for m in r.patterns.correction.finditer(rest)
        if not _negated(r.text, offset + m.start())
    ]
    return later[-1] if later else leading.group(1)


def _rule_explicit(r: _Reply) -> Decision:
    """The last non-negated answer statement ("the answer is B", "I choose C", "B is correct"); 'B or C' is none."""
    explicit = _explicit_answer(r.text, r.patterns)
    if not explicit:
        return NEXT
    return None if explicit == _AMBIGUOUS else explicit


def _rule_option_text(r: _Reply) -> Decision:
    """A reply that repeats one option's text as a whole."""
    return _key_of_text(r.text, r.options) or NEXT


def _rule_tokens(r: _Reply) -> Decision:
    """Standalone capital keys, not negated ("A" before a lower-case word is the article): one decides, several none."""
    tokens = {m.group(1) for m in r.patterns.token.finditer(r.text) if not _negated(r.text, m.start())}
    if len(tokens) == 1:
        return tokens.pop()
    return None if tokens else NEXT


def _rule_mentioned(r: _Reply) -> Decision:
    """The last resort: the one option whose text the reply mentions as a phrase, else none."""
    return _key_mentioned_by_text(r.text, r.options)


RULES: tuple[tuple[str, Callable[[_Reply], Decision]], ...] = (
    ("boxed", _rule_boxed),
    ("bare", _rule_bare),
    ("echo", _rule_echo),
    ("leading", _rule_leading),
    ("explicit", _rule_explicit),
    ("option_text", _rule_option_text),
    ("tokens", _rule_tokens),
    ("mentioned", _rule_mentioned),
)
"""The parser's rules, highest priority first; each rule's docstring says what it reads."""


def _options(options: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    """Return the single-letter options as upper-case key -> text ("" when only keys are given)."""
    opts: dict[str, str] = (
        {str(k).strip().upper(): str(v) for k, v in options.items()}
        if isinstance(options, Mapping)
        else {str(k).strip().upper(): "" for k in options}
    )
    return {k: v for k, v in opts.items() if len(k) == 1 and k.isalpha()}


def parse_choice(response: str | None, options: Mapping[str, str] | Sequence[str]) -> str | None:
    """Return the option key a reply commits to, or None when it commits to no single option."""
    opts = _options(options)
    if not opts or response is None:
        return None
    text = _normalise(str(response))
    if not text:
        return None
    reply = _Reply(text, opts, _patterns("".join(re.escape(k) for k in opts)))
    for _name, rule in RULES:
        decision = rule(reply)
        if not isinstance(decision, _Next):
            return decision
    return None
