"""``trtbench loadtest``: streaming load tiers against any Triton LLM model (gRPC) or any
OpenAI-compatible server (HTTP + SSE)."""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import ValidationError

from trtbench.commands.claim import claim_run_dir
from trtbench.commands.options import (
    RUNS_ROOT,
    deprecated_alias,
    merge_alias,
    parse_list,
    run_dir_option,
)
from trtbench.commands.stage_lines import StageLines
from trtbench.commands.terminal import print_outcome
from trtbench.core.errors import ConfigError
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.loadtest import run_loadtest, tiers_of
from trtbench.pipeline.preflight import preflight_loadtest
from trtbench.pipeline.stages import LOAD_TEST
from trtbench.profiling.loadtest.clients.grpc_client import ENDPOINTS
from trtbench.profiling.loadtest.clients.target import (
    API_GRPC,
    APIS,
    check_url,
    check_workers_api,
)
from trtbench.profiling.loadtest.stats.metrics import SLO_KEYS
from trtbench.profiling.loadtest.workload.schedule import ARRIVALS
from trtbench.spec.bench import LoadtestSpec

VLLM_GOODPUT_KEYS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2el": "e2e_ms"}
"""``vllm bench serve --goodput`` keys (values in ms) → trtbench's SLO keys."""


def parse_slo(text: str | None) -> dict[str, float]:
    """Goodput SLOs → ``{"slo_ttft_ms": 200.0, ...}`` (spec field names).

    Takes trtbench's ``ttft_ms=200,tpot_ms=20`` and vLLM's ``--goodput`` form ``ttft:200
    tpot:20`` (keys ttft, tpot, e2el), pairs split by commas or spaces; values in ms.

    Raises:
        ConfigError: a pair that is neither form, or an unknown key (one line).
    """
    out: dict[str, float] = {}
    for part in (text or "").replace(",", " ").split():
        key, sep, value = part.partition("=")
        if not sep:
            key, sep, value = part.partition(":")
            key = VLLM_GOODPUT_KEYS.get(key, "") if sep else ""
        try:
            if key not in SLO_KEYS:
                raise ValueError
            out[f"slo_{key}"] = float(value)
        except ValueError:
            raise ConfigError(
                f"--slo/--goodput: {part!r} is not KEY=MS with KEY one of "
                f"{', '.join(SLO_KEYS)}, nor vLLM's KEY:MS with KEY one of "
                f"{', '.join(VLLM_GOODPUT_KEYS)} (e.g. --slo ttft_ms=200,tpot_ms=20 or "
                "--goodput 'ttft:200 tpot:20')"
            ) from None
    return out


OPTION_OF_FIELD = {"--warmup-s": "--exclude-first-s"}
"""Spec fields whose option has another name."""


def spec_from_options(fields: dict) -> LoadtestSpec:
    """Validate CLI values as a LoadtestSpec; an invalid one names its ``--option``.
    One server, nothing to race: ``--repeats`` defaults to 1 (a spec's default is a
    race, ``rounds: auto``)."""
    try:
        return LoadtestSpec.model_validate(
            {"repeats": 1, **{k: v for k, v in fields.items() if v is not None}}
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [p for p in err["loc"] if isinstance(p, str)]
        option = f"--{loc[0].replace('_', '-')}" if loc else "options"
        option = OPTION_OF_FIELD.get(option, option)
        if option.startswith("--slo-"):
            option = "--slo"
        msg = err["msg"].removeprefix("Value error, ")
        got = (
            f" (got {err['input']!r})"
            if loc and not isinstance(err["input"], dict)
            else ""
        )
        raise ConfigError(f"{option}: {msg}{got}") from None


def check_load_options(
    concurrency: str | None, request_rate: str | None, max_concurrency: object
) -> None:
    """Raise ConfigError for tier options that do not go together (one line each)."""
    if request_rate is None and max_concurrency is not None:
        raise ConfigError(
            "--max-concurrency caps an open loop: give --request-rate too (a closed "
            "loop's size is --concurrency)"
        )
    if request_rate is not None and concurrency is not None:
        raise ConfigError(
            "--concurrency cannot go with --request-rate (closed- and open-loop tiers); "
            "use --max-concurrency C to cap the requests in flight of the open loop"
        )


@click.command("loadtest")
@click.option(
    "--url",
    required=True,
    help="Triton gRPC HOST:PORT (port 8001), or an OpenAI base URL http://HOST:PORT/v1.",
)
@click.option(
    "--api",
    type=click.Choice(APIS),
    default=API_GRPC,
    show_default=True,
    help="Triton gRPC streaming, or an OpenAI-compatible server's completions / chat "
    "completions API (vLLM, SGLang, trtllm-serve) streamed over SSE.",
)
@click.option("--model", default="ensemble", show_default=True, help="Model to call.")
@click.option(
    "--concurrency",
    default=None,
    help="Closed-loop tiers: comma-separated concurrencies.  [default: 1,4,8]",
)
@click.option(
    "--request-rate",
    default=None,
    help="Open-loop tiers instead: comma-separated requests/s.",
)
@click.option(
    "--max-concurrency",
    type=int,
    default=None,
    help="With --request-rate: at most this many requests in flight (the rest wait "
    "for a slot, counted as client queue time).",
)
@click.option(
    "--arrival",
    type=click.Choice(ARRIVALS),
    default="poisson",
    show_default=True,
    help="Arrival process (rate mode).",
)
@click.option(
    "--burstiness",
    type=float,
    default=1.0,
    show_default=True,
    help="Gamma shape (rate mode): 1 = Poisson, <1 burstier.",
)
@click.option(
    "--requests-per-tier",
    "--num-prompts",
    "requests_per_tier",
    type=int,
    default=None,
    help="Requests per tier.  [default: 32 unless --duration-s]",
)
@click.option(
    "--duration-s", type=float, default=None, help="Seconds per tier instead."
)
@click.option(
    "--ramp-up-s",
    type=float,
    default=0.0,
    show_default=True,
    help="Spread a closed-loop tier's first requests over this many seconds.",
)
@click.option(
    "--workers",
    type=int,
    default=1,
    show_default=True,
    help="Client processes sharing each tier (one event loop each; records merged).",
)
@click.option(
    "--warmup-requests",
    type=int,
    default=2,
    show_default=True,
    help="Unrecorded requests before the first tier.",
)
@click.option(
    "--input-len-mean",
    "--isl",
    "input_len_mean",
    type=int,
    default=64,
    show_default=True,
    help="Synthetic prompts: mean input length (tokens).",
)
@click.option(
    "--input-len-std",
    type=float,
    default=0.0,
    show_default=True,
    help="Synthetic prompts: standard deviation of the input length.",
)
@click.option(
    "--output-len-mean",
    "--osl",
    "output_len_mean",
    type=int,
    default=64,
    show_default=True,
    help="Mean output length asked for (max tokens).",
)
@click.option(
    "--output-len-std",
    type=float,
    default=0.0,
    show_default=True,
    help="Standard deviation of the output length asked for.",
)
@click.option(
    "--fixed-output-len/--free-output-len",
    default=True,
    show_default=True,
    help="Send min tokens = max tokens.",
)
@click.option(
    "--dataset",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="trtllm-bench JSONL (task_id, prompt|input_ids, output_tokens).",
)
@click.option(
    "--tokenizer",
    metavar="DIR|HUB_ID",
    default=None,
    help="A model dir with tokenizer.json, or a Hugging Face hub id (the local HF cache "
    "first, then the hub): exact ISL; needed for text-only models.",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the prompt lengths and the arrival schedule.",
)
@click.option(
    "--request-timeout-s",
    type=float,
    default=120.0,
    show_default=True,
    help="A request still running after this long fails (a row with the reason).",
)
@click.option(
    "--repeats",
    type=int,
    default=None,
    help="Run every tier N times, each pass in a fresh tier order; the summary adds the "
    "mean and 95% interval over passes.  [default: 1]",
)
@click.option(
    "--exclude-first-s",
    "warmup_s",
    type=float,
    default=None,
    help="Leave completions of each tier pass's first S seconds out of the statistics "
    "(they stay in requests.csv, in_window false).  [default: 0]",
)
@click.option(
    "--slo",
    "--goodput",
    "slo",
    default=None,
    help="Goodput SLOs in ms: ttft_ms=200,tpot_ms=20 (e2e_ms too), or vLLM's "
    "'ttft:200 tpot:20' (e2el too).",
)
@click.option(
    "--response-mode",
    type=click.Choice(sorted(ENDPOINTS)),
    default=None,
    help="With --api triton-grpc, how the model answers: stream (token by token over "
    "ModelStreamInfer), nostream (one response over the stream) or unary (one ModelInfer "
    "call).  [default: from the model config]",
)
@deprecated_alias(
    "--endpoint", "--response-mode", "endpoint", click.Choice(sorted(ENDPOINTS))
)
@click.option(
    "--variant", default=None, help="Label for the rows [default: the model]."
)
@click.option("--baseline", default=None, help="Variant the speedups compare against.")
@run_dir_option(default=RUNS_ROOT / "loadtest")
def loadtest(
    url: str,
    api: str,
    model: str,
    concurrency: str,
    request_rate: str | None,
    slo: str | None,
    tokenizer: str | None,
    response_mode: str | None,
    endpoint: str | None,
    variant: str | None,
    baseline: str | None,
    out: Path,
    **fields: object,
) -> None:
    """Load-test MODEL at URL tier by tier; write OUT/loadtest/*.csv and print the table."""
    check_url(api, url)
    mode = merge_alias(response_mode, endpoint, "--endpoint", "--response-mode")
    if mode is not None and api != API_GRPC:
        raise ConfigError(
            f"--response-mode goes with --api {API_GRPC} only (got --api {api})"
        )
    check_load_options(concurrency, request_rate, fields.get("max_concurrency"))
    check_workers_api(api, int(fields.get("workers") or 1))  # type: ignore[call-overload]
    spec = spec_from_options(
        {
            **fields,
            **parse_slo(slo),
            "concurrency": parse_list(concurrency, int, "--concurrency"),
            "request_rate": parse_list(request_rate, float, "--request-rate"),
        }
    )
    prompts = preflight_loadtest(spec, out, tokenizer)  # before the first tier
    claim_run_dir(RunDir(out))
    with StageLines() as progress:
        progress.start(LOAD_TEST, len(tiers_of(spec)) * spec.repeats, "cell")
        outcome = run_loadtest(
            url,
            model,
            spec,
            out,
            variant=variant,
            tokenizer_dir=tokenizer,
            endpoint=mode,
            baseline=baseline,
            progress=progress,
            prompts=prompts,
            api=api,
        )
    print_outcome(outcome)
