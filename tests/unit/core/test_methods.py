"""The method registry (``trtbench/core/methods.py``) is complete: the spec accepts exactly its
methods, each backend it lists accepts the method and no other does, vLLM serves what it
maps, the planner predicts each one, and the docs name each. A method registered without
one of these pieces fails here. Expected names are TensorRT-LLM's and vLLM's own (the
sources are in the registry's docstring), written out below rather than read from it."""

from __future__ import annotations

import ast
import re
from typing import get_args

import pytest

from tests.support.data import REPO_ROOT
from trtbench.builders.manifest import BuildManifest
from trtbench.core.methods import BACKENDS, METHODS
from trtbench.plan.chain_modes import DEFAULT_RATES
from trtbench.spec.bench import ModelsSpec, VariantSpec
from trtbench.spec.llmapi import Backend, Mode, variant_backend_problem
from trtbench.vllm_server.args import speculative_config

EXTRA = {"medusa": {"medusa_choices": [[0]]}, "eagle3": {"speculative_model": "/ckpt"}}
"""What a variant of each mode needs besides its name (the rest has defaults)."""


def variant(mode: str) -> VariantSpec:
    return VariantSpec(name=f"v-{mode}", mode=mode, **EXTRA.get(mode, {}))


def test_the_spec_accepts_exactly_the_registered_methods():
    assert get_args(Mode) == tuple(METHODS)
    assert get_args(Backend) == BACKENDS
    # build.json of older runs also says "eagle" (EAGLE-1): read, never built
    recorded = BuildManifest.model_fields["mode"].annotation
    assert set(get_args(recorded)) == {*METHODS, "eagle"}


def test_upstream_names_are_tensorrt_llms_and_vllms():
    named = {
        m.name: (m.llmapi_decoding_type, m.engine_mode, m.vllm_method)
        for m in METHODS.values()
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
    readme = (REPO_ROOT / "README.md").read_text()
    architecture = (REPO_ROOT / "docs" / "architecture.md").read_text()
    assert "add a speculative method" in architecture
    # the README's list of variant fields names every mode
    modes = readme.split("`mode` (", 1)[1].split("), `server`", 1)[0]
    for m in METHODS.values():
        assert re.search(rf"\b{m.name}\b", modes), (m.name, modes)


def test_the_reference_engine_has_a_decoder_for_each_method_it_is_listed_for():
    """Read off the engine factory itself (``make_engine``'s ``mode == "…"`` branches), not
    the registry: a method listed for the reference backend without a decoder fails."""
    source = (REPO_ROOT / "builders" / "reference" / "loading.py").read_text()
    factory = next(
        n
        for n in ast.walk(ast.parse(source))
        if isinstance(n, ast.FunctionDef) and n.name == "make_engine"
    )
    branches = {
        c.comparators[0].value
        for c in ast.walk(factory)
        if isinstance(c, ast.Compare)
        and isinstance(c.left, ast.Name)
        and c.left.id == "mode"
        and isinstance(c.comparators[0], ast.Constant)
    }
    listed = {m.name for m in METHODS.values() if "reference" in m.backends}
    assert branches == listed
