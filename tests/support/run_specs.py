"""Reference-backend runs of the small real models (``tiny_models``) for the integration
tests: a ``trtbench run`` spec (a few closed-loop tiers of fixed-length requests) written as
the YAML file a user passes on the command line, or a run directory built and deployed
through the library, ready to serve on the CPU."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from trtbench.builders.build import build_variants
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.deploy import deploy_run
from trtbench.spec.bench import BenchSpec, DeploySpec, ModelsSpec, VariantSpec


def spec_models(models: Mapping[str, Path]) -> dict[str, Path]:
    """The entries of ``tiny_models`` a spec's ``models:`` takes (target, draft, medusa); the
    EAGLE-3 checkpoint is a variant's ``speculative_model``, not a ``models:`` entry."""
    return {k: v for k, v in models.items() if k in ModelsSpec.model_fields}


def reference_run_spec(
    name: str,
    models: Mapping[str, Path],
    variants: list[dict[str, Any]],
    *,
    max_batch_size: int,
    deploy: dict[str, Any],
    profile: dict[str, Any],
    requests: int,
    output_tokens: int,
    input_tokens: int = 16,
    concurrency: tuple[int, ...] = (1, 2),
    **loadtest: Any,
) -> dict[str, Any]:
    """A ``backend: reference`` spec (the mapping ``trtbench.spec.bench.parse_spec`` reads).

    Every variant gets the small models' limits — dtype float32, ``max_batch_size``,
    ``max_input_len`` 64, ``max_seq_len`` 128 — besides its own keys (``name``, ``mode``, …).
    The load test runs ``concurrency`` tiers of ``requests`` requests each after one warm-up
    request, prompts of ``input_tokens`` and outputs of ``output_tokens`` tokens (means);
    ``loadtest`` adds further ``loadtest`` keys (``slo_ttft_ms``, ``repeats``, …); one
    round unless it gives ``repeats`` or ``rounds`` (the spec's default, a race, would make
    a test's length hang on its figures).
    ``deploy`` and ``profile`` are the spec's sections as they are.
    """
    limits = {
        "dtype": "float32",
        "max_batch_size": max_batch_size,
        "max_input_len": 64,
        "max_seq_len": 128,
    }
    return {
        "name": name,
        "backend": "reference",
        "models": {k: str(v) for k, v in spec_models(models).items()},
        "variants": [{**v, **limits} for v in variants],
        "deploy": deploy,
        "loadtest": {
            "concurrency": list(concurrency),
            "requests_per_tier": requests,
            "warmup_requests": 1,
            "input_len_mean": input_tokens,
            "output_len_mean": output_tokens,
            **({} if {"repeats", "rounds"} & set(loadtest) else {"repeats": 1}),
            **loadtest,
        },
        "profile": profile,
    }


def write_spec(directory: Path, spec: dict[str, Any]) -> Path:
    """Write ``spec`` as ``directory/spec.yaml`` (``yaml.safe_dump``); return its path."""
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def deployed_reference_run(
    root: Path, name: str, models: Mapping[str, Path], variants: list[VariantSpec]
) -> RunDir:
    """The run directory ``root`` with ``variants`` built (``build_variants``) and deployed
    (``deploy_run``) from a ``backend: reference`` spec named ``name`` over ``models``, to be
    served on the CPU with a 120 s ready timeout (``spec.deploy`` of the run)."""
    spec = BenchSpec(
        name=name,
        backend="reference",
        models=ModelsSpec(**spec_models(models)),
        variants=variants,
        deploy=DeploySpec(ready_timeout_s=120, reference_device="cpu"),
    )
    run_dir = RunDir(root)
    build_variants(spec, (), None, run_dir)
    deploy_run(run_dir, (), spec.deploy)
    return run_dir
