"""``profile.nsys`` in ``trtbench run``: every variant's server under nsys, one tier recorded.

With ``profile: {nsys: true, nsys_tier: I}`` each variant's tritonserver starts under
``nsys launch`` (:mod:`trtbench.profiling.traces.nsys_session` explains why an interactive session
and not ``nsys profile`` with a capture range). The load generator runs as usual; right
before tier ``I`` (0-based position in the spec's tier list, default 0) sends its first
request, ``nsys start`` opens collection, and after its last response ``nsys stop`` closes
it, so the trace holds that tier and nothing of model loading, warmup or the other tiers.
Once the server is stopped the report is exported to SQLite and analyzed
(:func:`~trtbench.profiling.traces.nsys.analyze_nsys_report`) into
``RUN_DIR/traces/<variant>/{kernel_launches,launch_summary,steps}.csv`` next to
``<tier>.nsys-rep`` and ``<tier>.sqlite``; ``trtbench report`` picks up ``steps.csv``.

nsys is looked up before anything is built (:func:`check_nsys`). A profiling step that fails
later (nsys start refused, no report) becomes a warning: the load test goes on. While nsys is
attached, the memory sampler's process tree includes the nsys launcher itself.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from trtbench.core.errors import ConfigError, NotAvailableError, TrtbenchError
from trtbench.core.run_dir import RunDir
from trtbench.pipeline.loadtest import tiers_of
from trtbench.profiling.loadtest.workload.schedule import Tier
from trtbench.profiling.traces.nsys import analyze_nsys_report
from trtbench.profiling.traces.nsys_profile import NsysProfileSpec, find_nsys
from trtbench.profiling.traces.nsys_session import (
    NsysSession,
    collect_sqlite,
    nsys_shutdown_argv,
    nsys_start_argv,
    nsys_stop_argv,
    run_nsys_command,
    session_name,
)
from trtbench.profiling.traces.table_io import write_trace_tables
from trtbench.spec.bench import BenchSpec

log = logging.getLogger(__name__)

Runner = Callable[[Sequence[str]], None]
LAUNCH_CSVS = ("kernel_launches.csv", "launch_summary.csv", "steps.csv")


def profiled_tier(spec: BenchSpec) -> Tier | None:
    """The tier recorded under nsys (``profile.nsys_tier``, default the first); None when
    ``profile.nsys`` is off.

    Raises:
        ConfigError: ``nsys_tier`` is not a position in the tier list.
    """
    if not spec.profile.nsys:
        return None
    tiers = tiers_of(spec.loadtest)
    index = spec.profile.nsys_tier or 0
    if not 0 <= index < len(tiers):
        labels = ", ".join(f"{i}={t.label}" for i, t in enumerate(tiers))
        raise ConfigError(
            f"profile.nsys_tier {index} is not a tier of this spec; use a position in the "
            f"tier list ({labels})"
        )
    return tiers[index]


def check_nsys(spec: BenchSpec) -> Path | None:
    """Validate ``profile.nsys`` before anything is built: the tier exists and nsys is found.

    Returns:
        The nsys executable, or None when the spec does not ask for nsys.

    Raises:
        ConfigError: bad ``profile.nsys_tier``.
        NotAvailableError: nsys is not installed where :func:`find_nsys` looks.
    """
    if profiled_tier(spec) is None:
        return None
    try:
        return find_nsys()
    except NotAvailableError:
        raise NotAvailableError(
            "profile.nsys is true but nsys (Nsight Systems CLI) was not found on PATH, in "
            "/usr/local/cuda/bin or /opt/nvidia/nsight-systems; install Nsight Systems or "
            "set profile.nsys: false"
        ) from None


def nsys_session_for(rd: RunDir, variant: str, tier: Tier, nsys: Path) -> NsysSession:
    """The session of one variant's server: report ``RUN_DIR/traces/<variant>/<tier>``."""
    spec = NsysProfileSpec(rd.traces_dir / variant, name=tier.label)
    name = session_name("trtbench", variant, str(os.getpid()))
    return NsysSession(name, spec, nsys)


def capture_for(
    rd: RunDir, spec: BenchSpec, variant: str, nsys: Path | None
) -> TierCapture | None:
    """The capture of one variant's server (None without nsys), after removing what an
    earlier run left in ``traces/<variant>/`` under the same names (so a tier that is not
    recorded this time never shows an old trace)."""
    tier = profiled_tier(spec) if nsys is not None else None
    if tier is None or nsys is None:
        return None
    session = nsys_session_for(rd, variant, tier, nsys)
    out = session.spec.out_dir
    stale = [session.report_path, session.spec.sqlite_path]
    for path in [*stale, *(out / name for name in LAUNCH_CSVS)]:
        path.unlink(missing_ok=True)
    return TierCapture(session, tier)


class TierCapture:
    """Opens the session's collection when ``tier`` starts and closes it when it ends.

    Called from the run's progress hooks (the tier hooks of :func:`trtbench.pipeline.run.run_bench`). Failures of
    nsys are kept in ``errors`` and never stop the load test.

    Args:
        session: the variant's session (its server runs under ``nsys launch``).
        tier: the tier to record.
        run: runs one nsys command (default :func:`run_nsys_command`).
    """

    def __init__(
        self, session: NsysSession, tier: Tier, run: Runner = run_nsys_command
    ) -> None:
        self.session, self.tier, self._run = session, tier, run
        self.active = False
        self.recorded = False
        self.errors: list[str] = []

    def _try(self, argv: Sequence[str]) -> bool:
        try:
            self._run(argv)
        except TrtbenchError as exc:
            self.errors.append(str(exc))
            return False
        return True

    def tier_started(self, tier: Tier) -> None:
        """Start collecting if ``tier`` is the recorded one (once)."""
        if tier == self.tier and not (self.active or self.recorded):
            self.session.spec.out_dir.mkdir(parents=True, exist_ok=True)
            self.active = self._try(nsys_start_argv(self.session))

    def tier_ended(self) -> None:
        """Stop collecting (writes the report) if a collection is open."""
        if self.active:
            self.active = False
            self.recorded = self._try(nsys_stop_argv(self.session))

    def close(self) -> None:
        """Stop an open collection (Ctrl-C inside the tier) and end the session."""
        self.tier_ended()
        with contextlib.suppress(TrtbenchError):  # already over when the server exited
            self._run(nsys_shutdown_argv(self.session))


def analyze_capture(capture: TierCapture) -> tuple[list[Path], list[str]]:
    """Export and analyze what ``capture`` recorded (after its server stopped).

    Returns:
        (files written: the SQLite export and the three CSVs; warnings, one line each).
    """
    label = f"{capture.session.spec.out_dir.name} {capture.tier.label}"
    notes = [f"nsys trace of {label}: {e}" for e in capture.errors]
    if not capture.recorded:
        return [], notes or [f"nsys trace of {label}: the tier did not run"]
    try:
        sqlite = collect_sqlite(capture.session)
        analysis = analyze_nsys_report(sqlite)
    except TrtbenchError as exc:
        return [], [*notes, f"nsys trace of {label}: {exc}"]
    return [sqlite, *write_trace_tables(analysis.tables(), sqlite.parent)], notes
