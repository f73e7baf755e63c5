"""``read_server_metrics_csv`` on a file written by the real writer from a real capture, then
damaged: one DataFileError naming the file and the line, never NaN or a dropped row."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.data import get_test_data_dir
from trtbench.core.errors import DataFileError
from trtbench.profiling.memory.server_metrics import (
    metrics_frame,
    parse_metrics_text,
    read_server_metrics_csv,
    write_server_metrics_csv,
)


@pytest.fixture
def written(tmp_path):
    text = (get_test_data_dir("server_metrics") / "metrics_kv_echo.txt").read_text()
    frame = metrics_frame(parse_metrics_text(text, t_ns=7, variant="v", phase="p"))
    return write_server_metrics_csv(frame, tmp_path / "server_metrics.csv"), frame


def test_round_trip_keeps_every_row(written):
    path, frame = written
    back = read_server_metrics_csv(path)
    assert len(back) == len(frame) == 29
    assert back["value"].tolist() == pytest.approx(
        frame["value"].astype(float).tolist()
    )


def test_a_file_cut_mid_row_names_the_last_line(written):
    path, _ = written
    text = path.read_text()
    path.write_text(text[: len(text) - 30])
    with pytest.raises(DataFileError) as err:
        read_server_metrics_csv(path)
    message = str(err.value)
    assert message.startswith(
        f"{path} line 30: "
    )  # header + 29 rows: the last one is cut
    assert message.endswith(
        "re-run `trtbench run` into this run directory (it scrapes "
        "the server), or delete the file"
    )


def test_a_garbled_value_and_a_missing_column(written):
    path, _ = written
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[4, "value"] = "12,5"
    frame.to_csv(path, index=False)
    with pytest.raises(
        DataFileError, match=r"line 6: column value holds '12,5', not a"
    ):
        read_server_metrics_csv(path)
    frame.drop(columns=["family"]).to_csv(path, index=False)
    with pytest.raises(DataFileError, match=r"lacks the required column\(s\) family"):
        read_server_metrics_csv(path)


def test_a_garbled_labels_json_names_the_line(written):
    path, _ = written
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.loc[2, "labels_json"] = '{"model": "kv_ec'
    frame.to_csv(path, index=False)
    with pytest.raises(
        DataFileError, match=r"line 4: labels_json '\{\"model\": \"kv_ec'"
    ):
        read_server_metrics_csv(path)
