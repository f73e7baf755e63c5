"""The tokenizer a load test counts with, from a model directory or a Hugging Face hub id.

``--tokenizer`` takes either, as ``vllm bench serve --tokenizer`` and AIPerf's ``--tokenizer``
do: an existing path is a model directory with ``tokenizer.json`` (or the file itself); any
other text shaped like a hub id (``Qwen/Qwen2.5-1.5B-Instruct``, ``gpt2``) is loaded with
transformers' ``AutoTokenizer`` from the local Hugging Face cache (``$HF_HOME/hub``, or
``$HF_HUB_CACHE``) first, ``local_files_only=True``, and only then from the hub. The fast
tokenizer's ``tokenizers.Tokenizer`` is what :class:`~.prompts.TextTokenizer` wraps, so a
hub tokenizer counts exactly as its ``tokenizer.json`` saved in a directory would.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from trtbench.core.errors import ConfigError
from trtbench.profiling.loadtest.workload.prompts import TextTokenizer

log = logging.getLogger(__name__)

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
"""A Hugging Face repository id: ``name`` or ``namespace/name`` (no path syntax)."""


def is_hub_id(text: str) -> bool:
    """True for text that can name a hub repository (``org/name``, ``name``); False for an
    absolute path, ``./x``, ``~/x``, ``a/b/c`` or a name with ``..``."""
    return bool(HUB_ID.fullmatch(text)) and ".." not in text


def _hub_backend(repo_id: str, local_files_only: bool) -> object | None:
    """The fast tokenizer's ``tokenizers.Tokenizer`` of ``repo_id`` (None: not found there)."""
    from transformers import AutoTokenizer  # noqa: PLC0415 - optional until needed

    try:
        tok = AutoTokenizer.from_pretrained(repo_id, local_files_only=local_files_only)
    except (OSError, ValueError) as exc:  # not cached / no hub / not a tokenizer repo
        log.debug(
            "tokenizer %s (local_files_only=%s): %s", repo_id, local_files_only, exc
        )
        return None
    return getattr(tok, "backend_tokenizer", None)  # None: a slow tokenizer only


def hub_cache_dir() -> str:
    """The Hugging Face hub cache searched first (``huggingface_hub`` resolves
    ``$HF_HUB_CACHE`` / ``$HF_HOME``)."""
    from huggingface_hub import constants  # noqa: PLC0415 - optional until needed

    return str(constants.HF_HUB_CACHE)


def load_tokenizer(ref: str | Path) -> TextTokenizer:
    """The tokenizer ``ref`` names: a model directory / ``tokenizer.json``, else a hub id
    (the local HF cache first, then the hub; module docstring).

    Raises:
        ConfigError: neither works; one line naming the local path tried, the hub id and the
            fix (a path that cannot be a hub id keeps :meth:`TextTokenizer.load`'s message).
    """
    text = str(ref)
    path = Path(text).expanduser()
    if path.exists() or not is_hub_id(text):
        return TextTokenizer.load(path)
    try:
        import transformers  # noqa: F401, PLC0415 - optional until needed
    except ImportError:
        raise ConfigError(
            f"--tokenizer {text}: no such path ({path.resolve()}), and loading the hub id "
            f"{text} needs transformers: pip install transformers, or give a model directory"
        ) from None
    backend = _hub_backend(text, local_files_only=True)
    if backend is None:
        log.info("tokenizer %s is not in the local HF cache; trying the hub", text)
        backend = _hub_backend(text, local_files_only=False)
    if backend is None:
        raise ConfigError(
            f"--tokenizer {text}: no tokenizer at the local path {path.resolve()}, and the "
            f"hub id {text} has no fast tokenizer in the local HF cache ({hub_cache_dir()}) "
            "nor on the hub (offline?): give a model directory with tokenizer.json, or "
            f"fetch it first (huggingface-cli download {text})"
        )
    return TextTokenizer(backend, text)
