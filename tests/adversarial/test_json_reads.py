"""Every JSON the toolkit reads is read one way: nesting too deep, integers too long, bytes that are not UTF-8
and syntax errors become one line naming the file (and line), or, for a model reply, an unusable reply."""

from __future__ import annotations

import ast
import json
import shutil
import sys
from pathlib import Path

import pytest

from hvcu_tasks.cli import main
from hvcu_tasks.data.jsonio import JsonReadError, loads, loads_reply, read_json
from hvcu_tasks.dev.smoke import SMOKE_DIR

ROOT = Path(__file__).resolve().parents[2]
DEEP_10K = "[" * 10_000 + "]" * 10_000
DEEP_100K = "[" * 100_000 + "]" * 100_000
LONG_INT = "7" * 5_001


def run(*argv: str | Path, capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- the reader itself ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (DEEP_100K, "nested deeper than"),
        ('{"a": ' + LONG_INT + "}", "4300-digit"),
        ('{"a": 1,}', "not valid JSON"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file(tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(JsonReadError) as err:
        read_json(path)
    assert str(err.value).startswith(f"{path}") and reason in str(err.value)
    assert "\n" not in str(err.value)


def test_bytes_that_are_not_utf8_name_the_file_and_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(JsonReadError, match=r"x\.json: not UTF-8 text \(byte 0xff at offset 7\)"):
        read_json(path)


def test_a_bad_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    assert loads('{"a": 1}', source=path, line=1) == {"a": 1}
    with pytest.raises(JsonReadError) as err:
        loads(DEEP_10K, source=path, line=3)
    assert str(err.value).startswith(f"{path}:3: nested deeper than")
    with pytest.raises(JsonReadError) as err:
        loads('{"a": 1,\n}', source=path, line=4)
    assert str(err.value).startswith(f"{path}:4: not valid JSON")  # the file's line, not the text's


def test_a_key_given_twice_is_refused_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"a": 1, "a": 2}')
    assert read_json(path) == {"a": 2}
    with pytest.raises(JsonReadError, match="key 'a' appears twice"):
        read_json(path, unique_keys=True)


def test_a_reply_too_deep_is_an_unusable_reply_not_an_exception() -> None:
    value, reason = loads_reply(DEEP_100K)
    assert value is None and reason is not None and reason.startswith("unusable reply: nested deeper than")
    assert loads_reply('{"ok": true}') == ({"ok": True}, None)


def test_moderate_nesting_and_brackets_inside_strings_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"s": "[" * 5000, "deep": [[[[[[[[[[1]]]]]]]]]]}))
    assert read_json(path)["s"] == "[" * 5000


# --- the commands that read JSON ------------------------------------------------------------------------------------


def test_data_validate_of_a_family_json_nested_10000_deep_is_one_line(tmp_path: Path, capsys) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(SMOKE_DIR, bench)
    family = bench / "Affective-Reasoning.json"
    family.write_text(DEEP_10K)
    code, out, err = run("data", "validate", bench, capsys=capsys)
    assert code != 0
    assert "Traceback" not in out + err and "RecursionError" not in out + err
    assert any(str(family) in line and "nested deeper than" in line for line in (out + err).splitlines())


def test_the_loader_reports_the_deep_family_file_as_a_problem_naming_it(tmp_path: Path) -> None:
    from hvcu_tasks.data.loaders import load_official_json

    family = tmp_path / "Affective-Reasoning.json"
    family.write_text(DEEP_10K)
    (problem,) = load_official_json(family).problems
    assert problem.source == str(family) and "nested deeper than" in problem.message


@pytest.mark.parametrize(
    ("board", "reason"),
    [
        ('{"schema": "hvcu-leaderboard", "notes": ' + DEEP_100K + "}", "nested deeper than"),
        ('{"entries": [{"score": ' + LONG_INT + "}]}", "4300-digit"),
    ],
)
def test_a_damaged_base_leaderboard_is_one_line_naming_it(tmp_path: Path, board: str, reason: str, capsys) -> None:
    from hvcu_tasks.report.board_file import read_leaderboard
    from hvcu_tasks.results.runs import ReportError

    path = tmp_path / "leaderboard.json"
    path.write_text(board)
    with pytest.raises(ReportError) as err:
        read_leaderboard(path)
    assert str(err.value).startswith(str(path)) and reason in str(err.value) and "\n" not in str(err.value)


def test_a_samples_log_line_nested_too_deep_names_file_and_line(tmp_path: Path) -> None:
    from hvcu_tasks.results.chains import chains_of_file

    path = tmp_path / "x_samples_hvcu_bench_base.jsonl"
    path.write_text(DEEP_100K + "\n")
    with pytest.raises(ValueError) as err:
        chains_of_file("hvcu_bench_base", path)
    assert str(err.value).startswith(f"{path}:1: ") and "nested deeper than" in str(err.value)


def test_a_synthesis_reply_nested_too_deep_fails_its_image_as_an_unusable_reply(tmp_path: Path, capsys) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from fake_openai import FakeOpenAI
    from test_synthesis import copy_images, stats, synth

    images = copy_images(tmp_path / "imgs", 1)
    with FakeOpenAI(lambda _r: "x", fault=lambda _n, _r: (200, {}, DEEP_100K.encode())) as server:
        code = synth("mcts", server.base_url, images, tmp_path / "out", "--retries", "0")
    err = capsys.readouterr().err
    assert code != 0 and "RecursionError" not in err
    reasons = list(stats(tmp_path / "out")["failed"].values())
    assert reasons and all("unusable reply: nested deeper than" in r and "RecursionError" not in r for r in reasons)


# --- no second way in -----------------------------------------------------------------------------------------------

ALLOWED: dict[str, str] = {
    "hvcu_tasks/core/records.py": "loads_unique: the hook modules and the exported folder's reader cannot import data/",
}
"""path -> why a bare json.loads / json.load may stay there (one: the pure core's reader for the shared hooks)."""


def test_no_json_is_parsed_outside_the_one_reader() -> None:
    found = []
    for folder in ("hvcu_tasks", "generation", "training"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "hvcu_tasks/data/jsonio.py" or rel in ALLOWED:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr in {"loads", "load", "JSONDecoder", "raw_decode"}:
                    if isinstance(node.value, ast.Name) and node.value.id == "json":
                        found.append(f"{rel}:{node.lineno}: json.{node.attr}")
                if isinstance(node, ast.ImportFrom) and node.module == "json":
                    found.append(f"{rel}:{node.lineno}: from json import ...")
    assert found == [], "parse JSON with hvcu_tasks.data.jsonio: " + "; ".join(found)


# --- hvcu mock serve: a malformed request is a 4xx, and the server keeps serving --------------------------------------


def raw_request(port: int, head: str, body: bytes = b"") -> tuple[int, dict]:
    """Send one hand-made HTTP request; return (status, JSON body of the answer)."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head.encode() + b"\r\n" + body)
        conn.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    header, _, payload = data.partition(b"\r\n\r\n")
    return int(header.split()[1]), json.loads(payload)


@pytest.mark.parametrize(
    ("length", "status", "named"),
    [("abc", 400, "'abc'"), ("-5", 400, "'-5'"), ("99999999999999999999999", 413, "over")],
)
def test_mock_refuses_a_bad_content_length_with_a_4xx_and_keeps_serving(length: str, status: int, named: str) -> None:
    import io
    import threading

    from generation.mock.answers import GoldIndex, MockSettings
    from generation.mock.server import make_server

    log = io.StringIO()
    server = make_server("127.0.0.1", 0, MockSettings(0, 0.6), GoldIndex(), log)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n"
        got, body = raw_request(port, head)
        assert got == status and named in body["error"]["message"]
        deep = ('{"messages": ' + DEEP_100K + "}").encode()
        head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(deep)}\r\n"
        got, body = raw_request(port, head, deep)
        assert got == 400 and "nested deeper than" in body["error"]["message"]
        got, body = raw_request(port, "GET /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n")
        assert got == 200 and body["object"] == "list"
    finally:
        server.shutdown()
        server.server_close()
    assert "Traceback" not in log.getvalue()
