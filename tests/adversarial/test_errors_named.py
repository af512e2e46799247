"""Errors that used to exit 0 or name nothing: each is one line naming what is wrong, before any work is paid for."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fake_openai import FakeOpenAI  # noqa: E402
from test_synthesis import copy_images, healthy, stats, synth  # noqa: E402

# --- cache=FILE -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("under", [False, True])
def test_cache_naming_a_file_is_one_line_before_the_inner_model_is_built(tmp_path: Path, under: bool) -> None:
    from hvcu_tasks.lmms.models.wrapper import ContextWrapper

    existing = tmp_path / "replies.txt"
    existing.write_text("not a folder")
    given = existing / "sub" if under else existing
    # An inner model name that does not exist: the cache argument must be refused before it is looked up.
    with pytest.raises(ValueError) as err:
        ContextWrapper(inner="no_such_model_anywhere", cache=str(given))
    message = str(err.value)
    assert message.startswith(f"hvcu_context: cannot create the request cache {given}: Not a directory")
    assert "\n" not in message and "not a folder" in message


@pytest.mark.slow
def test_cache_naming_a_file_under_the_lmms_eval_cli_exits_2_with_one_line(tmp_path: Path) -> None:
    import os
    import subprocess

    existing = tmp_path / "replies.txt"
    existing.write_text("not a folder")
    args = f"inner=openai,model_version=m,base_url=http://127.0.0.1:9/v1,cache={existing}"
    cmd = [str(Path(sys.executable).parent / "lmms-eval"), "--model", "hvcu_context", "--model_args", args]
    cmd += ["--tasks", "hvcu_bench_sample", "--output_path", str(tmp_path / "out")]
    env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("hvcu_context: error:")]
    assert len(errors) == 1 and str(existing) in errors[0] and "Not a directory" in errors[0]
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("*_results.json"))


# --- a rate limit asking for an hour --------------------------------------------------------------------------------


def an_hour(_n: int, _request: dict):
    return 429, {"Retry-After": "3600"}, b'{"error": {"message": "rate limit reached"}}'


def test_a_rate_limit_asking_an_hour_fails_the_image_at_once_said_once_and_counted(tmp_path: Path, capsys) -> None:
    images = copy_images(tmp_path / "imgs", 2)
    with FakeOpenAI(healthy, fault=an_hour) as server:
        start = time.monotonic()
        code = synth("mcts", server.base_url, images, tmp_path / "out", "--max-wait", "5")
        elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 1 and elapsed < 30
    notices = [line for line in err.splitlines() if line.startswith("rate limited:")]
    assert len(notices) == 1 and "429" in notices[0] and "3600" in notices[0] and "--max-wait 5" in notices[0]
    got = stats(tmp_path / "out")
    assert got["images_done"] == 0 and got["images_failed"] == 2
    assert all("429" in reason and "3600" in reason for reason in got["failed"].values())
    assert got["usage_this_run"]["rate_limited"] >= 2
    assert "rate-limited answer(s) (HTTP 429)" in err.splitlines()[-1]


def test_a_rate_limit_within_max_wait_is_waited_out_and_the_run_finishes(tmp_path: Path, capsys) -> None:
    images = copy_images(tmp_path / "imgs", 1)

    def twice(n: int, _request: dict):
        return (429, {"Retry-After": "0.2"}, b'{"error": {"message": "slow down"}}') if n < 2 else None

    with FakeOpenAI(healthy, fault=twice) as server:
        assert synth("mcts", server.base_url, images, tmp_path / "out", "--max-wait", "5") == 0
    assert stats(tmp_path / "out")["usage_this_run"]["rate_limited"] == 2
    assert sum(line.startswith("rate limited:") for line in capsys.readouterr().err.splitlines()) == 1


def test_the_default_single_wait_is_sixty_seconds() -> None:
    from generation.client import ClientConfig

    assert ClientConfig(model="m", base_url="http://x/v1").max_wait_s == 60
