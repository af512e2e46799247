"""Regenerate the bundled smoke sample (images and JSON) deterministically: `python -m hvcu_tasks.dev.smoke.build`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from PIL import Image, ImageDraw

from hvcu_tasks.core.families import FAMILIES
from hvcu_tasks.dev.smoke import SMOKE_DIR

SIZE = 96
Draw = Callable[[ImageDraw.ImageDraw], None]


def _heart(d: ImageDraw.ImageDraw, x: int, y: int, r: int, fill: str) -> None:
    """Draw a simple heart centred at (x, y)."""
    d.ellipse([x - r, y - r, x, y], fill=fill)
    d.ellipse([x, y - r, x + r, y], fill=fill)
    d.polygon([(x - r, y - r // 2), (x + r, y - r // 2), (x, y + r)], fill=fill)


def _bars(d: ImageDraw.ImageDraw) -> None:
    """Draw a cage of vertical bars."""
    for x in range(18, 80, 12):
        d.line([(x, 14), (x, 82)], fill="#555555", width=3)
    d.line([(14, 14), (82, 14)], fill="#555555", width=3)
    d.line([(14, 82), (82, 82)], fill="#555555", width=3)


def _metaphor(d: ImageDraw.ImageDraw) -> None:
    _heart(d, 48, 46, 18, "#d22")
    _bars(d)


def _symbolism(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#cfe8ff")
    d.ellipse([30, 30, 66, 58], fill="white")
    d.polygon([(60, 40), (84, 34), (66, 50)], fill="#3a7d2c")  # olive branch in the beak


def _contrast(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, 47, SIZE], fill="#2b2b2b")
    d.rectangle([48, 0, SIZE, SIZE], fill="#f4e27a")
    d.ellipse([12, 40, 36, 64], fill="#777777")
    d.ellipse([60, 40, 84, 64], fill="#ff9900")


def _exaggeration(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([10, 70, 86, 74], fill="#333333")
    d.ellipse([36, 6, 60, 30], fill="#e0b080")
    d.rectangle([44, 30, 52, 70], fill="#e0b080")
    d.rectangle([20, 40, 76, 46], fill="#e0b080")  # enormous arms


def _dislocation(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 60, SIZE, SIZE], fill="#1f5fbf")  # sea
    d.polygon([(30, 60), (48, 20), (66, 60)], fill="#8a6d3b")  # tree trunk shape
    d.ellipse([26, 8, 70, 40], fill="#2e8b57")  # a tree growing out of the sea


def _color(d: ImageDraw.ImageDraw) -> None:
    for i in range(SIZE):
        d.line([(i, 0), (i, SIZE)], fill=(255, 120 + i // 2, 40))


def _composition(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#f5f5f0")
    d.ellipse([70, 70, 90, 90], fill="#222222")  # tiny subject pushed into a corner


def _font(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="white")
    d.text((8, 20), "SALE", fill="black", font_size=34)
    d.text((8, 64), "ends today", fill="#888888", font_size=10)


def _graphics(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="white")
    for i in range(6, SIZE, 10):
        d.line([(i, 6), (SIZE - i, SIZE - 6)], fill="#0a0a8a", width=4)


def _joy(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#fff6cc")
    d.ellipse([18, 18, 78, 78], fill="#ffd23f")
    d.ellipse([34, 36, 40, 42], fill="black")
    d.ellipse([56, 36, 62, 42], fill="black")
    d.arc([32, 40, 64, 66], start=20, end=160, fill="black", width=3)


def _affection(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#ffe4ec")
    d.ellipse([16, 30, 44, 58], fill="#c08060")
    d.ellipse([52, 30, 80, 58], fill="#a06040")
    _heart(d, 48, 22, 8, "#e0306a")


def _wonder(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#0b1030")
    for x, y in [(10, 12), (30, 40), (70, 20), (85, 60), (50, 8), (20, 75), (60, 50)]:
        d.ellipse([x, y, x + 3, y + 3], fill="white")
    d.polygon([(0, 96), (30, 60), (60, 96)], fill="#1a1a1a")


def _anger(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#ffdddd")
    d.ellipse([18, 18, 78, 78], fill="#e53935")
    d.line([(30, 32), (44, 40)], fill="black", width=3)
    d.line([(66, 32), (52, 40)], fill="black", width=3)
    d.arc([34, 56, 62, 76], start=200, end=340, fill="black", width=3)


def _fear(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#101010")
    d.polygon([(40, 96), (48, 30), (56, 96)], fill="#3a3a3a")  # long shadow
    d.ellipse([44, 70, 52, 78], fill="#dddddd")  # small figure


def _sadness(d: ImageDraw.ImageDraw) -> None:
    d.rectangle([0, 0, SIZE, SIZE], fill="#9aa5b1")
    for x in range(4, SIZE, 9):
        d.line([(x, 0), (x - 6, 30)], fill="#5c6b7a", width=1)
    d.ellipse([36, 50, 60, 74], fill="#6d7b8a")
    d.ellipse([44, 58, 48, 66], fill="#2c5aa0")  # a tear


Q = tuple[str, tuple[str, str, str, str], str]

# (id, family, aspect, draw, [L1, L2, L3]) — each level: (question, four options, answer key).
SPECS: list[tuple[str, str, str, Draw, list[Q]]] = [
    (
        "metaphor_001",
        "implication",
        "metaphor",
        _metaphor,
        [
            ("What object is drawn behind the grey bars?", ("A star", "A red heart", "A key", "A bird"), "B"),
            (
                "What does placing the heart behind bars suggest?",
                (
                    "Feelings are kept confined",
                    "The heart is being repaired",
                    "Hearts are for sale",
                    "The bars are decorative",
                ),
                "A",
            ),
            (
                "Which message does the image most likely convey?",
                (
                    "Shopping brings joy",
                    "Exercise keeps the heart healthy",
                    "Love can feel like a prison",
                    "Zoos protect animals",
                ),
                "C",
            ),
        ],
    ),
    (
        "symbolism_001",
        "implication",
        "symbolism",
        _symbolism,
        [
            ("What is the white shape holding in its beak?", ("A green branch", "A letter", "A fish", "Nothing"), "A"),
            (
                "What does a white bird with an olive branch traditionally represent?",
                ("Winter", "A postal service", "Hunting season", "A dove of peace"),
                "D",
            ),
            ("What idea does the image stand for?", ("Migration", "Peace", "Hunger", "Speed"), "B"),
        ],
    ),
    (
        "contrast_001",
        "implication",
        "contrast",
        _contrast,
        [
            (
                "How do the two halves of the image differ in colour?",
                (
                    "Both are blue",
                    "Both are white",
                    "Left is dark, right is bright yellow",
                    "Left is green, right is red",
                ),
                "C",
            ),
            (
                "What does setting a grey circle on dark beside an orange circle on bright create?",
                (
                    "A visual opposition between gloom and cheer",
                    "A repeating pattern",
                    "A map of two countries",
                    "A clock face",
                ),
                "A",
            ),
            (
                "What is the image's implied meaning?",
                (
                    "Circles are better than squares",
                    "The same thing can feel bleak or hopeful depending on outlook",
                    "Night is longer than day",
                    "Orange is the best colour",
                ),
                "B",
            ),
        ],
    ),
    (
        "exaggeration_001",
        "implication",
        "exaggeration",
        _exaggeration,
        [
            (
                "What is unusual about the figure's arms?",
                (
                    "They are missing",
                    "They are shorter than the head",
                    "They are holding a ball",
                    "They are far wider than the body",
                ),
                "D",
            ),
            (
                "Why would an artist draw arms this oversized?",
                (
                    "To show the figure is cold",
                    "To exaggerate reach or power",
                    "To save space",
                    "To hide the figure's face",
                ),
                "B",
            ),
            (
                "Which message is the exaggeration most likely making?",
                (
                    "Someone is overreaching their grasp",
                    "Everyone should exercise",
                    "The figure is a tree",
                    "The ground is uneven",
                ),
                "A",
            ),
        ],
    ),
    (
        "dislocation_001",
        "implication",
        "dislocation",
        _dislocation,
        [
            (
                "Where is the tree placed in the image?",
                ("On a mountain", "In a pot", "Growing out of the blue sea", "On a rooftop"),
                "C",
            ),
            (
                "Why is a tree in the sea surprising?",
                (
                    "Trees are usually blue",
                    "The sea is usually green",
                    "Trees usually grow on land, so it is out of place",
                    "Trees cannot be drawn",
                ),
                "C",
            ),
            (
                "What does the dislocated tree most plausibly express?",
                (
                    "A weather forecast",
                    "Life persisting where it should not be able to",
                    "An advertisement for boats",
                    "A lesson in geometry",
                ),
                "B",
            ),
        ],
    ),
    (
        "color_001",
        "aesthetic",
        "color",
        _color,
        [
            (
                "Which colours make up the gradient?",
                ("Blue to purple", "Black to grey", "Green to teal", "Red-orange to yellow-orange"),
                "D",
            ),
            (
                "How do warm orange tones usually affect a viewer?",
                (
                    "They feel cold and distant",
                    "They feel warm and energetic",
                    "They feel silent",
                    "They feel metallic",
                ),
                "B",
            ),
            (
                "Which overall aesthetic impression does the colour scheme give?",
                (
                    "A warm, sunny mood",
                    "A clinical, sterile mood",
                    "A gloomy, rainy mood",
                    "A neutral, colourless mood",
                ),
                "A",
            ),
        ],
    ),
    (
        "composition_001",
        "aesthetic",
        "composition",
        _composition,
        [
            (
                "Where is the dark circle placed?",
                ("In the centre", "Across the top edge", "In the bottom-right corner", "It fills the frame"),
                "C",
            ),
            (
                "What effect does leaving most of the frame empty have?",
                (
                    "It creates large negative space around the subject",
                    "It makes the subject look crowded",
                    "It adds many details",
                    "It hides the subject",
                ),
                "A",
            ),
            (
                "How would you describe the composition's feeling?",
                ("Busy and chaotic", "Symmetrical and formal", "Loud and festive", "Minimal and isolated"),
                "D",
            ),
        ],
    ),
    (
        "font_001",
        "aesthetic",
        "font",
        _font,
        [
            ("Which word is written in the largest text?", ("ends", "today", "SALE", "OPEN"), "C"),
            (
                "What does the size difference between the two text lines do?",
                (
                    "Makes both lines equally important",
                    "Puts the emphasis on the word SALE",
                    "Makes the text unreadable",
                    "Hides the small line completely",
                ),
                "B",
            ),
            (
                "What is the typographic hierarchy trying to achieve?",
                (
                    "Grab attention first, then add detail",
                    "Confuse the reader",
                    "Decorate without meaning",
                    "Make the poster look empty",
                ),
                "A",
            ),
        ],
    ),
    (
        "graphics_001",
        "aesthetic",
        "graphics",
        _graphics,
        [
            (
                "What kind of marks fill the image?",
                ("Dots", "Diagonal strokes crossing in the middle", "Circles", "Handwritten letters"),
                "B",
            ),
            (
                "What do the repeated thick diagonal strokes create?",
                ("A sense of stillness", "A photograph", "A sense of movement and rhythm", "A blank surface"),
                "C",
            ),
            (
                "Which aesthetic quality do the graphics express?",
                ("Calm and static", "Soft and blurry", "Realistic and detailed", "Dynamic and energetic"),
                "D",
            ),
        ],
    ),
    (
        "joy_001",
        "affective",
        "joy",
        _joy,
        [
            (
                "What shape is the mouth on the yellow face?",
                ("An upward curve", "A straight line", "A downward curve", "An open circle"),
                "A",
            ),
            ("What does an upward-curved mouth show?", ("A frown", "A smile", "A yawn", "A shout"), "B"),
            ("Which emotion does the image evoke?", ("Anger", "Fear", "Joy", "Sadness"), "C"),
        ],
    ),
    (
        "affection_001",
        "affective",
        "affection",
        _affection,
        [
            (
                "What is drawn above the two round shapes?",
                ("A sun", "A small pink heart", "A cloud", "A question mark"),
                "B",
            ),
            (
                "What does a heart over two figures side by side suggest?",
                ("They are competing", "They are strangers", "They are lost", "They share a close bond"),
                "D",
            ),
            ("Which emotion does the image evoke?", ("Affection", "Anger", "Fear", "Boredom"), "A"),
        ],
    ),
    (
        "wonder_001",
        "affective",
        "wonder",
        _wonder,
        [
            ("What fills the dark sky?", ("Rain", "Birds", "Small white stars", "Balloons"), "C"),
            (
                "What does a wide starry sky over a small hill suggest?",
                ("A vast, awe-inspiring universe", "A busy city", "A storm", "A closed room"),
                "A",
            ),
            ("Which emotion does the image evoke?", ("Disgust", "Wonder", "Anger", "Embarrassment"), "B"),
        ],
    ),
    (
        "anger_001",
        "affective",
        "anger",
        _anger,
        [
            (
                "How are the eyebrows on the red face drawn?",
                ("Raised high and curved", "Missing", "As circles", "Slanted down toward the centre"),
                "D",
            ),
            (
                "What do inward-slanting brows and a downturned mouth signal?",
                ("Surprise", "Sleepiness", "Hostility", "Calm"),
                "C",
            ),
            ("Which emotion does the image evoke?", ("Joy", "Anger", "Wonder", "Affection"), "B"),
        ],
    ),
    (
        "fear_001",
        "affective",
        "fear",
        _fear,
        [
            (
                "What surrounds the small pale figure?",
                ("Darkness and a long shadow", "A sunny meadow", "A crowd of people", "Colourful balloons"),
                "A",
            ),
            (
                "What does a tiny figure facing a looming shadow in the dark suggest?",
                ("Celebration", "Vulnerability to a threat", "Relaxation", "Victory"),
                "B",
            ),
            ("Which emotion does the image evoke?", ("Amusement", "Pride", "Fear", "Contentment"), "C"),
        ],
    ),
    (
        "sadness_001",
        "affective",
        "sadness",
        _sadness,
        [
            ("What falls from the sky in the image?", ("Snow", "Leaves", "Confetti", "Rain"), "D"),
            ("What do grey rain and a blue tear on the face convey?", ("Excitement", "Sorrow", "Hunger", "Anger"), "B"),
            ("Which emotion does the image evoke?", ("Sadness", "Joy", "Wonder", "Anger"), "A"),
        ],
    ),
]


def build(out: Path = SMOKE_DIR) -> None:
    """Write the smoke sample's three family JSON files and PNG images under `out`."""
    records: dict[str, list[dict]] = {f: [] for f in FAMILIES}
    for sid, family, aspect, draw, levels in SPECS:
        stem = FAMILIES[family][1]
        img = Image.new("RGB", (SIZE, SIZE), "white")
        draw(ImageDraw.Draw(img))
        img_dir = out / "Image" / stem
        img_dir.mkdir(parents=True, exist_ok=True)
        img.save(img_dir / f"{sid}.png", optimize=True)
        records[family].append(
            {
                "id": sid,
                "aspect": aspect,
                "note": "SMOKE SAMPLE for offline tests, not HVCU-Bench data",
                "qa_levels": [
                    {
                        "level": n,
                        "question": q,
                        "options": [{"option_key": k, "option_text": t} for k, t in zip("ABCD", opts, strict=True)],
                        "correct_answer_key": ans,
                    }
                    for n, (q, opts, ans) in enumerate(levels, start=1)
                ],
            }
        )
    for family, items in records.items():
        text = json.dumps(items, indent=2, ensure_ascii=False) + "\n"
        (out / f"{FAMILIES[family][1]}.json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else SMOKE_DIR)
