"""Talking to a served variant as a user does: ``trtbench deploy RUN --serve`` in its own
process and Ctrl-C to stop it, and one request to a tritonserver over gRPC (streamed with
``ModelStreamInfer``, or the Triton inputs of a plain ``infer``)."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import np_to_triton_dtype

# The console script, not `python -m`: the working directory is then not on sys.path.
TRTBENCH = Path(sys.executable).parent / "trtbench"


def serve_cli(
    run_root: Path, variant: str, *options: str, cwd: Path | None = None
) -> tuple[subprocess.Popen, str]:
    """Start ``trtbench deploy RUN --variant V --serve OPTIONS…``; return the process and the
    endpoint line it prints once its server is ready (fails the test when there is none)."""
    proc = subprocess.Popen(  # noqa: S603
        [
            str(TRTBENCH),
            "deploy",
            str(run_root),
            "--variant",
            variant,
            "--serve",
            *options,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )
    line = proc.stdout.readline()
    if not line:
        proc.wait(60)
        pytest.fail(f"deploy --serve printed nothing: {proc.stderr.read()}")
    return proc, line


def stop_cli(proc: subprocess.Popen) -> str:
    """SIGINT (Ctrl-C) the serving command; assert it stopped on its own with 130 (128 +
    SIGINT), not by the kill that follows a 90 s wait; return its stderr."""
    try:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGINT, err
    return err


def infer_inputs(
    values: Mapping[str, object], shape: tuple[int, ...] = (1, 1)
) -> list[grpcclient.InferInput]:
    """Triton inputs, one per ``values`` item in its order. An ``np.ndarray`` goes as it
    is; a single value fills an array of ``shape`` (``(1, 1)``: batch 1 of the ensemble and
    TensorRT-LLM models; ``(1,)`` for the llmapi model, which has no batch dimension):
    ``str``/``bytes`` as BYTES (a str UTF-8 encoded), ``bool`` as BOOL, ``int`` as INT32.
    The Triton datatype is the array's numpy dtype (``tritonclient.utils.np_to_triton_dtype``)."""
    inputs = []
    for name, value in values.items():
        if isinstance(value, np.ndarray):
            array = value
        elif isinstance(value, str | bytes):
            raw = value.encode() if isinstance(value, str) else value
            array = np.full(shape, raw, dtype=object)
        elif isinstance(value, bool):  # before int: a bool is an int
            array = np.full(shape, value, dtype=np.bool_)
        elif isinstance(value, int):
            array = np.full(shape, value, dtype=np.int32)
        else:
            raise TypeError(f"input {name}: no Triton datatype for {type(value)}")
        tensor = grpcclient.InferInput(
            name, list(array.shape), np_to_triton_dtype(array.dtype)
        )
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


@dataclass(frozen=True)
class Streamed:
    """One response of a stream: every output tensor it carries (by name) and Triton's
    ``triton_final_response`` flag."""

    outputs: dict[str, np.ndarray]
    final: bool

    @property
    def ids(self) -> list[int] | None:
        """``output_ids`` flattened; None on a response without them (the empty final one)."""
        ids = self.outputs.get("output_ids")
        return None if ids is None else ids.reshape(-1).tolist()

    @property
    def text(self) -> str | None:
        """The one string of ``text_output``, decoded; None on a response without it."""
        text = self.outputs.get("text_output")
        return None if text is None else text.reshape(-1)[0].decode()

    @property
    def draft_counts(self) -> tuple[int | None, int | None]:
        """(``draft_tokens_proposed``, ``draft_tokens_accepted``): the speculative counts of
        this response (the ensemble's outputs, ``trtbench.triton_repo.interface``)."""
        return (
            self.scalar("draft_tokens_proposed"),
            self.scalar("draft_tokens_accepted"),
        )

    def scalar(self, name: str) -> int | float | bool | None:
        """The first value of output ``name`` as a Python number; None where it is absent."""
        array = self.outputs.get(name)
        return None if array is None else array.reshape(-1)[0].item()


def stream_infer(
    url: str,
    model: str,
    values: Mapping[str, object],
    *,
    shape: tuple[int, ...] = (1, 1),
    timeout_s: float = 60.0,
) -> list[Streamed]:
    """Send one request to ``model`` at gRPC ``url`` over ``ModelStreamInfer`` with
    ``enable_empty_final_response`` (inputs: :func:`infer_inputs` of ``values`` and
    ``shape``) and collect every response until the one flagged final.

    Raises:
        tritonclient.utils.InferenceServerException: the first error the stream answers
            with (the error itself).
        queue.Empty: no response came within ``timeout_s`` seconds.
    """
    client = grpcclient.InferenceServerClient(url)
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    out: list[Streamed] = []
    try:
        client.async_stream_infer(
            model, infer_inputs(values, shape), enable_empty_final_response=True
        )
        while not (out and out[-1].final):
            result, error = results.get(timeout=timeout_s)
            if error is not None:
                raise error
            response = result.get_response()
            out.append(
                Streamed(
                    outputs={o.name: result.as_numpy(o.name) for o in response.outputs},
                    final=response.parameters["triton_final_response"].bool_param,
                )
            )
    finally:
        client.stop_stream()
        client.close()
    return out
