"""Progress of the tiny-model build: what a ``BuildProgress`` sink hears, and the script's bars.

Built with a small recipe (seconds, not the real models' two minutes) on one torch thread, so
two builds of it are bit-identical and the sink can be shown to change nothing.
"""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from tests.support.data import REPO_ROOT
from trtbench.builders.tiny import tiny_models as tm
from trtbench.builders.tiny.tiny_recipe import EagleRecipe, Recipe

SMALL = Recipe(
    train_bytes=40_000,
    eval_bytes=10_000,
    vocab_size=300,
    seq_len=16,
    target_layers=1,
    target_hidden=32,
    target_heads=2,
    target_intermediate=64,
    target_steps=5,
    target_batch=4,
    prompt_len=8,
    continuation_len=8,
    train_prompts=8,
    eval_prompts=4,
    draft_hidden=16,
    draft_heads=2,
    draft_intermediate=32,
    draft_steps=3,
    draft_batch=4,
    medusa_steps=4,
    medusa_batch_positions=32,
)
SMALL_EAGLE = EagleRecipe(intermediate=32, steps=6, batch=4)
STEPS = {"target": 5, "draft": 3, "medusa": 4, "eagle3": 6}  # distinct: a mix-up shows


class Recorder:
    """A BuildProgress that writes down every call."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def start(self, part: str, total_steps: int) -> None:
        self.events.append(("start", part, total_steps))

    def advance(self, part: str, steps: int = 1) -> None:
        self.events.append(("advance", part, steps))

    def finish(self, part: str) -> None:
        self.events.append(("finish", part))


def expected_events(parts: list[str]) -> list[tuple]:
    out: list[tuple] = []
    for part in parts:
        out += [("start", part, STEPS[part])]
        out += [("advance", part, 1)] * STEPS[part]
        out += [("finish", part)]
    return out


def build_small(root: Path, progress: tm.BuildProgress | None) -> dict[str, Path]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tm, "MAX_THREADS", 1)  # one thread: repeatable to the bit
        return tm.ensure_tiny_models(
            root, progress=progress, recipe=SMALL, eagle=SMALL_EAGLE
        )


@pytest.fixture(scope="module")
def small_builds(tmp_path_factory) -> dict:
    """The small recipe built twice: without a sink, and with a Recorder."""
    quiet, watched = (
        tmp_path_factory.mktemp("quiet"),
        tmp_path_factory.mktemp("watched"),
    )
    recorder = Recorder()
    build_small(quiet, None)
    build_small(watched, recorder)
    return {"quiet": quiet, "watched": watched, "events": recorder.events}


def test_small_recipe_step_counts_are_the_ones_asserted():
    steps = {p: getattr(SMALL, f"{p}_steps") for p in tm.PARTS[:3]}
    assert {**steps, "eagle3": SMALL_EAGLE.steps} == STEPS
    assert tm.recipe_key(SMALL) != tm.recipe_key(Recipe())


def test_sink_hears_start_each_step_and_finish_of_every_part(small_builds):
    assert small_builds["events"] == expected_events(
        ["target", "draft", "medusa", "eagle3"]
    )
    quality = tm.read_quality(small_builds["watched"])
    assert {p: quality["parts"][p]["steps"] for p in tm.PARTS} == STEPS


def test_sink_hears_only_the_parts_rebuilt(small_builds, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(small_builds["watched"], root)
    (root / "draft" / "model.safetensors").unlink()  # the draft alone is stale
    recorder = Recorder()
    build_small(root, recorder)
    assert recorder.events == expected_events(["draft"])
    recorder = Recorder()
    build_small(root, recorder)  # complete now
    assert recorder.events == []


def test_sink_leaves_the_training_unchanged(small_builds):
    quiet, watched = small_builds["quiet"], small_builds["watched"]
    for part, weights in (
        ("target", "model.safetensors"),
        ("draft", "model.safetensors"),
        ("medusa", "medusa_lm_head.safetensors"),
        ("eagle3", "model.safetensors"),
    ):
        assert (quiet / part / weights).read_bytes() == (
            watched / part / weights
        ).read_bytes(), part
    q_quiet, q_watched = tm.read_quality(quiet), tm.read_quality(watched)
    for key in ("draft_greedy_agreement", "medusa_head_top1_accuracy"):
        assert q_quiet[key] == q_watched[key]
    for part in tm.PARTS:
        for key in ("first_loss", "final_loss"):
            assert q_quiet["parts"][part][key] == q_watched["parts"][part][key]


def test_complete_cache_calls_nothing_on_the_sink(tiny_models):
    class Untouchable:
        def __getattr__(self, name: str):
            raise AssertionError(f"progress.{name} used on a complete cache")

    root = tiny_models["target"].parent
    recorder = Recorder()
    assert tm.ensure_tiny_models(root, progress=recorder) == tiny_models
    assert tm.ensure_tiny_models(root, progress=Untouchable()) == tiny_models
    assert recorder.events == []


def load_script():
    path = REPO_ROOT / "scripts" / "make_tiny_models.py"
    spec = importlib.util.spec_from_file_location("make_tiny_models", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_script_bars_print_quarters_then_steps_done_of_total_off_a_terminal():
    script = load_script()
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=80)
    with script.Bars(console) as bars:
        bars.start("target", 5)
        for _ in range(5):
            bars.advance("target")
        bars.finish("target")
        bars.start("draft", 3)
        bars.advance("draft", 2)
    lines = out.getvalue().splitlines()
    # a line as each quarter of a model's steps is passed (5 steps: 2, 3, 4 pass 1/4, 2/4,
    # 3/4; the last step is the bar's), then the bars once
    assert lines[:4] == [
        "[tiny-models] target: 2/5 steps",
        "[tiny-models] target: 3/5 steps",
        "[tiny-models] target: 4/5 steps",
        "[tiny-models] draft: 2/3 steps",
    ]
    assert len(lines) == 6
    assert lines[4].startswith("target ") and " 5/5 steps 0:00:0" in lines[4]
    assert lines[5].startswith("draft ") and " 2/3 steps 0:00:0" in lines[5]


def test_script_bars_draw_nothing_when_nothing_is_built():
    script = load_script()
    out = io.StringIO()
    with script.Bars(Console(file=out, force_terminal=True)):
        pass
    assert out.getvalue() == ""


def test_script_log_lines_stay_whole_off_a_terminal():
    script = load_script()
    out = io.StringIO()
    handler = script.ConsoleLog(Console(file=out, force_terminal=False, width=40))
    handler.setFormatter(logging.Formatter("[tiny-models] %(message)s"))
    message = "built target: " + json.dumps({"steps": 600, "id": "x" * 60})
    handler.emit(logging.LogRecord("t", logging.INFO, __file__, 1, message, None, None))
    assert out.getvalue() == f"[tiny-models] {message}\n"
