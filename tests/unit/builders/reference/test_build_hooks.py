"""The reference build asks each method's module (``builders/reference/methods/<mode>.py``,
found through ``Method.reference_decoder``) for its model checks and build notes; a method
without a hook gets the default (no model of its own, K the variant's ``draft_len``).

Built from the tiny real models; the expected notes are written out from the definitions
(the n-gram window's defaults: ``trtbench/spec/speculation.py``, min 1)."""

from __future__ import annotations

import pytest

from trtbench.builders.reference import build
from trtbench.builders.reference.build import build_reference_variant
from trtbench.builders.reference.methods import draft_target, eagle3, medusa, ngram
from trtbench.core.run_dir import RunDir
from trtbench.spec.bench import parse_spec

ENGINE_NOTES = ["engine_dir", "batching", "decoding"]
"""The notes every reference build.json has, in order (the method's follow)."""


@pytest.fixture(scope="module")
def manifests(tiny_models, tmp_path_factory):
    """Dry-run build.json documents of one variant per method the reference engine runs."""
    spec = parse_spec(
        f"models: {{target: {tiny_models['target']}, draft: {tiny_models['draft']}, "
        f"medusa: {tiny_models['medusa']}}}\n"
        "variants:\n"
        "  - {name: base, mode: baseline}\n"
        "  - {name: dt, mode: draft_target, max_draft_len: 3, "
        "speculation: {max_concurrency: 4}}\n"
        "  - {name: med, mode: medusa, medusa_choices: [[0], [0, 0], [1]]}\n"
        "  - {name: ng, mode: ngram, max_draft_len: 5, prompt_lookup_max: 3}\n"
        "  - {name: sfx, mode: suffix, max_draft_len: 6}\n"
        f"  - {{name: e3, mode: eagle3, speculative_model: {tiny_models['eagle3']}}}\n"
    )
    out = RunDir(tmp_path_factory.mktemp("hooks"))
    return {
        v.name: build_reference_variant(spec, v, out, dry_run=True).model_dump(
            mode="json"
        )
        for v in spec.variants
    }


def test_the_hooks_are_the_methods_own_modules():
    assert (
        build.method_hook("draft_target", "check_models") is draft_target.check_models
    )
    assert build.method_hook("medusa", "check_models") is medusa.check_models
    assert build.method_hook("eagle3", "build_notes") is eagle3.build_notes
    assert build.method_hook("ngram", "build_notes") is ngram.build_notes
    # no hook in the module, or no module: the default
    assert build.method_hook("baseline", "check_models") is None
    assert build.method_hook("suffix", "build_notes") is None
    assert (
        build.method_hook("mtp", "check_models") is None
    )  # not on the reference engine


def test_each_method_records_its_models_and_k(manifests):
    roles = {
        n: [r for r, f in m["models"].items() if f is not None]
        for n, m in manifests.items()
    }
    assert roles == {
        "base": ["target"],
        "dt": ["target", "draft"],
        "med": ["target", "medusa"],
        "ng": ["target"],
        "sfx": ["target"],
        "e3": ["target", "eagle3"],
    }
    # the roles a method does not load are recorded as absent, eagle3's appended
    assert list(manifests["e3"]["models"]) == ["target", "draft", "medusa", "eagle3"]
    k = {n: m["max_draft_len"] for n, m in manifests.items()}
    # Medusa's K: the tree's 3 nodes; EAGLE-3's: the default draft length 4
    assert k == {"base": None, "dt": 3, "med": 3, "ng": 5, "sfx": 6, "e3": 4}
    assert manifests["med"]["medusa"]["choices"] == [[0], [1], [0, 0]]
    assert manifests["base"]["medusa"] is None


def test_each_method_adds_its_notes_between_the_engines_and_speculation(manifests):
    keys = {n: list(m["reference"]) for n, m in manifests.items()}
    assert keys == {
        "base": ENGINE_NOTES,
        "dt": [*ENGINE_NOTES, "draft_acceptance", "speculation"],
        "med": ENGINE_NOTES,
        "ng": [*ENGINE_NOTES, "ngram"],
        "sfx": ENGINE_NOTES,
        "e3": [*ENGINE_NOTES, "eagle3"],
    }
    assert manifests["ng"]["reference"]["ngram"] == (
        "prompt lookup: suffixes of 3 down to 1 tokens searched in the request's own "
        "prompt + output, the earliest occurrence drafts up to 5 tokens (vLLM's rule); "
        "no match drafts nothing"
    )
    assert manifests["dt"]["reference"]["draft_acceptance"].startswith("tokens: ")
    assert manifests["e3"]["reference"]["eagle3"].startswith(
        "EAGLE-3 chain of 4 drafts"
    )
