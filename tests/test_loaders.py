"""Loaders: the authors' JSON layout (with its loose types), parquet layouts, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import item, level
from PIL import Image

from hvcu_tasks.core.families import ASPECTS
from hvcu_tasks.core.schema import DataError
from hvcu_tasks.data.images import open_ref
from hvcu_tasks.data.loaders import load_official_json, load_parquet, load_path, load_source, rows_to_samples


def test_smoke_sample_has_one_sample_per_aspect_and_is_valid() -> None:
    samples = [s for fam in ASPECTS for s in load_source("smoke", fam).raise_for_problems()]
    assert len(samples) == 15
    assert sorted((s.family, s.aspect) for s in samples) == sorted((f, a) for f in ASPECTS for a in ASPECTS[f])
    assert all([lv.level for lv in s.levels] == [1, 2, 3] for s in samples)


def test_loose_types_of_the_release_are_normalised(write_dataset) -> None:
    raw = item(7, "abc")
    raw["qa_levels"][0]["level"] = "1"
    raw["qa_levels"][1]["correct_answer_key"] = " b "
    raw["qa_levels"][2]["options"][0]["option_key"] = "a"
    root = write_dataset({"implication": [raw]})
    (sample,) = load_path(root, ["implication"]).raise_for_problems()
    assert sample.id == "7"
    assert [lv.level for lv in sample.levels] == [1, 2, 3]
    assert [lv.answer for lv in sample.levels] == ["A", "B", "C"]
    assert sample.levels[2].options[0][0] == "A"


@pytest.mark.parametrize("ext", [".jpg", ".png", ".webp", ".jpeg"])
def test_images_are_found_with_every_release_extension(write_dataset, ext: str) -> None:
    root = write_dataset({"aesthetic": [item("color_001")]}, ext=ext)
    (sample,) = load_path(root, ["aesthetic"]).raise_for_problems()
    assert sample.image.path.suffix == ext
    assert open_ref(sample.image).size == (8, 8)


def test_extension_order_is_the_release_order(write_dataset) -> None:
    root = write_dataset({"aesthetic": [item("x1")]}, ext=".png")
    Image.new("RGB", (4, 4)).save(root / "Image" / "Aesthetic-Appreciation" / "x1.jpg")
    (sample,) = load_path(root, ["aesthetic"]).raise_for_problems()
    assert sample.image.path.suffix == ".jpg"


def test_aspect_comes_from_a_field_then_the_id_prefix_then_unknown(write_dataset) -> None:
    root = write_dataset({"implication": [item("a1", aspect="Symbolism"), item("contrast_9"), item("42")]})
    samples = load_path(root, ["implication"]).raise_for_problems()
    assert [s.aspect for s in samples] == ["symbolism", "contrast", "unknown"]


def test_a_missing_image_is_an_error_naming_file_id_and_field(write_dataset) -> None:
    root = write_dataset({"affective": [item("joy_001")]}, images=False)
    result = load_path(root, ["affective"])
    (problem,) = result.problems
    assert problem.source.endswith("Affective-Reasoning.json")
    assert (problem.record, problem.field) == ("joy_001", "image")
    with pytest.raises(DataError, match="joy_001: image"):
        result.raise_for_problems()


@pytest.mark.parametrize(
    ("mutate", "field", "message"),
    [
        (lambda r: r["qa_levels"].pop(), "qa_levels", "expected exactly levels [1, 2, 3]"),
        (lambda r: r["qa_levels"].reverse(), "qa_levels", "in order"),
        (lambda r: r["qa_levels"][1]["options"].pop(), "qa_levels[level=2].options", "A, B, C, D"),
        (lambda r: r["qa_levels"][0].update(correct_answer_key="E"), "qa_levels[level=1].correct_answer_key", "'E'"),
        (
            lambda r: r["qa_levels"][2]["options"][1].update(option_text="option A of level 3"),
            "qa_levels[level=3].options",
            "not distinct",
        ),
        (lambda r: r["qa_levels"][0].pop("question"), "qa_levels[level=1]", "missing field"),
        (lambda r: r["qa_levels"][0].update(level="one"), "qa_levels[0].level", "not a level number"),
    ],
)
def test_bad_records_are_reported_with_their_field(write_dataset, mutate, field: str, message: str) -> None:
    raw = item("metaphor_001")
    mutate(raw)
    root = write_dataset({"implication": [raw]})
    problems = load_path(root, ["implication"]).problems
    assert any(p.record == "metaphor_001" and p.field == field and message in p.message for p in problems), problems


def test_a_missing_family_file_is_reported(write_dataset) -> None:
    root = write_dataset({"implication": [item("metaphor_001")]})
    problems = load_path(root).problems
    assert {p.message.split(":")[0] for p in problems} == {
        "no data for family 'aesthetic'",
        "no data for family 'affective'",
    }


def test_unreadable_json_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "Implication-Understanding.json"
    bad.write_text("[{", encoding="utf-8")
    (problem,) = load_official_json(bad).problems
    assert problem.field == "file" and "cannot read JSON" in problem.message


def _png_bytes() -> bytes:
    import io

    buf = io.BytesIO()
    Image.new("RGB", (6, 6), "blue").save(buf, format="PNG")
    return buf.getvalue()


def test_parquet_with_nested_levels_and_image_struct(tmp_path: Path) -> None:
    rows = [
        {
            "id": "fear_001",
            "image": {"bytes": _png_bytes(), "path": None},
            "qa_levels": json.dumps(item("x")["qa_levels"]),
        }
    ]
    path = tmp_path / "Affective_Reasoning-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    (sample,) = load_parquet(path).raise_for_problems()
    assert (sample.family, sample.aspect) == ("affective", "fear")
    assert open_ref(sample.image).size == (6, 6)


def test_parquet_with_flat_level_columns() -> None:
    row = {"sample_id": 3, "img": _png_bytes(), "category": "Font"}
    for n in (1, 2, 3):
        lv = level(n, "D")
        row.update({f"l{n}_question": lv["question"], f"l{n}_options": ["w", "x", "y", "z"], f"l{n}_answer": "d"})
    (sample,) = rows_to_samples([row], "aesthetic", "mem").raise_for_problems()
    assert sample.aspect == "font"
    assert sample.levels[1].options == (("A", "w"), ("B", "x"), ("C", "y"), ("D", "z"))
    assert sample.levels[2].answer == "D"


def test_unknown_parquet_columns_fail_naming_expected_and_found() -> None:
    with pytest.raises(DataError) as err:
        rows_to_samples([{"uuid": 1, "picture_url": "x", "q": "?"}], "implication", "hub[Implication_Understanding]")
    text = str(err.value)
    assert "hub[Implication_Understanding]" in text
    assert "expected an id column" in text and "found columns ['picture_url', 'q', 'uuid']" in text


def test_folder_of_hub_parquet_files_loads_every_family(tmp_path: Path) -> None:
    for split in ("Implication_Understanding", "aesthetic-appreciation", "test_Affective_Reasoning"):
        rows = [{"id": f"{split}_1", "image": _png_bytes(), "qa_levels": item("x")["qa_levels"]}]
        (tmp_path / "assets").mkdir(exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), tmp_path / "assets" / f"{split}-00000-of-00001.parquet")
    result = load_path(tmp_path)
    assert not result.problems
    assert sorted(s.family for s in result.samples) == ["aesthetic", "affective", "implication"]


def test_hub_loader_maps_the_split_and_keeps_images_as_bytes(stand_in_hub) -> None:
    from standins.hub import card, parquet_bytes

    from hvcu_tasks.data import loaders

    row = {"id": "anger_001", "image": {"bytes": _png_bytes(), "path": None}, "qa_levels": item("x")["qa_levels"]}
    files = {"README.md": card(), "assets/Affective_Reasoning-00000-of-00001.parquet": parquet_bytes([row])}
    for split in ("Aesthetic_Appreciation", "Implication_Understanding"):
        files[f"assets/{split}-00000-of-00001.parquet"] = parquet_bytes([{**row, "id": "other_001"}])
    commit = stand_in_hub.repo("me/copy").commit(files, "v2")
    (sample,) = loaders.load_source("hub:me/copy@v2", "affective").raise_for_problems()
    assert f"/datasets/me/copy/resolve/{commit}/assets/Affective_Reasoning-00000-of-00001.parquet" in (
        stand_in_hub.paths("HEAD")
    )
    assert sorted(stand_in_hub.downloads()) == ["README.md", "assets/Affective_Reasoning-00000-of-00001.parquet"]
    assert sample.aspect == "anger" and sample.image.data == _png_bytes()
    assert sample.source == f"me/copy[Affective_Reasoning]@{commit}"
    assert stand_in_hub.foreign() == []


def test_hub_failure_is_a_clear_error_with_the_offline_hint(stand_in_hub) -> None:
    from hvcu_tasks.data import loaders

    stand_in_hub.stop()  # the hub, and the proxy every request of the client goes through, are down
    hub_at = f"cannot reach the Hugging Face Hub at {stand_in_hub.endpoint}"
    with pytest.raises(DataError, match=rf"HVCU-Bench@main.*{hub_at} \(Connect.*HVCU_BENCH_DATA.*HF_HUB_OFFLINE=1"):
        loaders.load_source("hub", "implication")
