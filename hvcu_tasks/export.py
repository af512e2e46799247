"""`hvcu export-task DIR`: a self-contained lmms-eval task folder generated from this package.

The folder holds the task YAMLs (the package's own task folder, so new tasks come along by themselves), the
bundled smoke sample, a README and ONE `utils.py` that needs nothing but lmms-eval and its dependencies.
`utils.py` is this package's code, not a copy kept by hand: the modules the task folder's `utils.py` imports
(and everything they import, lazily too) are concatenated in dependency order; the package's own imports are
removed and every reference to a name of another module is rewritten to that name in the one file. Where two
modules define the same name, the later module's name gets its module as prefix (`context.doc_to_messages`
becomes `context_doc_to_messages`, the name the YAMLs already use). Every step is checked with `ast` and
`symtable`; a construct the bundler cannot rewrite safely (a module name that is also a local variable, a module
object used other than as `module.name`, two different imports under one name) is an ExportError naming the
file and line, never a silently wrong file.

Every export also writes `.hvcu-export` (the toolkit version, then every file it wrote): `--force` replaces only an
empty folder or such an earlier export holding nothing else (its utils.py bytecode cache aside), never the working
folder or a folder holding it, so `hvcu export-task .../lmms_eval/tasks --force` is refused, not a wiped task tree.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import os
import re
import shutil
import symtable
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

PACKAGE = "hvcu_tasks"
PACKAGE_DIR: Path = Path(__file__).resolve().parent
TASKS_DIR: Path = PACKAGE_DIR / "lmms" / "tasks"
ROOT_NAME = "utils"
"""Module name of the task folder's utils.py (the root of the bundle) in messages and name prefixes."""
TASK_FILE = re.compile(r"(\.yaml|_yaml|\.jsonl)$")
"""Files of the task folder that go into the export as they are (YAMLs, YAML fragments, data stubs)."""


class ExportError(ValueError):
    """The package's code cannot be bundled safely, or the target folder is not usable."""


@dataclass
class Module:
    """One module of the bundle: its name, file, source and syntax tree."""

    name: str
    path: Path
    source: bytes
    tree: ast.Module = field(repr=False)

    @property
    def short(self) -> str:
        """The last component of the module name (the prefix of its renamed names)."""
        return self.name.rsplit(".", 1)[-1]

    @property
    def label(self) -> str:
        """The module's file relative to the package, for messages."""
        try:
            return str(self.path.relative_to(PACKAGE_DIR.parent))
        except ValueError:
            return str(self.path)


def module_file(name: str) -> Path | None:
    """Return the file of a package module (`hvcu_tasks.x.y`), or None when it is not a module of this package."""
    if name == ROOT_NAME:
        return TASKS_DIR / "utils.py"
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    parts = name.split(".")[1:]
    if not parts:
        return PACKAGE_DIR / "__init__.py"
    rel = Path(*parts)
    for candidate in (PACKAGE_DIR / rel.with_suffix(".py"), PACKAGE_DIR / rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def read_module(name: str) -> Module:
    """Read and parse one package module."""
    path = module_file(name)
    if path is None:
        raise ExportError(f"{name}: not a module of {PACKAGE}")
    source = path.read_bytes()
    return Module(name, path, source, ast.parse(source, filename=str(path)))


def absolute(module: Module, node: ast.ImportFrom) -> str:
    """Return the absolute module name an ImportFrom names (resolving relative imports)."""
    if not node.level:
        return node.module or ""
    package = module.name.split(".")
    if module.path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(module: Module, node: ast.stmt) -> list[str]:
    """Return the package modules one import statement needs (empty for anything outside the package)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if module_file(a.name)]
    if isinstance(node, ast.ImportFrom):
        source = absolute(module, node)
        if not module_file(source):
            return []
        subs = [f"{source}.{a.name}" for a in node.names if module_file(f"{source}.{a.name}")]
        return subs + ([source] if len(subs) < len(node.names) else [])
    return []


def is_package_import(module: Module, node: ast.AST) -> bool:
    """Whether a statement imports from this package (and so is removed from the bundle)."""
    return isinstance(node, (ast.Import, ast.ImportFrom)) and bool(imported_modules(module, node))


def modules_in_order(root: str = ROOT_NAME) -> list[Module]:
    """Return the root module and every package module it needs, each after the modules its top level imports.

    Imports inside functions (lazy) bring their module in but do not order it: they run after the whole file.
    """
    loaded: dict[str, Module] = {}
    order: list[Module] = []
    state: dict[str, str] = {}

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            raise ExportError(f"import cycle at module level: {' -> '.join((*chain, name))}")
        state[name] = "visiting"
        module = loaded.setdefault(name, read_module(name))
        top = [n for n in module.tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        for node in top:
            for dep in imported_modules(module, node):
                if dep != name:
                    visit(dep, (*chain, name))
        state[name] = "done"
        order.append(module)

    visit(root, ())
    lazy = [dep for m in list(order) for n in ast.walk(m.tree) for dep in imported_modules(m, n)]
    while lazy:
        dep = lazy.pop(0)
        if state.get(dep) != "done":
            visit(dep, ("(lazy)",))
            lazy += [d for n in ast.walk(loaded[dep].tree) for d in imported_modules(loaded[dep], n)]
    # The root module goes last: it is the file whose names the YAMLs reference.
    return [m for m in order if m.name != root] + [m for m in order if m.name == root]


# ---- names ----


def top_level_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Yield the module-level statements, descending into if/try/with blocks (not into functions or classes)."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for block in ("body", "orelse", "finalbody"):
                yield from top_level_statements(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from top_level_statements(handler.body)


def import_key(node: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[str, ...]:
    """Return what an external import binds: equal keys bind the same object under the same name."""
    if isinstance(node, ast.Import):
        return ("import", alias.name if alias.asname else alias.name.split(".")[0])
    return ("from", "." * node.level + (node.module or ""), alias.name)


def module_aliases(module: Module) -> dict[str, str]:
    """Return the module's names for package modules (`from hvcu_tasks import context` -> {"context": ...})."""
    aliases: dict[str, str] = {}
    for node in ast.walk(module.tree):
        if not is_package_import(module, node):
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if not a.asname:
                    raise ExportError(f"{module.label}:{node.lineno}: `import {a.name}` (use `from ... import`)")
                aliases[a.asname] = a.name
            continue
        source = absolute(module, node)
        for a in node.names:
            target = f"{source}.{a.name}"
            if module_file(target):
                if aliases.setdefault(a.asname or a.name, target) != target:
                    raise ExportError(f"{module.label}:{node.lineno}: {a.asname or a.name!r} names two modules")
    return aliases


def alias_assignments(module: Module) -> dict[str, tuple[str, str]]:
    """Return module-level `X = module.name` assignments whose right side is a package module's name."""
    aliases = module_aliases(module)
    found: dict[str, tuple[str, str]] = {}
    for node in module.tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id in aliases
        ):
            found[node.targets[0].id] = (aliases[node.value.value.id], node.value.attr)
    return found


def bindings(module: Module) -> dict[str, tuple[str, ...]]:
    """Return the module-level names the module binds, each with what binds it (an import key, or its module).

    Names bound only by a package import or by `X = module.name` (a re-export) are not bindings.
    """
    table = symtable.symtable(module.source.decode("utf-8"), str(module.path), "exec")
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    keys: dict[str, set[tuple[str, ...]]] = {}
    package_bound: set[str] = set(alias_assignments(module))
    for node in top_level_statements(module.tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bound_name = alias.asname or alias.name.split(".")[0]
                if is_package_import(module, node):
                    package_bound.add(bound_name)
                else:
                    keys.setdefault(bound_name, set()).add(import_key(node, alias))
    result: dict[str, tuple[str, ...]] = {}
    for name in sorted(bound - {"__all__"}):
        defined = assigned_besides_import(module, name)
        if name in package_bound and name not in keys and not (defined and name not in alias_assignments(module)):
            continue
        found = keys.get(name, set())
        result[name] = found.pop() if len(found) == 1 and not defined else ("def", module.name)
    return result


def assigned_besides_import(module: Module, name: str) -> bool:
    """Whether a module-level statement other than an import binds `name`."""
    for node in top_level_statements(module.tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets: list[ast.AST | None] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For)):
            targets = [node.target]
        elif isinstance(node, ast.With):
            targets = [item.optional_vars for item in node.items]
        for target in filter(None, targets):
            if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                return True
    return False


def renamed(module: Module, name: str) -> str:
    """Return the bundle name of a module-level name that another module also binds."""
    prefix = ROOT_NAME if module.name == ROOT_NAME else module.short
    return f"_{prefix}{name}" if name.startswith("_") else f"{prefix}_{name}"


@dataclass
class Plan:
    """What the bundle calls every module-level name of every module."""

    modules: list[Module]
    names: dict[tuple[str, str], str] = field(default_factory=dict)
    """(module, name it binds) -> its name in the bundle."""
    exports: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """(module, name it imports from the package) -> (module, name) it is."""
    module_aliases: dict[str, dict[str, str]] = field(default_factory=dict)
    """module -> {local name: package module it stands for}."""

    def resolve(self, module: str, name: str, seen: tuple = ()) -> str:
        """Return the bundle name of `module.name`, following re-exports."""
        if (module, name) in self.names:
            return self.names[(module, name)]
        if (module, name) in self.exports and (module, name) not in seen:
            return self.resolve(*self.exports[(module, name)], seen=(*seen, (module, name)))
        raise ExportError(f"{module}: has no module-level name {name!r} to export")


def plan(modules: list[Module]) -> Plan:
    """Decide the bundle name of every module-level name: the first module binding a name keeps it."""
    result = Plan(modules)
    owners: dict[str, tuple[str, ...]] = {}
    for module in modules:
        for name, key in bindings(module).items():
            first = owners.setdefault(name, key)
            result.names[(module.name, name)] = name if first == key else renamed(module, name)
        result.module_aliases[module.name] = module_aliases(module)
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ImportFrom) and is_package_import(module, node):
                source = absolute(module, node)
                for a in node.names:
                    if module_file(f"{source}.{a.name}"):
                        continue
                    local = a.asname or a.name
                    if result.exports.setdefault((module.name, local), (source, a.name)) != (source, a.name):
                        raise ExportError(f"{module.label}:{node.lineno}: {local!r} is imported from two places")
        for local, target in alias_assignments(module).items():
            result.exports[(module.name, local)] = target
    for module in modules:  # `X = module.name` that does not come out as `X = X` stays an assignment
        for local in alias_assignments(module):
            if result.resolve(module.name, local) != local:
                del result.exports[(module.name, local)]
                taken = local in owners
                owners.setdefault(local, ("def", module.name))
                result.names[(module.name, local)] = renamed(module, local) if taken else local
    final: dict[str, tuple[str, str]] = {}
    for (module, name), new in result.names.items():
        other = final.setdefault(new, (module, name))
        if other != (module, name) and bindings_key(result, other) != bindings_key(result, (module, name)):
            raise ExportError(f"bundle name {new!r} is both {other[0]}.{other[1]} and {module}.{name}")
    return result


def bindings_key(result: Plan, ref: tuple[str, str]) -> tuple[str, ...]:
    """Return what binds one (module, name) in the plan."""
    module = next(m for m in result.modules if m.name == ref[0])
    return bindings(module).get(ref[1], ("def", module.name))


# ---- rewriting one module ----


class Edits:
    """Byte-range replacements on a module's lines, applied together."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.lines = module.source.splitlines(keepends=True)
        self.spans: dict[int, list[tuple[int, int, bytes]]] = {}
        self.whole: dict[int, bytes] = {}

    def replace(self, node: ast.AST, expected: str, new: str) -> None:
        """Replace the one-line source of `node` (which must read `expected`) with `new`."""
        if node.end_lineno != node.lineno:
            raise ExportError(f"{self.module.label}:{node.lineno}: {expected!r} spans lines; write it on one line")
        self.replace_span(node.lineno, node.col_offset, node.end_col_offset, expected, new)

    def replace_span(self, line: int, start: int, end: int, expected: str, new: str) -> None:
        """Replace bytes start:end of a line (which must read `expected`) with `new`."""
        text = self.lines[line - 1][start:end].decode("utf-8")
        if text != expected:
            raise ExportError(f"{self.module.label}:{line}: expected {expected!r} at column {start}, found {text!r}")
        self.spans.setdefault(line, []).append((start, end, new.encode("utf-8")))

    def replace_lines(self, node: ast.stmt, new: str | None) -> None:
        """Replace the whole lines of a statement with `new` (indented like it), or drop them."""
        first = self.lines[node.lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        if first[len(indent) : node.col_offset].strip() or self.lines[node.end_lineno - 1][node.end_col_offset :].strip(
            b" \t\r\n"
        ).startswith(b";"):
            raise ExportError(f"{self.module.label}:{node.lineno}: put this statement on lines of its own")
        for line in range(node.lineno, node.end_lineno + 1):
            self.whole[line] = b""
        if new is not None:
            self.whole[node.lineno] = b"".join(indent + part.encode("utf-8") + b"\n" for part in new.splitlines())

    def text(self) -> str:
        """Return the edited source."""
        out = []
        for number, raw in enumerate(self.lines, start=1):
            if number in self.whole:
                out.append(self.whole[number])
                continue
            line = raw
            for start, end, new in sorted(self.spans.get(number, []), reverse=True):
                line = line[:start] + new + line[end:]
            out.append(line)
        return b"".join(out).decode("utf-8")


def blocks(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    """Yield every statement list (module body, function and class bodies, branches, handlers)."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                yield value


def check_scopes(module: Module, names: set[str]) -> None:
    """Refuse a rewritten name that some function or class also binds locally (renaming it would change it)."""
    lazily = lazily_imported(module)

    def walk(table: symtable.SymbolTable) -> None:
        for child in table.get_children():
            for sym in child.get_symbols():
                name = sym.get_name()
                if name in names and (sym.is_parameter() or sym.is_assigned() or sym.is_imported()):
                    if sym.is_global() or (name, child.get_lineno()) in lazily:
                        continue
                    raise ExportError(
                        f"{module.label}:{child.get_lineno()}: {child.get_name()} binds {name!r} locally, which is "
                        "also a module-level name the bundle renames; rename the local variable"
                    )
            walk(child)

    walk(symtable.symtable(module.source.decode("utf-8"), str(module.path), "exec"))


def lazily_imported(module: Module) -> set[tuple[str, int]]:
    """Return (name, function line) for every package import inside a function (removed by the bundle)."""
    found = set()
    for func in ast.walk(module.tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            line = func.decorator_list[0].lineno if func.decorator_list else func.lineno
            for node in ast.walk(func):
                if is_package_import(module, node):
                    found |= {(a.asname or a.name, func.lineno) for a in node.names}
                    found |= {(a.asname or a.name, line) for a in node.names}
    return found


def rewrite(module: Module, layout: Plan, seen: set[tuple[str, ...]] | None = None) -> str:
    """Return one module's source as it goes into the bundle.

    `seen` collects the module-level imports written so far; one that an earlier module made already is dropped.
    """
    seen = set() if seen is None else seen
    edits = Edits(module)
    aliases = layout.module_aliases[module.name]
    rename = {name: new for (owner, name), new in layout.names.items() if owner == module.name and new != name}
    rename |= {
        local: layout.resolve(source, name)
        for (owner, local), (source, name) in layout.exports.items()
        if owner == module.name and (owner, local) not in layout.names
    }
    rename = {old: new for old, new in rename.items() if old != new}
    check_scopes(module, set(rename) | set(aliases))
    removed: set[int] = set()
    reexports = alias_assignments(module)
    docstring = ast.get_docstring(module.tree, clean=True)
    if docstring is not None:
        comment = "\n".join(f"# {line}".rstrip() for line in docstring.splitlines())
        edits.replace_lines(module.tree.body[0], comment)
    for node in ast.walk(module.tree):
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        dunder_all = (
            node in module.tree.body
            and isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        )
        self_alias = (
            node in module.tree.body
            and isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in reexports
            and layout.resolve(*reexports[node.targets[0].id]) == node.targets[0].id
        )
        if future or dunder_all or self_alias or is_package_import(module, node):
            removed.add(id(node))
        elif node in module.tree.body and isinstance(node, (ast.Import, ast.ImportFrom)):
            made = {(alias.asname or alias.name.split(".")[0], *import_key(node, alias)) for alias in node.names}
            if made <= seen:
                removed.add(id(node))
            seen |= made
    for block in blocks(module.tree):
        gone = [stmt for stmt in block if id(stmt) in removed]
        for stmt in gone:
            edits.replace_lines(stmt, None)
        if gone and len(gone) == len(block) and block is not module.tree.body:
            edits.replace_lines(gone[0], "pass")
    module_refs: set[int] = set()
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            target = layout.resolve(aliases[node.value.id], node.attr)
            edits.replace(node, f"{node.value.id}.{node.attr}", target)
            module_refs.add(id(node.value))
    for node in ast.walk(module.tree):
        if id(node) in removed:
            continue
        if isinstance(node, ast.Name) and node.id in aliases and id(node) not in module_refs:
            raise ExportError(f"{module.label}:{node.lineno}: module {node.id!r} used as an object; use module.name")
        if isinstance(node, ast.Name) and node.id in rename:
            edits.replace(node, node.id, rename[node.id])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in rename:
            if node in module.tree.body:
                rename_definition(edits, module, node, rename[node.name])
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and set(node.names) & set(rename):
            line = edits.lines[node.lineno - 1].decode("utf-8")
            for old in set(node.names) & set(rename):
                line = re.sub(rf"\b{re.escape(old)}\b", rename[old], line)
            edits.whole[node.lineno] = line.encode("utf-8")
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and not is_package_import(module, node):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if bound in rename and node in module.tree.body:
                    if alias.asname is None and "." in alias.name:
                        raise ExportError(f"{module.label}:{node.lineno}: `import {alias.name}` clashes; use `as`")
                    edits.replace(alias, edits_text(edits, alias), f"{alias.name} as {rename[bound]}")
    return edits.text()


def edits_text(edits: Edits, node: ast.AST) -> str:
    """Return the current source text of a one-line node."""
    return edits.lines[node.lineno - 1][node.col_offset : node.end_col_offset].decode("utf-8")


def rename_definition(edits: Edits, module: Module, node: ast.stmt, new: str) -> None:
    """Rename the name in a `def`/`class` line."""
    line = edits.lines[node.lineno - 1]
    keyword = b"class" if isinstance(node, ast.ClassDef) else b"def"
    found = re.match(rb"\s*(?:async\s+)?" + keyword + rb"\s+", line[node.col_offset :])
    if found is None:
        raise ExportError(f"{module.label}:{node.lineno}: cannot find the name of {node.name}")
    start = node.col_offset + found.end()
    edits.replace_span(node.lineno, start, start + len(node.name.encode()), node.name, new)


# ---- the bundle ----

HEADER = '''"""HVCU-Bench task hooks for lmms-eval: prompts, answer parsing, data loading and the paper's metrics.

GENERATED by `hvcu export-task` from hvcu-toolkit {version}: do not edit; change the toolkit and export again.
Each section below is one module of the toolkit's `hvcu_tasks` package, in dependency order; names two modules
share carry their module as prefix (e.g. `context_doc_to_messages`).
"""

from __future__ import annotations

import sys as _hvcu_sys
import types as _hvcu_types
from hashlib import blake2b as _hvcu_blake2b
from os.path import realpath as _hvcu_realpath

# lmms-eval executes a task folder's utils.py once for every `!function utils.<name>` it reads, without
# registering it as a module. Each execution takes a module name made from this file's path and registers a
# module under it, so that dataclasses and pickle find this file's classes (pickle: across the processes of a
# data-parallel run); the first execution fills that module and every later one takes its objects (the end of
# this file), so caches, locks and classes exist once.
__name__ = "hvcu_bench_utils_" + _hvcu_blake2b(_hvcu_realpath(__file__).encode(), digest_size=6).hexdigest()
_hvcu_sys.modules.setdefault(__name__, _hvcu_types.ModuleType(__name__))
'''

SHARE = '''

# ==== one shared instance ====


def _hvcu_share_one_instance(namespace: dict) -> None:
    """Fill the registered module with the first execution's objects; give later executions those objects."""
    shared = _hvcu_sys.modules[namespace["__name__"]]
    if getattr(shared, "_hvcu_filled", False):
        namespace.update({k: v for k, v in vars(shared).items() if not k.startswith("__")})
        return
    shared.__dict__.update({k: v for k, v in namespace.items() if k != "__builtins__"})
    shared._hvcu_filled = True


_hvcu_share_one_instance(globals())
'''

RESERVED_PREFIX = "_hvcu_"
"""Names the bundle's own prologue and epilogue use; no module of the package may bind one."""


def toolkit_version() -> str:
    """Return the installed hvcu-toolkit version ("unknown" outside an installed package)."""
    try:
        return version("hvcu-toolkit")
    except PackageNotFoundError:
        return "unknown"


def bundle(root: str = ROOT_NAME) -> str:
    """Return the self-contained utils.py: every needed package module, rewritten into one file."""
    modules = modules_in_order(root)
    layout = plan(modules)
    reserved = sorted(new for new in layout.names.values() if new.startswith(RESERVED_PREFIX))
    if reserved:
        raise ExportError(f"names starting with {RESERVED_PREFIX!r} are the bundle's own: {', '.join(reserved)}")
    parts = [HEADER.format(version=toolkit_version())]
    seen: set[tuple[str, ...]] = set()
    for module in modules:
        body = tidy(rewrite(module, layout, seen).strip("\n"))
        parts.append(f"\n\n# ==== {module.label} ====\n\n{body}\n")
    parts.append(SHARE)
    text = "".join(parts)
    check_bundle(text)
    return text


def tidy(source: str) -> str:
    """Return the source with runs of blank lines (left by removed statements) cut to two, if that changes no code."""
    tidied = re.sub(r"\n{4,}", "\n\n\n", source)
    return tidied if ast.dump(ast.parse(tidied)) == ast.dump(ast.parse(source)) else source


def check_bundle(text: str) -> None:
    """Refuse a bundle that still imports the package or reads a global name nothing defines."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(n == PACKAGE or n.startswith(PACKAGE + ".") for n in names) or getattr(node, "level", 0):
                raise ExportError(f"bundle line {node.lineno}: still imports {names[0]}")
    table = symtable.symtable(text, "utils.py", "exec")
    defined = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    known = defined | set(dir(builtins)) | {"__file__", "__name__"}
    missing: set[str] = set()

    def walk(scope: symtable.SymbolTable) -> None:
        for sym in scope.get_symbols():
            if (sym.is_global() or scope.get_type() == "module") and sym.is_referenced():
                if sym.get_name() not in known:
                    missing.add(sym.get_name())
        for child in scope.get_children():
            walk(child)

    walk(table)
    if missing:
        raise ExportError(f"bundle reads global name(s) nothing defines: {', '.join(sorted(missing))}")


def referenced_hooks(files: dict[str, bytes]) -> set[str]:
    """Return every `utils.<name>` the YAMLs reference with `!function`."""
    names: set[str] = set()
    for rel, data in files.items():
        if rel.endswith(("yaml", "_yaml")):
            names |= set(re.findall(r"!function\s+utils\.(\w+)", data.decode("utf-8")))
    return names


def smoke_files() -> dict[str, bytes]:
    """Return the bundled smoke sample, at the path (relative to utils.py) the bundled code reads it from."""
    from hvcu_tasks.dev.smoke import SMOKE_DIR

    rel = SMOKE_DIR.relative_to(SMOKE_DIR.parent)
    return {
        str(rel / path.relative_to(SMOKE_DIR)): path.read_bytes()
        for path in sorted(SMOKE_DIR.rglob("*"))
        if path.is_file()
    }


README = """# HVCU-Bench task folder for lmms-eval (generated)

Generated by `hvcu export-task` from hvcu-toolkit {version}: the task YAMLs, the bundled smoke sample (`{data}/`)
and one `utils.py` holding the toolkit's prompts, answer parsing, data loading and metrics. It needs nothing but
lmms-eval ({lmms}) and lmms-eval's own dependencies. Do not edit: change the toolkit and export again.

    lmms-eval --include_path THIS_FOLDER --model vllm --model_args model=Qwen/Qwen3-VL-8B-Instruct \\
      --tasks hvcu_bench,hvcu_bench_context --output_path runs/ --log_samples

or copy this folder into `lmms_eval/tasks/hvcu_bench/`. Groups: {groups}.

- `hvcu_bench*` read the hub dataset Chime316/HVCU-Bench (`HVCU_BENCH_DATA=/path/to/copy` reads a local copy,
  `HVCU_BENCH_REVISION=<commit>` pins the hub revision); `*_sample*` read the smoke sample in `{data}/` (15
  chains on generated images: it tests the plumbing, its numbers mean nothing).
- The context setting (`hvcu_bench_context*`) needs a backend that holds multi-turn chats: `vllm` here. The
  Hugging Face chat backends (`qwen2_5_vl`, `qwen3_vl`, `llava_hf`) need hvcu-toolkit installed (pip install
  hvcu-toolkit), whose round driver runs their rounds; without it they stop before any model call with an error
  that says so. The toolkit's `hvcu_context` wrapper runs it on any backend. The gold context
  (`hvcu_bench_context_gold*`) runs on those four backends' chat classes, not under `--force_simple`.
"""


def export_files(lmms_range: str) -> dict[str, bytes]:
    """Return every file of the exported folder (relative path -> bytes)."""
    files = {
        str(path.relative_to(TASKS_DIR)): path.read_bytes()
        for path in sorted(TASKS_DIR.rglob("*"))
        if path.is_file() and TASK_FILE.search(path.name) and "__pycache__" not in path.parts
    }
    code = bundle()
    defined = {s.get_name() for s in symtable.symtable(code, "utils.py", "exec").get_symbols() if s.is_assigned()}
    missing = sorted(referenced_hooks(files) - defined)
    if missing:
        raise ExportError(f"the task YAMLs reference utils.{', utils.'.join(missing)}, which the bundle lacks")
    files["utils.py"] = code.encode("utf-8")
    smoke = smoke_files()
    files.update(smoke)
    groups = sorted(
        found.group(1).decode()
        for rel, data in files.items()
        if rel.endswith(".yaml") and (found := re.search(rb"^group: (\S+)", data, re.M))
    )
    data_dir = next(iter(smoke)).split("/")[0] if smoke else "data"
    files["README.md"] = README.format(
        version=toolkit_version(), data=data_dir, lmms=lmms_range, groups=", ".join(f"`{g}`" for g in groups)
    ).encode("utf-8")
    return files


MARKER = ".hvcu-export"
"""The file every export writes: a first line naming the toolkit version, then every file it wrote (sorted)."""
MARKER_HEAD = "hvcu export-task: written by hvcu-toolkit "


def marker_text(files: dict[str, bytes]) -> str:
    """Return the marker file's text for an export of `files`."""
    return "".join(f"{line}\n" for line in [MARKER_HEAD + toolkit_version(), *sorted(files)])


def exported_files(folder: Path) -> set[str] | None:
    """Return the files an earlier export wrote into `folder` (its marker's list), or None when it has no marker."""
    marker = folder / MARKER
    if not marker.is_file() or marker.is_symlink():
        return None
    lines = marker.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines or not lines[0].startswith(MARKER_HEAD):
        return None
    return {MARKER, *lines[1:]}


def foreign_files(folder: Path, limit: int = 3) -> list[str]:
    """Return up to `limit`+1 files (or linked folders) in `folder` that no export wrote, in a stable order.

    In an earlier export, its own files (its marker lists them) and Python's bytecode cache of its utils.py are not
    foreign; in a folder with no marker, every file is.
    """
    own = exported_files(folder)
    found: list[str] = []
    for top, dirs, names in os.walk(folder):
        dirs.sort()
        rel_top = Path(top).relative_to(folder)
        linked = [d for d in dirs if (Path(top) / d).is_symlink()]
        for name in sorted(names + linked):
            rel = rel_top / name
            cache = "__pycache__" in rel.parts and name.endswith(".pyc")
            if own is not None and (rel.as_posix() in own or cache):
                continue
            found.append(rel.as_posix())
            if len(found) > limit:
                return found
    return found


def check_target(dest: Path, force: bool) -> None:
    """Refuse a DIR the export must not replace: the working folder (or one holding it), or files not ours."""
    where = Path(os.path.abspath(dest))
    here = Path.cwd().resolve()
    if where.resolve() == here or where.resolve() in here.parents:
        raise ExportError(
            f"DIR {dest}: is the current folder (or holds it); name a folder beside it, e.g. "
            f"{where.resolve().parent / 'hvcu_bench'}"
        )
    if not where.exists() or not any(where.iterdir()):
        return
    if not force:
        raise ExportError(f"{dest}: folder exists and is not empty (--force replaces an earlier export)")
    foreign = foreign_files(where)
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise ExportError(
            f"{dest}: --force replaces only an empty folder or an earlier export, and this folder holds files no "
            f"export wrote ({shown}); name a new folder, e.g. {dest / 'hvcu_bench'}"
        )


def export_task(dest: Path, force: bool = False) -> dict[str, bytes]:
    """Write the task folder to `dest` (all of it or nothing).

    An existing non-empty `dest` is replaced only with `force`, and only when it is an earlier export (every file
    in it listed in its marker); the working folder, or a folder holding it, is never replaced.
    """
    from hvcu_tasks.data.files import check_folder
    from hvcu_tasks.lmms.plugin import SUPPORTED_LMMS_EVAL

    dest = check_folder(dest, "DIR")
    check_target(dest, force)
    files = export_files(SUPPORTED_LMMS_EVAL)
    files[MARKER] = marker_text(files).encode("utf-8")
    where = Path(os.path.abspath(dest))
    where.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{where.name}.", dir=where.parent))
    try:
        for rel, data in files.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        old = None
        if where.exists():
            old = where.with_name(f".{where.name}.old.{os.getpid()}")
            where.rename(old)
        staging.rename(where)
        if old is not None:
            shutil.rmtree(old)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return files


def _cmd_export_task(args: argparse.Namespace) -> int:
    """Write the task folder and say what is in it."""
    files = export_task(args.dir, force=args.force)
    lines = (files["utils.py"].count(b"\n"), len(files))
    print(f"wrote {args.dir}: {lines[1]} files, utils.py {lines[0]} lines")
    print(f"run: lmms-eval --include_path {args.dir} --tasks hvcu_bench_sample ... (see {args.dir}/README.md)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `export-task` subcommand."""
    p = sub.add_parser(
        "export-task",
        help="write a self-contained lmms-eval task folder (YAMLs + one utils.py) that needs no hvcu-toolkit",
        description=(
            "Write DIR: the HVCU-Bench task YAMLs, the smoke sample and one utils.py generated from this package "
            "(prompts, parsing, data loading, metrics), for `lmms-eval --include_path DIR` or lmms-eval's tasks folder."
        ),
    )
    p.add_argument(
        "dir", type=Path, metavar="DIR", help="the folder to write (absent, empty, or an earlier export with --force)"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help=f"replace DIR when it is an earlier export (its {MARKER} lists every file in it); never other files",
    )
    p.set_defaults(func=_cmd_export_task)
