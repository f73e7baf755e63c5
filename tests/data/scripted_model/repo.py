"""Write a Triton model repository of scripted-timing models (model.py + config.pbtxt.in).

Used by the load-generator tests and ``scripts/bench_loadgen.py``::

    write_scripted_repo(tmp / "repo", {"scripted": {"first_delay_ms": 40, "step_ms": 10}})

Also writes ``wrong_inputs``: a model whose input is ``prompt`` instead of ``text_input``
(for the bad-input test), when ``with_wrong_inputs`` is true.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from string import Template

HERE = Path(__file__).resolve().parent
DEFAULTS = {
    "max_batch_size": 64,
    "first_delay_ms": 40,
    "first_tokens": 1,
    "step_ms": 10,
    "tokens_per_step": 2,
    "draft_per_step": 4,
    "empty_final": "true",
    "send_log": "",  # a path: model.py records every response's send time there
    "slow_file": "",  # a path: while it exists, new requests run slow_factor times slower
    "slow_factor": 2.0,
}


def write_scripted_repo(
    repo: Path, models: dict[str, dict], with_wrong_inputs: bool = False
) -> Path:
    """Create ``repo/<name>/{config.pbtxt,1/model.py}`` for each model; return ``repo``."""
    template = Template((HERE / "config.pbtxt.in").read_text())
    configs = {
        name: template.substitute({**DEFAULTS, **params, "name": name})
        for name, params in models.items()
    }
    if with_wrong_inputs:
        text = template.substitute({**DEFAULTS, "name": "wrong_inputs"})
        configs["wrong_inputs"] = text.replace('name: "text_input"', 'name: "prompt"')
    for name, config in configs.items():
        (repo / name / "1").mkdir(parents=True, exist_ok=True)
        (repo / name / "config.pbtxt").write_text(config)
        shutil.copy(HERE / "model.py", repo / name / "1" / "model.py")
    return repo
