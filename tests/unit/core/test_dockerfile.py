"""Invariants of the Dockerfile and scripts/ngc_install.sh (read as text; no Docker here).

The image must be the NGC TensorRT-LLM 1.2.1 one the contract names, keep its torch, TensorRT
and TensorRT-LLM (no install of them, trtbench with --no-deps, dependencies under constraints of
what is installed), and print ``trtbench --help`` by default.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shlex

from tests.support.data import REPO_ROOT
from trtbench.builders.trtllm.contract import load_contract

HEAVY = re.compile(
    r"^(torch|tensorrt|tensorrt[-_]llm|tensorrt[-_]cu\d+)([<>=!~\[ ]|$)", re.I
)


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = (REPO_ROOT / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def install_lines() -> list[list[str]]:
    """Every ``pip install`` command of the Dockerfile RUNs and of scripts/ngc_install.sh."""
    script = (REPO_ROOT / "scripts" / "ngc_install.sh").read_text()
    script = re.sub(r"\\\n", " ", script)
    runs = [args for word, args in instructions() if word == "RUN"]
    commands = []
    for chunk in [*runs, *script.splitlines()]:
        for part in re.split(r"&&|;|\|", chunk):
            words = part.split()
            if "install" in words and any("pip" in w.lower() for w in words):
                commands.append(words)
    return commands


def test_base_image_is_a_build_argument_defaulting_to_the_contract_image():
    args = [a for w, a in instructions() if w == "ARG"]
    froms = [a for w, a in instructions() if w == "FROM"]
    assert froms == ["${BASE_IMAGE}"]
    # the ARG before FROM sets the default; the one after makes it visible to LABEL
    assert args == [f"BASE_IMAGE={load_contract().image}", "BASE_IMAGE"]
    assert (
        load_contract().image == "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"
    )
    text = (REPO_ROOT / "Dockerfile").read_text()
    # the other documented family, with a tag shown in TensorRT-LLM's own docs
    assert "--build-arg BASE_IMAGE=nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5" in text


def test_default_command_is_trtbench_help():
    cmds = [args for word, args in instructions() if word == "CMD"]
    assert [json.loads(c) for c in cmds] == [["trtbench", "--help"]]


def test_runs_use_pipefail_and_the_installer():
    shell = [json.loads(a) for w, a in instructions() if w == "SHELL"]
    assert shell == [["/bin/bash", "-o", "pipefail", "-c"]]
    runs = [a for w, a in instructions() if w == "RUN"]
    assert any("scripts/ngc_install.sh" in r for r in runs)


def test_nothing_heavy_is_installed():
    commands = install_lines()
    assert (
        len(commands) == 3
    )  # requirements under constraints, then trtbench (two forms)
    for words in commands:
        assert not any(HEAVY.match(w) for w in words), words
        assert "--upgrade" not in words and "-U" not in words
        assert "--force-reinstall" not in words


def test_trtbench_goes_in_without_dependencies_and_deps_under_constraints():
    commands = install_lines()
    local = [w for w in commands if "." in w]
    assert local and all("--no-deps" in w for w in local)
    (deps,) = [w for w in commands if "--requirement" in w]
    assert "--constraint" in deps
    script = (REPO_ROOT / "scripts" / "ngc_install.sh").read_text()
    # the constraints are every package of the image, name==version (no URLs)
    assert 'list --format=freeze > "$work/constraints.txt"' in script
    # and the requirements are pyproject's (installed metadata, extras left out), which
    # name none of the heavy packages
    assert 'tomllib.load(handle)["project"]["dependencies"]' in script
    required = importlib.metadata.requires("trtbench") or []
    plain = [r for r in required if "extra ==" not in r]
    assert plain and not any(HEAVY.match(r) for r in plain)
    assert any(HEAVY.match(r) for r in required)  # the trtllm extra does name one


def test_every_copied_path_exists_and_is_not_ignored():
    ignored = {
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for word, args in instructions():
        if word != "COPY":
            continue
        *sources, _dest = shlex.split(args)
        for src in sources:
            assert (REPO_ROOT / src).exists(), src
            assert src not in ignored and src.rstrip("/") not in ignored, src
    assert (
        REPO_ROOT / "builders" / "trtllm" / "data" / "trtllm_1_2_1_contract.json"
    ).is_file()
