"""``read_json_object``: the JSON files users point trtbench at, and the one-line errors."""

from __future__ import annotations

import pytest

from trtbench.core.errors import BuildError, ConfigError
from trtbench.core.json_files import read_json_object

FIXES = {"missing_fix": "make it", "bad_fix": "repair it"}


def test_an_object_is_returned_as_a_dict(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 192, "num_hidden_layers": 3}')
    assert read_json_object(path, **FIXES) == {
        "hidden_size": 192,
        "num_hidden_layers": 3,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "models.target: {path} does not exist; make it"),
        ("{oops", "models.target: {path} cannot be read (Expecting property name"),
        ("[1, 2]", "models.target: {path} is not a JSON object; repair it"),
        (b"\xff\xfe", "models.target: {path} cannot be read ("),
    ],
)
def test_each_failure_is_one_line_naming_the_file_and_the_fix(tmp_path, text, message):
    path = tmp_path / "config.json"
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    with pytest.raises(ConfigError) as info:
        read_json_object(path, label="models.target: ", **FIXES)
    assert str(info.value).startswith(message.format(path=path))
    assert "\n" not in str(info.value)


def test_the_error_type_is_the_callers(tmp_path):
    with pytest.raises(BuildError, match="does not exist; make it"):
        read_json_object(tmp_path / "config.json", error=BuildError, **FIXES)
