"""Checks of every user input before any work starts: nothing is built, served or measured
until the run directory is writable, the binaries are found, the fixed ports are free and
every prompt is valid and fits the engines.

Each command calls one ``preflight_*`` function first (``trtbench run`` before the first
build, ``trtbench loadtest`` before the first tier); each raises the error the CLI turns into
exit code 2 and one line naming the input and the fix. The single checks are public so a
stage can repeat one later (:func:`check_served_prompts` right before a variant's first tier,
once its deployed limits are known).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from trtbench.builders.build import (
    check_llmapi_plans,
    check_variants,
    variant_backend,
)
from trtbench.core import stacks
from trtbench.core.errors import ConfigError, NotAvailableError, ServerStartError
from trtbench.core.json_files import read_json_object
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.loadtest import make_prompts, open_tokenizer, tiers_of
from trtbench.pipeline.tier_capture import check_nsys
from trtbench.profiling.loadtest.workload.prompts import (
    Prompt,
    TextTokenizer,
    check_prompt_limits,
)
from trtbench.spec.bench import BenchSpec, DeploySpec, LoadtestSpec, VariantSpec
from trtbench.spec.llmapi import runtime_problem
from trtbench.spec.serving import resolve_trtllm_serve, resolve_vllm_python
from trtbench.triton_repo.binary import find_tritonserver
from trtbench.triton_repo.interface import RepoMetadata
from trtbench.triton_repo.ports import choose_ports
from trtbench.vllm_server.args import check_vllm_variants

PROBE_PREFIX = ".trtbench-write-check-"
RUNTIME_ERRORS = (ConfigError, ServerStartError, NotAvailableError)
"""What a check of a runtime piece raises when the piece is missing."""


def check_runtime(
    needs: list[str] | None,
    check: Callable[[], object],
    errors: tuple[type[Exception], ...] = RUNTIME_ERRORS,
) -> None:
    """Run ``check`` of a piece a real run starts (an executable, an interpreter): it raises
    as usual, or, with ``needs`` (a dry run, on a machine that need not have it), its
    message is added to ``needs`` instead.

    Raises:
        ``errors`` from ``check`` when ``needs`` is None; anything else it raises always.
    """
    if needs is None:
        check()
        return
    try:
        check()
    except errors as exc:
        needs.append(str(exc))


def check_writable(directory: Path, option: str = "--out") -> None:
    """Create ``directory`` (with its parents), write a probe file in it and remove it.

    Folders this check created are removed again, so a command that fails later, before it
    writes anything, leaves no empty run directory behind.

    Args:
        directory: the folder a command will write into.
        option: how the message names where it came from (``--out``, ``RUN_DIR``).

    Raises:
        ConfigError: ``cannot write to <dir> (<strerror>); choose another <option> or fix
            its permissions`` (also when ``directory`` is a file or lies under one).
    """
    created = [d for d in (directory, *directory.parents) if not d.exists()]
    try:
        if directory.exists() and not directory.is_dir():
            raise NotADirectoryError(0, "it is a file, not a folder")
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=PROBE_PREFIX, dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ConfigError(
            f"cannot write to {directory} ({exc.strerror or exc}); choose another "
            f"{option} or fix its permissions"
        ) from None
    finally:
        for folder in created:  # deepest first; only the empty ones go
            with contextlib.suppress(OSError):
                folder.rmdir()


def check_run_dir(
    run_dir: RunDir, option: str = "--out", subdirs: Sequence[Path] | None = None
) -> None:
    """:func:`check_writable` for the run directory and those of its folders that exist.

    Args:
        run_dir: the run directory.
        option: how messages name it (``--out``, ``RUN_DIR``).
        subdirs: folders inside it the command writes (default: every stage's folder);
            a read-only one that exists already fails here, not after the work.

    Raises:
        ConfigError: a folder cannot be written (see :func:`check_writable`).
    """
    if subdirs is None:
        subdirs = (
            run_dir.engine_dir("_").parent,
            run_dir.model_repo("_").parent,
            run_dir.server_log("_").parent,
            run_dir.loadtest_dir,
            run_dir.traces_dir,
            run_dir.plots_dir,
        )
    check_writable(run_dir.root, option)
    for folder in subdirs:
        if folder.is_dir():
            check_writable(folder, option)


def check_tritonserver(path: Path | None, field: str = "--tritonserver") -> Path:
    """The tritonserver executable: ``path`` when given, else the first one found.

    Args:
        path: ``--tritonserver`` / ``deploy.tritonserver``, or None to search.
        field: how the message names ``path`` (``deploy.tritonserver``).

    Raises:
        ConfigError: ``path`` is not an executable file.
        ServerStartError: none found on $PATH, in NGC's place or the nvidia-pytriton wheel.
    """
    try:
        return find_tritonserver(path).path
    except ServerStartError:
        if path is None:
            raise
        raise ConfigError(
            f"{field} {path} is not an executable file; point {field} at a Triton server "
            "binary, or leave it out to search $PATH, /opt/tritonserver/bin and the "
            "nvidia-pytriton wheel"
        ) from None


def check_ports(deploy: DeploySpec) -> None:
    """The fixed ports of ``deploy`` are distinct and free on its bind address.

    Raises:
        ServerStartError: two equal ports, a port in use (the message names the option and
            the spec field), or a bind address that is not an IP literal.
    """
    fixed = (deploy.grpc_port, deploy.http_port, deploy.metrics_port)
    if any(port is not None for port in fixed):
        choose_ports(*fixed, host=deploy.bind_address)


def check_trtllm_serve(command: str, served: Sequence[str]) -> None:
    """The ``trtllm-serve`` executable (``deploy.trtllm_serve``) is found when a variant is
    served by it; nothing is checked when none is.

    Args:
        command: ``deploy.trtllm_serve`` (a name on ``$PATH`` or a path).
        served: the names of the ``server: trtllm-serve`` variants.

    Raises:
        ConfigError: not found; one line naming it, the variants that need it and
            the fix (:func:`~trtbench.spec.serving.resolve_trtllm_serve`).
    """
    if served:
        names = (
            f"variant {served[0]}"
            if len(served) == 1
            else "variants " + ", ".join(served)
        )
        resolve_trtllm_serve(command, names)


def check_mpirun(spec: BenchSpec, variants: Sequence[VariantSpec]) -> None:
    """``deploy.mpirun`` is found when a TensorRT-LLM variant spans several GPUs.

    Raises:
        ConfigError: tp_size × pp_size > 1 and the launcher is not on $PATH.
    """
    wide = [
        v.name
        for v in variants
        if v.tp_size * v.pp_size > 1 and stacks.backend(spec.backend_of(v)).tensorrt_llm
    ]
    if wide and shutil.which(spec.deploy.mpirun) is None:
        raise ConfigError(
            f"deploy.mpirun {spec.deploy.mpirun!r} was not found and variant {wide[0]} "
            "needs it (tp_size × pp_size > 1); install Open MPI or set deploy.mpirun"
        )


def check_llmapi_variants(spec: BenchSpec, variants: Sequence[VariantSpec]) -> None:
    """Every variant fits its backend, and every trtllm-pytorch variant's LLM-API plan passes
    the contract of the targeted TensorRT-LLM and, when Triton serves it, can be served by
    ``deploy.llmapi_runtime``.

    Raises:
        ConfigError: a mode or field the backend lacks, a plan the contract refuses, or a
            mode the reference engine cannot serve yet with ``llmapi_runtime: reference``.
    """
    llmapi = [
        v for v in variants if stacks.backend(variant_backend(spec, v, None)).llmapi
    ]
    runtime = spec.deploy.llmapi_runtime  # who runs Triton's llmapi model
    for v in llmapi:
        if not stacks.server(v.server).model_repository:
            continue  # trtllm-serve runs TensorRT-LLM itself, whatever llmapi_runtime says
        where = f"variants[{spec.variants.index(v)}]"
        if problem := runtime_problem(v.mode, runtime, where):
            raise ConfigError(problem)
    check_llmapi_plans(spec, llmapi)


def target_tokenizer(spec: BenchSpec) -> TextTokenizer:
    """The tokenizer the served variants use (``models.target/tokenizer.json``).

    Raises:
        ConfigError: ``models.target`` is missing or holds no ``tokenizer.json``.
    """
    target = spec.models.target
    if not target.is_dir():
        raise ConfigError(
            f"models.target: {target} does not exist; set it to the target model directory"
        )
    if not (target / "tokenizer.json").is_file():
        raise ConfigError(
            f"models.target: {target} has no tokenizer.json; the load test counts prompt "
            "tokens with the target's fast tokenizer, save it there (save_pretrained)"
        )
    return TextTokenizer.load(target)


def target_vocab_size(spec: BenchSpec) -> int | None:
    """``vocab_size`` of ``models.target/config.json`` (None when absent: the build says so)."""
    config = spec.models.target / "config.json"
    if not config.is_file():
        return None
    data = read_json_object(
        config,
        missing_fix="point models.target at a model saved with save_pretrained",
        bad_fix="save the target model again with save_pretrained",
        label="models.target: ",
    )
    size = data.get("vocab_size")
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def check_spec_prompts(
    spec: BenchSpec,
    variants: Sequence[VariantSpec],
    tokenizer: TextTokenizer,
) -> list[Prompt]:
    """Make the spec's prompts (every dataset line or ``loadtest.datasets`` record checked)
    and hold them against each variant.

    The limits are the ones the build gives the engine (``max_input_len``, ``max_seq_len``
    of each variant, the target's ``vocab_size``), so this runs before anything is built.

    Returns:
        The prompts, as the load test will make them.

    Raises:
        ConfigError: a bad dataset line or record (``file:line``), a dataset source
            without records (``loadtest.datasets[i]``) or the first prompt over a limit
            (naming it and the variant).
    """
    prompts = make_prompts(spec.loadtest, tokenizer)
    vocab = target_vocab_size(spec)
    for v in variants:
        check_prompt_limits(
            prompts,
            max_input_len=v.max_input_len,
            max_seq_len=v.max_seq_len,
            vocab_size=vocab,
            special_tokens=tokenizer.special_tokens,
            engine=f"variant {v.name} (variants[{spec.variants.index(v)}])",
        )
    return prompts


def check_served_prompts(
    prompts: Sequence[Prompt], meta: RepoMetadata, tokenizer: TextTokenizer | None
) -> None:
    """Hold ``prompts`` against a deployed variant's limits (its ``trtbench.json``).

    Meant for right before the variant's first tier, once its repository is rendered.

    Raises:
        ConfigError: the first prompt over ``max_input_len`` / ``max_seq_len`` or outside
            the tokenizer's vocabulary (naming the prompt and the variant).
    """
    check_prompt_limits(
        prompts,
        max_input_len=meta.max_input_len,
        max_seq_len=meta.max_seq_len,
        vocab_size=tokenizer.vocab_size if tokenizer is not None else None,
        special_tokens=tokenizer.special_tokens if tokenizer is not None else 0,
        engine=f"variant {meta.variant}",
    )


def check_window(spec: LoadtestSpec, field: str = "--exclude-first-s") -> None:
    """The steady-state window leaves something to measure: ``warmup_s`` is shorter than a
    tier pass when passes are timed (``duration_s``). With ``requests_per_tier`` a pass's
    length is unknown before it runs; a tier left without a completion is marked then.

    Raises:
        ConfigError: ``warmup_s`` ≥ ``duration_s`` (names ``field`` and the fix).
    """
    if spec.duration_s is not None and spec.warmup_s >= spec.duration_s:
        raise ConfigError(
            f"{field} {spec.warmup_s:g} leaves nothing of a {spec.duration_s:g} s tier "
            "(--duration-s / loadtest.duration_s); exclude fewer seconds or run longer tiers"
        )


def check_workers(spec: LoadtestSpec, field: str = "--workers") -> None:
    """Every client process gets at least one slot of every closed-loop tier, and an
    open-loop cap is not split across processes (not supported).

    Raises:
        ConfigError: ``workers`` > the smallest concurrency (names the tier and the fix),
            or ``workers`` > 1 with ``max_concurrency``.
    """
    n = spec.workers
    if n > 1 and spec.request_rate and spec.max_concurrency is not None:
        raise ConfigError(
            f"{field} {n} with --max-concurrency is not supported (each process would "
            "cap its own requests); use --workers 1 for a capped request-rate tier"
        )
    closed = [t for t in tiers_of(spec) if t.concurrency is not None]
    small = min(closed, key=lambda t: t.concurrency or 0, default=None)
    if small is not None and n > (small.concurrency or 0):
        raise ConfigError(
            f"{field} {n} is larger than the concurrency of tier {small.label}: each "
            f"client process needs a slot; use {field} {small.concurrency} or less, or "
            "drop that tier"
        )


def preflight_run(
    spec: BenchSpec,
    run_dir: RunDir,
    variants: Sequence[str] = (),
    source: str | None = None,
    needs: list[str] | None = None,
) -> list[Prompt]:
    """Everything ``trtbench run`` needs, checked before the first build (every variant's
    build checks too: :func:`~trtbench.builders.build.check_variants`).

    Args:
        spec: the validated bench spec.
        run_dir: where the run writes (``--out``).
        variants: the variants to run (default: all).
        source: the spec file, named in front of a build check's message.
        needs: a dry run's list of what this machine lacks: a missing executable or
            interpreter (tritonserver, trtllm-serve, mpirun, nsys, vLLM's) is added to it
            instead of raising (:func:`check_runtime`); None: it raises.

    Returns:
        The prompts the load test will send (checked against every selected variant).

    Raises:
        ConfigError: unknown variant, unwritable run directory, a bad
            ``deploy.tritonserver`` or ``deploy.mpirun``, bad tiers or
            ``profile.nsys_tier``, a bad dataset line, a prompt over a variant's limits,
            a ``server: vllm`` variant vLLM cannot serve or no vLLM interpreter for it, no
            ``trtllm-serve`` for a ``server: trtllm-serve`` variant, a variant its build
            would refuse (model directories, weights, trees, plans).
        ModelMismatchError: a draft or heads that do not fit the target.
        ServerStartError: no tritonserver found, a fixed port taken.
        NotAvailableError: ``profile.nsys`` without nsys.
    """
    selected = spec.select(tuple(variants))
    tiers_of(spec.loadtest)
    check_window(spec.loadtest, "loadtest.warmup_s")
    check_workers(spec.loadtest, "loadtest.workers")
    check_runtime(needs, lambda: check_nsys(spec), (NotAvailableError,))
    check_run_dir(run_dir)
    if _run_by(selected, "tritonserver"):  # vLLM- and trtllm-serve-only runs need none
        tritonserver = spec.deploy.tritonserver
        check_runtime(
            needs, lambda: check_tritonserver(tritonserver, "deploy.tritonserver")
        )
    served = _run_by(selected, "trtllm_serve")
    check_runtime(needs, lambda: check_trtllm_serve(spec.deploy.trtllm_serve, served))
    check_runtime(needs, lambda: check_mpirun(spec, selected))
    check_llmapi_variants(spec, selected)
    check_variants(spec, [v.name for v in selected], None, run_dir, source)
    check_vllm_variants(spec.deploy.vllm_python, selected, spec.models, False)
    if _run_by(selected, "vllm_python"):
        check_runtime(needs, lambda: resolve_vllm_python(spec.deploy.vllm_python))
    check_ports(spec.deploy)
    return check_spec_prompts(spec, selected, target_tokenizer(spec))


def _run_by(variants: Sequence[VariantSpec], executable: str) -> list[str]:
    """The names of ``variants`` whose server runs from ``deploy.<executable>``
    (:attr:`~trtbench.core.stacks.Server.executable`)."""
    return [
        v.name for v in variants if stacks.server(v.server).executable == executable
    ]


def _grouped_run_by(
    servers: Mapping[str, Sequence[str]] | None, executable: str
) -> list[str]:
    """The variants of ``servers`` (server → variant names) whose server runs from
    ``deploy.<executable>``."""
    return [
        name
        for kind, names in (servers or {}).items()
        if stacks.server(kind).executable == executable
        for name in names
    ]


def preflight_build(run_dir: RunDir, dry_run: bool = False) -> None:
    """``trtbench build``: the run directory is writable (nothing to write on a dry run).

    Raises:
        ConfigError: see :func:`check_run_dir`.
    """
    if not dry_run:
        check_run_dir(run_dir)


def preflight_deploy(
    run_dir: Path,
    deploy: DeploySpec,
    *,
    write: bool = True,
    serve: bool = False,
    tritonserver_option: bool = False,
    servers: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """``trtbench deploy``: RUN_DIR writable (when writing); with ``serve``, the servers'
    executables found (tritonserver, trtllm-serve) and the fixed ports free.

    Args:
        run_dir: the RUN_DIR argument.
        deploy: the resolved deploy options.
        write: repositories will be written (not ``--check``).
        serve: servers will be started (``--serve``).
        tritonserver_option: the binary came from ``--tritonserver`` (names it so).
        servers: the variants to serve by server kind (``{"triton": […], "vllm": […],
            "trtllm-serve": […]}``); None: unknown, tritonserver is checked.

    Raises:
        ConfigError, ServerStartError: see :func:`check_run_dir`, :func:`check_tritonserver`,
            :func:`check_trtllm_serve`, :func:`check_ports`.
    """
    if write:
        check_run_dir(RunDir(run_dir), "RUN_DIR")
    if serve:
        if servers is None or _grouped_run_by(servers, "tritonserver"):
            field = "--tritonserver" if tritonserver_option else "deploy.tritonserver"
            check_tritonserver(deploy.tritonserver, field)
        check_trtllm_serve(
            deploy.trtllm_serve, _grouped_run_by(servers, "trtllm_serve")
        )
        check_ports(deploy)


def preflight_loadtest(
    spec: LoadtestSpec, out: Path, tokenizer_dir: str | Path | None = None
) -> list[Prompt]:
    """``trtbench loadtest``: ``--out`` writable, tiers distinct, tokenizer and prompts valid,
    all before the first request.

    Returns:
        The prompts the load test will send.

    Raises:
        ConfigError: unwritable ``--out``, duplicate tiers, a missing tokenizer, a bad
            dataset line or record (``file:line``), a ``loadtest.datasets`` source
            without records.
    """
    run_dir = RunDir(out)
    check_run_dir(run_dir, "--out", (run_dir.loadtest_dir,))
    tiers_of(spec)
    check_window(spec)
    check_workers(spec)
    return make_prompts(spec, open_tokenizer(tokenizer_dir))
