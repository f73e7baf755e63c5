"""Published limits of the GPUs the planner knows: memory, HBM bandwidth, dense tensor peaks.

All figures are vendor spec-sheet values for *dense* math (NVIDIA lists sparse peaks, twice as
large, in bold; those are not used here). Memory is the spec-sheet capacity in decimal bytes.

Sources:
    H100 SXM5 and H200 SXM: NVIDIA spec pages, https://www.nvidia.com/en-us/data-center/h100/
        and https://www.nvidia.com/en-us/data-center/h200/.
    A100 SXM4 80GB: NVIDIA A100 datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4): 80 GB
        HBM2e, 2,039 GB/s, BF16 tensor 312 TFLOP/s dense; no FP8 tensor cores (Ampere).
    L40S: NVIDIA L40S datasheet: 48 GB GDDR6, 864 GB/s, BF16 tensor 362.05 TFLOP/s dense
        (733 sparse), FP8 733 TFLOP/s dense (1,466 sparse).
    B200 (HGX, 1,000 W): NVIDIA HGX B200 spec page, per GPU (the 8-GPU totals / 8): 180 GB
        HBM3e (1.44 TB), 8 TB/s (64 TB/s), dense BF16 2.25 / FP8 4.5 / FP4 9 PFLOP/s (the page
        lists sparse figures, twice these); NVLink 5, 1.8 TB/s total per GPU.
    GB200 (NVL72): NVIDIA GB200 NVL72 spec page, per GPU (the rack's totals / 72): 186 GB
        HBM3e (13.4 TB), 8 TB/s (576 TB/s), dense BF16 2.5 / FP8 5 / FP4 10 PFLOP/s; NVLink 5,
        1.8 TB/s total per GPU.
    H20: NVIDIA H20 product brief: 96 GB HBM3, 4.0 TB/s, FP16/BF16 148 TFLOP/s and FP8
        296 TFLOP/s dense; NVLink 4, 900 GB/s total.
    MI300X: AMD Instinct MI300X data sheet: 192 GB HBM3, 5.3 TB/s, dense FP16/BF16 1,307.4
        and FP8 2,614.9 TFLOP/s (the sheet's sparse figures are twice these); AMD Infinity
        Fabric, 7 links x 64 GB/s per direction = 448 GB/s per direction (896 GB/s total).
    RTX 3090: NVIDIA Ampere GA102 whitepaper: 24 GB GDDR6X, 936 GB/s, FP16 tensor with FP32
        accumulate 71 TFLOP/s dense; no FP8; PCIe Gen4 x16 (no NVLink bridge assumed).

GPU-to-GPU links (per direction; spec sheets quote the bidirectional total, twice as large):
    H100 SXM5 and H200 SXM: NVLink 4, 900 GB/s total (the same spec pages) =
        450 GB/s each way (18 links x 25 GB/s).
    A100 SXM4: NVLink 3, 600 GB/s total (A100 datasheet) = 300 GB/s each way.
    L40S: no NVLink; PCIe Gen4 x16, 64 GB/s total (L40S datasheet) = 32 GB/s each way.
    B200, GB200: NVLink 5, 1.8 TB/s total = 900 GB/s each way; H20: NVLink 4, 450 GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from trtbench.core.errors import ConfigError


@dataclass(frozen=True)
class GpuSpec:
    """One GPU's limits (dense peaks; decimal units).

    Attributes:
        name: canonical key, e.g. ``h100-sxm``.
        label: human name with the variant, e.g. ``H100 SXM5 80GB``.
        memory_bytes: device memory from the spec sheet.
        hbm_bandwidth_bytes_per_s: peak DRAM bandwidth.
        bf16_dense_flops_per_s: dense BF16/FP16 tensor-core peak.
        fp8_dense_flops_per_s: dense FP8 tensor-core peak; None where the GPU has none.
        source: where the numbers come from.
        link_bytes_per_s: GPU-to-GPU bandwidth in one direction (NVLink, or PCIe).
        link_label: the link's name, e.g. ``NVLink 4``.
        fp4_dense_flops_per_s: dense FP4 tensor peak; None where the GPU has none (all but
            Blackwell).
    """

    name: str
    label: str
    memory_bytes: float
    hbm_bandwidth_bytes_per_s: float
    bf16_dense_flops_per_s: float
    fp8_dense_flops_per_s: float | None
    source: str
    link_bytes_per_s: float
    link_label: str
    fp4_dense_flops_per_s: float | None = None

    def ridge_flops_per_byte(self, fp8: bool = False) -> float:
        """Roofline ridge point: dense peak / bandwidth (FLOP per byte).

        Raises:
            ConfigError: ``fp8`` on a GPU without FP8 tensor cores.
        """
        return self.peak_flops_per_s(fp8) / self.hbm_bandwidth_bytes_per_s

    def peak_flops_per_s(self, fp8: bool = False, fp4: bool = False) -> float:
        """Dense tensor peak for BF16/FP16 math, FP8 math when ``fp8``, FP4 math when ``fp4``.

        Raises:
            ConfigError: ``fp8`` on a GPU without FP8 tensor cores (A100), ``fp4`` on one
                without FP4 tensor cores (all but Blackwell).
        """
        if fp4:
            if self.fp4_dense_flops_per_s is None:
                raise ConfigError(
                    f"{self.label} has no FP4 tensor cores; plan FP4 weights on b200 or "
                    "gb200, or give --dtype int4 (4-bit weights, 16-bit math)"
                )
            return self.fp4_dense_flops_per_s
        if not fp8:
            return self.bf16_dense_flops_per_s
        if self.fp8_dense_flops_per_s is None:
            raise ConfigError(
                f"{self.label} has no FP8 tensor cores; plan with --dtype bfloat16 or "
                "float16, or pick an FP8-capable GPU (h100-sxm, h200, b200, l40s, mi300x)"
            )
        return self.fp8_dense_flops_per_s


_TB = 1e12
_GB = 1e9

GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        GpuSpec(
            "h100-sxm",
            "H100 SXM5 80GB",
            80 * _GB,
            3.35 * _TB,
            989 * _TB,
            1979 * _TB,
            "https://www.nvidia.com/en-us/data-center/h100/ (NVIDIA H100 spec page)",
            450 * _GB,
            "NVLink 4",
        ),
        GpuSpec(
            "h200",
            "H200 SXM 141GB",
            141 * _GB,
            4.8 * _TB,
            989 * _TB,
            1979 * _TB,
            "https://www.nvidia.com/en-us/data-center/h200/ (NVIDIA H200 spec page)",
            450 * _GB,
            "NVLink 4",
        ),
        GpuSpec(
            "a100-sxm-80gb",
            "A100 SXM4 80GB",
            80 * _GB,
            2.039 * _TB,
            312 * _TB,
            None,
            "NVIDIA A100 datasheet (SXM4 80GB: 2,039 GB/s, BF16 312 TFLOP/s dense)",
            300 * _GB,
            "NVLink 3",
        ),
        GpuSpec(
            "l40s",
            "L40S 48GB",
            48 * _GB,
            0.864 * _TB,
            362.05 * _TB,
            733 * _TB,
            "NVIDIA L40S datasheet (864 GB/s; BF16 362 / FP8 733 TFLOP/s dense)",
            32 * _GB,
            "PCIe Gen4 x16",
        ),
        GpuSpec(
            "b200",
            "B200 (HGX) 180GB",
            180 * _GB,
            8.0 * _TB,
            2250 * _TB,
            4500 * _TB,
            "https://www.nvidia.com/en-us/data-center/hgx/ (NVIDIA HGX B200 spec, per GPU)",
            900 * _GB,
            "NVLink 5",
            9000 * _TB,
        ),
        GpuSpec(
            "gb200",
            "GB200 (NVL72) 186GB",
            186 * _GB,
            8.0 * _TB,
            2500 * _TB,
            5000 * _TB,
            "https://www.nvidia.com/en-us/data-center/gb200-nvl72/ (per GPU)",
            900 * _GB,
            "NVLink 5",
            10000 * _TB,
        ),
        GpuSpec(
            "h20",
            "H20 96GB",
            96 * _GB,
            4.0 * _TB,
            148 * _TB,
            296 * _TB,
            "NVIDIA H20 product brief (96 GB HBM3, 4.0 TB/s, BF16 148 / FP8 296 TFLOP/s)",
            450 * _GB,
            "NVLink 4",
        ),
        GpuSpec(
            "mi300x",
            "Instinct MI300X 192GB",
            192 * _GB,
            5.3 * _TB,
            1307.4 * _TB,
            2614.9 * _TB,
            "AMD Instinct MI300X data sheet (5.3 TB/s; BF16 1,307.4 / FP8 2,614.9 dense)",
            448 * _GB,
            "Infinity Fabric",
        ),
        GpuSpec(
            "rtx-3090",
            "GeForce RTX 3090 24GB",
            24 * _GB,
            0.936 * _TB,
            71 * _TB,
            None,
            "NVIDIA Ampere GA102 whitepaper (936 GB/s; FP16 tensor, FP32 acc. 71 TFLOP/s)",
            32 * _GB,
            "PCIe Gen4 x16",
        ),
    )
}

_ALIASES = {
    "h100": "h100-sxm",
    "h100-sxm5": "h100-sxm",
    "h200-sxm": "h200",
    "a100": "a100-sxm-80gb",
    "a100-80gb": "a100-sxm-80gb",
    "hgx-b200": "b200",
    "gb200-nvl72": "gb200",
    "3090": "rtx-3090",
}


def gpu_preset_names() -> str:
    """The GPU presets (:data:`GPUS`) as ``a, b, c``, sorted: what ``--gpu``'s help and the
    error of :func:`get_gpu` list."""
    return ", ".join(sorted(GPUS))


def get_gpu(name: str) -> GpuSpec:
    """Look a GPU up by key or alias (case-insensitive: ``H100``, ``h100-sxm``, ``a100``…).

    Raises:
        ConfigError: unknown name; the message lists the known ones.
    """
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    key = _ALIASES.get(key, key)
    if key not in GPUS:
        raise ConfigError(
            f"unknown GPU preset {name!r}; use one of {gpu_preset_names()}"
        )
    return GPUS[key]


def match_gpu_name(device_name: str) -> GpuSpec | None:
    """Best effort: the table entry for an NVML device name such as ``NVIDIA H100 80GB HBM3``.

    Returns None when no entry matches (PCIe variants of H100/A100 are not in the table).
    """
    text = device_name.upper()
    for key, needle in (("gb200", "GB200"), ("b200", "B200"), ("h20", "H20 ")):
        if needle in text + " ":
            return GPUS[key]
    if "MI300X" in text:
        return GPUS["mi300x"]
    if "3090" in text:
        return GPUS["rtx-3090"]
    if "H200" in text:
        return GPUS["h200"]
    if "L40S" in text:
        return GPUS["l40s"]
    if "PCIE" in text or "NVL" in text:
        return None
    if "H100" in text:
        return GPUS["h100-sxm"]
    if "A100" in text and "80GB" in text.replace(" ", ""):
        return GPUS["a100-sxm-80gb"]
    return None
