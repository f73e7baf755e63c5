"""The servers and backends (``trtbench/core/stacks.py``) are records callers ask, never
names they compare: each record answers what its stack is (written out below from the
stacks' own documentation, not read from the records), its ``module:function`` paths name
the functions that start, build and render, the spec accepts exactly the combinations the
records allow (others refused in one line), and no module outside ``stacks.py`` compares a
variant's server or backend with a name constant (read from every module's syntax tree)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest
import tomllib

from tests.support.data import REPO_ROOT
from trtbench.builders.build import backend_builder, variant_backend
from trtbench.builders.reference.build import build_reference_variant
from trtbench.builders.trtllm.backend import build_trtllm_variant
from trtbench.builders.trtllm.llmapi_build import build_llmapi_variant
from trtbench.core import stacks
from trtbench.core.errors import ConfigError
from trtbench.pipeline.trtllm_deploy import (
    describe_trtllm_serve,
    trtllm_server_for,
    trtllm_tokenizer_dir,
)
from trtbench.pipeline.vllm_deploy import (
    describe_vllm,
    vllm_server_for,
    vllm_tokenizer_dir,
)
from trtbench.spec.bench import DeploySpec, parse_spec
from trtbench.spec.llmapi import Backend
from trtbench.spec.serving import Server
from trtbench.triton_repo.render import render_reference
from trtbench.triton_repo.render_llmapi import render_llmapi
from trtbench.triton_repo.render_trtllm import render_trtllm

SERVES = {
    "triton": {"reference", "trtllm", "trtllm-pytorch"},
    "vllm": {"reference"},
    "trtllm-serve": {"trtllm-pytorch"},
}
"""Which builds each server serves: Triton every backend's repository; vLLM the Hugging
Face directories the reference build checks; trtllm-serve the LLM-API plan of
trtllm-pytorch (docs/servers.md, ``spec/serving.py``)."""


def test_the_spec_literals_are_the_records_names():
    assert get_args(Server) == tuple(stacks.SERVER_STACKS) == stacks.SERVERS
    assert get_args(Backend) == tuple(stacks.BACKEND_STACKS) == stacks.BACKENDS


def test_what_each_server_is():
    facts = {
        name: (
            s.protocol,
            s.model_repository,
            set(s.backends),
            s.own_engine,
            s.llmapi_counters,
            s.executable,
        )
        for name, s in stacks.SERVER_STACKS.items()
    }
    assert facts == {
        "triton": (
            "triton-grpc",
            True,
            SERVES["triton"],
            False,
            False,
            "tritonserver",
        ),
        "vllm": ("openai", False, SERVES["vllm"], True, False, "vllm_python"),
        "trtllm-serve": (
            "openai",
            False,
            SERVES["trtllm-serve"],
            False,
            True,
            "trtllm_serve",
        ),
    }
    labels = {name: s.label for name, s in stacks.SERVER_STACKS.items()}
    assert labels == {
        "triton": "Triton",
        "vllm": "vLLM",
        "trtllm-serve": "trtllm-serve",
    }


def test_each_servers_executable_is_a_deploy_field():
    for s in stacks.SERVER_STACKS.values():
        assert s.executable in DeploySpec.model_fields, s.name


def test_what_each_backend_is():
    facts = {
        name: (b.reference_engine, b.engines, b.llmapi, b.tensorrt_llm)
        for name, b in stacks.BACKEND_STACKS.items()
    }
    assert facts == {
        "reference": (True, False, False, False),
        "trtllm": (False, True, False, True),
        "trtllm-pytorch": (False, False, True, True),
    }


def test_the_paths_name_the_functions_that_start_build_and_render():
    """Checked against the functions imported by name (a path to a wrong function or a
    typo fails here, not in a run)."""
    launch = {
        name: tuple(
            path and stacks.load(path)
            for path in (s.launch, s.tokenizer_dir, s.describe)
        )
        for name, s in stacks.SERVER_STACKS.items()
    }
    assert launch == {
        "triton": (None, None, None),  # served from the repository trtbench writes
        "vllm": (vllm_server_for, vllm_tokenizer_dir, describe_vllm),
        "trtllm-serve": (
            trtllm_server_for,
            trtllm_tokenizer_dir,
            describe_trtllm_serve,
        ),
    }
    built = {name: backend_builder(name) for name in stacks.BACKENDS}
    assert built == {
        "reference": build_reference_variant,
        "trtllm": build_trtllm_variant,
        "trtllm-pytorch": build_llmapi_variant,
    }
    rendered = {
        name: stacks.load(b.repository) for name, b in stacks.BACKEND_STACKS.items()
    }
    assert rendered == {
        "reference": render_reference,
        "trtllm": render_trtllm,
        "trtllm-pytorch": render_llmapi,
    }


@pytest.mark.parametrize(
    ("kind", "name", "fact", "expected"),
    [
        ("server", "vllm", "own_engine", True),
        ("server", "triton", "own_engine", False),
        ("backend", "trtllm-pytorch", "llmapi", True),
        ("server", float("nan"), "own_engine", False),  # a CSV row without a server
        ("backend", None, "reference_engine", False),
        ("backend", "tensorrt", "engines", False),  # a name this version does not know
    ],
)
def test_a_report_row_asks_what_its_server_or_backend_is(kind, name, fact, expected):
    assert stacks.has(kind, name, fact) is expected


@pytest.mark.parametrize(
    ("ask", "name", "known"),
    [
        (stacks.server, "sglang", "triton, vllm, trtllm-serve"),
        (stacks.backend, "tensorrt", "reference, trtllm, trtllm-pytorch"),
        (backend_builder, "tensorrt", "reference, trtllm, trtllm-pytorch"),
    ],
)
def test_an_unknown_name_is_refused_in_one_line(ask, name, known):
    with pytest.raises(ConfigError) as info:
        ask(name)
    what = "server" if ask is stacks.server else "backend"
    assert str(info.value) == f"{what} {name!r} is unknown; use one of {known}"


@pytest.mark.parametrize("server", sorted(SERVES))
@pytest.mark.parametrize("backend", ["reference", "trtllm", "trtllm-pytorch"])
def test_a_variant_builds_exactly_where_its_server_serves_the_backend(server, backend):
    """The spec and the build together accept a baseline variant of ``server`` with
    ``backend`` exactly when :data:`SERVES` lists it; otherwise one line names the field."""
    text = (
        f"backend: {backend}\nmodels: {{target: t}}\n"
        f"variants: [{{name: a, mode: baseline, server: {server}}}]\n"
    )
    try:
        spec = parse_spec(text)
        variant_backend(spec, spec.variants[0], None)
    except ConfigError as exc:
        assert backend not in SERVES[server]
        assert "\n" not in str(exc) and "variants[0]." in str(exc)
    else:
        assert backend in SERVES[server]


# -- the guard: no comparison with a server or backend name constant -------------------

CONSTANTS = {"TRITON", "VLLM", "TRTLLM_SERVE", "REFERENCE", "TRTLLM", "TRTLLM_PYTORCH"}
"""The name constants of ``trtbench/core/stacks.py``, written out."""
STACKS_MODULE = "trtbench.core.stacks"
EQUALITY = (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)
MEMBERSHIP = (ast.In, ast.NotIn)


def _module_names() -> dict[Path, str]:
    """Every module file of the package → its dotted name (pyproject's package-dir)."""
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    out = {}
    for package, folder in pyproject["tool"]["setuptools"]["package-dir"].items():
        root = REPO_ROOT / folder
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if ".venv" in parts or "templates" in parts:
                continue
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            out.setdefault(path, ".".join((package, *parts)))
    return out


class _Names:
    """What one module's names refer to: the stacks module, or a stack name constant."""

    def __init__(self, tree: ast.Module, aliases: dict[str, set[str]]) -> None:
        self.modules: set[str] = set()  # local names of trtbench.core.stacks
        self.constants: set[str] = set()  # local names of a stack name constant
        for node in ast.walk(tree):  # imports inside functions too
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == STACKS_MODULE and a.asname:
                        self.modules.add(a.asname)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    local = a.asname or a.name
                    if f"{node.module}.{a.name}" == STACKS_MODULE:
                        self.modules.add(local)
                    elif a.name in aliases.get(node.module, set()):
                        self.constants.add(local)
        for node in tree.body:  # NAME = stacks.X (or another constant): an alias
            if isinstance(node, ast.Assign) and self.names_constant(node.value):
                self.constants |= {
                    t.id for t in node.targets if isinstance(t, ast.Name)
                }

    def names_constant(self, node: ast.AST) -> bool:
        """``node`` is a stack name constant (``stacks.VLLM``, ``VLLM``, an alias)."""
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return node.value.id in self.modules and node.attr in CONSTANTS
        return isinstance(node, ast.Name) and node.id in self.constants

    def holds_constant(self, node: ast.AST) -> bool:
        """``node`` is a constant or a tuple / list / set literal holding one."""
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(self.holds_constant(e) for e in node.elts)
        return self.names_constant(node)


def stack_aliases(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module name → its names that hold a stack name constant (``stacks.py``'s own, and
    module-level aliases such as ``LLMAPI_BACKEND = stacks.TRTLLM_PYTORCH``, followed
    through imports until nothing changes)."""
    aliases: dict[str, set[str]] = {STACKS_MODULE: set(CONSTANTS)}
    trees = {m: ast.parse(s) for m, s in sources.items() if m != STACKS_MODULE}
    changed = True
    while changed:
        changed = False
        for module, tree in trees.items():
            found = _Names(tree, aliases).constants  # imported or assigned: importable
            if found - aliases.get(module, set()):
                aliases[module] = aliases.get(module, set()) | found
                changed = True
    return aliases


def stack_comparisons(
    source: str, aliases: dict[str, set[str]] | None = None
) -> list[tuple[int, str]]:
    """(line, code) of each comparison of a value with a server or backend name constant:
    ``==`` / ``!=`` / ``is`` with one on either side, ``in`` / ``not in`` a literal tuple,
    list or set holding one, a ``match`` case, a dict keyed by one, a lookup by one
    (``groups[stacks.VLLM]``, ``.get(TRTLLM_SERVE)``). ``stacks.REFERENCE in
    method.backends`` asks a method its backends and passes."""
    tree = ast.parse(source)
    names = _Names(tree, aliases or {STACKS_MODULE: set(CONSTANTS)})
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            left = node.left
            for op, right in zip(node.ops, node.comparators, strict=True):
                if (
                    isinstance(op, EQUALITY)
                    and (names.names_constant(left) or names.names_constant(right))
                ) or (
                    isinstance(op, MEMBERSHIP)
                    and isinstance(right, (ast.Tuple, ast.List, ast.Set))
                    and names.holds_constant(right)
                ):
                    found.append((node.lineno, ast.unparse(node)))
                    break
                left = right
        elif isinstance(node, ast.MatchValue) and names.names_constant(node.value):
            found.append((node.lineno, ast.unparse(node.value)))
        elif _keyed_by_constant(node, names):
            found.append((node.lineno, ast.unparse(node)[:80]))
    return found


def _keyed_by_constant(node: ast.AST, names: _Names) -> bool:
    """``node`` is a dict keyed by a constant or a lookup by one (``[...]``, ``.get``)."""
    if isinstance(node, ast.Dict):
        return any(k is not None and names.names_constant(k) for k in node.keys)
    if isinstance(node, ast.Subscript):
        return names.names_constant(node.slice)
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and bool(node.args)
        and names.names_constant(node.args[0])
    )


def test_no_module_compares_a_server_or_backend_with_its_name():
    """Callers ask the record (``stacks.server(v.server).own_engine``) instead."""
    files = _module_names()
    sources = {name: path.read_text() for path, name in files.items()}
    aliases = stack_aliases(sources)
    assert "LLMAPI_BACKEND" in aliases["trtbench.spec.llmapi"]  # it sees aliases
    found = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {code}"
        for path, name in files.items()
        if name != STACKS_MODULE
        for line, code in stack_comparisons(sources[name], aliases)
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "from trtbench.core import stacks\nif v.server == stacks.VLLM: pass",
        "from trtbench.core import stacks\nok = stacks.TRITON != server",
        "from trtbench.core.stacks import REFERENCE as R\nok = backend != R",
        "from trtbench.core import stacks\nok = b in (stacks.TRTLLM,\n    other)",
        "from trtbench.core import stacks\nok = b not in [stacks.REFERENCE]",
        "import trtbench.core.stacks as s\nok = b is s.TRTLLM_PYTORCH",
        "from trtbench.core import stacks\nLLM = (stacks.TRTLLM_PYTORCH)\nok = b == LLM",
        "from trtbench.core import stacks\nmatch s:\n    case stacks.TRITON: pass",
        "from trtbench.core import stacks\nrun = {stacks.VLLM: f, stacks.TRITON: g}[s]",
        "from trtbench.core import stacks\nnames = groups[stacks.VLLM]",
        "from trtbench.core.stacks import TRTLLM_SERVE\nnames = groups.get(TRTLLM_SERVE, [])",
    ],
)
def test_the_guard_sees_a_name_comparison(source):
    assert stack_comparisons(source)


def test_the_guard_follows_an_alias_another_module_defines():
    aliases = stack_aliases(
        {
            "trtbench.spec.llmapi": "from trtbench.core import stacks\n"
            "LLMAPI_BACKEND = stacks.TRTLLM_PYTORCH\n",
            "trtbench.spec.more": "from trtbench.spec.llmapi import LLMAPI_BACKEND as B\n"
            "AGAIN = B\n",
        }
    )
    assert aliases["trtbench.spec.more"] == {"B", "AGAIN"}
    source = "from trtbench.spec.more import AGAIN\nok = backend == AGAIN"
    assert stack_comparisons(source, aliases)
    assert not stack_comparisons(source)  # unknown to the guard without the table


@pytest.mark.parametrize(
    "source",
    [
        "from trtbench.core import stacks\nif stacks.server(v.server).own_engine: pass",
        'VLLM = "vllm"  # a counter source of its own\nif self.kind == VLLM: pass',
        "from trtbench.core import stacks\nok = stacks.REFERENCE in method.backends",
        "from trtbench.core import stacks\nchosen = stacks.backend(stacks.TRITON)",
        "from trtbench.core import stacks\nok = name in stacks.SERVERS",
    ],
)
def test_the_guard_passes_what_asks_a_record(source):
    assert not stack_comparisons(source)
