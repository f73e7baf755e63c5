"""``read_manifest``: build.json written by ``write_manifest``, then damaged or from a newer
trtbench: a one-line DataFileError naming the file and the fix (exit 2 in the CLI)."""

from __future__ import annotations

import json

import pytest

from tests.support.manifests import manifest
from trtbench.builders.manifest import read_manifest, write_manifest
from trtbench.core.errors import BuildError, DataFileError

FIX = "run `trtbench build` again for this variant"


@pytest.fixture
def engine_dir(tmp_path):
    write_manifest(tmp_path / "v", manifest("reference", "medusa"))
    return tmp_path / "v"


def test_round_trip_and_schema_version(engine_dir):
    assert json.loads((engine_dir / "build.json").read_text())["schema_version"] == 1
    assert read_manifest(engine_dir).medusa.choices == [[0], [1], [0, 0]]


def test_an_old_manifest_without_schema_version_is_version_1(engine_dir):
    path = engine_dir / "build.json"
    doc = json.loads(path.read_text())
    del doc["schema_version"]
    path.write_text(json.dumps(doc))
    assert read_manifest(engine_dir).schema_version == 1


def test_a_newer_manifest_is_refused(engine_dir):
    path = engine_dir / "build.json"
    doc = json.loads(path.read_text())
    doc["schema_version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(DataFileError) as err:
        read_manifest(engine_dir)
    assert str(err.value) == (
        f"{path} has schema_version 99 but this trtbench reads up to 1; upgrade trtbench "
        "(pip install -U trtbench) or re-run with this version"
    )


def test_a_truncated_manifest_names_line_and_column(engine_dir):
    path = engine_dir / "build.json"
    text = path.read_text()
    path.write_text(text[: text.index('"cuda_graphs"') + 5])
    with pytest.raises(DataFileError) as err:
        read_manifest(engine_dir)
    line = text[: text.index('"cuda_graphs"')].count("\n") + 1
    assert str(err.value).startswith(f"{path} line {line} column ")
    assert str(err.value).endswith(f"; {FIX}")


def test_a_wrong_type_names_the_field(engine_dir):
    path = engine_dir / "build.json"
    doc = json.loads(path.read_text())
    doc["medusa"]["num_heads"] = "three"
    path.write_text(json.dumps(doc))
    with pytest.raises(DataFileError) as err:
        read_manifest(engine_dir)
    assert str(err.value) == (
        f"{path} is not a valid build manifest (medusa.num_heads: Input should be a valid "
        f"integer, unable to parse string as an integer); {FIX}"
    )


def test_a_missing_manifest_is_still_a_build_error(tmp_path):
    (tmp_path / "v").mkdir()
    with pytest.raises(BuildError, match="has no build.json"):
        read_manifest(tmp_path / "v")
