"""Benchmark data and the harness (issue 11): one validator, clean task-load failures, failed replies, NaN.

Every dataset fault is refused by the same checks in `hvcu data validate` and at task load, before any
model call, with one line naming the file, the id, the level and the field. Local JSON copies (image
files) and hub-parquet copies (image bytes) go through the same checks.
"""

from __future__ import annotations

import io
import json
import logging
import math
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import datasets
import pytest
from conftest import item
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from PIL import Image

from hvcu_tasks import settings
from hvcu_tasks.cli import main
from hvcu_tasks.core import aggregate, metrics, payloads
from hvcu_tasks.core.families import ASPECTS, FAMILIES
from hvcu_tasks.core.metrics import Outcome, overall_score, score_family
from hvcu_tasks.core.prompts import NO_ANSWER
from hvcu_tasks.data import validate
from hvcu_tasks.lmms import context, documents, hook_table, hooks
from hvcu_tasks.lmms.models.wrapper import ContextWrapper
from hvcu_tasks.results.scores import family_metrics

IMPL_FILE = "Implication-Understanding.json"
HUB_IMPL = "Chime316/HVCU-Bench[Implication_Understanding]"


# ---------------------------------------------------------------- helpers


def png(size: tuple[int, int] = (8, 8), noise: bool = False) -> bytes:
    """Encode a small PNG (random noise when `noise`, so that a truncated copy cannot decode)."""
    img = Image.effect_noise(size, 80).convert("RGB") if noise else Image.new("RGB", size, "red")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def bomb_png(width: int, height: int) -> bytes:
    """Return a PNG whose header claims width x height pixels (what a decompression bomb looks like to PIL)."""
    data = bytearray(png((1, 1)))
    ihdr = struct.pack(">II", width, height) + bytes(data[24:29])
    data[16:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr) & 0xFFFFFFFF)
    return bytes(data)


def valid_families(**impl_items: list[dict]) -> dict[str, list[dict]]:
    """Return one valid item per family, with the implication items replaced when given."""
    return {
        "implication": impl_items.get("impl", [item("metaphor_001")]),
        "aesthetic": [item("font_001")],
        "affective": [item("joy_001")],
    }


class Source:
    """A dataset written as a local authors' JSON copy or published as the hub's parquet config; read by both paths.

    The hub copy is served by the stand-in hub (tests/standins/hub.py) and read through the real `huggingface_hub`.
    """

    def __init__(self, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub=None):
        self.kind, self.tmp, self.mp, self.hub = kind, tmp_path, monkeypatch, hub

    def write(self, items_by_family: dict[str, list[dict]], images: dict[str, bytes] | None = None) -> str:
        """Store the dataset; `images` overrides the image bytes of the named ids. Return the source string."""
        images = images or {}
        if self.kind == "json":
            root = self.tmp / "data"
            for family, items in items_by_family.items():
                stem = FAMILIES[family][1]
                (root / "Image" / stem).mkdir(parents=True, exist_ok=True)
                (root / f"{stem}.json").write_text(json.dumps(items), encoding="utf-8")
                for it in items:
                    name = str(it["id"])
                    if "/" not in name:
                        (root / "Image" / stem / f"{name}.png").write_bytes(images.get(name, png()))
            self.mp.setenv(settings.DATA_ENV, str(root))
            return str(root)
        from standins.hub import card, parquet_bytes

        files = {"README.md": card()}
        for family, items in items_by_family.items():
            rows = [
                {
                    "id": str(it["id"]),
                    "image": {"bytes": images.get(str(it["id"]), png()), "path": None},
                    "qa_levels": json.dumps(it["qa_levels"]),
                }
                for it in items
            ]
            files[f"assets/{FAMILIES[family][0]}-00000-of-00001.parquet"] = parquet_bytes(rows)
        self.hub.repo("Chime316/HVCU-Bench").commit(files)
        self.mp.delenv(settings.DATA_ENV, raising=False)
        return "hub"

    def where(self) -> str:
        """Return how problem lines name the implication file of this source."""
        return IMPL_FILE if self.kind == "json" else HUB_IMPL


@pytest.fixture(params=["json", "hub"])
def source(request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    hub = request.getfixturevalue("stand_in_hub") if request.param == "hub" else None
    return Source(request.param, tmp_path, monkeypatch, hub)


def stub(family: str, declared: str = "hub") -> datasets.Dataset:
    return datasets.Dataset.from_list([{"family": family, "source": declared}])


def validate_lines(capsys, src: str) -> tuple[int, list[str]]:
    code = main(["data", "validate", src])
    return code, [line for line in capsys.readouterr().out.splitlines() if ": id=" in line]


def task_load_error(family: str = "implication", setting: str = "base") -> SystemExit:
    """Load a hub task's documents (redirected by the env) and return the error that stopped it."""
    load = hooks.process_docs if setting == "base" else context.process_docs
    with pytest.raises(SystemExit) as err:
        load(stub(family))
    return err.value


def refused_everywhere(
    capsys, source: Source, items: list[dict], expected: str | tuple[str, ...], **images: bytes
) -> None:
    """Assert `hvcu data validate` and task load (both settings) refuse the dataset with the same line."""
    parts = (expected,) if isinstance(expected, str) else expected
    src = source.write(valid_families(impl=items), images)
    code, lines = validate_lines(capsys, src)
    assert code == 1
    assert any(source.where() in line and all(p in line for p in parts) for line in lines), lines
    for setting in ("base", "context"):
        err = task_load_error(setting=setting)
        assert err.code != 0
        assert all(p in str(err) for p in parts), str(err)


# ---------------------------------------------------------------- sample ids are path-safe


def test_an_id_that_climbs_out_of_the_dataset_is_refused_and_the_outside_image_never_read(
    tmp_path, monkeypatch, capsys
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.png").write_bytes(png())
    evil = item("../../../outside/evil")
    src = Source("json", tmp_path, monkeypatch).write(valid_families(impl=[item("metaphor_001"), evil]))
    opened: list[str] = []
    real_open = Image.open
    monkeypatch.setattr(Image, "open", lambda fp, *a, **k: opened.append(str(fp)) or real_open(fp, *a, **k))
    real_read = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: opened.append(str(self)) or real_read(self))
    code, lines = validate_lines(capsys, src)
    assert code == 1
    assert any("'../../../outside/evil' contains a path separator" in line for line in lines), lines
    assert not any("outside" in path for path in opened)
    assert "contains a path separator" in str(task_load_error())


def test_an_id_from_the_hub_with_a_separator_is_refused(tmp_path, monkeypatch, capsys, stand_in_hub) -> None:
    src = Source("hub", tmp_path, monkeypatch, stand_in_hub).write(valid_families(impl=[item("..\\..\\evil")]))
    code, lines = validate_lines(capsys, src)
    assert code == 1 and any("contains a path separator" in line for line in lines), lines


def test_integer_ids_are_fine_and_become_text(write_dataset, monkeypatch) -> None:
    root = write_dataset({"implication": [item(7), item(8)]})
    monkeypatch.setenv(settings.DATA_ENV, str(root))
    docs = hooks.process_docs(stub("implication"))
    assert sorted({d["sample_id"] for d in docs}) == ["7", "8"]


# ---------------------------------------------------------------- one validator, both sources


def _with(mutate: Callable[[dict], object]) -> list[dict]:
    raw = item("metaphor_001")
    mutate(raw)
    return [raw]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda r: r["qa_levels"][1].update(question=None), "id=metaphor_001: qa_levels[level=2].question: "),
        (lambda r: r["qa_levels"][0].update(question=42), "id=metaphor_001: qa_levels[level=1].question: "),
        (lambda r: r["qa_levels"][2].update(question="  "), "id=metaphor_001: qa_levels[level=3].question: empty"),
        (
            lambda r: r["qa_levels"][0]["options"][2].update(option_text=None),
            "id=metaphor_001: qa_levels[level=1].options[2].option_text: ",
        ),
        (
            lambda r: r["qa_levels"][1]["options"][0].update(option_text=3),
            "id=metaphor_001: qa_levels[level=2].options[0].option_text: ",
        ),
        (
            lambda r: r["qa_levels"][1]["options"][3].update(option_text=""),
            "id=metaphor_001: qa_levels[level=2].options: an option text is empty",
        ),
    ],
    ids=["null-question", "int-question", "blank-question", "null-option", "int-option", "empty-option"],
)
def test_a_missing_or_non_text_field_is_refused_naming_file_id_level_field(
    capsys, source, mutate, expected: str
) -> None:
    refused_everywhere(capsys, source, _with(mutate), expected)


def test_a_null_question_is_never_sent_as_the_text_none(write_dataset, monkeypatch) -> None:
    raw = item("metaphor_001")
    raw["qa_levels"][0]["question"] = None
    monkeypatch.setenv(settings.DATA_ENV, str(write_dataset({"implication": [raw]})))
    err = task_load_error()
    assert "qa_levels[level=1].question: missing (null)" in str(err)


def test_a_lone_surrogate_is_refused(capsys, source) -> None:
    items = _with(lambda r: r["qa_levels"][2].update(question="Which word \ud800 fits?"))
    refused_everywhere(capsys, source, items, "id=metaphor_001: qa_levels[level=3].question: contains a lone surrogate")


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda r: r["qa_levels"][0]["options"][3].update(option_key="E"),
            "qa_levels[level=1].options: expected option keys A, B, C, D in order, got ['A', 'B', 'C', 'E']",
        ),
        (
            lambda r: r["qa_levels"][1]["options"][1].update(option_key="A"),
            "qa_levels[level=2].options: duplicate option key 'A'",
        ),
        (
            lambda r: r["qa_levels"][2].update(correct_answer_key="E"),
            "qa_levels[level=3].correct_answer_key: answer 'E' is not one of the options",
        ),
        (
            lambda r: r["qa_levels"][2].update(correct_answer_key=None),
            "qa_levels[level=3].correct_answer_key: missing (null)",
        ),
        (lambda r: r["qa_levels"][2].update(level=4), "qa_levels[2].level: level 4 is outside 1-3"),
        (lambda r: r["qa_levels"][0].update(level=0), "qa_levels[0].level: level 0 is outside 1-3"),
        (lambda r: r["qa_levels"][1].pop("level"), "qa_levels[1].level: missing"),
    ],
    ids=["key-E", "duplicate-key", "gold-not-an-option", "gold-null", "level-4", "level-0", "level-missing"],
)
def test_bad_keys_and_levels_are_refused_for_both_sources(capsys, source, mutate, expected: str) -> None:
    refused_everywhere(capsys, source, _with(mutate), expected)


def test_an_option_key_given_twice_in_json_text_is_refused() -> None:
    from hvcu_tasks.data.loaders import rows_to_samples

    levels = item("metaphor_001")["qa_levels"]
    texts = [json.dumps(lv) for lv in levels]
    texts[1] = texts[1].replace(json.dumps(levels[1]["options"]), '{"A": "cat", "A": "dog", "B": "x", "C": "y"}')
    row = {"id": "metaphor_001", "image": png(), "qa_levels": "[" + ", ".join(texts) + "]"}
    problems = rows_to_samples([row], "implication", HUB_IMPL).problems
    assert [(p.record, p.field) for p in problems] == [("metaphor_001", "qa_levels")]
    assert "key 'A' appears twice in one object" in problems[0].message


def test_an_empty_family_file_is_refused(capsys, source) -> None:
    src = source.write(valid_families(impl=[]))
    code, lines = validate_lines(capsys, src)
    why = "holds no items"  # the JSON file, and the parquet split (read with pyarrow: no rows is no items)
    assert code == 1
    assert any(source.where() in line and why in line for line in lines), lines
    assert why in str(task_load_error())


def test_duplicate_ids_are_refused_before_any_request(capsys, source) -> None:
    items = [item("metaphor_001"), item("metaphor_001", "BBB")]
    refused_everywhere(capsys, source, items, "id=metaphor_001: id: duplicate id (2 items)")


def test_a_truncated_image_is_refused_naming_the_id(capsys, source, monkeypatch) -> None:
    from PIL import ImageFile

    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)  # what importing lmms_eval.api.task does
    whole = png((64, 64), noise=True)
    refused_everywhere(
        capsys, source, [item("metaphor_001")], "id=metaphor_001: image: cannot decode", metaphor_001=whole[:-200]
    )


@pytest.mark.parametrize("pixels", [(20000, 20000), (10000, 10000)], ids=["bomb-error", "bomb-warning"])
def test_a_decompression_bomb_is_refused_naming_the_id(capsys, source, pixels: tuple[int, int]) -> None:
    expected = (
        "id=metaphor_001: image: too large to decode safely (a decompression bomb?): ",
        f"{pixels[0] * pixels[1]:,} pixels is over the limit of",
    )
    refused_everywhere(capsys, source, [item("metaphor_001")], expected, metaphor_001=bomb_png(*pixels))


def test_every_problem_is_listed_before_the_last_line(write_dataset, monkeypatch) -> None:
    bad = [item("metaphor_001", "ABE"), item("symbolism_001"), item("symbolism_001")]
    monkeypatch.setenv(settings.DATA_ENV, str(write_dataset({"implication": bad})))
    lines = str(task_load_error()).splitlines()
    assert any("id=metaphor_001: qa_levels[level=3].correct_answer_key" in line for line in lines[:-1])
    assert any("id=symbolism_001: id: duplicate id" in line for line in lines[:-1])
    assert "2 problem(s)" in lines[-1] and "no request was sent" in lines[-1] and "hvcu data validate" in lines[-1]


def test_each_image_is_decoded_once_for_both_settings(write_dataset, monkeypatch) -> None:
    root = write_dataset({"implication": [item("metaphor_001"), item("symbolism_001")]})
    monkeypatch.setenv(settings.DATA_ENV, str(root))
    decoded: list[str] = []
    real = validate._decode
    monkeypatch.setattr(validate, "_decode", lambda ref, data=None: decoded.append(ref.path.name) or real(ref, data))
    hooks.process_docs(stub("implication"))
    context.process_docs(stub("implication"))
    assert sorted(decoded) == ["metaphor_001.png", "symbolism_001.png"]


def test_an_unexpected_load_error_also_ends_the_run_with_one_line(monkeypatch) -> None:
    def broken(source: str, family: str):
        raise OSError("disk quota exceeded")

    monkeypatch.setattr(documents, "load_family", broken)
    err = task_load_error()
    assert err.code != 0
    assert str(err).splitlines()[-1].endswith("load: unexpected OSError: disk quota exceeded")


# ---------------------------------------------------------------- the hub cannot be reached


def test_an_unreachable_hub_fails_in_seconds_naming_the_env_variable(monkeypatch) -> None:
    from huggingface_hub import constants

    monkeypatch.delenv(settings.DATA_ENV, raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # what the client read at import
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    start = time.monotonic()
    err = task_load_error()
    assert time.monotonic() - start < 5
    last = str(err).splitlines()[-1]
    assert "http://127.0.0.1:9" in last and "HVCU_BENCH_DATA" in last


def test_validating_an_unreachable_hub_says_so_once(monkeypatch, capsys) -> None:
    from huggingface_hub import constants

    from hvcu_tasks.data import hub

    hub.reset()  # a fresh process: nothing pinned yet
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    assert main(["data", "validate", "hub"]) == 1
    said = [line for line in capsys.readouterr().out.splitlines() if "cannot reach the Hugging Face Hub" in line]
    assert len(said) == 1 and "http://127.0.0.1:9" in said[0] and "HVCU_BENCH_DATA" in said[0]


# ---------------------------------------------------------------- replies that never came


def _base_docs():
    return hooks.process_docs(stub("implication", "smoke"))


@pytest.mark.parametrize("reply", [None, "", "   ", 7], ids=["none", "empty", "blank", "not-a-string"])
def test_a_missing_reply_counts_as_a_failed_request_with_a_warning(reply, caplog) -> None:
    doc = _base_docs()[4]  # symbolism_001, level 2
    payload = hooks.process_results(doc, [reply])["n_failed_requests"]
    assert payload["outcomes"][0]["failed"] is True and payload["outcomes"][0]["correct"] is False
    with caplog.at_level(logging.WARNING, logger="hvcu_tasks"):
        assert hook_table.AGGREGATIONS["n_failed_requests"]([payload]) == 1
    assert "implication/symbolism_001 L2" in caplog.text


def test_no_results_at_all_counts_as_a_failed_request() -> None:
    payload = hooks.process_results(_base_docs()[0], [])["n_failed_requests"]
    assert hook_table.AGGREGATIONS["n_failed_requests"]([payload]) == 1


def test_a_real_reply_is_not_a_failed_request() -> None:
    payload = hooks.process_results(_base_docs()[0], ["C"])["n_failed_requests"]
    assert hook_table.AGGREGATIONS["n_failed_requests"]([payload]) == 0


class NoneInRound(lmms):
    """A chat model that answers 'B', except None in one round (what a backend gives for a lost reply)."""

    is_simple = False

    def __init__(self, none_round: int):
        super().__init__()
        self.none_round, self.round, self.histories = none_round, -1, []

    def generate_until(self, requests):
        self.round += 1
        self.histories.append([r.args[1]() for r in requests])
        return [None if self.round == self.none_round else "B" for _ in requests]

    def loglikelihood(self, requests):
        raise NotImplementedError

    def generate_until_multi_round(self, requests):
        raise NotImplementedError


@pytest.mark.parametrize("none_round", [0, 1, 2])
def test_context_wrapper_keeps_a_none_reply_as_failed_in_any_round(none_round: int, caplog) -> None:
    docs = context.process_docs(stub("implication", "smoke"))
    model = NoneInRound(none_round)
    wrapper = ContextWrapper.around(model)
    wrapper.task_dict["t"] = {"train": docs}

    def doc_to_messages(doc, round_idx=None, previous_output=None, previous_round_info=None):
        if round_idx is None:
            return context.doc_to_messages(doc)
        return context.doc_to_messages(doc, round_idx=round_idx, previous_output=previous_output)

    request = Instance(
        request_type="generate_until_multi_round",
        arguments=("ctx", doc_to_messages, {}, 0, "t", "train"),
        idx=0,
        metadata={"task": "t", "doc_id": 0, "repeats": 1},
    )
    (replies,) = wrapper.generate_until_multi_round([request])
    assert len(replies) == 3 and replies[none_round] is None
    if none_round < 2:  # the next round shows the lost reply as "(no answer)", never "None"
        history = model.histories[none_round + 1][0]
        assert history[2 + 2 * none_round]["content"][0]["text"] == NO_ANSWER
    payload = context.process_results(docs[0], [replies])["n_failed_requests"]
    assert [o["failed"] for o in payload["outcomes"]] == [i == none_round for i in range(3)]
    with caplog.at_level(logging.WARNING, logger="hvcu_tasks"):
        assert hook_table.AGGREGATIONS["n_failed_requests"]([payload]) == 1
    assert f"implication/metaphor_001 L{none_round + 1}" in caplog.text


def test_context_chain_with_a_missing_last_round_counts_it_failed() -> None:
    docs = context.process_docs(stub("implication", "smoke"))
    payload = context.process_results(docs[0], [["B", "A"]])["n_failed_requests"]
    assert hook_table.AGGREGATIONS["n_failed_requests"]([payload]) == 1
    assert hook_table.AGGREGATIONS["n_incomplete"]([payload]) == 0


# ---------------------------------------------------------------- empty denominators are "not available"


def _outcomes(levels: str) -> list[Outcome]:
    """One implication sample answered right at the given levels only ('12' = levels 1 and 2 asked)."""
    return [Outcome("metaphor_001", "implication", "metaphor", int(n), "A", "A") for n in levels]


def test_unasked_levels_give_nan_accuracy_and_invalid_rate() -> None:
    scores = score_family(_outcomes("1"))
    assert scores.acc["perc"] == 100.0
    assert math.isnan(scores.acc["bridge"]) and math.isnan(scores.acc["conn"])
    assert math.isnan(scores.invalid["bridge"])


def test_no_complete_chain_gives_nan_full_chain_accuracy_never_zero() -> None:
    scores = score_family(_outcomes("12"))
    assert math.isnan(scores.acc_full)
    assert scores.n_samples == 0 and scores.n_incomplete == 1


def test_no_failed_chain_gives_nan_error_shares() -> None:
    scores = score_family(_outcomes("123"))
    assert all(math.isnan(v) for v in scores.error_share.values())
    assert scores.error_counts == {"perc": 0, "bridge": 0, "conn": 0}


def test_overall_score_is_nan_when_any_family_is_nan() -> None:
    assert math.isnan(overall_score([50.0, float("nan"), 40.0]))
    assert math.isnan(aggregate.overall_score_group([50.0, float("nan"), 40.0], [3, 0, 3], False))


def logged_diagnostics(items: list[dict], family: str) -> dict[str, float | int]:
    """Every metric of a family task's acc_full payloads, the diagnostics included, as `hvcu report` scores them."""
    return family_metrics([Outcome.from_dict(r) for r in payloads.flatten(items)], ASPECTS[family])


def test_limit_without_a_complete_chain_gives_nan_aggregations() -> None:
    docs = _base_docs()
    items = [hooks.process_results(d, [d["answer"]])["acc_full"] for d in list(docs)[:2]]
    assert math.isnan(hook_table.AGGREGATIONS["acc_full"](items))
    assert math.isnan(hook_table.AGGREGATIONS["acc_l3_conn"](items))
    assert hook_table.AGGREGATIONS["n_chains"](items) == 0
    diagnostics = logged_diagnostics(items, "implication")  # what `hvcu report` computes from the sample log
    assert math.isnan(diagnostics["full_metaphor"]) and math.isnan(diagnostics["error_share_perc"])


def test_an_aspect_with_no_chain_is_nan() -> None:
    assert math.isnan(metrics.NA)
    docs = hooks.process_docs(stub("aesthetic", "smoke"))
    items = [hooks.process_results(d, [d["answer"]])["acc_full"] for d in docs if d["sample_id"] != "font_001"]
    diagnostics = logged_diagnostics(items, "aesthetic")
    assert diagnostics["full_color"] == 100.0
    assert math.isnan(diagnostics["full_font"])
