"""``mode: eagle3`` on vLLM: ``--speculative-config``, the recommendation's vLLM snippet and the
``vllm serve`` line ``trtbench deploy RUN`` prints.

Expected objects are written by hand from vLLM 0.32's ``SpeculativeConfig``
(``vllm/config/speculative.py``): ``method`` ``"eagle3"`` (one of its ``EagleModelTypes``),
``model`` the EAGLE-3 checkpoint dir, ``num_speculative_tokens`` K — the config
tests/integration/test_vllm_eagle3_crosscheck.py serves the tiny checkpoint with.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.run_specs import reference_run_spec, write_spec
from trtbench.core.errors import ConfigError
from trtbench.profiling.report.recommendation_config import Policy, vllm_snippet
from trtbench.spec.bench import parse_spec
from trtbench.spec.serving import resolve_vllm_python
from trtbench.vllm_server.args import serve_argv, speculative_config


def eagle3_spec(extra: str = ""):
    return parse_spec(
        "models: {target: /m/t}\n"
        "variants: [{name: e3, mode: eagle3, server: vllm, speculative_model: /m/e3"
        f"{extra}}}]\n"
    )


def test_eagle3_argv_carries_method_checkpoint_and_k():
    spec = eagle3_spec(", max_draft_len: 3")
    argv = serve_argv(Path("/v/bin/python"), spec.variants[0], spec.models, 1)
    assert argv[argv.index("--model") + 1] == "/m/t"  # the target is served
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": "eagle3",
        "model": "/m/e3",
        "num_speculative_tokens": 3,
    }


def test_eagle3_default_k_is_4():
    spec = eagle3_spec()
    assert speculative_config(spec.variants[0], spec.models) == {
        "method": "eagle3",
        "model": "/m/e3",
        "num_speculative_tokens": 4,
    }


def test_eagle3_adaptive_speculation_is_refused_as_for_every_mode():
    spec = eagle3_spec(", speculation: {max_concurrency: 4}")
    with pytest.raises(ConfigError, match="mode eagle3.*no vLLM 0.32 counterpart"):
        speculative_config(spec.variants[0], spec.models)


def test_recommendation_vllm_snippet_for_an_eagle3_winner():
    snip = vllm_snippet(Policy("e3", "eagle3", 4, 8, ((1, 4), (8, 2))))
    assert snip.config["method"] == "eagle3"
    assert snip.config["num_speculative_tokens"] == 4
    assert snip.config["model"].startswith("<")  # a placeholder to fill in
    # K 4 at batch 1, 2 at 2..8, off (0) from 9: vLLM's inclusive [start, end, K] ranges
    assert snip.config["num_speculative_tokens_per_batch_size"] == [
        [1, 1, 4],
        [2, 8, 2],
        [9, 9, 0],
    ]
    payload = snip.text.split("--speculative-config '", 1)[1].rstrip("'")
    assert json.loads(payload) == snip.config


def test_deploy_prints_the_vllm_serve_line_of_an_eagle3_variant(
    tiny_models, tmp_path, capsys
):
    """``trtbench build`` then ``trtbench deploy RUN --check`` (nothing started): the printed
    line is the vLLM command with the EAGLE-3 checkpoint of the variant."""
    try:
        python = resolve_vllm_python(None)
    except ConfigError as exc:
        pytest.skip(str(exc))
    spec = reference_run_spec(
        "e3-vllm",
        {"target": tiny_models["target"]},
        [
            {"name": "base", "mode": "baseline"},
            {
                "name": "vllm-e3",
                "mode": "eagle3",
                "server": "vllm",
                "max_draft_len": 3,
                "speculative_model": str(tiny_models["eagle3"]),
            },
        ],
        max_batch_size=2,
        deploy={"vllm_python": str(python)},
        profile={},
        requests=2,
        output_tokens=8,
    )
    path, out = write_spec(tmp_path, spec), tmp_path / "run"
    code, stdout, stderr = run_cli(["build", path, "--out", out], capsys)
    assert code == 0, stdout + stderr
    code, stdout, stderr = run_cli(["deploy", out, "--check"], capsys)
    assert code == 0, stdout + stderr
    [line] = [x for x in stdout.splitlines() if x.startswith("vllm-e3:")]
    argv = shlex.split(
        line.split("): ", 1)[1]
    )  # "NAME: served by vLLM, … (log …): CMD"
    assert argv[:3] == [
        str(python),
        "-m",
        "vllm.entrypoints.launchers.api_server.entry",
    ]
    assert argv[argv.index("--model") + 1] == str(tiny_models["target"])
    assert argv[argv.index("--port") + 1] == "PORT"
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {
        "method": "eagle3",
        "model": str(tiny_models["eagle3"]),
        "num_speculative_tokens": 3,
    }
    assert not (out / "model_repo" / "vllm-e3").exists()  # no Triton repository
