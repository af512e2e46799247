"""The three generation stages and the validator of benchmark construction: prompts in, checked drafts out.

Pure functions: render a stage's prompt, turn a reply into a `Draft` (or say why it is unusable), and turn
a validator reply into a `Verdict`. The model writes the correct option and three distractors as text;
letters are assigned later, over the whole dataset, so answer positions can be balanced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from generation.policy import prompt
from generation.replies import ReplyError, parse_json_reply

# Stage order of the paper's top-down construction: connotation, then bridge, then perception.
STAGE_LEVELS: tuple[int, int, int] = (3, 2, 1)
LEVEL_TITLES = {1: "perception", 2: "bridge", 3: "connotation"}

FAMILY_TITLES = {
    "implication": "Implication Understanding",
    "aesthetic": "Aesthetic Appreciation",
    "affective": "Affective Reasoning",
}
FAMILY_FOCUS = {
    "implication": "the implied message or idea the image conveys beyond its literal content.",
    "aesthetic": "the aesthetic effect or design quality the image achieves and why it works or fails.",
    "affective": "the emotion the image evokes or expresses.",
}
ASPECT_DEFINITIONS = {
    "metaphor": "one thing is shown as another to suggest a shared quality.",
    "symbolism": "an object or sign stands for a wider idea by convention.",
    "contrast": "opposed elements are set side by side to make a point.",
    "exaggeration": "something is enlarged or intensified beyond reality to stress an idea.",
    "dislocation": "things appear out of their normal place or context to provoke a reading.",
    "color": "hue, saturation and brightness choices and the mood or harmony they create.",
    "composition": "framing, cropping, balance and placement of elements.",
    "font": "typeface, size, weight and spacing of the text.",
    "graphics": "lines, shapes, strokes, textures and their density.",
    "joy": "happiness, delight or amusement.",
    "affection": "love, tenderness, warmth toward someone or something.",
    "wonder": "awe, amazement or curiosity.",
    "anger": "irritation, outrage or hostility.",
    "fear": "anxiety, threat or dread.",
    "sadness": "grief, loneliness or melancholy.",
}


@dataclass(frozen=True)
class Draft:
    """One generated level: its question, the correct option text and three distractors."""

    level: int
    question: str
    answer: str
    distractors: tuple[str, str, str]

    def text(self) -> str:
        """Render the draft for a later prompt, correct option marked."""
        options = "\n".join(f"- {o}" for o in self.distractors)
        return f"Question: {self.question}\nCorrect option: {self.answer}\nOther options:\n{options}"


@dataclass(frozen=True)
class Verdict:
    """The validator's decision on a lower level given the one above it."""

    dependency: bool
    progression: bool
    single_answer: bool
    reason: str

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return self.dependency and self.progression and self.single_answer

    def failures(self) -> list[str]:
        """Return the failed checks with the validator's reason, as guidance for the next attempt."""
        names = {
            "dependency": "the lower answer does not directly help answer the higher question",
            "progression": "the lower question is not clearly more objective and observable than the higher one",
            "single_answer": "not exactly one option is correct, or a distractor is implausible",
        }
        failed = [text for name, text in names.items() if not getattr(self, name)]
        return [f"{text} (validator: {self.reason})" for text in failed]


def feedback_text(reasons: Sequence[str]) -> str:
    """Render the reasons an earlier attempt failed as guidance lines (empty when none)."""
    if not reasons:
        return ""
    return "An earlier attempt was rejected; fix these problems:\n" + "\n".join(f"- {r}" for r in reasons) + "\n"


def stage_prompt(
    level: int, family: str, aspect: str, above: Sequence[Draft], anchor: str | None, reasons: Sequence[str]
) -> str:
    """Return the generation prompt for one level, conditioned on the levels above it."""
    anchor_line = ""
    if anchor and level == 3:
        anchor_line = f'The correct level-3 answer must express this reference concept: "{anchor}".\n'
    chain = "\n".join(f"Level {d.level} ({LEVEL_TITLES[d.level]}):\n{d.text()}" for d in above)
    return prompt(f"bench_level_{level}").format(
        family_title=FAMILY_TITLES[family],
        family_focus=FAMILY_FOCUS[family],
        aspect=aspect,
        aspect_definition=ASPECT_DEFINITIONS.get(aspect, "as named."),
        anchor=anchor_line,
        chain=chain,
        feedback=feedback_text(reasons),
    )


def validate_prompt(upper: Draft | None, lower: Draft) -> str:
    """Return the validator prompt for a new level under the one above it (the top level has none)."""
    if upper is None:
        return prompt("bench_validate_top").format(draft=lower.text())
    return prompt("bench_validate").format(
        upper_level=upper.level, upper=upper.text(), lower_level=lower.level, lower=lower.text()
    )


def parse_draft(reply: str, level: int) -> Draft:
    """Parse a stage reply into a Draft; raise ReplyError saying what is wrong with it."""
    obj = parse_json_reply(reply, ("question", "answer", "distractors"))
    question, answer, distractors = obj["question"], obj["answer"], obj["distractors"]
    if not isinstance(question, str) or not question.strip():
        raise ReplyError("the question is empty")
    if not isinstance(answer, str) or not answer.strip():
        raise ReplyError("the correct option is empty")
    if not isinstance(distractors, list) or len(distractors) != 3 or not all(isinstance(d, str) for d in distractors):
        raise ReplyError(f"need exactly three distractor strings, got {distractors!r}"[:300])
    options = [answer.strip(), *(d.strip() for d in distractors)]
    if any(not o for o in options):
        raise ReplyError("a distractor is empty")
    if len({o.casefold().rstrip(".") for o in options}) != 4:
        raise ReplyError("the four options are not distinct")
    return Draft(level, question.strip(), options[0], (options[1], options[2], options[3]))


def parse_verdict(reply: str, top: bool = False) -> Verdict:
    """Parse a validator reply (the top level's checks only single_answer); raise ReplyError when a check is bad."""
    names = ("single_answer",) if top else ("dependency", "progression", "single_answer")
    obj = parse_json_reply(reply, names)
    flags = {"dependency": True, "progression": True}  # nothing above the top level to depend on
    for name in names:
        value = obj[name]
        if isinstance(value, str) and value.strip().lower() in {"true", "false", "yes", "no"}:
            value = value.strip().lower() in {"true", "yes"}
        if not isinstance(value, bool):
            raise ReplyError(f"validator field {name!r} must be true or false, got {value!r}")
        flags[name] = value
    return Verdict(reason=str(obj.get("reason", "")).strip(), **flags)
