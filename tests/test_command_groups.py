"""`hvcu` finds the generation/training command groups through the `hvcu.commands` entry points (pyproject.toml):
every one resolves, `hvcu -h` lists the commands in today's order, and a group that does not load, or is not
installed, costs only its own commands, said in one line.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import types
from importlib.metadata import EntryPoint

import pytest
from conftest import pyproject, run

from hvcu_tasks import cli

GROUP = "hvcu.commands"

# The command groups pyproject.toml declares, and what each adds to `hvcu` (docs/cli.md).
DECLARED = {
    "synthesis": "generation.cli:add_parser",
    "mock": "generation.mock.cli:add_parser",
    "build-bench": "generation.bench.cli:add_parser",
    "human": "generation.human.cli:add_parser",
    "perturb": "generation.perturb.cli:add_parser",
    "audit": "generation.audit.cli:add_parser",
    "train": "training.cli:add_parser",
}

# `hvcu -h`'s commands, in the order it has always listed them.
ORDER = [
    "data",
    "score",
    "chains",
    "report",
    "mcts",
    "direct",
    "mock",
    "build-bench",
    "human",
    "perturb",
    "audit",
    "train",
    "export-task",
    "cache",
    "tasks-dir",
    "tiny-model",
]


def declared_entry_points() -> list[EntryPoint]:
    """The `hvcu.commands` entry points of this checkout's pyproject.toml."""
    table = pyproject()["project"]["entry-points"][GROUP]
    return [EntryPoint(name, value, GROUP) for name, value in table.items()]


def commands(parser: argparse.ArgumentParser) -> list[str]:
    """The top-level commands of a parser, in the order `hvcu -h` lists them."""
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [choice.dest for choice in sub._choices_actions]


@pytest.fixture
def listed(monkeypatch: pytest.MonkeyPatch):
    """Make `hvcu` see the given entry points (instead of the installed metadata's)."""

    def use(entry_points: list[EntryPoint]) -> None:
        monkeypatch.setattr(cli, "command_entry_points", lambda: list(entry_points))

    return use


def test_pyproject_declares_each_command_group_as_an_entry_point() -> None:
    assert {ep.name: ep.value for ep in declared_entry_points()} == DECLARED


@pytest.mark.parametrize("entry_point", declared_entry_points(), ids=lambda ep: ep.name)
def test_every_declared_entry_point_resolves_to_a_function(entry_point: EntryPoint) -> None:
    module = importlib.import_module(entry_point.module)
    assert callable(getattr(module, entry_point.attr))


def test_the_tests_see_the_checkouts_entry_points() -> None:
    # conftest puts this checkout's metadata first: what `hvcu` lists here is what pyproject.toml declares
    assert {ep.name: ep.value for ep in cli.command_entry_points()} == DECLARED


def test_help_lists_every_command_in_todays_order() -> None:
    assert commands(cli.build_parser()) == ORDER


def test_the_order_does_not_depend_on_the_order_entry_points_are_found(listed) -> None:
    listed(declared_entry_points()[::-1])
    assert commands(cli.build_parser()) == ORDER


def test_a_group_of_another_distribution_comes_after_the_declared_ones(listed) -> None:
    plugin = types.ModuleType("hvcu_test_plugin")
    plugin.add_parser = lambda sub: sub.add_parser("extra", help="a plugin's command").set_defaults(func=lambda a: 0)
    sys.modules["hvcu_test_plugin"] = plugin
    try:
        listed([EntryPoint("extra", "hvcu_test_plugin:add_parser", GROUP), *declared_entry_points()])
        assert commands(cli.build_parser()) == [*ORDER[:12], "extra", *ORDER[12:]]
    finally:
        del sys.modules["hvcu_test_plugin"]


# --- a group that is not installed ----------------------------------------------------------------------------------


def without(*names: str) -> list[EntryPoint]:
    """The declared entry points less the named ones."""
    return [ep for ep in declared_entry_points() if ep.name not in names]


def test_help_says_which_group_is_not_installed_and_how_to_fix_it(listed, capsys) -> None:
    listed(without("synthesis"))
    with pytest.raises(SystemExit) as done:
        cli.main(["-h"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    tail = " ".join(out.split("options:")[1].split())
    assert "command groups not installed: synthesis (mcts, direct): hvcu-toolkit's metadata lacks" in tail
    assert "run `pip install -e .` again" in tail
    assert commands(cli.build_parser()) == ORDER  # still listed, each marked as not available


def test_a_command_of_a_group_not_installed_says_so_in_one_line(listed, capsys) -> None:
    listed(without("train"))
    code, out, err = run("train", "config", "--model", "m", capsys=capsys)
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: command group 'train' (train) is not installed")
    assert "pip install -e ." in lines[0]


def test_the_other_commands_work_without_a_word_when_a_group_is_not_installed(listed, capsys) -> None:
    listed([])  # installed from a wheel built before the entry points existed
    code, out, err = run("tasks-dir", capsys=capsys)
    assert (code, err) == (0, "") and out.strip().endswith("tasks")


# --- a group that fails to load -------------------------------------------------------------------------------------


def raising_registration(sub: argparse._SubParsersAction) -> None:
    """Register half a command group, then fail."""
    sub.add_parser("half", help="registered before the failure")
    raise RuntimeError("registration broke")


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("hvcu_no_such_module:add_parser", "ModuleNotFoundError: No module named 'hvcu_no_such_module'"),
        ("generation.cli:no_such_function", "AttributeError: module 'generation.cli' has no attribute"),
        ("test_command_groups:GROUP", "TypeError: test_command_groups:GROUP is a str, not a function"),
        ("test_command_groups:raising_registration", "RuntimeError: registration broke"),
    ],
    ids=["import-error", "missing-attribute", "not-callable", "raises"],
)
def test_a_group_that_fails_to_load_is_one_line_and_the_others_keep_working(
    value: str, error: str, listed, capsys
) -> None:
    listed([EntryPoint("train", value, GROUP), *without("train")])
    code, out, err = run("tasks-dir", capsys=capsys)
    assert code == 0 and out.strip().endswith("tasks")
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"warning: command group 'train' (entry point train = {value}) did not load: {error}")
    assert "Traceback" not in err
    assert "half" not in commands(cli.build_parser())  # a half-done registration is taken back
    with pytest.raises(SystemExit) as done:  # another group's command: its own help as always
        cli.main(["mcts", "-h"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("usage: hvcu mcts [-h] --images PATH")


def test_a_command_of_a_group_that_failed_to_load_is_refused_in_one_line(listed, capsys) -> None:
    listed([EntryPoint("train", "hvcu_no_such_module:add_parser", GROUP), *without("train")])
    code, out, err = run("train", "prepare", "--chains", "x", capsys=capsys)
    lines = err.splitlines()
    assert (code, out, len(lines)) == (2, "", 1), err
    assert lines[0].startswith("error: command group 'train' (entry point train = hvcu_no_such_module:add_parser)")


def test_help_names_a_group_that_failed_to_load(listed, capsys) -> None:
    listed([EntryPoint("audit", "hvcu_no_such_module:add_parser", GROUP), *without("audit")])
    with pytest.raises(SystemExit):
        cli.main(["-h"])
    tail = " ".join(capsys.readouterr().out.split("options:")[1].split())
    assert "command group 'audit' (entry point audit = hvcu_no_such_module:add_parser) did not load" in tail
