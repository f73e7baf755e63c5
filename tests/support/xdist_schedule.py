"""How ``scripts/test.sh`` spreads the suite over its pytest-xdist workers.

Each worker is its own process, so a session or module fixture (a vLLM server, the demo
run) starts once per worker that runs a test using it. The scheduler therefore keeps
every test file on one worker (as ``--dist loadfile``), puts the files that share the
session's vLLM servers (:data:`SHARED_VLLM_FILES`) on one worker together, and hands out
the slowest units first (longest-processing-time order), so that neither worker ends the
run alone on a long file while the other idles.

``xdist_group`` marks are not used: pytest-xdist 3.8 groups them by rewriting a private
node id attribute that pytest 9.2 no longer reads, so under pytest 9.2 they have no effect.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

VLLM_GROUP = "vllm"
# Test files that use the session fixtures of tests/integration/conftest.py
# (vllm_target_url, vllm_draft_url, vllm_draft_detailed_url). tests/conftest.py refuses a
# collection in which another file uses them.
SHARED_VLLM_FILES = frozenset(
    {
        "tests/integration/test_openai_loadtest.py",
        "tests/integration/test_openai_spec_counts.py",
        "tests/integration/test_vllm_bench_serve_agreement.py",
        "tests/integration/test_vllm_crosscheck.py",
    }
)
SHARED_VLLM_FIXTURES = frozenset(
    {"vllm_target_url", "vllm_draft_url", "vllm_draft_detailed_url"}
)
# Seconds each slow unit took on 2 idle cores with two workers (``--durations`` of a full
# run, docs/testing.md); only their order matters. Units not listed follow, largest first.
SLOW_UNITS_S = {
    VLLM_GROUP: 420,
    "tests/integration/test_faults.py": 180,
    "tests/integration/test_demo_followup.py": 150,
    "tests/integration/test_run_pipeline.py": 110,
    "tests/integration/test_slurm_run.py": 100,
    "tests/integration/test_followup_gate.py": 100,
    "tests/integration/test_vllm_server.py": 95,
    "tests/integration/test_vllm_eagle3_crosscheck.py": 90,
    "tests/integration/test_run_mixed_servers.py": 80,
    "tests/integration/test_llmapi_cpu_example.py": 55,
    "tests/unit/gpu_proof/test_gpu_proof_cpu.py": 40,
    "tests/integration/test_loopback.py": 35,
    "tests/integration/test_loadgen_ground_truth.py": 35,
}


def file_of(nodeid: str) -> str:
    """The file part of pytest's ``path::name[params]`` node id."""
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    """The work unit of a test: its file, or :data:`VLLM_GROUP` for the files sharing the
    session's vLLM servers."""
    path = file_of(nodeid)
    return VLLM_GROUP if path in SHARED_VLLM_FILES else path


class SlowestFirstFileScheduling(LoadScopeScheduling):
    """pytest-xdist's scope scheduling with :func:`unit_of` as the scope and the units
    queued slowest first (:data:`SLOW_UNITS_S`, then by number of tests)."""

    _ordered = False

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node) -> None:
        if not self._ordered:  # the queue is complete by the first assignment
            units = sorted(
                self.workqueue.items(),
                key=lambda unit: (-SLOW_UNITS_S.get(unit[0], 0), -len(unit[1])),
            )
            self.workqueue.clear()
            self.workqueue.update(units)
            self._ordered = True
        super()._assign_work_unit(node)
