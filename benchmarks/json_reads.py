"""Measure what `hvcu_tasks.data.jsonio.loads` costs beyond `json.loads`, and where its depth guard pays.

Three texts of the sizes the toolkit reads most: a data identity (the identity column, decoded several times per
chain), one `--log_samples` line of the context setting, and a results file. For each, the microseconds per call
of plain `json.loads`, of `jsonio.loads` as it stands, and of the depth guard alone (`jsonio._too_deep`), best of
--repeat rounds. Then a text nested 200 deep (accepted by json.loads, refused by the guard) and one nested 100,000
deep (json.loads raises RecursionError, which jsonio turns into the same one-line refusal).

    python benchmarks/json_reads.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import timeit

from hvcu_tasks.data import jsonio

IDENTITY = {
    "family": "implication",
    "fingerprint": "sha256:" + "f4" * 32,
    "kind": "hub",
    "repo": "Chime316/HVCU-Bench",
    "revision": "0" * 40,
    "samples": 400,
    "source": "hub:Chime316/HVCU-Bench",
}
OUTCOME = {
    "sample_id": "metaphor_001",
    "family": "implication",
    "aspect": "metaphor",
    "gold": "B",
    "pred": "B",
    "response": "B",
    "pred_official": "B",
    "correct": True,
    "correct_official": True,
    "failed": False,
    "data": "sha256:" + "f4" * 32,
}
LINE = {
    "doc_id": 0,
    "filtered_resps": ["B", "A", "C"],
    "input_media": ["/data/Image/Implication-Understanding/metaphor_001.png"],
    "acc_full": {
        "outcomes": [OUTCOME | {"level": k} for k in (1, 2, 3)],
        "questions": ["What is shown?\nOptions:\nA. a\nB. b\nC. c\nD. d"] * 3,
        "replies": ["B", "A", "C"],
        "gold": ["B", "A", "C"],
        "data_identity": IDENTITY,
    },
}
RESULTS = {
    "results": {f"hvcu_bench_{s}": {f"metric_{i},none": 50.0 for i in range(40)} for s in ("impl", "aesth", "affect")},
    "configs": {f"hvcu_bench_{s}": {"metadata": {"hvcu_data_identity": IDENTITY}} for s in ("impl", "aesth", "affect")},
    "config": {"model": "hvcu_replay", "model_args": "model=m", "limit": None},
}


def per_call(function, text: str, repeat: int) -> float:
    """Return the best microseconds per call of function(text) over `repeat` rounds."""
    number = max(1, 20_000 // max(1, len(text) // 100))
    return min(timeit.repeat(lambda: function(text), number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    """Print the table of costs and the two deep texts' outcomes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    texts = {"identity": json.dumps(IDENTITY), "samples line": json.dumps(LINE), "results file": json.dumps(RESULTS)}
    print(f"{'text':<14}{'bytes':>8}{'json.loads µs':>15}{'jsonio.loads µs':>17}{'depth guard µs':>16}")
    for name, text in texts.items():
        plain = per_call(json.loads, text, args.repeat)
        ours = per_call(jsonio.loads, text, args.repeat)
        scan = per_call(jsonio._too_deep, text, args.repeat)
        print(f"{name:<14}{len(text):>8}{plain:>15.2f}{ours:>17.2f}{scan:>16.2f}")
    for depth in (200, 100_000):
        text = "[" * depth + "]" * depth
        try:
            jsonio.loads(text)
            outcome = "read"
        except jsonio.JsonReadError as exc:
            outcome = exc.reason
        print(f"nested {depth:,} deep: {outcome}")


if __name__ == "__main__":
    main()
