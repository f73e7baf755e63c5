"""``engines.model_dirs``: a carried models folder needs every tiny part, eagle3/ too,
and the one-line error names the missing part and all four (``tiny_models.PARTS``)."""

from __future__ import annotations

import pytest

from tests.gpu.proof.engines import MAX_TOKENS_PER_STEP, MODES, model_dirs
from trtbench.core.errors import ConfigError

PARTS = ("target", "draft", "medusa", "eagle3")


def test_a_carried_folder_without_eagle3_names_it_and_every_part(tmp_path):
    for part in PARTS[:3]:
        (tmp_path / part).mkdir()
        (tmp_path / part / "config.json").write_text("{}")
    with pytest.raises(ConfigError) as info:
        model_dirs(tmp_path)
    message = str(info.value)
    assert "eagle3/config.json is missing" in message and "\n" not in message
    assert "(target/, draft/, medusa/, eagle3/)" in message


def test_a_complete_carried_folder_gives_every_part(tmp_path):
    for part in PARTS:
        (tmp_path / part).mkdir()
        (tmp_path / part / "config.json").write_text("{}")
    assert model_dirs(tmp_path) == {p: tmp_path / p for p in PARTS}


def test_eagle3_is_measured_with_a_chain_of_4():
    assert "eagle3" in MODES
    assert MAX_TOKENS_PER_STEP["eagle3"] == 4 + 1  # K accepted + the target's token
