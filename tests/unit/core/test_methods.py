"""The methods (``trtbench/core/methods/``, one module each) are complete: the spec accepts exactly its
methods, each backend it lists accepts the method and no other does, vLLM serves what it
maps, the planner predicts each one, and the docs name each. A method registered without
one of these pieces fails here. Expected names are TensorRT-LLM's and vLLM's own (the
sources are in ``method.py``'s docstring), written out below rather than read from it,
for the six methods written before the plug-ins (:data:`WRITTEN_OUT`); a method added
since writes its own answers in its module's test."""

from __future__ import annotations

import ast
import re
from typing import get_args

import pytest

from tests.support.data import REPO_ROOT
from trtbench.builders.manifest import BuildManifest
from trtbench.core.methods import BACKENDS, METHODS
from trtbench.core.stacks import SERVERS
from trtbench.plan.chain_modes import DEFAULT_RATES
from trtbench.spec.bench import ModelsSpec, VariantSpec
from trtbench.spec.llmapi import Backend, Mode, variant_backend_problem
from trtbench.spec.serving import Server
from trtbench.vllm_server.args import speculative_config

WRITTEN_OUT = ("baseline", "draft_target", "medusa", "eagle3", "mtp", "ngram")
"""The methods whose answers this file writes out."""
EXTRA = {"medusa": {"medusa_choices": [[0]]}, "eagle3": {"speculative_model": "/ckpt"}}
"""What a variant of each mode needs besides its name (the rest has defaults)."""


def variant(mode: str) -> VariantSpec:
    return VariantSpec(name=f"v-{mode}", mode=mode, **EXTRA.get(mode, {}))


def test_the_spec_accepts_exactly_the_registered_methods():
    assert get_args(Mode) == tuple(METHODS)
    assert get_args(Backend) == BACKENDS
    assert get_args(Server) == SERVERS
    # build.json of older runs also says "eagle" (EAGLE-1): read, never built
    recorded = BuildManifest.model_fields["mode"].annotation
    assert set(get_args(recorded)) == {*METHODS, "eagle"}


def test_upstream_names_are_tensorrt_llms_and_vllms():
    assert tuple(METHODS)[: len(WRITTEN_OUT)] == WRITTEN_OUT  # the spec's order
    named = {
        n: (
            METHODS[n].llmapi_decoding_type,
            METHODS[n].engine_mode,
            METHODS[n].vllm_method,
        )
        for n in WRITTEN_OUT
    }
    assert named == {
        "baseline": (None, "NONE", ""),
        "draft_target": ("DraftTarget", "DRAFT_TOKENS_EXTERNAL", "draft_model"),
        "medusa": (None, "MEDUSA", "medusa"),
        "eagle3": ("Eagle3", None, "eagle3"),
        "mtp": ("MTP", None, None),
        "ngram": ("NGram", None, "ngram"),
    }


@pytest.mark.parametrize("name", list(METHODS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backend_accepts_a_method_exactly_when_the_registry_lists_it(name, backend):
    problem = variant_backend_problem(variant(name), backend, "variants[0]")
    assert (problem is None) == (backend in METHODS[name].backends), problem
    if problem is not None:
        assert problem.startswith("variants[0].mode: ")  # names the field and the fix


@pytest.mark.parametrize("name", list(METHODS))
def test_vllm_serves_a_method_exactly_when_the_registry_maps_it(name, tmp_path):
    models = ModelsSpec(target=tmp_path, draft=tmp_path, medusa=tmp_path)
    (tmp_path / "config.json").write_text('{"medusa_num_heads": 1}')
    wanted = METHODS[name].vllm_method
    if wanted is None:
        with pytest.raises(Exception, match="vLLM serving is mapped for modes"):
            speculative_config(variant(name), models)
        return
    config = speculative_config(variant(name), models)
    if wanted == "":
        assert config is None  # the baseline: no --speculative-config
    else:
        assert config is not None and config["method"] == wanted


@pytest.mark.parametrize("name", list(METHODS))
def test_the_planner_has_arithmetic_for_every_method(name):
    m = METHODS[name]
    if m.planner == "chain":
        assert name in DEFAULT_RATES  # default per-position rates, overridable
    else:
        assert m.planner == name


def test_the_docs_name_every_method():
    spec_doc = (REPO_ROOT / "docs" / "spec.md").read_text()
    architecture = (REPO_ROOT / "docs" / "architecture.md").read_text()
    assert "add a speculative method" in architecture
    # the spec page's list of variant fields names every mode
    modes = spec_doc.split("`mode` (", 1)[1].split("), `server`", 1)[0]
    for m in METHODS.values():
        assert re.search(rf"\b{m.name}\b", modes), (m.name, modes)


def test_the_reference_engine_has_a_decoder_for_each_method_it_is_listed_for():
    """A method listed for the reference backend names a decoder factory that imports
    (``Method.reference_decoder``, ``module:function`` under
    ``builders/reference/methods/``); one not listed names none, so the engine refuses it."""
    import importlib

    for m in METHODS.values():
        listed = "reference" in m.backends
        assert (m.reference_decoder is not None) == listed, m.name
        if listed:
            module, _, name = m.reference_decoder.partition(":")
            assert module == f"trtbench.builders.reference.methods.{m.name}"
            assert callable(getattr(importlib.import_module(module), name))


PACKAGE_FOLDERS = (
    "trtbench",
    "builders",
    "profiling",
    "triton_repo",
    "vllm_server",
    "trtllm_server",
)
"""Every folder of the package (pyproject's package_dir maps them under ``trtbench``)."""
KINDS = {
    "method": {"baseline", "draft_target", "medusa", "eagle3", "eagle", "mtp", "ngram"},
    "server": {"triton", "vllm", "trtllm-serve"},
    "backend": {"reference", "trtllm", "trtllm-pytorch"},
}
"""The values of a variant's ``mode``, ``server`` and ``backend``, written out (not read
from the registry, so a registry edit cannot hide a literal)."""
KINDS["method"] |= set(METHODS)  # a method added since is guarded too, never hidden
NAMED = set().union(*KINDS.values())
OTHER_VOCABULARIES = {"part", "role", "runtime", "llmapi_runtime", "variants"}
"""Operands whose words only look like a method, server or backend: the tiny-model
workshop's parts and the memory breakdown's roles (``medusa``, ``eagle3`` heads), the
LLM-API runtime (``tensorrt_llm`` or ``reference``) and variant names."""


def _literals(node: ast.AST) -> set[str]:
    """The strings a literal operand holds (a string, or a tuple / list / set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(set(), *(_literals(e) for e in node.elts))
    return set()


def _word(node: ast.AST) -> str:
    """The last name an operand ends in: ``spec.backend_of(v)`` → ``backend_of``,
    ``v.get("server")`` → ``server``, ``row["mode"]`` → ``mode``."""
    if isinstance(node, ast.Call):
        key = node.args[0] if node.args else None
        func = node.func
        if isinstance(key, ast.Constant) and getattr(func, "attr", "") == "get":
            return str(key.value)
        return _word(node.func)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def named_literals(source: str) -> list[tuple[int, str]]:
    """(line, code) of each comparison (``==``, ``!=``, ``in``, ``not in``, a ``match``
    case) of a value with a method / server / backend name written as a string, and of
    each dict keyed by such names (two or more of one kind, or looked up at once)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            words = {_word(o) for o in operands if not _literals(o)}
            if set().union(*map(_literals, operands)) & NAMED and not (
                words & OTHER_VOCABULARIES
            ):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.MatchValue) and _literals(node.value) & NAMED:
            found.append((node.lineno, ast.unparse(node.value)))
        elif isinstance(node, ast.Dict):
            keys = set().union(set(), *(_literals(k) for k in node.keys if k))
            one_kind = any(len(keys) >= 2 and keys <= names for names in KINDS.values())
            if one_kind:
                found.append((node.lineno, ast.unparse(node)[:80]))
        elif (
            isinstance(node, (ast.Subscript, ast.Call))
            and isinstance(target := getattr(node, "value", None) or node.func, ast.AST)
            and isinstance(getattr(target, "value", target), ast.Dict)
        ):
            table = getattr(target, "value", target)
            if set().union(set(), *(_literals(k) for k in table.keys if k)) & NAMED:
                found.append((node.lineno, ast.unparse(node)[:80]))
    return found


def test_no_module_compares_a_method_server_or_backend_with_a_literal():
    """Modules name a method by the registry's constants (``methods.MEDUSA``) and ask its
    entry what it is; servers and backends likewise by their constants. Read from the
    syntax tree of every module of every package folder, so a comparison split over lines
    or a dict keyed by the names is seen too."""
    found = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {code}"
        for folder in PACKAGE_FOLDERS
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        if path.name != "stacks.py" or path.parent.name != "core"
        for line, code in named_literals(path.read_text())
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        'if variant.mode == "medusa": pass',
        'if "draft_target" in modes: pass',
        "if mode not in ('draft_target',\n    'eagle3'): pass",
        'ok = spec.backend_of(v) != "trtllm"',
        'ok = row.get("server") == "vllm"',
        'k = {"draft_target": 1, "medusa": 2}.get(mode, 0)',
        'k = {"draft_target": 1}[mode]',
        'match mode:\n    case "ngram": pass',
        'table = {"vllm": 1, "triton": 2}',
    ],
)
def test_the_guard_sees_a_literal(source):
    assert named_literals(source)


@pytest.mark.parametrize(
    "source",
    [
        'roles["medusa"] = spec.models.medusa',
        "if variant.mode == methods.MEDUSA: pass",
        'roles = {"target": t, "draft": None, "medusa": None}',
        'if part == "eagle3": pass',
        'if spec.deploy.llmapi_runtime == "reference": pass',
    ],
)
def test_the_guard_passes_what_is_not_a_literal_comparison(source):
    assert not named_literals(source)


METHOD_CONSTANTS = {"BASELINE", "DRAFT_TARGET", "MEDUSA", "EAGLE3", "MTP", "NGRAM"}
"""The method-name constants of ``trtbench.core.methods``: only the methods' own folder
compares a value with one; everything else asks the method (``methods.METHODS[mode]``)."""


def _constant_bindings(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(the names a module binds ``trtbench.core.methods`` to, ``methods`` always; the
    names it binds the method constants to, ``from trtbench.core.methods import MEDUSA``)."""
    modules, constants = {"methods", "trtbench.core.methods"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "trtbench.core":
            modules |= {a.asname or a.name for a in node.names if a.name == "methods"}
        elif (
            isinstance(node, ast.ImportFrom) and node.module == "trtbench.core.methods"
        ):
            constants |= {
                a.asname or a.name for a in node.names if a.name in METHOD_CONSTANTS
            }
        elif isinstance(node, ast.Import):
            modules |= {
                a.asname
                for a in node.names
                if a.name == "trtbench.core.methods" and a.asname
            }
    return modules, constants


def method_constants(source: str) -> list[tuple[int, str]]:
    """(line, code) of each comparison (``==``, ``!=``, ``in``, ``not in``, a ``match``
    case) of a value with a method-name constant of ``trtbench.core.methods`` (alone or in
    a tuple / list / set), and of each dict with such a constant among its keys."""
    tree = ast.parse(source)
    modules, constants = _constant_bindings(tree)

    def named(node: ast.AST | None) -> bool:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(named(e) for e in node.elts)
        if isinstance(node, ast.Name):
            return node.id in constants
        return (
            isinstance(node, ast.Attribute)
            and node.attr in METHOD_CONSTANTS
            and ast.unparse(node.value) in modules
        )

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            ops = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
            operands = [node.left, *node.comparators]
            if any(isinstance(op, ops) for op in node.ops) and any(
                map(named, operands)
            ):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.MatchValue) and named(node.value):
            found.append((node.lineno, ast.unparse(node.value)))
        elif isinstance(node, ast.Dict) and any(map(named, node.keys)):
            found.append((node.lineno, ast.unparse(node)[:80]))
    return found


def test_no_module_outside_the_methods_branches_on_a_method_constant():
    """A method is one module: the rest of trtbench asks the method (``Method``'s
    attributes, its reference-engine module's hooks) and never compares a mode with
    ``methods.MEDUSA`` & co. nor keys a table by them. Read from the syntax tree of every
    module of every package folder outside ``trtbench/core/methods/``."""
    found = [
        f"{relative}:{line}: {code}"
        for folder in PACKAGE_FOLDERS
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        if not (relative := str(path.relative_to(REPO_ROOT))).startswith(
            ("trtbench/core/methods/",)
        )
        for line, code in method_constants(path.read_text())
    ]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "if variant.mode == methods.MEDUSA: pass",
        "ok = tiers[tiers['mode'] != methods.BASELINE]",
        "if methods.DRAFT_TARGET in modes: pass",
        "if mode not in (methods.EAGLE3,\n    methods.NGRAM): pass",
        "from trtbench.core.methods import MTP as M\nok = mode == M",
        "from trtbench.core import methods as m\nok = row.get('mode') != m.BASELINE",
        "import trtbench.core.methods\nok = mode == trtbench.core.methods.MEDUSA",
        "types = {**methods.LLMAPI_DECODING_TYPES, methods.MEDUSA: 'Medusa'}",
        "match mode:\n    case methods.NGRAM: pass",
    ],
)
def test_the_guard_sees_a_branch_on_a_method_constant(source):
    assert method_constants(source)


@pytest.mark.parametrize(
    "source",
    [
        "if methods.METHODS[variant.mode].tree: pass",
        "mode = METHODS[methods.BASELINE].engine_mode",
        "return methods.BASELINE",
        "ok = ~tiers['mode'].isin(methods.NON_DRAFTING)",
        "if manifest.mode == methods.LEGACY_EAGLE: pass",
        "if mode == SpeculativeDecodingMode.MEDUSA: pass",
        "MEDUSA = 4\nok = flags == MEDUSA",
    ],
)
def test_the_guard_passes_what_asks_the_method(source):
    assert not method_constants(source)


def test_each_method_has_its_constant_label_and_drafter():
    from trtbench.core import methods

    constants = {
        "BASELINE": "baseline",
        "DRAFT_TARGET": "draft_target",
        "MEDUSA": "medusa",
        "EAGLE3": "eagle3",
        "MTP": "mtp",
        "NGRAM": "ngram",
    }
    assert {getattr(methods, c) for c in constants} == set(WRITTEN_OUT)
    assert all(getattr(methods, c) == v for c, v in constants.items())
    labels = [m.label for m in METHODS.values()]
    assert len(set(labels)) == len(labels) and all(labels)
    # a method drafts exactly when something proposes its drafts
    assert all(m.drafts == (m.drafter != "none") for m in METHODS.values())
    # the drafter's checkpoint is what the spec asks for: models.draft, models.medusa,
    # speculative_model (EAGLE-3); MTP drafts with the target's layers, n-gram with none
    assert {n: METHODS[n].drafter for n in WRITTEN_OUT} == {
        "baseline": "none",
        "draft_target": "draft_model",
        "medusa": "heads",
        "eagle3": "eagle3_head",
        "mtp": "mtp_layers",
        "ngram": "prompt_lookup",
    }
    assert METHODS["medusa"].tree and not any(
        m.tree for n, m in METHODS.items() if n != "medusa"
    )


def test_each_methods_fields_are_spec_fields_refused_on_other_methods():
    """A method's own fields (the registry's ``fields``) are VariantSpec fields, and a
    variant of a method that does not own one is refused, naming the field."""
    from trtbench.core import methods

    assert set(methods.METHOD_FIELDS) <= set(VariantSpec.model_fields)
    value = {
        "max_draft_len": 3,
        "speculative_model": "/ckpt",
        "draft_acceptance": "logits",
        "medusa_choices": [[0]],
        "num_nextn_predict_layers": 1,
        "max_matching_ngram_size": 2,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 2,
        "speculative_options": {"x": 1},
        "speculation": {"max_concurrency": 4},
    }
    # fields a method module declares itself (Method.spec_fields) are its own test's
    assert set(value) == set(methods.METHOD_FIELDS) - set(methods.SPEC_FIELDS)
    for field, given in value.items():
        for mode in METHODS:
            if mode in methods.owners(field):
                continue
            fields = {**EXTRA.get(mode, {}), field: given}
            with pytest.raises(ValueError, match=field):
                VariantSpec(name="v", mode=mode, **fields)


def test_the_questions_a_method_answers():
    """What the rest of trtbench asks a method instead of its name, written out from the
    methods' definitions: a draft model and an EAGLE-3 head are checkpoints of their own
    (``speculative_model``); K is ``max_draft_len`` for the chains but MTP's is its layer
    count and Medusa's its tree; only n-gram drafts without a forward pass."""
    from trtbench.core import methods

    def where(question: str) -> set[str]:
        return {n for n in WRITTEN_OUT if getattr(METHODS[n], question)}

    assert where("needs_draft_model") == {"draft_target", "eagle3"}
    assert where("has_draft_len") == {"draft_target", "eagle3", "ngram"}
    assert where("free_drafts") == {"ngram"}
    assert where("drafts") == set(WRITTEN_OUT) - {"baseline"}
    assert {n for n, m in METHODS.items() if m.owns("max_matching_ngram_size")} == {
        "ngram"
    }
    # the Triton repository of the engine path reads draft counts two ways
    assert {
        n: m.engine_counts for n, m in METHODS.items() if m.engine_counts != "none"
    } == {
        "draft_target": "per_response",
        "medusa": "perf_metrics",
    }
    assert (
        methods.method_of("eagle") is None and methods.method_of(float("nan")) is None
    )
    assert methods.method_of("mtp") is METHODS["mtp"]
    # TensorRT-LLM's engine path: draft-target is two engines (DRAFT_TOKENS_EXTERNAL),
    # Medusa runs there only; its decoding_type is the LLM API's, else the engine path's
    assert where("draft_engine") == {"draft_target"}
    assert where("engine_path_only") == {"medusa"}
    assert {n: METHODS[n].trtllm_decoding_type for n in WRITTEN_OUT} == {
        "baseline": None,
        "draft_target": "DraftTarget",
        "medusa": "Medusa",
        "eagle3": "Eagle3",
        "mtp": "MTP",
        "ngram": "NGram",
    }
    # "is it the baseline": a method that drafts nothing; a missing value or a mode that
    # is no method (build.json's legacy eagle) speculates, as `mode != "baseline"` said
    assert methods.NON_DRAFTING == ("baseline",)
    asked = ("baseline", "ngram", "eagle", None, float("nan"))
    assert [methods.drafts_nothing(m) for m in asked] == [True, *[False] * 4]


def test_a_backend_the_registry_does_not_list_is_refused_without_a_rule_of_its_own(
    monkeypatch,
):
    """No fall-through on backends either: were n-gram listed for the reference backend
    only, ``trtllm-pytorch`` would refuse it from the registry alone, naming the field and
    the backend that runs it."""
    from dataclasses import replace

    from trtbench.core import methods

    monkeypatch.setitem(
        methods.METHODS, "ngram", replace(METHODS["ngram"], backends=("reference",))
    )
    problem = variant_backend_problem(variant("ngram"), "trtllm-pytorch", "variants[1]")
    assert problem == (
        "variants[1].mode: n-gram (ngram) is not supported by backend trtllm-pytorch; "
        "set backend: reference on the variant or the spec"
    )
    assert variant_backend_problem(variant("ngram"), "reference", "variants[1]") is None
