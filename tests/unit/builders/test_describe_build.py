"""``describe_build``: the line ``trtbench build`` prints per variant, sizes in binary units."""

from __future__ import annotations

import pytest

from trtbench.builders.build import describe_build
from trtbench.builders.manifest import BuildManifest, CudaGraphs, ModelFiles


def manifest(bytes_on_disk: int) -> BuildManifest:
    return BuildManifest(
        backend="reference",
        variant={"name": "base"},
        mode="baseline",
        models={"target": ModelFiles(path="/m/target"), "draft": None, "medusa": None},
        tokenizer_dir="/m/target",
        cuda_graphs=CudaGraphs(
            requested=False, available=False, reason="not requested"
        ),
        build_seconds=1.5,
        bytes_on_disk=bytes_on_disk,
    )


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (2_500_000, "2.4 MiB on disk"),  # 2.5e6 / 2**20 = 2.384 (was "2.50 MB")
        (16_060_522_496, "14.96 GiB on disk"),  # / 2**30 = 14.957 (was "16060.52 MB")
        (1536, "1.5 KiB on disk"),  # 1536 / 2**10
    ],
)
def test_built_line_gives_the_size_in_binary_units(size, text):
    line = describe_build(manifest(size))
    assert (
        line
        == f"built base: reference baseline, no draft, {text}, 1.50 s, cuda_graphs=off"
    )
