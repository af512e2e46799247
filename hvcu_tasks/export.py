"""`hvcu export-task DIR`: an lmms-eval task folder generated from this package, needing nothing but lmms-eval.

The SHIPPED modules and the core files they import are copied with their package imports made relative (any other
import is an ExportError naming file and line); `.hvcu-export` lists what was written, so `--force` replaces only
an earlier export. See docs/lmms-eval.md, "A task folder for lmms-eval itself".
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import tempfile
from pathlib import Path

PACKAGE = "hvcu_tasks"
PACKAGE_DIR: Path = Path(__file__).resolve().parent
TASKS_DIR: Path = PACKAGE_DIR / "lmms" / "tasks"
CORE_DIR: Path = PACKAGE_DIR / "core"
LMMS_DIR: Path = PACKAGE_DIR / "lmms"
UTILS_TEMPLATE: Path = LMMS_DIR / "export_utils.py"
README_TEMPLATE: Path = LMMS_DIR / "export_README.md"
"""The exported folder's README, formatted with the toolkit version, the lmms-eval range and the groups."""
LIB = "hvcu_lib"
"""The exported folder's code folder (export_utils.LIB)."""
CORE = f"{PACKAGE}.core"
SHARED = ("hooks", "context", "analysis_tasks", "hook_table")
"""The hook modules of `hvcu_tasks/lmms/` both task folders run: the export copies each as hvcu_lib/<name>.py."""
SHIPPED: dict[str, tuple[str, Path]] = {
    f"{PACKAGE}.settings": ("settings", PACKAGE_DIR / "settings.py"),
    f"{PACKAGE}.lmms.documents": ("documents", LMMS_DIR / "export_documents.py"),
    **{f"{PACKAGE}.lmms.{name}": (name, LMMS_DIR / f"{name}.py") for name in SHARED},
}
"""The modules besides the core the export ships: module -> (its name in hvcu_lib/, the file copied there)."""
TASK_FILE = re.compile(r"(\.yaml|_yaml|\.jsonl)$")
"""Files of the task folder that go into the export as they are (YAMLs, YAML fragments, data stubs)."""
MARKER = ".hvcu-export"
"""The file every export writes: a first line naming the toolkit version, then every other file it wrote (sorted)."""
MARKER_HEAD = "hvcu export-task: written by hvcu-toolkit "
LIB_INIT = '"""HVCU-Bench code of an exported task folder: the toolkit\'s hook modules and its pure core (core/)."""\n'


class ExportError(ValueError):
    """The package's code cannot be exported as it is, or the target folder is not usable."""


def label(path: Path) -> str:
    """Return a package file relative to the repository, for messages."""
    return str(path.relative_to(PACKAGE_DIR.parent) if path.is_relative_to(PACKAGE_DIR.parent) else path)


def _shipped(module: str, names: list[str], depth: int) -> bool:
    """Whether `from module import names` imports only exported code, seen from a copy `depth` below the core."""
    if (module + ".").startswith(CORE + "."):
        return True
    if depth == 0:
        return False
    return module in SHIPPED or bool(names) and all(f"{module}.{name}" in SHIPPED for name in names)


def _target(module: str, depth: int) -> str:
    """Return the relative module an exported copy imports in place of the package's `module`."""
    if module in SHIPPED:
        return "." + SHIPPED[module][0]
    if not (module + ".").startswith(CORE + "."):
        return "."  # `from hvcu_tasks.lmms import hooks, context`: modules shipped beside the importer
    rest = module[len(CORE) :].lstrip(".")
    return ("." if depth == 0 else ".core" + ("." if rest else "")) + rest


def relative_core_imports(path: Path, depth: int) -> bytes:
    """Return a module's source with its `from` imports of exported package modules made relative to hvcu_lib/.

    `depth`: 0 for hvcu_lib/core/*.py (they may import only the core), -1 for hvcu_lib/*.py (also the SHIPPED ones).
    """
    source = path.read_bytes()
    lines = source.decode("utf-8").splitlines(keepends=True)
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == PACKAGE for a in node.names):
            module, names = node.names[0].name, []
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == PACKAGE:
            module, names = node.module or "", [a.name for a in node.names]
        else:
            continue
        if isinstance(node, ast.Import) or not _shipped(module, names, depth):
            raise ExportError(
                f"{label(path)}:{node.lineno}: imports {module}; an exported module may import only {CORE}, the "
                f"hook modules it ships (as `from ... import`), the standard library and lmms-eval's dependencies"
            )
        line = lines[node.lineno - 1]
        found = re.compile(r"\bfrom\s+" + re.escape(module) + r"\s+import\b").search(line, node.col_offset)
        if found is None:
            raise ExportError(f"{label(path)}:{node.lineno}: cannot find `from {module} import` on one line")
        lines[node.lineno - 1] = line[: found.start()] + f"from {_target(module, depth)} import" + line[found.end() :]
    return "".join(lines).encode("utf-8")


def core_imports(path: Path) -> set[str]:
    """Return the core modules (file stems) a module imports, at its top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == CORE:
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(CORE + "."):
            found.add((node.module or "").removeprefix(CORE + ".").split(".")[0])
    return found


def used_core() -> list[Path]:
    """Return the core modules the SHIPPED modules import, directly or through other core modules (sorted)."""
    todo = set().union(*(core_imports(path) for _name, path in SHIPPED.values()))
    done: set[str] = {"__init__"}
    while todo - done:
        name = min(todo - done)
        done.add(name)
        todo |= core_imports(CORE_DIR / f"{name}.py")
    return sorted(CORE_DIR / f"{name}.py" for name in done)


def code_files() -> dict[str, bytes]:
    """Return the exported code: utils.py, the SHIPPED modules and a copy of each core module they use."""
    files = {"utils.py": UTILS_TEMPLATE.read_bytes(), f"{LIB}/__init__.py": LIB_INIT.encode("utf-8")}
    for name, path in SHIPPED.values():
        files[f"{LIB}/{name}.py"] = relative_core_imports(path, -1)
    for path in used_core():
        files[f"{LIB}/core/{path.name}"] = relative_core_imports(path, 0)
    return files


def export_files(lmms_range: str) -> dict[str, bytes]:
    """Return every file of the exported folder (relative path -> bytes)."""
    from hvcu_tasks.data.provenance import toolkit_version
    from hvcu_tasks.dev.smoke import SMOKE_DIR
    from hvcu_tasks.lmms.hook_table import HOOKS

    files = {
        path.relative_to(TASKS_DIR).as_posix(): path.read_bytes()
        for path in sorted(TASKS_DIR.rglob("*"))
        if path.is_file() and TASK_FILE.search(path.name) and "__pycache__" not in path.parts
    }
    yamls = [data.decode("utf-8") for rel, data in files.items() if rel.endswith(("yaml", "_yaml"))]
    missing = sorted({name for text in yamls for name in re.findall(r"!function\s+utils\.(\w+)", text)} - set(HOOKS))
    if missing:
        raise ExportError(f"the task YAMLs reference utils.{', utils.'.join(missing)}, which hook_table.HOOKS lacks")
    files.update(code_files())
    files.update(
        (f"data/{path.relative_to(SMOKE_DIR).as_posix()}", path.read_bytes())
        for path in sorted(SMOKE_DIR.rglob("*"))
        if path.is_file()
    )
    groups = sorted(
        found.group(1).decode()
        for rel, data in files.items()
        if rel.endswith(".yaml") and (found := re.search(rb"^group: (\S+)", data, re.M))
    )
    version = toolkit_version()
    readme = README_TEMPLATE.read_text("utf-8").format(
        version=version, lmms=lmms_range, groups=", ".join(f"`{g}`" for g in groups)
    )
    files["README.md"] = readme.encode("utf-8")
    files[MARKER] = "".join(f"{line}\n" for line in [MARKER_HEAD + version, *sorted(files)]).encode("utf-8")
    return files


def foreign_files(folder: Path, limit: int = 3) -> list[str]:
    """Return up to `limit`+1 files (or linked folders) in `folder` that no export wrote (its marker's list and
    bytecode caches aside; all of them without a marker), in a stable order."""
    marker = folder / MARKER
    lines = [] if marker.is_symlink() or not marker.is_file() else marker.read_text("utf-8", "replace").splitlines()
    own = {MARKER, *lines[1:]} if lines and lines[0].startswith(MARKER_HEAD) else None  # an earlier export's files
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
    """Write the task folder to `dest`, all of it or nothing (check_target says which `dest` it may replace)."""
    from hvcu_tasks.data.files import check_folder
    from hvcu_tasks.lmms.plugin import SUPPORTED_LMMS_EVAL

    dest = check_folder(dest, "DIR")
    check_target(dest, force)
    files = export_files(SUPPORTED_LMMS_EVAL)
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
    lines = sum(data.count(b"\n") for rel, data in files.items() if rel.endswith(".py"))
    print(f"wrote {args.dir}: {len(files)} files, {lines} lines of Python (utils.py, {LIB}/)")
    print(f"run: lmms-eval --include_path {args.dir} --tasks hvcu_bench_sample ... (see {args.dir}/README.md)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the `export-task` subcommand."""
    p = sub.add_parser(
        "export-task",
        help="write an lmms-eval task folder (YAMLs, utils.py, the pure core) that needs no hvcu-toolkit",
        description=(
            "Write DIR: the HVCU-Bench task YAMLs, the smoke sample, a utils.py of hooks and a copy of the "
            "toolkit's pure core (prompts, parsing, metrics), for `lmms-eval --include_path DIR` or lmms-eval's "
            "tasks folder."
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
