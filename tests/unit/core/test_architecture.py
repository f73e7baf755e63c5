"""The house rules, read from the code (docs/architecture.md): floors, charters, import
direction, no private names across modules, the installed package list, the module size budget.

Every package's ``__init__.py`` docstring is its charter: a summary line, ``Lives here: …``
and ``May import: …``. The last line is the rule this test enforces. A module may import
modules of its own package, of the package's subpackages (not for the root ``trtbench``,
which holds only the entry point), and of the rooms its package's charter names: a dotted
name under ``trtbench`` (``core``, ``spec``, ``builders.manifest``, ``profiling.loadtest``).
On top of the charters, :data:`FLOORS` orders the rooms: nothing imports a floor above its own.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomllib

from tests.support.data import REPO_ROOT

SOFT_CODE_LINES = 320
"""A module's code lines (docstrings, comments and blank lines not counted) above which it
must say why it is one concept (:data:`LONGER_BY_CONCEPT`): a module is split where its
concept splits, never to fit a count, and a long explanation never pushes code out."""
HARD_CODE_LINES = 400
"""No module, listed or not, holds more code lines than this."""
LONGER_BY_CONCEPT = {
    "profiling/traces/nsys.py": "one facade over one export format: the schema-aware "
    "loader of an Nsight Systems SQLite export and its call-to-GPU-work join",
    "profiling/loadtest/stats/metrics.py": "the definitions of summary.csv's latency "
    "figures, kept together so each reads beside the others (docs/metrics.md)",
    "profiling/loadtest/records/counter_versions.py": "one table (data: a row per server, "
    "counter source and meaning) that the readers, docs/metrics.md and their tests share",
}
"""Modules above :data:`SOFT_CODE_LINES`, each with the concept that holds it together."""
NOT_CODE = {
    "templates",
    "data",
    "__pycache__",
}  # package data: Triton models, contracts


def package_dirs() -> dict[str, Path]:
    """Installed package name -> folder, from pyproject's package-dir mapping."""
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    mapping = pyproject["tool"]["setuptools"]["package-dir"]
    found: dict[str, Path] = {}
    for name, folder in mapping.items():
        root = REPO_ROOT / folder
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root)
            if NOT_CODE & set(rel.parts):
                continue
            found[".".join([name, *rel.parts])] = init.parent
    return found


PACKAGES = package_dirs()


@dataclass(frozen=True)
class Module:
    name: str  # trtbench.profiling.traces.nsys
    package: str  # trtbench.profiling.traces
    path: Path


def modules() -> list[Module]:
    out = []
    for pkg, folder in PACKAGES.items():
        for path in sorted(folder.glob("*.py")):
            name = pkg if path.stem == "__init__" else f"{pkg}.{path.stem}"
            out.append(Module(name, pkg, path))
    return out


MODULES = modules()
MODULE_NAMES = {m.name for m in MODULES}


def charter(package: str) -> tuple[str, str, list[str]]:
    """(summary, lives here, may import) of a package's ``__init__`` docstring."""
    doc = ast.get_docstring(ast.parse((PACKAGES[package] / "__init__.py").read_text()))
    lines = [line for line in (doc or "").splitlines() if line.strip()]
    assert len(lines) == 3, f"{package}: charter must be 3 lines, got {lines}"
    summary, lives, may = lines
    assert lives.startswith("Lives here: "), f"{package}: {lives!r}"
    assert may.startswith("May import: "), f"{package}: {may!r}"
    rooms = may.removeprefix("May import: ").split("(")[0].rstrip(" .")
    allowed = (
        [] if rooms.startswith("nothing") else [r.strip() for r in rooms.split(",")]
    )
    return summary, lives, allowed


def imported_modules(tree: ast.AST, module: Module) -> list[tuple[int, str, list[str]]]:
    """(line, trtbench module imported, names taken from it) for every import statement,
    lazy ones included; the target is the longest known module prefix."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.package.split(".")[
                    : len(module.package.split(".")) - node.level + 1
                ]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            names = [a.name for a in node.names]
            targets = [
                (f"{base}.{n}", []) if f"{base}.{n}" in MODULE_NAMES else (base, [n])
                for n in names
            ]
        else:
            continue
        for target, names in targets:
            if target == "trtbench" or target.startswith("trtbench."):
                found.append((node.lineno, target, names))
    return found


def type_checking_lines(tree: ast.AST) -> set[int]:
    """Lines inside ``if TYPE_CHECKING:`` blocks (annotations only, never run)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith(
            "TYPE_CHECKING"
        ):
            for child in node.body:
                lines.update(
                    range(child.lineno, (child.end_lineno or child.lineno) + 1)
                )
    return lines


def owner(target: str) -> str:
    """The module a dotted import target names (a package counts as its __init__)."""
    while target not in MODULE_NAMES and "." in target:
        target = target.rsplit(".", 1)[0]
    return target


ENTRY_POINT = "trtbench.cli"  # the only module of the root package, above everything

FLOORS = (
    ("ground", ("core",)),
    ("bench spec", ("spec",)),
    (
        "subsystems",
        ("builders", "triton_repo", "vllm_server", "trtllm_server", "profiling"),
    ),
    ("planner", ("plan",)),
    ("stages", ("pipeline", "cluster")),
    ("roof", ("commands", "cli")),
)
"""The floors of ``trtbench``, bottom first (docs/architecture.md draws them): a module
never imports a room of a floor above its own."""


def floor(name: str) -> int:
    """The floor (index into :data:`FLOORS`) of a module or package ``trtbench.<room>…``."""
    room = name.removeprefix("trtbench.").split(".")[0]
    return next(i for i, (_, rooms) in enumerate(FLOORS) if room in rooms)


def in_room(target: str, room: str) -> bool:
    full = f"trtbench.{room}"
    return target == full or target.startswith(full + ".")


def allowed(module: Module, target: str) -> bool:
    if owner(target) == ENTRY_POINT:
        return False  # nothing in the package imports the command line
    if owner(target) == "trtbench":
        return True  # the root package's __init__: __version__ only
    if module.name == ENTRY_POINT and in_room(target, "commands"):
        return True  # the entry point reaches its commands
    target_pkg = next(m.package for m in MODULES if m.name == owner(target))
    if target_pkg == module.package:
        return True
    if module.package != "trtbench" and target_pkg.startswith(module.package + "."):
        return True
    return any(in_room(target, room) for room in charter(module.package)[2])


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_package_has_a_three_line_charter(package: str):
    summary, lives, rooms = charter(package)
    assert summary.endswith(".") or summary.endswith(":"), summary
    known = (
        {"core"}
        | {p.removeprefix("trtbench.") for p in PACKAGES}
        | {m.name.removeprefix("trtbench.") for m in MODULES}
    )
    assert set(rooms) <= known, f"{package}: unknown rooms {set(rooms) - known}"


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_every_charter_names_what_lives_in_its_folder(package: str):
    """A module or sub-folder left out of its package's "Lives here" line is one a
    newcomer cannot find from docs/architecture.md's rooms."""
    _, lives, _ = charter(package)
    words = set(re.findall(r"\w+", lives))
    folder = PACKAGES[package]
    present = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
    present += [p.parent.name for p in folder.glob("*/__init__.py")]
    if package in PLUGIN_FOLDERS:
        # a plug-in folder: its charter names the interface; every other module is named
        # as a method (adding a module adds the method, no list to edit)
        from trtbench.core.methods import METHODS

        present = [name for name in present if name not in METHODS]
    assert sorted(name for name in present if name not in words) == []


PLUGIN_FOLDERS = ("trtbench.core.methods", "trtbench.builders.reference.methods")
"""Folders of one module per speculative method, found at import."""


@pytest.mark.parametrize(
    "package", ["trtbench.profiling", "trtbench.profiling.loadtest"]
)
def test_a_folder_of_folders_has_no_module_of_its_own(package: str):
    assert [p.name for p in PACKAGES[package].glob("*.py")] == ["__init__.py"]


def test_pyproject_installs_every_package():
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert sorted(pyproject["tool"]["setuptools"]["packages"]) == sorted(PACKAGES)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_imports_follow_the_charters(module: Module):
    tree = ast.parse(module.path.read_text())
    wrong = sorted(
        {
            f"{module.path.relative_to(REPO_ROOT)}:{line} imports {target}"
            for line, target, _ in imported_modules(tree, module)
            if owner(target) in MODULE_NAMES and not allowed(module, target)
        }
    )
    may = charter(module.package)[2]
    assert not wrong, f"{module.package} may import {may} only: {wrong}"


def test_the_root_package_holds_only_the_entry_point():
    assert sorted(m.name for m in MODULES if m.package == "trtbench") == [
        "trtbench",
        ENTRY_POINT,
    ]


def test_every_room_is_on_one_floor():
    rooms = {p.removeprefix("trtbench.").split(".")[0] for p in PACKAGES} - {"trtbench"}
    placed = {r for _, floor_rooms in FLOORS for r in floor_rooms} - {"cli"}
    assert rooms == placed


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_nothing_imports_a_floor_above(module: Module):
    if module.name == "trtbench":
        return
    tree = ast.parse(module.path.read_text())
    up = sorted(
        {
            f"{module.name} ({FLOORS[floor(module.name)][0]}) imports {target} "
            f"({FLOORS[floor(target)][0]})"
            for _, target, _ in imported_modules(tree, module)
            if owner(target) in MODULE_NAMES
            and owner(target) != "trtbench"
            and floor(target) > floor(module.name)
        }
    )
    assert up == []


def test_no_import_cycles():
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        tree = ast.parse(module.path.read_text())
        skip = type_checking_lines(tree)
        graph[module.name] = {
            owner(t)
            for line, t, _ in imported_modules(tree, module)
            if line not in skip and owner(t) != module.name and owner(t) in MODULE_NAMES
        }
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt) :] + [nxt] if nxt in path else [node, nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])


def python_files() -> list[Path]:
    roots = [
        REPO_ROOT / d
        for d in ("trtbench", "builders", "profiling", "triton_repo", "vllm_server")
    ]
    roots += [REPO_ROOT / "scripts", REPO_ROOT / "tests"]
    return sorted(
        p for r in roots for p in r.rglob("*.py") if "__pycache__" not in p.parts
    )


def private_uses(path: Path) -> list[str]:
    """``from x import _name`` and ``module._name`` where ``module`` was imported."""
    tree = ast.parse(path.read_text())
    imported: set[str] = set()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    out.append(
                        f"{path}:{node.lineno} from {node.module} import {a.name}"
                    )
                imported.add(a.asname or a.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name)
            and node.value.id in imported
        ):
            out.append(f"{path}:{node.lineno} {ast.unparse(node)}")
    return out


def test_no_private_name_is_used_across_modules():
    third_party = (
        "torch",
        "np",
        "sys",
        "os",
    )  # their private names are theirs to document
    found = [
        use
        for path in python_files()
        for use in private_uses(path)
        if not use.split(" ", 1)[1].startswith(tuple(f"{m}." for m in third_party))
    ]
    assert found == []


TOP_FOLDERS = ("builders", "profiling", "triton_repo", "vllm_server")
"""Repository folders installed under ``trtbench.`` (pyproject's package-dir)."""


def absolute_imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every absolute import in the file at ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level:
            found.append((node.lineno, node.module or ""))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
    return found


def test_the_package_is_imported_by_one_name_only():
    """``builders.x`` and ``trtbench.builders.x`` would be two modules with two copies of
    their state; scripts and tests import the installed name only."""
    wrong = [
        f"{path.relative_to(REPO_ROOT)}:{line} {name}"
        for path in python_files()
        for line, name in absolute_imports(path)
        if name.split(".")[0] in TOP_FOLDERS
    ]
    assert wrong == []


def test_tests_import_helpers_from_tests_support_only():
    """A test module never imports another test module (or a bare helper by its file name):
    that works only when pytest happened to put the other folder on sys.path first."""
    files = list((REPO_ROOT / "tests").rglob("*.py"))
    local = {p.stem for p in files}
    wrong = [
        f"{path}:{line} {name}"
        for path in files
        for line, name in absolute_imports(path)
        if name.split(".")[0] in local
    ]
    assert wrong == []


def code_lines(text: str) -> int:
    """Lines of ``text`` (Python source) that hold a token of code: not blank, not only a
    comment, not part of a docstring (a string standing alone as a statement: a module's,
    class's or function's docstring, or an attribute's)."""
    doc: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            doc.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    skip = {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    }
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in skip:
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - doc)


def test_code_lines_count_code_only():
    text = (
        '"""Module docstring,\n\nlong."""\n'
        "# a comment\n"
        "\n"
        "X = 1  # trailing comment: still a code line\n"
        '"""X\'s attribute docstring."""\n'
        "def f(a,\n      b):\n"
        '    """Docstring."""\n'
        "    return (a +\n            b)\n"
    )
    assert code_lines(text) == 5  # X = 1; def (2 lines); return (2 lines)


def test_modules_stay_within_the_size_budget():
    sizes = {
        str(m.path.relative_to(REPO_ROOT)): code_lines(m.path.read_text())
        for m in MODULES
    }
    unexplained = {
        path: n
        for path, n in sizes.items()
        if n > SOFT_CODE_LINES and path not in LONGER_BY_CONCEPT
    }
    assert unexplained == {}, "split by concept, or say why in LONGER_BY_CONCEPT"
    assert {path: n for path, n in sizes.items() if n > HARD_CODE_LINES} == {}
    stale = {
        path: sizes.get(path)
        for path in LONGER_BY_CONCEPT
        if sizes.get(path, 0) <= SOFT_CODE_LINES
    }
    assert stale == {}, "no longer over the soft limit: drop it from LONGER_BY_CONCEPT"


def test_no_module_is_packed_to_fit():
    """``# fmt: skip`` kept code on fewer lines to fit the count; the formatter decides."""
    packed = [
        str(p.relative_to(REPO_ROOT))
        for p in python_files()
        if "fmt: skip" in p.read_text()
    ]
    assert packed == [(str(Path(__file__).relative_to(REPO_ROOT)))]


def test_the_checks_see_a_violation():
    """The rules above are not vacuous: a core module importing a subsystem is caught, and
    so is a private name taken from another module."""
    core = next(m for m in MODULES if m.name == "trtbench.spec.bench")
    assert not allowed(core, "trtbench.profiling.loadtest.stats.metrics")
    reference = next(
        m for m in MODULES if m.name == "trtbench.builders.reference.engine"
    )
    assert not allowed(reference, "trtbench.builders.trtllm.plan")
    assert allowed(reference, "trtbench.builders.medusa_tree")
    assert allowed(reference, "trtbench.core.errors")
    assert not allowed(core, "trtbench.cli")


def test_private_use_detector(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from trtbench.cli import _hidden\n"
        "from trtbench.builders.tiny import tiny_models as tm\n"
        "tm._secret()\n"
        "self._fine = 1\n"
    )
    found = private_uses(probe)
    assert [f.split(" ", 1)[1] for f in found] == [
        "from trtbench.cli import _hidden",
        "tm._secret",
    ]


def test_test_file_names_are_unique():
    """pytest imports test files by basename (no __init__.py in tests/): two files of one
    name in different folders stop the whole collection."""
    names = [p.name for p in (REPO_ROOT / "tests").rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
