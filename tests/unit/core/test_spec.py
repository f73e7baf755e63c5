"""The bench spec: path resolution, defaults and one-line errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtbench.core.errors import ConfigError
from trtbench.core.paths import expand_vars
from trtbench.spec.bench import load_spec, parse_spec

GOOD = """
models: {target: /m/target, draft: rel/draft, medusa: "${HEADS:-/m/heads}"}
variants:
  - {name: base, mode: baseline}
  - {name: d4, mode: draft_target}
  - {name: med, mode: medusa, medusa_choices: [[0], [0, 0]]}
"""


def test_paths_expand_variables_and_resolve_against_the_spec_folder(tmp_path):
    spec = parse_spec(GOOD, base_dir=tmp_path)
    assert spec.models.target == Path("/m/target")
    assert spec.models.draft == tmp_path / "rel" / "draft"
    assert spec.models.medusa == Path("/m/heads")  # the ${VAR:-default} default


def test_defaults_for_draft_len_and_tree():
    spec = parse_spec(GOOD)
    assert spec.variant("d4").draft_len == 4
    assert spec.variant("med").tree == [[0], [0, 0]]
    assert spec.variant("base").tree == "mc_sim_7b_63"
    assert [v.name for v in spec.select(("med", "base"))] == ["base", "med"]


def test_expand_vars_forms():
    env = {"A": "x", "TRTBENCH_CACHE": "/c"}
    assert expand_vars("$A/${A}/${B:-y}/${TRTBENCH_CACHE}", env) == "x/x/y//c"
    with pytest.raises(KeyError):
        expand_vars("${MISSING}", env)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("mode: draft_target}", "mode: drafty}"), "variants[1].mode: Input should be"),
        (
            (
                "{name: d4, mode: draft_target}",
                "{name: d4, mode: draft_target, max_draft_len: 0}",
            ),
            "variants[1].max_draft_len: Input should be greater than or equal to 1",
        ),
        (
            ("{name: d4,", "{nam: d4,"),
            "variants[1].nam: unknown key; did you mean 'name'?",
        ),
        (("variants:", "variantz:"), "variantz: unknown key; did you mean 'variants'?"),
        (("name: base,", "name: d4,"), "variant name 'd4' is used twice"),
        ((", draft: rel/draft", ""), "a draft_target variant needs models.draft"),
        (
            (
                "[[0], [0, 0]]}",
                "[[0], [0, 0]], max_draft_len: 2}\n  - {name: x, mode: baseline, "
                "medusa_choices: [[0]]}",
            ),
            "variants[3]: medusa_choices is only for mode medusa",
        ),
    ],
)
def test_invalid_fields_are_named_in_one_line(edit, message):
    with pytest.raises(ConfigError) as info:
        parse_spec(GOOD.replace(*edit), source="s.yaml")
    text = str(info.value)
    assert text.startswith("s.yaml: ")
    assert message in text
    assert "\n" not in text


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "models: {target: /m}\nvariants: [\n  - {name: x, mode: baseline}\n"
    )
    with pytest.raises(
        ConfigError, match=r"bad.yaml: line 3, column 3: YAML syntax error"
    ):
        load_spec(path)


def test_unset_variable_without_default_names_it():
    with pytest.raises(
        ConfigError, match=r"environment variable NOPE_X in '\$NOPE_X/t'"
    ):
        parse_spec("models: {target: $NOPE_X/t}\nvariants: [{name: b, mode: baseline}]")


def test_missing_spec_file(tmp_path):
    with pytest.raises(
        ConfigError, match="does not exist; pass the path to a bench spec"
    ):
        load_spec(tmp_path / "nope.yaml")


def test_a_missing_section_is_named_with_the_fix():
    """The README's first trtllm-serve snippet lacked models: pydantic's "Field required"
    named the field but not what to do."""
    with pytest.raises(ConfigError) as err:
        parse_spec("variants: [{name: b, mode: baseline}]\n", source="s.yaml")
    assert str(err.value) == "s.yaml: models: required and missing: add it"


@pytest.mark.parametrize(
    "loadtest, field",
    [
        ("{datasets: [{format: humaneval, weight: .inf}]}", "weight"),
        ("{burstiness: .nan}", "burstiness"),
        ("{ramp_up_s: .inf}", "ramp_up_s"),
    ],
)
def test_a_number_that_is_not_finite_is_refused_naming_its_field(loadtest, field):
    # YAML reads .inf and .nan as floats; a weight of inf once ended in an OverflowError
    with pytest.raises(ConfigError, match=f"{field}.*finite number"):
        parse_spec(GOOD + f"loadtest: {loadtest}\n")
