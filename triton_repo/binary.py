"""Find the ``tritonserver`` binary and prepare how it must be started (environment, backend
directory, command line of one process or of an ``mpirun`` of ranks).

Search order: an explicit path, ``$PATH``, ``/opt/tritonserver/bin/tritonserver`` (NGC),
then the binary bundled in the ``nvidia-pytriton`` wheel. For the bundled one, a backend
directory is assembled whose Python backend stub matches the running interpreter, and the
server starts with ``LD_LIBRARY_PATH`` led by the interpreter's ``LIBDIR`` and ``PATH`` led
by its ``bin/`` (the stub links libpython dynamically and must load the same patch release
as the interpreter's standard library).
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trtbench.core.errors import ServerStartError
from trtbench.triton_repo.ports import DEFAULT_BIND_ADDRESS, Ports, bind_flag_values

NGC_TRITONSERVER = Path("/opt/tritonserver/bin/tritonserver")


@dataclass(frozen=True)
class TritonBinary:
    """Where tritonserver was found and how it must be started.

    Attributes:
        path: the executable.
        source: ``explicit`` | ``PATH`` | ``ngc`` | ``pytriton``.
        pytriton_root: for ``pytriton``, the wheel's ``tritonserver/`` folder (backends, stubs).
    """

    path: Path
    source: str
    pytriton_root: Path | None = None


def pytriton_root() -> Path | None:
    """The ``tritonserver/`` folder of an installed nvidia-pytriton wheel, or None."""
    try:
        import pytriton  # noqa: PLC0415 - optional extra
    except ImportError:
        return None
    root = Path(pytriton.__file__).parent / "tritonserver"
    return root if (root / "bin" / "tritonserver").is_file() else None


def find_tritonserver(
    explicit: Path | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    ngc_path: Path = NGC_TRITONSERVER,
    search_pytriton: bool = True,
) -> TritonBinary:
    """Locate tritonserver in the search order of the module docstring.

    Args:
        explicit: ``--tritonserver`` / ``deploy.tritonserver``; when given, only it is used.
        environ: environment whose ``PATH`` is searched (default ``os.environ``).
        ngc_path: where the NGC images keep it.
        search_pytriton: also look inside the nvidia-pytriton wheel.

    Raises:
        ServerStartError: nothing found; the message lists where it looked and the fix.
    """
    env = os.environ if environ is None else environ
    if explicit is not None:
        if not (explicit.is_file() and os.access(explicit, os.X_OK)):
            raise ServerStartError(
                f"tritonserver {explicit} is not an executable file; pass --tritonserver "
                "PATH to a Triton server binary, or leave it out to search $PATH, "
                f"{ngc_path} and the nvidia-pytriton wheel"
            )
        return TritonBinary(explicit, "explicit")
    on_path = shutil.which("tritonserver", path=env.get("PATH", ""))
    if on_path:
        return TritonBinary(Path(on_path), "PATH")
    if ngc_path.is_file():
        return TritonBinary(ngc_path, "ngc")
    root = pytriton_root() if search_pytriton else None
    if root is not None:
        return TritonBinary(root / "bin" / "tritonserver", "pytriton", root)
    raise ServerStartError(
        "tritonserver not found (looked at --tritonserver, $PATH, "
        f"{ngc_path} and the nvidia-pytriton wheel); install the cpu-server extra "
        "(`pip install 'trtbench[cpu-server]'`, which brings nvidia-pytriton) or run inside "
        "an NGC tritonserver image"
    )


def _link(link: Path, target: Path) -> None:
    """Point ``link`` at ``target`` atomically (safe when two servers prepare at once, in
    two processes or two threads of one: each writes its own temporary link)."""
    if link.is_symlink() and Path(os.readlink(link)) == target:
        return
    tmp = link.with_name(f".{link.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)


def prepare_backend_dir(binary: TritonBinary, dest: Path) -> Path | None:
    """For the PyTriton binary, assemble ``dest/python`` with the stub for this Python version.

    Returns:
        The backend directory to pass as ``--backend-directory``, or None for other binaries.

    Raises:
        ServerStartError: the wheel has no stub for the running Python version.
    """
    if binary.pytriton_root is None:
        return None
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = (
        binary.pytriton_root
        / "python_backend_stubs"
        / version
        / "triton_python_backend_stub"
    )
    if not stub.is_file():
        raise ServerStartError(
            f"nvidia-pytriton has no Python backend stub for Python {version}; use a Python "
            "version it ships (3.8-3.13) or a tritonserver built for this one"
        )
    python_dir = dest / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    source_dir = binary.pytriton_root / "backends" / "python"
    # Symlinks, not copies: the stub finds its bundled libraries through an $ORIGIN rpath.
    links = {p.name: p for p in source_dir.iterdir() if p.is_file()}
    links["triton_python_backend_stub"] = stub
    for name, target in links.items():
        _link(python_dir / name, target)
    return dest


def server_env(binary: TritonBinary, base: Mapping[str, str]) -> dict[str, str]:
    """Environment for tritonserver: the libpython fix for the PyTriton binary (pure)."""
    env = dict(base)
    if binary.pytriton_root is not None:
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        libs = binary.pytriton_root.parent.parent / "nvidia_pytriton.libs"
        parts = [libdir, str(libs), env.get("LD_LIBRARY_PATH", "")]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in parts if p)
        bin_dir = str(Path(sys.executable).parent)
        env["PATH"] = os.pathsep.join(p for p in [bin_dir, env.get("PATH", "")] if p)
    return env


def server_argv(
    binary: Path,
    model_repo: Path,
    ports: Ports,
    backend_dir: Path | None,
    extra_args: Sequence[str] = (),
    bind_address: str = DEFAULT_BIND_ADDRESS,
) -> list[str]:
    """The tritonserver command line of one process (pure).

    Every service binds ``bind_address`` (an IP literal, in the form each flag needs, see
    :func:`~trtbench.triton_repo.ports.bind_flag_values`).

    Raises:
        ServerStartError: ``bind_address`` is not an IP address literal.
    """
    grpc_address, http_address = bind_flag_values(bind_address)
    argv = [
        str(binary),
        f"--model-repository={model_repo}",
        f"--grpc-port={ports.grpc}",
        f"--http-port={ports.http}",
        f"--metrics-port={ports.metrics}",
        f"--grpc-address={grpc_address}",
        f"--http-address={http_address}",
        f"--metrics-address={http_address}",
        "--allow-metrics=true",
        "--disable-auto-complete-config",
    ]
    if backend_dir is not None:
        argv.append(f"--backend-directory={backend_dir}")
    argv.extend(extra_args)
    return argv


def mpirun_argv(
    mpirun: str,
    rank_argv: Sequence[str],
    world_size: int,
    tensorrt_llm_models: Sequence[str],
) -> list[str]:
    """The MPMD launch of ``world_size`` tritonserver ranks (pure).

    ``mpirun --allow-run-as-root -n 1 <rank 0> : -n 1 <rank 1> …``; each rank is
    ``rank_argv`` plus ``--backend-config=python,shm-region-prefix-name=prefix{i}_``; ranks
    > 0 add ``--model-control-mode=explicit`` and one ``--load-model`` per TensorRT-LLM model
    (NVIDIA/TensorRT-LLM ``triton_backend/scripts/launch_triton_server.py``).

    Raises:
        ServerStartError: world_size < 2 or no TensorRT-LLM model for ranks > 0.
    """
    if world_size < 2:
        raise ServerStartError(f"mpirun needs world_size >= 2, got {world_size}")
    if not tensorrt_llm_models:
        raise ServerStartError(
            "a multi-GPU launch needs the TensorRT-LLM model names for ranks > 0; "
            "render the repository with `trtbench deploy` (trtbench.json lists them)"
        )
    argv = [mpirun, "--allow-run-as-root"]
    for rank in range(world_size):
        if rank:
            argv.append(":")
        argv += ["-n", "1", *rank_argv]
        argv.append(f"--backend-config=python,shm-region-prefix-name=prefix{rank}_")
        if rank:
            argv.append("--model-control-mode=explicit")
            argv += [f"--load-model={name}" for name in tensorrt_llm_models]
    return argv
