#!/usr/bin/env bash
# The GPU suite: checks prepared for a bare GPU machine that has torch and this repository (an
# NGC PyTorch container or the lent GPU machine; no TensorRT-LLM, no network). One section per
# check, each sized to its GPU-time budget; run all or some:
#
#   bash scripts/gpu_suite.sh [OUT_DIR]                  # default docs/gpu/<gpu>-<YYYY-MM-DD>
#   GPU_SUITE_SECTIONS=calibrate bash scripts/gpu_suite.sh
#
# Sections:
#   calibrate  `trtbench calibrate` of a ~1B (llama-3.2-1b) and a ~8B (llama-3-8b) Llama shape,
#              random init, bf16, B 1..64 x q 1..16 at context 1024 (about 1-2 minutes; each
#              model stopped after CALIBRATE_TIMEOUT_S, default 150 s, so <= 5 minutes), then
#              `trtbench plan` of each with and without the calibration
#              (docs/planner.md "Calibration"). Writes calibration-<model>.json, calibrate.log,
#              plan-<model>-{calibrated,roofline}.txt.
#
# Environment: GPU_SUITE_SECTIONS (default: all), PLAN_GPU (the planner's GPU preset; default
# guessed from nvidia-smi's name: h200, h100-sxm, b200, ...), CALIBRATE_TIMEOUT_S.
# Where trtbench is not importable it is installed editable, without dependencies and offline
# (scripts/gpu_env.sh, wheels in .whl/ first). Exit status != 0 on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[gpu-suite] %s\n' "$*"; }
GPU_ENV_LABEL=gpu-suite
GPU_ENV_IMPORTS="trtbench.cli, trtbench.plan.plan_run"
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh
trtbench() { "$PY" -m trtbench.cli "$@"; }

GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "${GPU_NAME,,}" in
    *gb200*) PRESET=gb200 ;;
    *b200*) PRESET=b200 ;;
    *h200*) PRESET=h200 ;;
    *h100*) PRESET=h100-sxm ;;
    *h20*) PRESET=h20 ;;
    *a100*) PRESET=a100-sxm-80gb ;;
    *l40s*) PRESET=l40s ;;
    *) PRESET=h100-sxm ;;
esac
PRESET=${PLAN_GPU:-$PRESET}
OUT=${1:-docs/gpu/${PRESET%%-*}-$(date -u +%F)}
SECTIONS=${GPU_SUITE_SECTIONS:-calibrate}
mkdir -p "$OUT"
say "GPU: $GPU_NAME (plan preset $PRESET); out: $OUT; sections: $SECTIONS"
{
    echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "date: $(date -u +%FT%TZ)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$OUT/suite.txt"

section_calibrate() {
    local model file
    for model in llama-3.2-1b llama-3-8b; do
        file="$OUT/calibration-$model.json"
        say "calibrate $model"
        timeout "${CALIBRATE_TIMEOUT_S:-150}" "$PY" -m trtbench.cli calibrate \
            --model "$model" --out "$file" --device cuda \
            --batch 1,2,4,8,16,32,64 --query 1,2,4,8,16 --context 1024 \
            --warmup 3 --repeats 5 --min-repeat-ms 20 | tee -a "$OUT/calibrate.log"
        # plan context = 768 + 512 / 2 = 1024, the calibration's: T(B, q) is used as measured
        local plan=(plan --model "$model" --gpu "$PRESET" --input-len 768 --output-len 512
            --concurrency 1,4,16,64 --eagle3 default --ngram default)
        [ "$model" = llama-3-8b ] && plan+=(--draft llama-3.2-1b)
        trtbench "${plan[@]}" --calibration "$file" > "$OUT/plan-$model-calibrated.txt"
        trtbench "${plan[@]}" > "$OUT/plan-$model-roofline.txt"
        grep -E '^(Crossover|Recommended)' "$OUT/plan-$model-calibrated.txt" | sed 's/^/  calibrated: /'
        grep -E '^(Crossover|Recommended)' "$OUT/plan-$model-roofline.txt" | sed 's/^/  roofline:   /'
    done
}

for section in ${SECTIONS//,/ }; do
    case "$section" in
        calibrate) section_calibrate ;;
        *) say "unknown section '$section'; known: calibrate" >&2; exit 2 ;;
    esac
done
say "done: $OUT"
