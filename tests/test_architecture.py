"""The package's rooms: no import circles, imports point down the data flow, core stays pure, one home for HVCU_*.

Every file of hvcu_tasks/, generation/ and training/ is parsed with `ast`; every import counts, also one inside a
function, a relative one, and `from pkg import module` (an edge to the module, and to `pkg/__init__`).
The layering table (LAYERS) is the one docs/development.md quotes.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hvcu_tasks", "generation", "training")

LAYERS: dict[str, frozenset[str]] = {
    "core": frozenset({"core"}),
    "settings": frozenset(),
    "argtypes": frozenset(),
    "dev.smoke": frozenset({"core"}),
    "data": frozenset({"core", "settings", "data", "dev.smoke"}),
    "results": frozenset({"core", "settings", "data", "results"}),
    "lmms": frozenset({"core", "settings", "data", "results", "lmms"}),
    "report": frozenset({"core", "settings", "data", "results", "report"}),
    "dev": frozenset({"core", "settings", "data", "results", "lmms", "dev", "dev.smoke"}),
    "export": frozenset({"*"}),
    "cli": frozenset({"*"}),
    "": frozenset({"core"}),
}
"""Folder (or top-level module) of hvcu_tasks -> the folders it may import ("*": anything in hvcu_tasks but cli).

Data flows one way: core <- data <- results <- lmms (a replayed model reads result files) / report; dev (smoke
sample, tiny models) on top; cli and export may import anything; nothing imports cli. "" is hvcu_tasks/__init__.
"""


def _modules() -> dict[str, Path]:
    """Every module of the three packages by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The longest known module a dotted name lies in (None outside the three packages)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """The modules of the three packages that `module` imports anywhere in its file."""
    path = MODULES[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            owner = _owner(name)
            if owner and owner != module:
                found.add(owner)
    return found


EDGES = {module: _imports(module) for module in MODULES}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in EDGES[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(MODULES):
        if module not in index:
            visit(module)
    return found


def _layer(module: str) -> str:
    """The LAYERS key a hvcu_tasks module belongs to."""
    rest = module.removeprefix("hvcu_tasks").removeprefix(".")
    if rest.startswith("dev.smoke"):
        return "dev.smoke"
    return rest.split(".")[0]


def test_the_import_graph_sees_lazy_relative_and_package_imports() -> None:
    # the graph itself: a function-level import, and `from pkg import module`
    assert "hvcu_tasks.lmms.models.routing" in EDGES["hvcu_tasks.lmms.plugin"]
    assert "hvcu_tasks.data.jsonio" in EDGES["hvcu_tasks.data.provenance"]


def test_no_import_circle() -> None:
    assert _cycles() == []


def test_the_eval_package_never_imports_generation_or_training() -> None:
    up = {
        (m, t)
        for m, targets in EDGES.items()
        if m.startswith("hvcu_tasks")
        for t in targets
        if t.split(".")[0] in {"generation", "training"}
    }
    assert up == set()


def test_core_imports_only_the_standard_library_and_core() -> None:
    bad = []
    for module, path in MODULES.items():
        if not module.startswith("hvcu_tasks.core"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = ["hvcu_tasks.core"] if node.level else [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if not (name == "hvcu_tasks.core" or name.startswith("hvcu_tasks.core.")) and (
                    top not in sys.stdlib_module_names or top == "hvcu_tasks"
                ):
                    bad.append(f"{module}: {name}")
    assert bad == []


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_each_folder_imports_only_what_the_layering_allows(layer: str) -> None:
    allowed = LAYERS[layer]
    bad = []
    for module, targets in EDGES.items():
        if not module.startswith("hvcu_tasks") or _layer(module) != layer:
            continue
        for target in targets:
            if not target.startswith("hvcu_tasks"):
                continue
            to = _layer(target)
            if to == "" and layer != "core":
                continue  # the package's own __init__, run by every import of hvcu_tasks.x anyway
            if to == "cli" or not ("*" in allowed or to in allowed or to == layer):
                bad.append(f"{module} -> {target}")
    assert bad == []


def test_every_hvcu_tasks_module_has_a_layer() -> None:
    assert {m for m in MODULES if m.startswith("hvcu_tasks") and _layer(m) not in LAYERS} == set()


def test_nothing_imports_the_command_line() -> None:
    assert {m for m, targets in EDGES.items() if "hvcu_tasks.cli" in targets} == set()


def _hvcu_constants(module: str) -> dict[str, str]:
    """Module-level NAME = "HVCU_..." constants of a module."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value.startswith("HVCU_"):
                found.update({t.id: value.value for t in targets if isinstance(t, ast.Name)})
    return found


def _environment_reads(module: str) -> list[str]:
    """HVCU_* names a module reads from os.environ / os.getenv (literal, or a constant here or imported)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    constants = _hvcu_constants(module)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and _owner(node.module) == node.module:
            theirs = _hvcu_constants(node.module)
            constants.update({a.asname or a.name: theirs[a.name] for a in node.names if a.name in theirs})

    def key(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value
        if isinstance(expr, ast.Name):
            return constants.get(expr.id)
        return None

    def is_environ(expr: ast.expr) -> bool:
        return (
            isinstance(expr, ast.Attribute)
            and expr.attr == "environ"
            or (isinstance(expr, ast.Name) and expr.id == "environ")
        )

    read = []
    for node in ast.walk(tree):
        keys: list[ast.expr] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr in {"get", "pop", "setdefault"} and is_environ(node.func.value):
                keys = [node.args[0]]
            elif node.func.attr == "getenv":
                keys = [node.args[0]]
        elif isinstance(node, ast.Subscript) and is_environ(node.value):
            keys = [node.slice]
        elif isinstance(node, ast.Compare) and any(is_environ(c) for c in node.comparators):
            keys = [node.left]
        read += [k for k in map(key, keys) if k and k.startswith("HVCU_")]
    return read


def test_hvcu_environment_variables_are_read_only_in_settings() -> None:
    reads = {
        m: _environment_reads(m)
        for m in MODULES
        if m.startswith("hvcu_tasks") and m != "hvcu_tasks.settings" and _environment_reads(m)
    }
    assert reads == {}


def test_environment_reads_are_found(tmp_path) -> None:
    # the check above would see today's reads of the variables through constants and literals
    assert "HVCU_CACHE_DIR" in _hvcu_constants("hvcu_tasks.settings").values()
