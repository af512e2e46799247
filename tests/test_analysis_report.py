"""The analysis tables of `hvcu report` (hvcu_tasks/report/analysis.py) on hand-written lmms-eval results files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hvcu_tasks.core.families import ASPECTS
from hvcu_tasks.report.analysis import analysis_tables
from hvcu_tasks.report.render import to_markdown
from hvcu_tasks.results.runs import ReportError, read_folders

SHORTS = ("impl", "aesth", "affect")


def family_values(perc: float, bridge: float, conn: float, full: float, **extra: float) -> dict[str, float]:
    values = {"acc_l1_perc": perc, "acc_l2_bridge": bridge, "acc_l3_conn": conn, "acc_full": full, "n_incomplete": 0}
    return {f"{k},none": v for k, v in {**values, **extra}.items()}


def write_run(
    folder: Path,
    model: str,
    tasks: dict[str, dict],
    stamp: str = "20260101_000000",
    limit=None,
    identities: dict[str, dict] | None = None,
) -> Path:
    """Write an lmms-eval results file; `identities`: task -> the data identity its config records."""
    folder.mkdir(parents=True, exist_ok=True)
    document = {
        "results": {task: {"alias": task, **values} for task, values in tasks.items()},
        "configs": {
            task: {"task": task, "metadata": {"hvcu_data_identity": identity}}
            for task, identity in (identities or {}).items()
        },
        "config": {"model": "openai", "model_args": f"model_version={model}", "limit": limit},
    }
    path = folder / f"{stamp}_results.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def hub_identity(family: str, fingerprint: str) -> dict:
    """A hub load with the dataset card's counts (so taken for HVCU-Bench) and the given fingerprint."""
    counts = dict(ASPECTS[family])
    return {
        "scheme": "hvcu-data/1",
        "family": family,
        "kind": "hub",
        "location": "Chime316/HVCU-Bench",
        "samples": sum(counts.values()),
        "aspects": counts,
        "fingerprint": fingerprint,
    }


def scored(prefix: str, fulls: tuple[float, float, float], perc: float = 80) -> dict[str, dict]:
    """The three family tasks `<prefix>_<short>` with these acc_full values."""
    return {f"{prefix}_{s}": family_values(perc, 70, 60, full) for s, full in zip(SHORTS, fulls, strict=True)}


def by_name(tables) -> dict:
    return {t.name: t for t in tables}


def test_no_analysis_run_gives_no_table(tmp_path: Path) -> None:
    write_run(tmp_path / "m1", "m1", {f"hvcu_bench_{s}": family_values(50, 50, 50, 30) for s in SHORTS})
    assert analysis_tables(read_folders([tmp_path]).analysis) == []


def test_multi_modal_gain_is_score_with_image_minus_score_blind(tmp_path: Path) -> None:
    # base acc_full 30, 40, 50 -> Score 40; blind 10, 20, 36 -> Score 22; gain 18
    base = {f"hvcu_bench_{s}": family_values(80, 70, 60, full) for s, full in zip(SHORTS, (30, 40, 50), strict=True)}
    blind = {
        f"hvcu_bench_blind_{s}": family_values(26, 30, 40, full) for s, full in zip(SHORTS, (10, 20, 36), strict=True)
    }
    write_run(tmp_path / "a", "m1", base, "20260101_000000")
    write_run(tmp_path / "b", "m1", blind, "20260101_000001")
    table = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"]
    row = next(r for r in table.rows if r[0] == "m1")
    assert row[1:5] == [26, 30, 40, 10]  # Impl. perc, bridge, conn, full (blind)
    assert row[-3:] == [22.0, 40.0, 18.0]


def test_blind_without_the_image_run_has_no_gain(tmp_path: Path) -> None:
    write_run(tmp_path, "m1", {f"hvcu_bench_blind_{s}": family_values(25, 25, 25, 2) for s in SHORTS})
    row = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"].rows[-1]
    assert row[0] == "m1" and row[-3] == 2.0 and row[-2] is None and row[-1] is None


def test_the_blind_table_has_the_chance_row(tmp_path: Path) -> None:
    write_run(tmp_path, "m1", {f"hvcu_bench_blind_{s}": family_values(25, 25, 25, 2) for s in SHORTS})
    chance = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"].rows[0]
    assert chance[0].startswith("chance")
    assert chance[1:5] == [25.0, 25.0, 25.0, 1.5625] and chance[-3:] == [1.5625, 1.5625, None]


def test_circular_table_shows_score_bias_and_its_chance(tmp_path: Path) -> None:
    tasks = {
        f"hvcu_bench_circular_{s}": family_values(60, 50, 40, full, position_bias=bias)
        for s, full, bias in zip(SHORTS, (20, 25, 50), (10, 12.5, 8), strict=True)
    }
    write_run(tmp_path, "m1", tasks)
    table = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_circular"]
    _chance, row = table.rows
    assert row[0] == "m1" and row[-2] == round((20 + 25 + 50) / 3, 2) and row[-1] == pytest.approx(30.5 / 3)


def test_circular_chance_values_stay_readable_at_two_decimals(tmp_path: Path) -> None:
    # 100/256 = 0.390625 -> "0.39"; 100/256^3 = 5.96e-06 would round to 0.00, so it is written as "6.0e-06"
    write_run(tmp_path, "m1", {f"hvcu_bench_circular_{s}": family_values(60, 50, 40, 20) for s in SHORTS})
    table = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_circular"]
    chance = table.rows[0]
    assert chance[1:5] == ["0.39", "0.39", "0.39", "6.0e-06"] and chance[-2:] == ["6.0e-06", None]
    assert "| 0.39 | 0.39 | 0.39 | 6.0e-06 |" in to_markdown(table)


def test_position_bias_is_listed_for_every_run_setting_and_family(tmp_path: Path) -> None:
    shares = {"pred_share_A": 70, "pred_share_B": 10, "pred_share_C": 10, "pred_share_D": 10}
    golds = {"gold_share_A": 25, "gold_share_B": 25, "gold_share_C": 25, "gold_share_D": 25, "position_bias": 45}
    tasks = {f"hvcu_bench_{s}": family_values(50, 50, 50, 30, **shares, **golds) for s in SHORTS}
    tasks |= {f"hvcu_bench_circular_{s}": family_values(50, 50, 50, 30) for s in SHORTS}
    write_run(tmp_path, "m1", tasks)
    table = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_position"]
    assert [r[1:3] for r in table.rows[1:]] == [["base", f] for f in ("Impl.", "Aesth.", "Affect.")] + [
        ["circular", f] for f in ("Impl.", "Aesth.", "Affect.")
    ]
    assert table.rows[1][3:] == [70, 10, 10, 10, 25, 25, 25, 25, 45]
    assert table.rows[-1][3:] == [None] * 9  # a run without these metrics: "–", never 0
    assert table.rows[0][3:7] == [25.0] * 4


def test_error_propagation_rows_keep_nan_as_not_available(tmp_path: Path) -> None:
    prop = {
        "wrong_bridge_after_wrong": float("nan"),
        "wrong_bridge_after_right": 20,
        "wrong_conn_after_wrong": 100,
        "wrong_conn_after_right": 0,
    }
    write_run(
        tmp_path / "a", "m1", {f"hvcu_bench_context_gold_{s}": family_values(50, 50, 50, 30, **prop) for s in SHORTS}
    )
    table = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_propagation"]
    assert table.columns[3:] == [
        "L2 wrong after L1 wrong",
        "L2 wrong after L1 right",
        "L3 wrong after L2 wrong",
        "L3 wrong after L2 right",
    ]
    assert table.rows[0][3:] == [75.0] * 4
    gold = table.rows[1]
    assert gold[:3] == ["m1", "gold context", "Impl."]
    assert math.isnan(gold[3]) and gold[4:] == [20, 100, 0]


def test_a_partial_run_is_marked(tmp_path: Path) -> None:
    write_run(tmp_path, "m1", {"hvcu_bench_blind_impl": family_values(25, 25, 25, 2)}, limit=4)
    row = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"].rows[-1]
    assert row[0] == "m1*" and row[-3] is None


def test_a_smoke_sample_run_is_marked(tmp_path: Path) -> None:
    write_run(tmp_path, "m1", {f"hvcu_bench_blind_sample_{s}": family_values(25, 25, 25, 2) for s in SHORTS})
    assert by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"].rows[-1][0] == "m1†"


def test_a_percentage_out_of_range_names_the_file_task_and_metric(tmp_path: Path) -> None:
    path = write_run(tmp_path, "m1", {"hvcu_bench_circular_impl": family_values(120, 50, 50, 30)})
    with pytest.raises(ReportError, match=f"{path}: hvcu_bench_circular_impl: acc_l1_perc: 120 is outside 0-100"):
        analysis_tables(read_folders([tmp_path]).analysis)


def test_the_same_task_twice_for_one_model_is_refused(tmp_path: Path) -> None:
    write_run(tmp_path / "a", "m1", {"hvcu_bench_blind_impl": family_values(25, 25, 25, 2)})
    write_run(tmp_path / "b", "m1", {"hvcu_bench_blind_impl": family_values(25, 25, 25, 2)})
    with pytest.raises(ReportError, match="m1 has blind implication results twice"):
        analysis_tables(read_folders([tmp_path]).analysis)


def test_hvcu_report_on_an_analysis_only_run_prints_the_analysis_tables(tmp_path: Path, capsys) -> None:
    from conftest import run

    write_run(tmp_path, "m1", {f"hvcu_bench_blind_{s}": family_values(25, 25, 25, 2) for s in SHORTS})
    code, out, err = run("report", str(tmp_path), "--format", "json", "--no-reference", capsys=capsys)
    assert code == 0, err
    names = [t["name"] for t in json.loads(out)]
    assert "analysis_blind" in names


def test_hvcu_report_puts_the_multi_modal_gain_beside_the_paper_tables(tmp_path: Path, capsys) -> None:
    from conftest import run

    # base acc_full 30, 40, 50 -> Score 40; blind 10, 20, 36 -> Score 22; gain 18
    base = {f"hvcu_bench_{s}": family_values(80, 70, 60, full) for s, full in zip(SHORTS, (30, 40, 50), strict=True)}
    blind = {
        f"hvcu_bench_blind_{s}": family_values(26, 30, 40, full) for s, full in zip(SHORTS, (10, 20, 36), strict=True)
    }
    write_run(tmp_path / "a", "m1", base, "20260101_000000")
    write_run(tmp_path / "b", "m1", blind, "20260101_000001")
    code, out, err = run("report", str(tmp_path), "--format", "json", "--no-reference", capsys=capsys)
    assert code == 0, err
    tables = {t["name"]: t for t in json.loads(out)}
    assert "table2_base" in tables
    row = next(r for r in tables["analysis_blind"]["rows"] if r[0] == "m1")
    assert row[-3:] == [22.0, 40.0, 18.0]


def test_base_on_the_hub_and_blind_on_the_smoke_sample_give_no_gain(tmp_path: Path) -> None:
    write_run(tmp_path / "a", "m1", scored("hvcu_bench", (30, 40, 50)), "20260101_000000")
    write_run(tmp_path / "b", "m1", scored("hvcu_bench_blind_sample", (10, 20, 36)), "20260101_000001")
    table = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"]
    row = table.rows[-1]
    assert row[0] == "m1†" and row[-3:] == [22.0, None, None]  # Score (image) of other data is not shown either
    assert any(
        n.startswith("m1†: no multi-modal gain: blind ran on the smoke sample, base on HVCU-Bench") for n in table.notes
    )


def test_smoke_and_partial_marks_follow_each_setting(tmp_path: Path) -> None:
    write_run(tmp_path / "a", "m1", scored("hvcu_bench", (30, 40, 50)), "20260101_000000", limit=4)
    write_run(tmp_path / "b", "m1", scored("hvcu_bench_blind_sample", (10, 20, 36)), "20260101_000001")
    rows = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_position"].rows[1:]
    assert [r[:2] for r in rows] == [["m1*", "base"]] * 3 + [["m1†", "blind"]] * 3


def test_a_partial_base_run_gives_no_gain(tmp_path: Path) -> None:
    write_run(tmp_path / "a", "m1", scored("hvcu_bench", (30, 40, 50)), "20260101_000000", limit=4)
    write_run(tmp_path / "b", "m1", scored("hvcu_bench_blind", (10, 20, 36)), "20260101_000001")
    table = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"]
    row = table.rows[-1]
    assert row[0] == "m1" and row[-1] is None
    assert "m1: no multi-modal gain: base is partial (a family missing, --limit or incomplete chains)" in table.notes


def test_a_partial_blind_run_gives_no_gain(tmp_path: Path) -> None:
    write_run(tmp_path / "a", "m1", scored("hvcu_bench", (30, 40, 50)), "20260101_000000")
    blind = scored("hvcu_bench_blind", (10, 20, 36))
    blind["hvcu_bench_blind_aesth"]["n_incomplete,none"] = 2
    write_run(tmp_path / "b", "m1", blind, "20260101_000001")
    table = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"]
    assert table.rows[-1][0] == "m1*" and table.rows[-1][-1] is None
    assert "m1*: no multi-modal gain: blind is partial (a family missing, --limit or incomplete chains)" in table.notes


def test_base_and_blind_on_different_data_give_no_gain(tmp_path: Path) -> None:
    base_ids = {f"hvcu_bench_{s}": hub_identity(f, "sha256:old") for s, f in zip(SHORTS, ASPECTS, strict=True)}
    blind_ids = {f"hvcu_bench_blind_{s}": hub_identity(f, "sha256:old") for s, f in zip(SHORTS, ASPECTS, strict=True)}
    blind_ids["hvcu_bench_blind_aesth"] = hub_identity("aesthetic", "sha256:new")  # e.g. a later hub revision
    write_run(tmp_path / "a", "m1", scored("hvcu_bench", (30, 40, 50)), "20260101_000000", identities=base_ids)
    write_run(tmp_path / "b", "m1", scored("hvcu_bench_blind", (10, 20, 36)), "20260101_000001", identities=blind_ids)
    table = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"]
    assert table.rows[-1][-1] is None
    assert "m1: no multi-modal gain: base and blind read different aesthetic data (fingerprints differ)" in table.notes


def test_base_and_blind_on_the_same_recorded_data_give_the_gain(tmp_path: Path) -> None:
    # base Score (30 + 40 + 50) / 3 = 40, blind (10 + 20 + 36) / 3 = 22: gain 18
    base_ids = {f"hvcu_bench_{s}": hub_identity(f, f"sha256:{f}") for s, f in zip(SHORTS, ASPECTS, strict=True)}
    blind_ids = {f"hvcu_bench_blind_{s}": hub_identity(f, f"sha256:{f}") for s, f in zip(SHORTS, ASPECTS, strict=True)}
    write_run(tmp_path / "a", "m1", scored("hvcu_bench", (30, 40, 50)), "20260101_000000", identities=base_ids)
    write_run(tmp_path / "b", "m1", scored("hvcu_bench_blind", (10, 20, 36)), "20260101_000001", identities=blind_ids)
    table = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"]
    assert table.rows[-1][0] == "m1" and table.rows[-1][-3:] == [22.0, 40.0, 18.0]
    assert not any("no multi-modal gain" in n for n in table.notes)


def test_a_setting_mixing_the_smoke_sample_and_the_benchmark_is_split_into_partial_rows(tmp_path: Path) -> None:
    tasks = scored("hvcu_bench_blind", (10, 20, 36))
    tasks["hvcu_bench_blind_sample_aesth"] = tasks.pop("hvcu_bench_blind_aesth")
    write_run(tmp_path, "m1", tasks)
    rows = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"].rows[1:]
    assert [(r[0], r[-3]) for r in rows] == [("m1*", None), ("m1†*", None)]  # no Score from mixed data


def test_blind_on_custom_data_is_its_own_row_without_a_gain(tmp_path: Path) -> None:
    # a local copy with 3 samples per family is not the published benchmark (the card's counts differ)
    local = {
        f"hvcu_bench_blind_{s}": {
            **hub_identity(f, "sha256:x"),
            "kind": "local",
            "location": "/data/copy",
            "samples": 3,
        }
        for s, f in zip(SHORTS, ASPECTS, strict=True)
    }
    write_run(tmp_path / "a", "m1", scored("hvcu_bench", (30, 40, 50)), "20260101_000000")
    write_run(tmp_path / "b", "m1", scored("hvcu_bench_blind", (10, 20, 36)), "20260101_000001", identities=local)
    table = by_name(analysis_tables(read_folders([tmp_path]).analysis))["analysis_blind"]
    assert table.rows[-1][0] == "m1 (custom data)" and table.rows[-1][-3:] == [22.0, None, None]
    assert "m1 (custom data): no multi-modal gain: blind ran on custom data, base on HVCU-Bench" in table.notes


def test_a_damaged_data_identity_names_the_file_and_task(tmp_path: Path) -> None:
    path = write_run(
        tmp_path,
        "m1",
        {"hvcu_bench_blind_impl": family_values(25, 25, 25, 2)},
        identities={"hvcu_bench_blind_impl": {"kind": "hub"}},
    )
    with pytest.raises(ReportError, match=f"{path}: hvcu_bench_blind_impl: configs metadata hvcu_data_identity"):
        analysis_tables(read_folders([tmp_path]).analysis)
