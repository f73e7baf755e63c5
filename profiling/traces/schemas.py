"""Column contracts of the launch analysis: the normalized frames and the three CSV schemas.

Definitions and sources are in :mod:`trtbench.profiling.traces.launches`. All times are integer
nanoseconds on the trace's own timeline (nsys: session time; Kineto: ``ts`` x 1000).
"""

from __future__ import annotations

from trtbench.core.export import Column

API_KINDS = ("kernel_launch", "graph_launch", "other")
GPU_KINDS = ("kernel", "memcpy", "memset", "graph")

# The normalized launch frame both loaders produce (dtypes: Int64 except s_* / *_kind category).
LAUNCH_FRAME_COLUMNS = (
    "pid",  # host process id (NA: GPU activity whose launching call is unknown, Kineto)
    "tid",  # host thread of the API call (NA: no API row)
    "correlation_id",  # CUPTI correlation id linking the call and its GPU activity
    "s_api_name",  # API name, nsys _vNNNN suffix stripped (NA: no API row)
    "api_kind",  # kernel_launch | graph_launch | other (NA: no API row)
    "api_start_ns",
    "api_end_ns",
    "gpu_kind",  # kernel | memcpy | memset | graph (NA: a launch call with no GPU activity)
    "start_ns",  # GPU activity start
    "end_ns",
    "device_id",
    "stream_id",
    "graph_node_id",  # set for kernels replayed from a CUDA graph (node tracing)
    "s_name",  # kernel name (demangled), "Memcpy HtoD", "Memset", "CUDA graph"
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
)
INT_COLUMNS = frozenset(
    c for c in LAUNCH_FRAME_COLUMNS if not (c.startswith("s_") or c.endswith("_kind"))
)
# Ranges (NVTX ranges, Kineto user annotations): s_name category, others Int64.
RANGE_COLUMNS = ("s_name", "pid", "tid", "start_ns", "end_ns")
# Step windows made from ranges, graph launches or the whole trace (one host thread each).
WINDOW_COLUMNS = ("step", "s_name", "pid", "tid", "start_ns", "end_ns")

KERNEL_LAUNCH_SCHEMA = (
    Column("api_start_ns", "start of the launching CUDA API call (ns)"),
    Column("api_dur_ns", "host duration of the call: api end - api start (ns)"),
    Column(
        "queue_start_ns",
        "api end when the kernel started after the call returned, else empty (ns)",
        False,
    ),
    Column(
        "queue_dur_ns",
        "kernel start - api end when >= 0, else empty (nsys Queue Dur) (ns)",
        False,
    ),
    Column("kernel_start_ns", "kernel start on the GPU (ns)"),
    Column("kernel_dur_ns", "kernel end - kernel start (ns)"),
    Column("total_dur_ns", "max(api end, kernel end) - api start (ns)"),
    Column("launch_delay_ns", "max(0, kernel start - api end): HTA launch delay (ns)"),
    Column("pid", "host process id"),
    Column("tid", "host thread id of the call"),
    Column("device_id", "GPU device id"),
    Column("stream_id", "CUDA stream id"),
    Column("correlation_id", "correlation id shared by the call and its kernels"),
    Column("s_api_name", "API function without the _vNNNN suffix"),
    Column("api_kind", "kernel_launch | graph_launch | other"),
    Column(
        "graph_node_id",
        "CUDA graph node id for graph-replayed kernels, else empty",
        False,
    ),
    Column(
        "call_kernels",
        "kernels launched by this call (nodes of a graph replay; 1 for a plain launch)",
    ),
    Column("call_index", "0-based rank of this kernel by start time within its call"),
    Column("grid_x", "grid size x (blocks)"),
    Column("grid_y", "grid size y (blocks)"),
    Column("grid_z", "grid size z (blocks)"),
    Column("block_x", "block size x (threads)"),
    Column("block_y", "block size y (threads)"),
    Column("block_z", "block size z (threads)"),
    Column("s_kernel_name", "kernel name (demangled)"),
)

_STAT_NAMES = (
    ("mean", "mean"),
    ("median", "median"),
    ("min", "minimum"),
    ("max", "maximum"),
    ("std", "sample standard deviation (ddof=1; 0 for one value)"),
)
_METRICS = (
    ("total", "total duration max(api end, kernel end) - api start"),
    ("api", "API call duration"),
    ("queue", "queue duration, over launches that have one"),
    ("kernel", "kernel duration"),
)
LAUNCH_SUMMARY_SCHEMA = (
    Column("pid", "host process id"),
    Column("tid", "host thread id"),
    Column("device_id", "GPU device id"),
    Column("s_api_name", "API function"),
    Column("s_kernel_name", "kernel name (demangled)"),
    Column("count", "kernels launched (rows of kernel_launches.csv)"),
    Column(
        "queue_count", "kernels with a queue time (started after the call returned)"
    ),
    *(
        Column(
            f"{metric}_{stat}_ns",
            f"{stat_text} of the {metric_text} (ns)",
            metric != "queue",
        )
        for metric, metric_text in _METRICS
        for stat, stat_text in _STAT_NAMES
    ),
)

STEP_SCHEMA = (
    Column("step", "0-based step index in time order"),
    Column("s_name", "range name, or graph_launch / whole_trace"),
    Column("pid", "host process id"),
    Column("start_ns", "step start (range start or graph-launch call start) (ns)"),
    Column("end_ns", "step end (ns)"),
    Column("wall_ns", "step wall time: end - start (ns)"),
    Column(
        "launch_calls",
        "kernel-launch and graph-launch API calls started in the step, by any thread of "
        "the process",
    ),
    Column(
        "graph_launches",
        "graph-launch calls (cudaGraphLaunch / cuGraphLaunch) among them",
    ),
    Column(
        "launch_overhead_ns",
        "LAUNCH OVERHEAD PER STEP: sum of host durations of those calls (ns)",
    ),
    Column("kernels", "kernels launched by calls of the step (graph nodes included)"),
    Column("graph_kernels", "kernels launched by the step's graph launches"),
    Column("launch_delay_calls", "launch calls of the step with traced GPU work"),
    Column(
        "launch_delay_mean_ns",
        "mean over those calls of max(0, first GPU start - api end) (ns)",
        False,
    ),
    Column("launch_delay_max_ns", "maximum of the same (ns)", False),
    Column(
        "gpu_start_ns",
        "first start of the step's GPU activities (kernels, memcpy, memset) (ns)",
        False,
    ),
    Column("gpu_end_ns", "last end of the step's GPU activities (ns)", False),
    Column(
        "gpu_busy_ns", "union of the step's GPU activity intervals, all streams (ns)"
    ),
    Column(
        "gpu_idle_ns",
        "(gpu end - gpu start) - gpu busy (ns); empty when the step ran no GPU work",
    ),
    Column(
        "owner_tid",
        "host thread that owns the step (its range, or its graph launches)",
        False,
        "int",
    ),
    Column(
        "launch_threads",
        "threads of the process with launch calls in the step (calls of every thread count)",
        False,
        "int",
    ),
    Column("owner_launch_calls", "launch_calls made by the owner thread", False, "int"),
    Column(
        "owner_graph_launches",
        "graph_launches made by the owner thread",
        False,
        "int",
    ),
    Column(
        "owner_launch_overhead_ns",
        "launch_overhead_ns of the owner thread's calls (ns)",
        False,
    ),
    Column(
        "owner_kernels", "kernels launched by the owner thread's calls", False, "int"
    ),
)

_RANK = (
    Column(
        "rank", "rank of the trace (last integer of its file name, else its position)"
    ),
    Column("rank_file", "the rank's trace file name"),
)
RANK_STEP_SCHEMA = (
    *_RANK,
    Column(
        "device_id",
        "GPU that ran most of the rank's kernels (empty: none)",
        False,
        "int",
    ),
    *STEP_SCHEMA,
    Column(
        "aligned_step",
        "step index shared across ranks (by range name, else by position); empty when the "
        "ranks' steps cannot be aligned",
        False,
        "int",
    ),
)
RANK_SUMMARY_SCHEMA = (*_RANK, *LAUNCH_SUMMARY_SCHEMA)
STEP_ALIGNMENT_SCHEMA = (
    Column("aligned_step", "step index shared across ranks", kind="int"),
    Column("s_name", "the step's range name (of the first rank that has it)"),
    Column("ranks", "ranks that have this step", kind="int"),
    Column("wall_min_ns", "shortest step wall time over the ranks (ns)"),
    Column("wall_max_ns", "longest step wall time over the ranks (ns)"),
    Column(
        "launch_overhead_mean_ns",
        "mean over the ranks of the step's launch overhead (ns)",
    ),
    Column("launch_overhead_min_ns", "smallest launch overhead over the ranks (ns)"),
    Column("launch_overhead_max_ns", "largest launch overhead over the ranks (ns)"),
    Column(
        "launch_overhead_max_rank",
        "the rank with the largest launch overhead (first such rank)",
        kind="int",
    ),
    Column("kernels_min", "fewest kernels over the ranks", kind="int"),
    Column("kernels_max", "most kernels over the ranks", kind="int"),
    Column("gpu_busy_min_ns", "smallest GPU busy time over the ranks (ns)"),
    Column("gpu_busy_max_ns", "largest GPU busy time over the ranks (ns)"),
)
