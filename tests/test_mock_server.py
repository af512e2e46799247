"""`hvcu mock serve`: a deterministic OpenAI-compatible endpoint answering every prompt the toolkit sends."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import BIN, item, one_line_error, run

from generation.bench.stages import Draft, parse_draft, parse_verdict, stage_prompt, validate_prompt
from generation.mcts import Node
from generation.mock.answers import GoldIndex, MockSettings, load_gold, reply_to
from generation.mock.server import base_url, make_server
from generation.mock.styles import MC_STYLES, parse_styles
from generation.policy import candidate_fields, chain_text, feedback_text, judge_score, prompt
from generation.runner import direct_levels
from hvcu_tasks.core.official_parsing import parse_official
from hvcu_tasks.core.parsing import parse_choice
from hvcu_tasks.core.prompts import CONTEXT_PREFIX, SYSTEM_PROMPT, level_text

SMOKE_IMAGES = Path(__file__).resolve().parents[1] / "hvcu_tasks" / "dev" / "smoke" / "data" / "Image"
IMAGE_URL = "data:image/png;base64,iVBORw0KGgo="  # the mock reads only the text parts


@contextmanager
def mock(
    seed: int = 0, accuracy: float = 0.6, gold: GoldIndex | None = None, styles: str | None = None
) -> Iterator[tuple[str, io.StringIO]]:
    """Serve the mock in this process on a free port (`styles`: a --styles value); yield its URL and what it logged."""
    log = io.StringIO()
    settings = MockSettings(seed, accuracy, **({"styles": parse_styles(styles)} if styles else {}))
    server = make_server("127.0.0.1", 0, settings, gold or GoldIndex(), log)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield base_url(server), log
    finally:
        server.shutdown()
        server.server_close()


def post(url: str, body: dict) -> tuple[int, dict]:
    """POST a chat-completions body; return (status, parsed JSON)."""
    request = urllib.request.Request(
        f"{url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def reply(url: str, body: dict) -> str:
    """Return the reply text of a request the mock must answer."""
    status, payload = post(url, body)
    assert status == 200, payload
    return payload["choices"][0]["message"]["content"]


def user(text: str, seed: int | None = None) -> dict:
    """Return a one-turn request with an image, as the synthesis client sends it."""
    content = [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": IMAGE_URL}}]
    body = {"model": "mock", "messages": [{"role": "user", "content": content}], "temperature": 0.8}
    return body if seed is None else {**body, "seed": seed}


def question(n: int, options: str = "ABCD") -> str:
    """Return the level text of a synthetic multiple-choice question number n."""
    return level_text(f"Synthetic question {n}: what does the picture show?", [(k, f"choice {k}{n}") for k in options])


def gold_for(count: int) -> tuple[GoldIndex, dict[str, str]]:
    """Return a gold index over `count` synthetic questions (gold cycling A, B, C, D) and the same as a dict."""
    gold = {question(n): "ABCD"[n % 4] for n in range(count)}
    index = GoldIndex(sources=["test"])
    for text, key in gold.items():
        index.add(text, key, "test")
    return index, gold


def base_request(text: str) -> dict:
    """Return a base-setting request as lmms-eval's openai backend sends it: system prompt, then text + image."""
    return {
        "model": "mock",
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
            {
                "role": "user",
                "content": [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": IMAGE_URL}}],
            },
        ],
        "temperature": 0,
        "max_tokens": 64,
    }


def toolkit_requests() -> list[dict]:
    """Return one request per toolkit prompt: MCTS levels and judge, direct, build-bench stages and validators."""
    l1 = Node(id=1, parent=0, level=1, question="What is red?", answer="A red umbrella.")
    l3 = Draft(3, "What does it mean?", "Hope", ("Fear", "Anger", "Boredom"))
    l2 = Draft(2, "How is hope shown?", "By light", ("By shadow", "By text", "By size"))
    texts = [
        prompt("level_1").format(chain=chain_text([]), feedback=feedback_text([])),
        prompt("level_2").format(chain=chain_text([l1]), feedback=feedback_text(["too similar to a sibling"])),
        prompt("level_3").format(chain=chain_text([l1, l1]), feedback=""),
        prompt("judge").format(chain=chain_text([l1]), level=2, question="Why red?", answer="It signals danger."),
        prompt("direct"),  # sent as it is, without .format() (generation/runner.py)
        stage_prompt(3, "affective", "joy", [], "delight", []),
        stage_prompt(2, "implication", "metaphor", [l3], None, ["the four options are not distinct"]),
        stage_prompt(1, "aesthetic", "font", [l3, l2], None, []),
        validate_prompt(None, l3),
        validate_prompt(l3, l2),
    ]
    return [user(text, seed=7) for text in texts]


# --- what the mock answers -------------------------------------------------------------------------------------


def test_every_toolkit_prompt_gets_a_reply_its_own_parser_accepts() -> None:
    with mock() as (url, _log):
        replies = [reply(url, body) for body in toolkit_requests()]
    for text in replies[:3]:
        assert set(candidate_fields(text)) == {"question", "answer"}
    assert 0.0 <= judge_score(replies[3]) <= 1.0
    assert len(direct_levels(replies[4])) == 3
    for text, level in zip(replies[5:8], (3, 2, 1), strict=True):
        assert parse_draft(text, level).level == level
    assert parse_verdict(replies[8], top=True).reason
    assert parse_verdict(replies[9]).reason


def validator_verdicts(count: int) -> list[dict]:
    """Return the mock's verdicts on `count` lower-level validator requests (request seeds 0..count-1)."""
    l3 = Draft(3, "What does it mean?", "Hope", ("Fear", "Anger", "Boredom"))
    l2 = Draft(2, "How is hope shown?", "By light", ("By shadow", "By text", "By size"))
    body = user(validate_prompt(l3, l2))
    return [json.loads(reply_to({**body, "seed": n}, MockSettings(), GoldIndex()).text) for n in range(count)]


CHECKS = ("dependency", "progression", "single_answer")


def test_a_validator_verdict_passes_whole_with_probability_085() -> None:
    # n = 800, p = 0.85 (README): sd = sqrt(0.85 * 0.15 / 800) = 0.0126; +-4 sd = +-0.05 fails a correct mock with
    # probability 6e-5 and catches every check passing with 0.85 on its own (whole verdict 0.85^3 = 0.61).
    passed = sum(all(v[name] for name in CHECKS) for v in validator_verdicts(800))
    assert 0.85 - 0.05 <= passed / 800 <= 0.85 + 0.05


def test_a_failing_validator_verdict_fails_exactly_one_named_check() -> None:
    failing = [v for v in validator_verdicts(200) if not all(v[name] for name in CHECKS)]
    assert failing
    for verdict in failing:
        assert sum(not verdict[name] for name in CHECKS) == 1
        assert verdict["reason"].startswith("mock validator: ")


def test_an_anchored_connotation_stage_makes_the_anchor_the_correct_option() -> None:
    with mock() as (url, _log):
        text = reply(url, user(stage_prompt(3, "affective", "joy", [], "quiet delight", []), seed=1))
    assert "quiet delight" in parse_draft(text, 3).answer


def test_an_unrecognised_prompt_is_a_400_naming_it_and_logged() -> None:
    with mock() as (url, log):
        status, payload = post(url, user("Tell me a joke about penguins."))
    assert status == 400
    assert "unrecognised prompt" in payload["error"]["message"]
    assert "Tell me a joke about penguins." in payload["error"]["message"]
    assert "Tell me a joke about penguins." in log.getvalue()


def test_a_body_without_messages_is_a_400() -> None:
    with mock() as (url, _log):
        status, payload = post(url, {"model": "mock"})
    assert status == 400
    assert "'messages'" in payload["error"]["message"]


def test_streaming_requests_are_refused_with_a_clear_400() -> None:
    with mock() as (url, _log):
        status, payload = post(url, {**base_request(question(0)), "stream": True})
    assert status == 400
    assert "stream" in payload["error"]["message"]


def test_models_endpoint_lists_the_mock_model() -> None:
    with mock() as (url, _log), urllib.request.urlopen(f"{url}/models", timeout=10) as response:
        listing = json.loads(response.read())
    assert [m["id"] for m in listing["data"]] == ["mock"]


# --- determinism -----------------------------------------------------------------------------------------------


def mixed_requests() -> list[dict]:
    """Return toolkit prompts and multiple-choice questions (base and context setting)."""
    mc = [base_request(question(n)) for n in range(20)]
    context = {
        "model": "mock",
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": question(1)},
            {"role": "assistant", "content": "B"},
            {"role": "user", "content": CONTEXT_PREFIX + question(2)},
        ],
    }
    return toolkit_requests() + mc + [context]


def test_two_servers_with_one_seed_give_identical_replies() -> None:
    index, _ = gold_for(20)
    with mock(seed=5, gold=index) as (first, _), mock(seed=5, gold=index) as (second, _):
        assert [reply(first, b) for b in mixed_requests()] == [reply(second, b) for b in mixed_requests()]


def test_concurrent_requests_get_the_replies_serial_requests_get() -> None:
    index, _ = gold_for(20)
    bodies = mixed_requests() * 4
    with mock(seed=5, gold=index) as (url, _):
        serial = [reply(url, b) for b in bodies]
        with ThreadPoolExecutor(16) as pool:
            concurrent = list(pool.map(lambda b: reply(url, b), reversed(bodies)))
    assert concurrent[::-1] == serial


def test_another_seed_gives_other_replies() -> None:
    bodies = [base_request(question(n)) for n in range(40)]
    with mock(seed=0) as (a, _), mock(seed=1) as (b, _):
        assert [reply(a, x) for x in bodies] != [reply(b, x) for x in bodies]


# --- multiple choice -------------------------------------------------------------------------------------------


def test_accuracy_is_the_share_of_gold_answers_within_binomial_tolerance() -> None:
    # n = 400, p = 0.6: sd = sqrt(0.6 * 0.4 / 400) = 0.0245; +-4 sd = +-0.098 fails for a correct mock with
    # probability 6e-5 per seed, and catches an accuracy off by 0.1 (or a mock at chance, 0.25).
    index, gold = gold_for(400)
    with mock(seed=11, accuracy=0.6, gold=index) as (url, _):
        right = sum(parse_choice(reply(url, base_request(text)), "ABCD") == key for text, key in gold.items())
    assert 0.6 - 0.098 <= right / 400 <= 0.6 + 0.098


def test_accuracy_one_always_names_the_gold_key() -> None:
    index, gold = gold_for(60)
    with mock(accuracy=1.0, gold=index) as (url, _):
        assert all(parse_choice(reply(url, base_request(t)), "ABCD") == k for t, k in gold.items())


def test_accuracy_zero_never_names_the_gold_key() -> None:
    index, gold = gold_for(60)
    with mock(accuracy=0.0, gold=index) as (url, _):
        assert not any(parse_choice(reply(url, base_request(t)), "ABCD") == k for t, k in gold.items())


def test_default_replies_are_mostly_a_bare_letter_and_both_parsers_read_every_one() -> None:
    # The default draws `B` 6 times in 10: n = 200 gives sd 0.035, so 0.6 +- 0.14 (4 sd) holds for a correct mock.
    index, gold = gold_for(200)
    with mock(accuracy=1.0, gold=index) as (url, _):
        answers = [(reply(url, base_request(text)), key) for text, key in gold.items()]
    assert all(parse_choice(answer, "ABCD") == key == parse_official(answer) for answer, key in answers), answers
    assert 0.46 <= sum(re.fullmatch("[A-D]", answer) is not None for answer, _ in answers) / 200 <= 0.74


STYLE_ROW = re.compile(r"^ *\| `([\w-]+)` \| `(.+?)` \| (\S+) \| (\S+) \|$", re.M)


def documented_styles() -> list[tuple[str, str, str, str]]:
    """The reply-style table of docs/offline-recipes.md: name, the reply to a question with gold B, both parsers'."""
    rows = STYLE_ROW.findall((Path(__file__).resolve().parents[1] / "docs" / "offline-recipes.md").read_text())
    assert len(rows) >= 6, rows
    return rows


def test_every_reply_style_of_the_mock_is_in_the_docs_table() -> None:
    assert sorted(name for name, *_ in documented_styles()) == sorted(MC_STYLES)


@pytest.mark.parametrize(
    ("name", "shown", "ours", "authors"), documented_styles(), ids=[r[0] for r in documented_styles()]
)
def test_each_reply_style_is_the_reply_and_reads_as_the_docs_table_says(name, shown, ours, authors) -> None:
    index = GoldIndex(sources=["test"])
    text = level_text("What does the picture show?", [("A", "a cat"), ("B", "a red balloon"), ("C", "a dog")])
    index.add(text, "B", "test")
    with mock(accuracy=1.0, gold=index, styles=name) as (url, _):
        answer = reply(url, base_request(text))
    assert answer == shown.replace("<option text>", "a red balloon")
    assert (parse_choice(answer, "ABC") or "—", parse_official(answer) or "—") == (ours, authors)


def test_a_context_turn_is_answered_from_the_question_after_the_prefix() -> None:
    index, gold = gold_for(30)
    chats = [
        {
            "messages": [
                {"role": "user", "content": question(0)},
                {"role": "assistant", "content": "A"},
                {"role": "user", "content": CONTEXT_PREFIX + text},
            ]
        }
        for text in gold
    ]
    with mock(accuracy=1.0, gold=index) as (url, _):
        assert [parse_choice(reply(url, c), "ABCD") for c in chats] == list(gold.values())


def test_a_question_with_unknown_gold_gets_an_option_letter_and_one_log_line() -> None:
    with mock(accuracy=1.0) as (url, log):
        letters = {parse_choice(reply(url, base_request(question(n))), "ABCD") for n in range(40)}
    assert letters == set("ABCD")
    assert log.getvalue().count("gold key is unknown") == 1


def test_gold_comes_from_a_dataset_folder_holding_one_family(write_dataset) -> None:
    root = write_dataset({"affective": [item("joy_1", "DCB", aspect="joy")]})
    index = load_gold([str(root)])
    assert index.gold[level_text("Question at level 2?", [(k, f"option {k} of level 2") for k in "ABCD"])] == "C"


def with_options(sid: str, answers: str, option_text: str) -> dict:
    """Return an authors'-format item whose option texts at every level are `option_text` + key."""
    sample = item(sid, answers, aspect="joy")
    for lv in sample["qa_levels"]:
        lv["options"] = [{"option_key": k, "option_text": f"{option_text} {k}"} for k in "ABCD"]
    return sample


def test_one_question_text_with_other_options_keeps_a_gold_for_each(write_dataset) -> None:
    root = write_dataset({"affective": [with_options("joy_1", "ABC", "first"), with_options("joy_2", "DDD", "second")]})
    index = load_gold([str(root)])
    assert index.gold[level_text("Question at level 3?", [(k, f"first {k}") for k in "ABCD"])] == "C"
    assert index.gold[level_text("Question at level 3?", [(k, f"second {k}") for k in "ABCD"])] == "D"


def test_one_question_with_the_same_options_and_gold_in_two_samples_is_accepted(write_dataset) -> None:
    root = write_dataset({"affective": [item("joy_1", "ABC", aspect="joy"), item("joy_2", "ABC", aspect="joy")]})
    assert len(load_gold([str(root)]).gold) == 3


def test_one_question_with_the_same_options_and_two_golds_in_one_source_is_one_error_naming_both(
    write_dataset, capsys
) -> None:
    root = write_dataset({"affective": [item("joy_1", "ABC", aspect="joy"), item("joy_2", "ABD", aspect="joy")]})
    code, _out, err = run("mock", "serve", "--port", "0", "--gold", str(root), capsys=capsys)
    line = one_line_error(err)
    assert code == 2
    assert f"{root}: affective/joy_1 L3" in line and f"{root}: affective/joy_2 L3" in line
    assert "gold C" in line and "D" in line and "Question at level 3?" in line
    assert "earlier source" not in line


def test_one_question_with_the_same_options_and_two_golds_in_two_sources_names_both_sources(
    write_dataset, tmp_path: Path, capsys
) -> None:
    first = write_dataset({"affective": [item("joy_1", "ABC", aspect="joy")]})
    second = tmp_path / "second"
    shutil.copytree(first, second)
    (second / "Affective-Reasoning.json").write_text(json.dumps([item("joy_9", "ABD", aspect="joy")]))
    (second / "Image" / "Affective-Reasoning" / "joy_1.png").rename(
        second / "Image" / "Affective-Reasoning" / "joy_9.png"
    )
    code, _out, err = run("mock", "serve", "--port", "0", "--gold", str(first), "--gold", str(second), capsys=capsys)
    line = one_line_error(err)
    assert code == 2
    assert f"{first}: affective/joy_1 L3" in line and f"{second}: affective/joy_9 L3" in line


def test_the_smoke_sample_is_the_default_gold_with_45_questions() -> None:
    assert len(load_gold(["smoke"]).gold) == 45  # 15 chains x 3 levels


# --- the command line ------------------------------------------------------------------------------------------


def start_mock(*args: str) -> tuple[subprocess.Popen, str]:
    """Start `hvcu mock serve --port 0 ARGS` in its own process group; return it and the URL it printed."""
    proc = subprocess.Popen(
        [str(BIN / "hvcu"), "mock", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    line = proc.stdout.readline()
    found = re.search(r"(http://127\.0\.0\.1:\d+/v1)", line)
    assert found, line + proc.stderr.read()
    return proc, found.group(1)


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> tuple[int, str]:
    """Send `sig` to the mock; return its exit status and stderr."""
    os.killpg(proc.pid, sig)
    _out, err = proc.communicate(timeout=20)
    return proc.returncode, err


def test_serve_prints_the_url_of_a_free_port_and_stops_cleanly_on_ctrl_c() -> None:
    proc, url = start_mock("--seed", "3", "--accuracy", "0.25")
    try:
        assert int(url.rsplit(":", 1)[1].split("/")[0]) > 0
        with urllib.request.urlopen(f"{url}/models", timeout=10) as response:
            assert response.status == 200
    finally:
        code, err = stop(proc, signal.SIGINT)
    assert code == 0
    assert "Traceback" not in err
    assert "mock: stopped" in err


@pytest.mark.slow
def test_mcts_through_the_cli_against_the_mock_writes_chains(tmp_path: Path) -> None:
    proc, url = start_mock()
    try:
        done = subprocess.run(
            [
                str(BIN / "hvcu"),
                "mcts",
                "--images",
                str(SMOKE_IMAGES / "Affective-Reasoning"),
                "--out",
                str(tmp_path / "mcts"),
                "--model",
                "mock",
                "--base-url",
                url,
                "--quiet",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        stop(proc)
    assert done.returncode == 0, done.stderr
    chains = [json.loads(line) for line in (tmp_path / "mcts" / "chains.jsonl").read_text().splitlines()]
    assert chains
    assert all([lv["level"] for lv in c["levels"]] == [1, 2, 3] for c in chains)
    assert {Path(c["image"]).stem for c in chains} == {
        "joy_001",
        "affection_001",
        "wonder_001",
        "anger_001",
        "fear_001",
        "sadness_001",
    }


def test_direct_in_process_against_the_mock_writes_one_chain_per_image(tmp_path: Path, capsys) -> None:
    with mock() as (url, _):
        code, _out, err = run(
            "direct",
            "--images",
            str(SMOKE_IMAGES / "Implication-Understanding"),
            "--out",
            str(tmp_path / "d"),
            "--model",
            "mock",
            "--base-url",
            url,
            "--quiet",
            capsys=capsys,
        )
    assert code == 0, err
    assert len((tmp_path / "d" / "chains.jsonl").read_text().splitlines()) == 5


def test_accuracy_outside_zero_to_one_is_a_usage_error_naming_it(capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        run("mock", "serve", "--accuracy", "1.5", capsys=capsys)
    assert stopped.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--accuracy" in last and "1.5" in last


@pytest.mark.parametrize("styles", ["sarcasm", "letter:0", "letter,letter"])
def test_a_bad_styles_value_is_a_usage_error_naming_it(styles: str, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        run("mock", "serve", "--styles", styles, capsys=capsys)
    assert stopped.value.code == 2
    assert "argument --styles:" in capsys.readouterr().err.strip().splitlines()[-1]


def test_serve_with_hard_styles_answers_in_them_and_says_so() -> None:
    proc, url = start_mock("--styles", "prose:3,boxed", "--accuracy", "1")
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=10) as response:
            assert json.loads(response.read())["hvcu_mock"]["styles"] == [["prose", 3], ["boxed", 1]]
        smoke = load_gold(["smoke"])
        answers = {reply(url, base_request(text)): key for text, key in list(smoke.gold.items())[:20]}
    finally:
        stop(proc)
    assert all(a in (f"Based on the image, {k}.", f"\\boxed{{{k}}}") for a, k in answers.items()), answers
    assert not any(parse_official(answer) for answer in answers)  # the authors' rule reads neither


def test_a_port_in_use_is_one_error_line(capsys) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _out, err = run("mock", "serve", "--port", str(port), capsys=capsys)
    assert code == 2
    line = one_line_error(err)
    assert f"127.0.0.1:{port}" in line and "in use" in line


def test_wait_gives_up_with_one_error_line_when_nothing_answers(capsys) -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    code, _out, err = run("mock", "wait", "--port", str(port), "--timeout", "0.3", capsys=capsys)
    assert code == 2
    assert f"127.0.0.1:{port}" in one_line_error(err)


def test_an_unknown_gold_source_is_one_error_line(tmp_path: Path, capsys) -> None:
    code, _out, err = run("mock", "serve", "--port", "0", "--gold", str(tmp_path / "nothing"), capsys=capsys)
    assert code == 2
    assert str(tmp_path / "nothing") in one_line_error(err)


def test_wait_for_a_mock_process_that_ended_is_one_error_line_naming_it(capsys) -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    code, _out, err = run("mock", "wait", "--port", "1", "--pid", str(ended.pid), "--timeout", "5", capsys=capsys)
    assert code == 2
    assert f"mock process {ended.pid} ended" in one_line_error(err)


def test_wait_with_a_pid_ignores_another_mock_on_the_port(capsys) -> None:
    with mock() as (url, _):
        port = url.rsplit(":", 1)[1].split("/")[0]
        code, _out, err = run(
            "mock", "wait", "--port", port, "--pid", str(os.getppid()), "--timeout", "0.3", capsys=capsys
        )
    assert code == 2
    assert f"another mock answers there: pid {os.getpid()}" in one_line_error(err)


def test_wait_returns_once_the_named_mock_answers(capsys) -> None:
    with mock() as (url, _):
        port = url.rsplit(":", 1)[1].split("/")[0]
        code, out, _err = run("mock", "wait", "--port", port, "--pid", str(os.getpid()), capsys=capsys)
    assert code == 0
    assert out.strip() == f"mock endpoint ready: {url}"
