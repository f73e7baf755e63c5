"""``read_repo_metadata``: trtbench.json written by ``RepoMetadata.to_json``, then damaged
or from a newer trtbench: a one-line DataFileError naming the file and the fix."""

from __future__ import annotations

import json

import pytest

from tests.support.run_factory import write_repo_metadata
from trtbench.core.errors import DataFileError, DeployError
from trtbench.triton_repo.interface import METADATA_SCHEMA_VERSION, read_repo_metadata

FIX = "render it again with `trtbench deploy RUN_DIR`"


@pytest.fixture
def path(tmp_path):
    return write_repo_metadata(tmp_path, "med", "medusa", streaming=True)


def test_round_trip(path):
    meta = read_repo_metadata(path.parent)
    assert meta.variant == "med" and meta.schema_version == METADATA_SCHEMA_VERSION == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d.update(schema_version=99),
            "{path} has schema_version 99 but this trtbench reads up to 1; upgrade trtbench "
            "(pip install -U trtbench) or re-run with this version",
        ),
        (
            lambda d: d.update(streaming="yes please"),
            "{path} is not valid trtbench repository metadata (streaming: Input should be a "
            "valid boolean, unable to interpret input); " + FIX,
        ),
        (
            lambda d: d.pop("model_name"),
            "{path} is not valid trtbench repository metadata (model_name: Field required); "
            + FIX,
        ),
    ],
)
def test_bad_documents(path, change, message):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(DataFileError) as err:
        read_repo_metadata(path.parent)
    assert str(err.value) == message.format(path=path)


def test_truncated(path):
    path.write_text(path.read_text()[:40])
    with pytest.raises(
        DataFileError, match=r"trtbench\.json line \d+ column \d+: not valid"
    ):
        read_repo_metadata(path.parent)


def test_missing_is_still_a_deploy_error(tmp_path):
    with pytest.raises(DeployError, match="trtbench deploy"):
        read_repo_metadata(tmp_path)
