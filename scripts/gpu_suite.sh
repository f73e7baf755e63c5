#!/usr/bin/env bash
# The GPU suite: every check prepared for a bare GPU machine that has torch and this repository
# (an NGC PyTorch container or the lent GPU machine; no TensorRT-LLM, no network), in one run of
# at most 8 minutes of GPU time (2 in the short mode). One section per check, each stopped at
# its budget; a failed section is recorded and the next one still runs:
#
#   bash scripts/gpu_suite.sh [OUT_DIR]                  # default docs/gpu/<gpu>-<YYYY-MM-DD>
#   GPU_SUITE_SHORT=1 bash scripts/gpu_suite.sh          # the 2-minute version
#   GPU_SUITE_SECTIONS=proof,large bash scripts/gpu_suite.sh
#   GPU_SUITE_DEVICE=cpu GPU_SUITE_SHORT=1 bash scripts/gpu_suite.sh OUT   # CPU stand-in
#
# Sections (budget full / short; docs/gpu/README.md says what each writes):
#   nsys       scripts/gpu_nsys_check.sh: `trtbench analyze nsys` on a real Nsight Systems
#              export of a known launch pattern (60 s / 30 s). Skipped where nsys is absent.
#   proof      scripts/gpu_proof.py, bfloat16, every mode, eager and CUDA graphs: step times by
#              CUDA events with warm-up at every (batch, mode) shape and repeats, lossless,
#              Kineto launch analysis (profiled apart), memory peaks per configuration
#              (B 1,8,32,64: 180 s / B 1,8: 45 s). NVML is sampled by `nvidia-smi` in a
#              process of its own during proof and large (nvml.csv).
#   large      scripts/gpu_large_steps.py: each method's step time on random-init ~1B and ~8B
#              Llama shapes, bf16, CUDA graphs, speedup at the tiny models' acceptance taken
#              from the proof (105 s / 1B only: 25 s).
#   calibrate  `trtbench calibrate` of the ~1B (llama-3.2-1b) and ~8B (llama-3-8b) shapes,
#              random init, bf16, B 1..64 x q 1..16 at context 1024 = the verify cost T(B, q),
#              then `trtbench plan` of each with and without it (docs/planner.md "Calibration")
#              (2 x 60 s / 1B only, a 3 x 3 grid: 20 s).
#
# Environment: GPU_SUITE_SECTIONS (default nsys,proof,large,calibrate), GPU_SUITE_SHORT (1: the
# short mode), GPU_SUITE_DEVICE (cuda, or cpu: the CPU stand-in below), GPU_SUITE_MODELS (the
# tiny models folder to carry, scripts/make_tiny_models.py; default: made or found in this
# machine's cache), PLAN_GPU (the planner's GPU preset; default guessed from nvidia-smi's name).
#
# CPU stand-in (GPU_SUITE_DEVICE=cpu): checks the script end to end where no GPU is lent. Every
# section runs on the CPU at toy sizes: proof float32 B 1,2 with host perf_counter timing
# instead of CUDA events; large and calibrate on a 2-layer, 64-wide Llama config standing in
# for the ~1B / ~8B shapes; nsys is skipped (no GPU); no NVML sampler; no budgets. Its figures
# are not GPU figures, and suite.txt says so.
#
# Where trtbench is not importable it is installed editable, without dependencies and offline
# (scripts/gpu_env.sh, wheels in .whl/ first). Exit status: 0 every section ran or was skipped,
# 1 a section failed (the others still ran), 2 an unknown section.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[gpu-suite] %s\n' "$*"; }
GPU_ENV_LABEL=gpu-suite
GPU_ENV_IMPORTS="trtbench.cli, trtbench.plan.plan_run, trtbench.builders.reference"
# shellcheck source=scripts/gpu_env.sh
. scripts/gpu_env.sh

DEVICE=${GPU_SUITE_DEVICE:-cuda}
SHORT=${GPU_SUITE_SHORT:-0}
if [ "$DEVICE" = cpu ]; then
    GPU_NAME="none: CPU stand-in (toy sizes, host clocks; not GPU figures)"
    PRESET=${PLAN_GPU:-h100-sxm}
else
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
fi
OUT=${1:-docs/gpu/${PRESET%%-*}-$(date -u +%F)}
SECTIONS=${GPU_SUITE_SECTIONS:-nsys,proof,large,calibrate}
MODELS_ARG=()
[ -n "${GPU_SUITE_MODELS:-}" ] && MODELS_ARG=(--models "$GPU_SUITE_MODELS")
mkdir -p "$OUT"
MODE_WORD=full
[ "$SHORT" = 1 ] && MODE_WORD=short
say "GPU: $GPU_NAME (plan preset $PRESET); device $DEVICE; $MODE_WORD mode; out: $OUT; sections: $SECTIONS"
{
    echo "git: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
    echo "date: $(date -u +%FT%TZ)"
    echo "device: $DEVICE; mode: $MODE_WORD; sections: $SECTIONS"
    if [ "$DEVICE" = cpu ]; then
        echo "gpu: $GPU_NAME"
    else
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    fi
    "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} > "$OUT/suite.txt"

# budget SECONDS: the section's GPU-time cap (none on the CPU stand-in)
budget() { if [ "$DEVICE" = cpu ]; then echo 0; else echo "$1"; fi; }
capped() {  # capped SECONDS CMD...: run CMD, stopped after SECONDS (0: never)
    local s=$1
    shift
    if [ "$s" = 0 ]; then "$@"; else timeout "$s" "$@"; fi
}
pick() { if [ "$SHORT" = 1 ]; then echo "$2"; else echo "$1"; fi; }  # pick FULL SHORT

NVML_PID=""
nvml_start() {  # NVML sampled by nvidia-smi in a process of its own (not in the measured one)
    [ "$DEVICE" = cpu ] && return 0
    command -v nvidia-smi > /dev/null || return 0
    nvidia-smi --query-gpu=timestamp,power.draw,memory.used,utilization.gpu,clocks.sm \
        --format=csv,nounits -lms 100 >> "$OUT/nvml-$1.csv" 2> /dev/null &
    NVML_PID=$!
}
nvml_stop() { if [ -n "$NVML_PID" ]; then kill "$NVML_PID" 2> /dev/null || true; wait "$NVML_PID" 2> /dev/null || true; NVML_PID=""; fi; }
trap nvml_stop EXIT

# sampled NAME SECONDS LINES SCRIPT ARGS...: run a Python script of the repository within its
# budget under NVML sampling, its output in NAME.log; show the log's last LINES lines
sampled() {
    local name=$1 seconds=$2 lines=$3 rc=0
    shift 3
    nvml_start "$name"
    capped "$(budget "$seconds")" "$PY" "$@" > "$OUT/$name.log" 2>&1 || rc=$?
    nvml_stop
    tail -n "$lines" "$OUT/$name.log"
    return $rc
}

TOY_CONFIG="$OUT/toy-llama-config.json"  # the CPU stand-in for the ~1B / ~8B shapes
toy_config() {
    cat > "$TOY_CONFIG" << 'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
 "intermediate_size": 128, "vocab_size": 256, "tie_word_embeddings": false}
JSON
}

section_nsys() {
    if [ "$DEVICE" = cpu ]; then
        echo "  skipped: the CPU stand-in has no GPU to trace (scripts/gpu_nsys_check.sh needs one)"
        return 3
    fi
    local rc=0
    capped "$(budget "$(pick 60 30)")" bash scripts/gpu_nsys_check.sh "$OUT/nsys" \
        > "$OUT/nsys.log" 2>&1 || rc=$?
    tail -n 20 "$OUT/nsys.log" | grep -E '^(PASS|FAIL)|no nsys' || true
    return $rc
}

section_proof() {
    local args=(--out "$OUT/proof" "${MODELS_ARG[@]}" --quiet)
    if [ "$DEVICE" = cpu ]; then
        args+=(--device cpu --dtypes float32 --batch-sizes 1,2 --max-tokens 8 --trace-steps 3
            --repeats 2 --threads 1)
    else
        args+=(--device "$DEVICE" --dtypes bfloat16 --batch-sizes "$(pick 1,8,32,64 1,8)"
            --max-tokens "$(pick 64 32)" --trace-steps "$(pick 16 8)" --repeats "$(pick 3 2)"
            --memory-interval-ms 0)  # NVML: nvidia-smi in its own process, not a thread here
    fi
    sampled proof "$(pick 180 45)" 4 scripts/gpu_proof.py "${args[@]}"
}

section_large() {
    local args=(--out "$OUT/large" --accept "$OUT/proof/decode_timing.csv")
    if [ "$DEVICE" = cpu ]; then
        toy_config
        args+=(--device cpu --dtype float32 --models "$TOY_CONFIG" --batch-sizes 1,2
            --context 16 --steps 2 --repeats 2 --warmup 1 --threads 1)
    else
        args+=(--device "$DEVICE" --models "$(pick llama-3.2-1b,llama-3-8b llama-3.2-1b)"
            --batch-sizes "$(pick 1,8,32,64 1,8)" --steps "$(pick 10 5)"
            --repeats "$(pick 3 2)")
    fi
    sampled large "$(pick 105 25)" 3 scripts/gpu_large_steps.py "${args[@]}"
}

section_calibrate() {
    local model file models grid plan_len
    if [ "$DEVICE" = cpu ]; then
        toy_config
        models=("$TOY_CONFIG")
        grid=(--device cpu --batch 1,2 --query 1,2 --context 64 --warmup 1 --repeats 2
            --min-repeat-ms 1)
        plan_len=(--input-len 48 --output-len 32 --concurrency 1,2)
    else
        read -r -a models <<< "$(pick "llama-3.2-1b llama-3-8b" llama-3.2-1b)"
        grid=(--device cuda --batch "$(pick 1,2,4,8,16,32,64 1,8,64)"
            --query "$(pick 1,2,4,8,16 1,5,9)" --context 1024 --warmup 3
            --repeats "$(pick 5 3)" --min-repeat-ms "$(pick 20 10)")
        # plan context = 768 + 512 / 2 = 1024, the calibration's: T(B, q) is used as measured
        plan_len=(--input-len 768 --output-len 512 --concurrency 1,4,16,64)
    fi
    for model in "${models[@]}"; do
        local name=${model##*/}
        name=${name%.json}
        file="$OUT/calibration-$name.json"
        say "calibrate $name"
        # (errexit is off inside a section: every failure returns explicitly)
        capped "$(budget "$(pick 60 20)")" "$PY" -m trtbench.cli calibrate \
            --model "$model" --out "$file" "${grid[@]}" | tee -a "$OUT/calibrate.log" \
            || return $?
        local plan=(plan --model "$model" --gpu "$PRESET" "${plan_len[@]}"
            --eagle3 default --ngram default)
        [ "$model" = llama-3-8b ] && plan+=(--draft llama-3.2-1b)
        "$PY" -m trtbench.cli "${plan[@]}" --calibration "$file" \
            > "$OUT/plan-$name-calibrated.txt" || return $?
        "$PY" -m trtbench.cli "${plan[@]}" > "$OUT/plan-$name-roofline.txt" || return $?
        grep -E '^(Crossover|Recommended)' "$OUT/plan-$name-calibrated.txt" | sed 's/^/  calibrated: /'
        grep -E '^(Crossover|Recommended)' "$OUT/plan-$name-roofline.txt" | sed 's/^/  roofline:   /'
    done
}

failed=0
for section in ${SECTIONS//,/ }; do
    case "$section" in
        nsys | proof | large | calibrate) ;;
        *) say "unknown section '$section'; known: nsys, proof, large, calibrate" >&2; exit 2 ;;
    esac
    say "section $section"
    started=$(date +%s)
    rc=0
    "section_$section" || rc=$?
    took=$(($(date +%s) - started))
    case "$rc" in
        0) status=ok ;;
        3) status="skipped (no nsys, or no GPU)" ;;
        124 | 137) status="stopped at its budget (rc $rc)"; failed=1 ;;
        *) status="failed (rc $rc)"; failed=1 ;;
    esac
    say "section $section: $status, ${took} s"
    echo "section $section: $status, ${took} s" >> "$OUT/suite.txt"
done
say "done: $OUT"
exit $failed
