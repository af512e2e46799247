"""`hvcu train prepare`: chains.jsonl -> LLaMA-Factory ShareGPT datasets in the compositions of Table 4."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from PIL import Image

from hvcu_tasks.cli import main
from training.prepare import ChainError, check_sample, prepare, read_chains, select_third

LEVEL_TEXT = [
    ("What object is in the centre?", "A red umbrella"),
    ("Why is it open indoors?", "It shields from a fake rain"),
    ("What does the ad imply?", "The product protects you"),
]


def chain(image: str, tag: str, method: str = "mcts") -> dict:
    """Return one chain line as `hvcu mcts` writes it (open-ended questions and answers)."""
    scored = method == "mcts"
    levels = [
        {
            "level": i + 1,
            "question": f"{q} ({tag})",
            "answer": f"{a} ({tag}).",
            "score": 0.9 - i / 10 if scored else None,
        }
        for i, (q, a) in enumerate(LEVEL_TEXT)
    ]
    return {"image": image, "method": method, "path_score": 0.8 if scored else None, "levels": levels}


def write_chains(root: Path, n_images: int = 4, per_image: int = 3, method: str = "mcts") -> Path:
    """Write images (relative paths, as mcts ran from `root`) and a chains.jsonl with per_image chains each."""
    (root / "imgs").mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n_images):
        Image.new("RGB", (64, 48), (40 * i, 90, 160)).save(root / "imgs" / f"ad_{i}.png")
        lines += [chain(f"imgs/ad_{i}.png", f"{i}.{k}", method) for k in range(per_image)]
    path = root / f"{method}_chains.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def run_cli(*argv: str) -> int:
    """Run `hvcu train ...` in-process and return its exit status."""
    return main(["train", *argv])


def load(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))


def test_full_data_is_every_chain_as_three_turns_perception_first(tmp_path: Path) -> None:
    chains = write_chains(tmp_path, n_images=4, per_image=3)
    [ds], _ = prepare([chains], tmp_path / "data", ["full-data"], image_root=tmp_path)
    samples = load(ds.file)
    assert (ds.counts.samples, ds.counts.qa_pairs, ds.counts.images) == (12, 36, 4)
    first = samples[0]
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"] * 3
    assert first["messages"][0]["content"] == "<image>What object is in the centre? (0.0)"
    assert first["messages"][2]["content"] == "Why is it open indoors? (0.0)"
    assert first["messages"][5]["content"] == "The product protects you (0.0)."
    assert first["images"] == [str((tmp_path / "imgs" / "ad_0.png").resolve())]
    assert sum(m["content"].count("<image>") for s in samples for m in s["messages"]) == 12


def test_full_hierarchy_is_a_seeded_third_with_all_levels(tmp_path: Path) -> None:
    chains = write_chains(tmp_path, n_images=10, per_image=3)
    full = load(prepare([chains], tmp_path / "full", ["full-data"], image_root=tmp_path)[0][0].file)
    [ds], _ = prepare([chains], tmp_path / "a", ["full-hierarchy"], seed=7, image_root=tmp_path)
    picked = load(ds.file)
    assert ds.counts.samples == 10 and ds.counts.qa_pairs == 30
    assert all(s in full for s in picked) and all(len(s["messages"]) == 6 for s in picked)
    assert [full.index(s) for s in picked] == sorted(full.index(s) for s in picked)  # input order kept
    again = prepare([chains], tmp_path / "b", ["full-hierarchy"], seed=7, image_root=tmp_path)[0][0].file
    other = prepare([chains], tmp_path / "c", ["full-hierarchy"], seed=8, image_root=tmp_path)[0][0].file
    assert again.read_bytes() == ds.file.read_bytes()
    assert load(other) != picked


@pytest.mark.parametrize("n", [1, 2, 3, 4, 29, 30, 31])
def test_full_hierarchy_size_is_ceil_of_a_third(n: int) -> None:
    assert len(select_third(n, seed=0)) == math.ceil(n / 3)


def test_l3_only_is_every_chains_connotation_pair_alone_with_the_image(tmp_path: Path) -> None:
    chains = write_chains(tmp_path, n_images=2, per_image=3)
    [ds], _ = prepare([chains], tmp_path / "data", ["l3-only"], image_root=tmp_path)
    samples = load(ds.file)
    assert (ds.counts.samples, ds.counts.qa_pairs, ds.counts.images) == (6, 6, 2)
    assert samples[0]["messages"] == [
        {"role": "user", "content": "<image>What does the ad imply? (0.0)"},
        {"role": "assistant", "content": "The product protects you (0.0)."},
    ]
    assert len(samples[0]["images"]) == 1


def test_direct_baseline_chains_prepare_under_their_own_name(tmp_path: Path) -> None:
    direct = write_chains(tmp_path, n_images=3, per_image=1, method="direct")
    written, chains = prepare([direct], tmp_path / "data", ["full-data", "l3-only"], image_root=tmp_path)
    assert [p.name for p in written] == ["hvcu_direct_full_data", "hvcu_direct_l3_only"]
    assert chains.by_method == {"direct": 3}
    assert [p.counts.qa_pairs for p in written] == [9, 3]


def test_dataset_info_has_role_content_tags_and_keeps_other_entries(tmp_path: Path) -> None:
    out = tmp_path / "data"
    out.mkdir()
    (out / "dataset_info.json").write_text(json.dumps({"mine": {"file_name": "mine.json"}}))
    prepare([write_chains(tmp_path)], out, ["full-data"], image_root=tmp_path)
    prepare([write_chains(tmp_path, method="direct")], out, ["l3-only"], image_root=tmp_path)
    info = json.loads((out / "dataset_info.json").read_text())
    assert sorted(info) == ["hvcu_direct_l3_only", "hvcu_mcts_full_data", "mine"]
    assert info["hvcu_mcts_full_data"] == {
        "file_name": "hvcu_mcts_full_data.json",
        "formatting": "sharegpt",
        "columns": {"messages": "messages", "images": "images"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"},
    }


def test_output_is_byte_stable(tmp_path: Path) -> None:
    chains = write_chains(tmp_path)
    files = []
    for name in ("a", "b"):
        written, _ = prepare([chains], tmp_path / name, list(("full-data", "full-hierarchy", "l3-only")), 3, tmp_path)
        files.append([p.file.read_bytes() for p in written] + [(tmp_path / name / "dataset_info.json").read_bytes()])
    assert files[0] == files[1]


def test_exact_duplicate_chains_are_dropped_and_counted(tmp_path: Path) -> None:
    chains = write_chains(tmp_path, n_images=2, per_image=2)
    [ds], read = prepare([chains, chains], tmp_path / "data", ["full-data"], image_root=tmp_path)
    assert read.duplicates == 4 and ds.counts.samples == 4


def test_relative_images_resolve_against_image_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chains = write_chains(tmp_path / "mcts_cwd")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ChainError, match=r"mcts_chains.jsonl:1: image: no file .*--image-root"):
        read_chains([chains])
    assert len(read_chains([chains], image_root=tmp_path / "mcts_cwd").chains) == 12


def _bad_file(tmp_path: Path, *lines: object) -> Path:
    write_chains(tmp_path, n_images=1, per_image=1)
    path = tmp_path / "bad.jsonl"
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda c: c.update(image="imgs/missing.png"), "image: no file"),
        (lambda c: c.update(method="beam"), "method: must be one of"),
        (lambda c: c["levels"].reverse(), "levels[0].level: must be 1"),
        (lambda c: c["levels"].pop(), "levels: must be a list of three levels"),
        (lambda c: c["levels"][1].update(answer="  "), "levels[1].answer: must be a non-empty string"),
        (lambda c: c["levels"][2].update(question="See <image> again?"), "levels[2].question: contains '<image>'"),
        (lambda c: c["levels"][0].update(level=True), "levels[0].level: must be 1 (order L1, L2, L3), got True"),
        (
            lambda c: c["levels"][1].update(answer="Rain.<|im_end|>\n<|im_start|>user\nHi"),
            "levels[1].answer: contains the chat special token '<|im_end|>'",
        ),
        (
            lambda c: c["levels"][0].update(question="<|vision_start|>What is it?"),
            "levels[0].question: contains the chat special token '<|vision_start|>'",
        ),
        (lambda c: c.update(sample_id="x"), "line: unknown key(s) ['sample_id']"),
        (lambda c: c.pop("levels"), "line: missing key(s) ['levels']"),
        (
            lambda c: c.update(image="imgs/ad\x000.png"),
            "image: holds a NUL byte, which no file path can: 'imgs/ad\\x000.png'",
        ),
    ],
)
def test_a_bad_line_is_rejected_naming_file_line_and_field(tmp_path: Path, mutate, where: str) -> None:
    good, bad = chain("imgs/ad_0.png", "ok"), chain("imgs/ad_0.png", "bad")
    mutate(bad)
    path = _bad_file(tmp_path, good, bad)
    with pytest.raises(ChainError) as err:
        prepare([path], tmp_path / "data", ["full-data"], image_root=tmp_path)
    assert f"{path}:2: {where}" in str(err.value)
    assert not (tmp_path / "data").exists()


def test_every_bad_line_is_reported_at_once(tmp_path: Path) -> None:
    path = _bad_file(tmp_path, "{not json", chain("imgs/ad_0.png", "ok"), [1, 2], "")
    with pytest.raises(ChainError) as err:
        read_chains([path], image_root=tmp_path)
    assert err.value.problems == [
        f"{path}:1: line: not valid JSON: Expecting property name enclosed in double quotes (line 1 column 2)",
        f"{path}:3: line: must be a JSON object, got list",
    ]


def test_an_empty_chains_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "chains.jsonl"
    path.write_text("\n")
    with pytest.raises(ChainError, match="no chains"):
        read_chains([path])


def test_check_sample_finds_what_llamafactory_would_drop_or_reject(tmp_path: Path) -> None:
    image = tmp_path / "a.png"
    Image.new("RGB", (8, 8)).save(image)
    ok = {"messages": [{"role": "user", "content": "<image>Q"}, {"role": "assistant", "content": "A"}],
          "images": [str(image)]}  # fmt: skip
    assert check_sample(ok) == []
    swapped = {**ok, "messages": list(reversed(ok["messages"]))}
    assert "messages[0].role: expected 'user' (turns alternate, user first)" in check_sample(swapped)
    two = {**ok, "messages": [{"role": "user", "content": "<image><image>Q"}, ok["messages"][1]]}
    assert check_sample(two) == ["images: 1 image(s) but 2 <image> placeholder(s)"]
    gone = {**ok, "images": [str(tmp_path / "gone.png")]}
    assert check_sample(gone) == [f"images[0]: no file {tmp_path / 'gone.png'}"]
    empty = {**ok, "messages": [ok["messages"][0], {"role": "assistant", "content": ""}]}
    assert check_sample(empty) == ["messages[1].content: empty"]


def test_cli_prepare_reports_counts_per_composition(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    chains = write_chains(tmp_path, n_images=3, per_image=2)
    code = run_cli(
        "prepare", "--chains", str(chains), "--out", str(tmp_path / "data"),
        "--composition", "full-data", "full-hierarchy", "l3-only", "--image-root", str(tmp_path),
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "read 6 chain(s) from 1 file(s) (mcts 6); dropped 0 exact duplicate(s)" in out
    assert "hvcu_mcts_full_data (full-data): 6 samples, 18 QA pairs, 3 images" in out
    assert "hvcu_mcts_full_hierarchy (full-hierarchy): 2 samples, 6 QA pairs," in out
    assert "hvcu_mcts_l3_only (l3-only): 6 samples, 6 QA pairs, 3 images" in out


def test_cli_name_needs_a_single_composition(tmp_path: Path, capsys) -> None:
    chains = write_chains(tmp_path)
    assert run_cli("prepare", "--chains", str(chains), "--out", str(tmp_path / "d"), "--composition", "full-data",
                   "l3-only", "--name", "x", "--image-root", str(tmp_path)) == 2  # fmt: skip
    assert "single --composition" in capsys.readouterr().err


def test_a_corrupt_image_is_rejected_naming_the_line(tmp_path: Path) -> None:
    write_chains(tmp_path, n_images=1, per_image=1)
    (tmp_path / "imgs" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n but the rest is not a PNG")
    path = _bad_file(tmp_path, chain("imgs/ad_0.png", "ok"), chain("imgs/broken.png", "bad"))
    with pytest.raises(ChainError) as err:
        read_chains([path], image_root=tmp_path)
    [problem] = err.value.problems
    assert problem.startswith(f"{path}:2: image: {(tmp_path / 'imgs' / 'broken.png').resolve()}: not a readable image")


def test_each_distinct_image_is_verified_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import training.prepare as prep

    opened: list[Path] = []
    real = prep.image_problem
    monkeypatch.setattr(prep, "image_problem", lambda p: opened.append(p) or real(p))
    read_chains([write_chains(tmp_path, n_images=3, per_image=4)], image_root=tmp_path)
    assert sorted(p.name for p in opened) == ["ad_0.png", "ad_1.png", "ad_2.png"]


def test_a_chains_file_that_is_not_utf8_names_the_file_and_line(tmp_path: Path) -> None:
    write_chains(tmp_path, n_images=1, per_image=1)
    path = tmp_path / "latin1.jsonl"
    good = json.dumps(chain("imgs/ad_0.png", "ok"))
    bad = json.dumps(chain("imgs/ad_0.png", "caf\u00e9"), ensure_ascii=False).encode("latin-1")
    path.write_bytes(good.encode() + b"\n" + bad + b"\n")
    with pytest.raises(ChainError) as err:
        read_chains([path], image_root=tmp_path)
    at = bad.index("é".encode("latin-1"))
    assert err.value.problems == [
        f"{path}:2: line: not UTF-8 text (invalid continuation byte at byte {at} of the line)"
    ]


def test_mcts_and_direct_chains_are_not_mixed_silently(tmp_path: Path) -> None:
    mcts = write_chains(tmp_path, n_images=2, per_image=1)
    direct = write_chains(tmp_path, n_images=2, per_image=1, method="direct")
    with pytest.raises(ValueError, match=r"chains of different methods \(mcts 2, direct 2\); .* give --name"):
        prepare([mcts, direct], tmp_path / "data", ["full-data"], image_root=tmp_path)
    assert not (tmp_path / "data").exists()


def test_a_named_mixture_keeps_same_text_chains_of_both_methods(tmp_path: Path) -> None:
    mcts = write_chains(tmp_path, n_images=2, per_image=1)
    direct = write_chains(tmp_path, n_images=2, per_image=1, method="direct")  # same images, questions, answers
    [ds], read = prepare([mcts, direct], tmp_path / "data", ["l3-only"], image_root=tmp_path, name="both")
    assert read.duplicates == 0 and read.by_method == {"mcts": 2, "direct": 2}
    assert (ds.name, ds.counts.samples) == ("both", 4)


def test_cli_prepare_refuses_mixed_methods_without_a_name(tmp_path: Path, capsys) -> None:
    mcts = write_chains(tmp_path, n_images=1, per_image=1)
    direct = write_chains(tmp_path, n_images=1, per_image=1, method="direct")
    assert run_cli("prepare", "--chains", str(mcts), str(direct), "--out", str(tmp_path / "d"),
                   "--composition", "full-data", "--image-root", str(tmp_path)) == 2  # fmt: skip
    assert "chains of different methods (mcts 1, direct 1)" in capsys.readouterr().err


def test_a_broken_dataset_info_names_its_path(tmp_path: Path) -> None:
    out = tmp_path / "data"
    out.mkdir()
    (out / "dataset_info.json").write_text("{oops")
    with pytest.raises(ValueError, match=f"{out / 'dataset_info.json'}: not a JSON file"):
        prepare([write_chains(tmp_path)], out, ["full-data"], image_root=tmp_path)
