"""Stand-ins for lmms-eval's general benchmarks, the tasks the group `hvcu_suite` names beside HVCU-Bench.

Small datasets in the real schemas (columns, configs and splits that lmms-eval 0.7.3's task YAMLs and utils read) of
`Lin-Chen/MMStar` (split val), `lmms-lab-encoder/MMMU` (split validation), `lmms-lab-encoder/MMBench` (configs cc:
test, cn: dev, en: dev), `deepvk/MMBench-ru` (split dev) and `lmms-lab-encoder/HallusionBench` (split image), for the
stand-in hub (`publish_general`), with each document's scripted reply per model (`reply`) and the scripted verdicts of
the GPT judge MMBench and HallusionBench call (`judge`). Every document says how each model's reply scores, so the
expected numbers of tests/test_general_e2e.py are worked out by hand from this file alone.
"""

from __future__ import annotations

import io
from typing import Any

MODELS = ("model-a", "model-b", "model-c")

# ---------------------------------------------------------------- MMStar (Lin-Chen/MMStar, config val, split val)
# lmms-eval scores a reply by the letter mcq_extract finds; a category is the mean of its l2 categories' accuracies
# and `average` the mean over all l2 categories present.
MMSTAR = [
    # (index, category, l2_category, answer, {model: reply})
    (0, "coarse perception", "image scene and topic", "A", {"model-a": "A", "model-b": "A", "model-c": "A"}),
    (1, "coarse perception", "image emotion", "B", {"model-a": "C", "model-b": "B", "model-c": "B"}),
    (2, "fine-grained perception", "object counting", "C", {"model-a": "C", "model-b": "C", "model-c": "C"}),
    (3, "instance reasoning", "single-instance reasoning", "D", {"model-a": "D", "model-b": "A", "model-c": "D"}),
    (4, "logical reasoning", "diagram reasoning", "A", {"model-a": "B", "model-b": "B", "model-c": "A"}),
    (5, "science & technology", "biology & chemistry & physics", "B", {"model-a": "B", "model-b": "C", "model-c": "B"}),
    (6, "math", "geometry", "C", {"model-a": "The answer is C.", "model-b": "D", "model-c": "C"}),
]

# ---------------------------------------------------------------- MMMU (lmms-lab-encoder/MMMU, split validation)
MMMU = [
    # (id, answer, {model: reply}); all multiple-choice with four options
    ("validation_Art_1", "A", {"model-a": "A", "model-b": "A", "model-c": "A"}),
    ("validation_Art_2", "B", {"model-a": "B", "model-b": "C", "model-c": "C"}),
    ("validation_Math_1", "C", {"model-a": "C", "model-b": "D", "model-c": "C"}),
    ("validation_Physics_1", "D", {"model-a": "A", "model-b": "A", "model-c": "B"}),
]

# ---------------------------------------------------------------- MMBench (four splits, CircularEval)
# A question is a hit when every row of it (index, and index + 1,000,000 for a circular copy with rotated options)
# is answered right; a reply with no letter and no option text goes to the judge (JUDGED: the letter it returns).
PLUSH = "It looks like a plush toy to me."
MMBENCH: dict[str, list[tuple[int, str, dict[str, str]]]] = {
    # split task -> (index, answer, {model: reply})
    "mmbench_cn_cc": [
        (0, "A", {"model-a": "A", "model-b": "A", "model-c": "A"}),
        (1, "B", {"model-a": "B", "model-b": "C", "model-c": "B"}),
    ],
    "mmbench_cn_dev": [
        (0, "A", {"model-a": "A", "model-b": "B", "model-c": "A"}),
        (1, "C", {"model-a": PLUSH, "model-b": "C", "model-c": "D"}),
    ],
    "mmbench_en_dev": [
        (0, "A", {"model-a": "A", "model-b": "A", "model-c": "A"}),
        (1, "D", {"model-a": "D", "model-b": "B", "model-c": "D"}),
        (1_000_000, "B", {"model-a": "C", "model-b": "B", "model-c": "B"}),  # question 0 with options rotated
    ],
    "mmbench_ru_dev": [
        (0, "B", {"model-a": "A", "model-b": "A", "model-c": "B"}),
        (1, "C", {"model-a": "C", "model-b": PLUSH, "model-c": "C"}),
    ],
}
JUDGED = {("mmbench_cn_dev", 1): "C", ("mmbench_ru_dev", 1): "A"}
"""What the judge answers for a prose reply to (split, index): model-a's cn_dev 1 becomes right, model-b's ru_dev 1
wrong."""

# ---------------------------------------------------------------- HallusionBench (lmms-lab-encoder/HallusionBench)
HALLUSION = [
    # (category, subcategory, set_id, figure_id, question_id, visual_input, gt_answer, details, {model: reply})
    ("VD", "illusion", "0", "0", "0", "1", "1", "Yes, the two lines are equally long.",
     {"model-a": "Yes.", "model-b": "No.", "model-c": "Yes."}),
    ("VD", "illusion", "0", "1", "0", "2", "0", "No, in the edited figure the lines differ.",
     {"model-a": "Yes.", "model-b": "No.", "model-c": "No."}),
    ("VS", "chart", "1", "0", "0", "0", "1", "Yes, 2020 had the most sales.",
     {"model-a": "I cannot tell.", "model-b": "No.", "model-c": "Yes."}),
    ("VS", "chart", "1", "1", "0", "1", "0", "No, the chart shows 2019 had the most sales.",
     {"model-a": "No.", "model-b": "No.", "model-c": "No."}),
]  # fmt: skip


def _png(shade: int) -> bytes:
    """Return a small PNG of one grey shade."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (shade, shade, shade)).save(buffer, format="PNG")
    return buffer.getvalue()


OPTIONS = ("red", "green", "blue", "yellow")


def mmstar_question(index: int) -> str:
    """Return MMStar document `index`'s question (the real layout: question, then the options in one line)."""
    return f"Which colour stands out in stand-in picture {index}?\nOptions: " + ", ".join(
        f"{k}: {t}" for k, t in zip("ABCD", OPTIONS, strict=True)
    )


def mmmu_question(doc_id: str) -> str:
    """Return MMMU document `doc_id`'s question (one image, referred to as <image 1>)."""
    return f"<image 1> Which colour is the stand-in shape of {doc_id}?"


def mmbench_question(task: str, index: int) -> str:
    """Return an MMBench row's question (a circular copy asks the same question)."""
    return f"What is in stand-in {task} picture {index % 1_000_000}?"


def mmbench_options(index: int) -> tuple[str, str, str, str]:
    """Return an MMBench row's options A-D (a circular copy's are rotated by one)."""
    items = ("teddy bear", "rabbit", "cat", "dog")
    return items if index < 1_000_000 else items[1:] + items[:1]


def hallusion_question(set_id: str, figure_id: str) -> str:
    """Return a HallusionBench question."""
    return f"Stand-in HallusionBench set {set_id}, figure {figure_id}: is the statement true? Answer yes or no."


def _dataset_parquet(rows: list[dict[str, Any]], features: dict[str, Any]) -> bytes:
    """Return rows as one parquet file written by `datasets` (its feature types, images included, in the metadata)."""
    import datasets

    buffer = io.BytesIO()
    datasets.Dataset.from_list(rows, features=datasets.Features(features)).to_parquet(buffer)
    return buffer.getvalue()


def _card(configs: list[tuple[str, str, str]]) -> bytes:
    """Return a dataset card declaring (config, split, parquet path) as the hub's YAML `configs`."""
    import yaml

    meta = {"configs": [{"config_name": c, "data_files": [{"split": s, "path": p}]} for c, s, p in configs]}
    return f"---\n{yaml.safe_dump(meta, sort_keys=False)}---\n# stand-in\n".encode()


def general_repos() -> dict[str, dict[str, bytes]]:
    """Return every stand-in repository: repo id -> files (card and parquet)."""
    from datasets import Image, Value

    text, number, image = Value("string"), Value("int64"), Image()
    mmstar = [
        {
            "index": index,
            "question": mmstar_question(index),
            "image": {"bytes": _png(40 * index), "path": None},
            "answer": answer,
            "category": category,
            "l2_category": l2,
            "meta_info": {"source": "stand-in", "split": "val", "image_path": [f"{index}.png"]},
        }
        for index, category, l2, answer, _replies in MMSTAR
    ]
    mmstar_features = {"index": number, "question": text, "image": image, "answer": text, "category": text}
    mmstar_features |= {
        "l2_category": text,
        "meta_info": {"source": text, "split": text, "image_path": [text]},
    }
    mmmu = [
        {
            "id": doc_id,
            "question": mmmu_question(doc_id),
            "options": repr(list(OPTIONS)),
            "explanation": "",
            **{f"image_{n}": ({"bytes": _png(30 * i), "path": None} if n == 1 else None) for n in range(1, 8)},
            "img_type": "['Diagrams']",
            "answer": answer,
            "topic_difficulty": "Easy",
            "question_type": "multiple-choice",
            "subfield": "stand-in",
        }
        for i, (doc_id, answer, _replies) in enumerate(MMMU)
    ]
    mmmu_features = {"id": text, "question": text, "options": text, "explanation": text}
    mmmu_features |= {f"image_{n}": image for n in range(1, 8)}
    mmmu_features |= {"img_type": text, "answer": text, "topic_difficulty": text, "question_type": text}
    mmmu_features |= {"subfield": text}

    def mmbench_rows(task: str, cc: bool = False, l2: str = "L2-category") -> list[dict[str, Any]]:
        rows = []
        for index, answer, _replies in MMBENCH[task]:
            row = {"index": index, "question": mmbench_question(task, index)}
            row |= {} if cc else {"hint": "nan"}
            row |= dict(zip("ABCD", mmbench_options(index), strict=True))
            row |= {"answer": answer, "category": "object_localization", "image": {"bytes": _png(9), "path": None}}
            row |= {"source": "stand-in", l2: "finegrained_perception", "comment": "nan", "split": "dev"}
            rows.append(row)
        return rows

    mmbench_features = {"index": number, "question": text, "hint": text, **dict.fromkeys("ABCD", text)}
    mmbench_features |= {"answer": text, "category": text, "image": image, "source": text, "L2-category": text}
    mmbench_features |= {"comment": text, "split": text}
    cc_features = {k: v for k, v in mmbench_features.items() if k != "hint"}
    ru_features = {("l2-category" if k == "L2-category" else k): v for k, v in mmbench_features.items()}
    hallusion = [
        {
            "category": category,
            "subcategory": sub,
            "visual_input": visual,
            "set_id": set_id,
            "figure_id": figure,
            "sample_note": "stand-in",
            "question_id": question,
            "question": hallusion_question(set_id, figure),
            "gt_answer_details": details,
            "gt_answer": gt,
            "filename": f"{set_id}_{figure}.png",
            "image": {"bytes": _png(200), "path": None},
        }
        for category, sub, set_id, figure, question, visual, gt, details, _replies in HALLUSION
    ]
    hallusion_features = {k: text for k in hallusion[0] if k != "image"} | {"image": image}
    return {
        "Lin-Chen/MMStar": {
            "README.md": _card([("val", "val", "mmstar.parquet")]),
            "mmstar.parquet": _dataset_parquet(mmstar, mmstar_features),
        },
        "lmms-lab-encoder/MMMU": {
            "README.md": _card([("default", "validation", "data/validation-00000-of-00001.parquet")]),
            "data/validation-00000-of-00001.parquet": _dataset_parquet(mmmu, mmmu_features),
        },
        "lmms-lab-encoder/MMBench": {
            "README.md": _card(
                [
                    ("cc", "test", "cc/test-00000-of-00001.parquet"),
                    ("cn", "dev", "cn/dev-00000-of-00001.parquet"),
                    ("en", "dev", "en/dev-00000-of-00001.parquet"),
                ]
            ),
            "cc/test-00000-of-00001.parquet": _dataset_parquet(mmbench_rows("mmbench_cn_cc", cc=True), cc_features),
            "cn/dev-00000-of-00001.parquet": _dataset_parquet(mmbench_rows("mmbench_cn_dev"), mmbench_features),
            "en/dev-00000-of-00001.parquet": _dataset_parquet(mmbench_rows("mmbench_en_dev"), mmbench_features),
        },
        "deepvk/MMBench-ru": {
            "README.md": _card([("default", "dev", "data/dev-00000-of-00001.parquet")]),
            "data/dev-00000-of-00001.parquet": _dataset_parquet(
                mmbench_rows("mmbench_ru_dev", l2="l2-category"), ru_features
            ),
        },
        "lmms-lab-encoder/HallusionBench": {
            "README.md": _card([("default", "image", "data/image-00000-of-00001.parquet")]),
            "data/image-00000-of-00001.parquet": _dataset_parquet(hallusion, hallusion_features),
        },
    }


def publish_general(hub: Any) -> None:
    """Commit every stand-in repository to the stand-in hub (branch main)."""
    for repo_id, files in general_repos().items():
        hub.repo(repo_id).commit(files)


def _text(request: dict[str, Any]) -> str:
    """Return every text part of a chat request's last user message, joined."""
    content = [m for m in request["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "\n".join(p.get("text", "") for p in content)


def general_reply(model: str, text: str) -> str | None:
    """Return `model`'s scripted reply to a general-benchmark question, None when `text` asks none of them."""
    for index, _c, _l2, _answer, replies in MMSTAR:
        if mmstar_question(index).split("\n")[0] in text:
            return replies[model]
    for doc_id, _answer, replies in MMMU:
        if f"shape of {doc_id}?" in text:
            return replies[model]
    for task, rows in MMBENCH.items():
        for index, _answer, replies in rows:
            if mmbench_question(task, index) in text and all(
                f"{k}. {o}" in text for k, o in zip("ABCD", mmbench_options(index), strict=True)
            ):
                return replies[model]
    for _c, _s, set_id, figure, _q, _v, _g, _d, replies in HALLUSION:
        if hallusion_question(set_id, figure) in text:
            return replies[model]
    return None


def judge(request: dict[str, Any]) -> str:
    """Answer as the GPT judge of MMBench (the option letter) and HallusionBench (correct / incorrect / unclear)."""
    text = _text(request)
    if text.startswith("Imagine you are an intelligent teacher"):
        reference = text.split("\nReference answer: ", 1)[1].split("\n", 1)[0]
        prediction = text.split("\nPrediction answer:", 1)[1].split("\nOutput:", 1)[0].strip().lower()
        said = next((w for w in ("yes", "no") if prediction.startswith(w)), None)
        if said is None:
            return "unclear"
        return "correct" if reference.lower().startswith(said) else "incorrect"
    for (task, index), letter in JUDGED.items():
        if f"stand-in {task} picture {index}" in text:
            return letter
    raise AssertionError(f"the stand-in judge was asked about nothing it knows: {text[:200]!r}")
