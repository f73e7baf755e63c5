"""Error types. The library raises these; only the CLI turns them into exit code 2 and one line.

Every message names the thing that is wrong and says what to do next.
"""

from __future__ import annotations


class TrtbenchError(Exception):
    """Base class for user-facing errors (bad input, missing files, unavailable tools).

    ``exit_code``: what the CLI exits with (2: bad input or environment; 1: the measurement
    itself went wrong, e.g. a server died mid-tier).
    """

    exit_code = 2


class ConfigError(TrtbenchError):
    """A bench spec, CLI option or dataset is invalid."""


class BuildError(TrtbenchError):
    """An engine could not be built or does not match what was asked for."""


class ModelMismatchError(BuildError):
    """Draft or Medusa heads incompatible with the target (vocab, tokenizer, hidden size)."""


class DeployError(TrtbenchError):
    """A model repository cannot be rendered, validated or written."""


class ServerStartError(TrtbenchError):
    """tritonserver could not be found, started, or did not become ready."""


class DataFileError(TrtbenchError):
    """A file trtbench reads back (run.json, build.json, trtbench.json, a CSV) is corrupt,
    truncated, or written by a newer trtbench (unknown ``schema_version``)."""


class RunDirBusyError(TrtbenchError):
    """Another trtbench process holds the run directory's lock."""


class ServerDiedError(TrtbenchError):
    """A server exited or stopped answering while requests were being measured."""

    exit_code = 1


class CheckFailedError(TrtbenchError):
    """A measured check did not pass (``trtbench follow-up``: the recommended config is
    significantly worse than the best fixed variant at a tier, or a tier went unchecked)."""

    exit_code = 1


class LoadTestError(TrtbenchError):
    """The load test cannot start (unreachable server, unknown model, mismatched inputs)."""


class TraceParseError(TrtbenchError):
    """A profiler export is not what it claims to be, or holds nothing to analyse."""


class NotAvailableError(TrtbenchError):
    """An optional tool or library (nsys, tensorrt_llm, NVML, a GPU) is not present."""
