"""The pinned environment: lmms-eval and LLaMA-Factory at the versions the project is built for, together."""

from __future__ import annotations

from importlib.metadata import version

from packaging.version import Version


def test_lmms_eval_is_the_version_the_task_hook_was_written_for() -> None:
    assert version("lmms_eval") == "0.7.3"


def test_llamafactory_0_9_5_shares_the_environment() -> None:
    assert version("llamafactory") == "0.9.5"
    assert Version(version("transformers")) <= Version("5.6.0")
    assert Version(version("datasets")) <= Version("4.0.0")
    assert Version(version("accelerate")) <= Version("1.11.0")
    assert Version(version("peft")) <= Version("0.18.1")
    from llamafactory.hparams import get_train_args  # noqa: F401  (importable beside lmms-eval)


def test_filelock_is_below_the_release_that_breaks_lmms_eval() -> None:
    assert Version(version("filelock")) < Version("4.3")
