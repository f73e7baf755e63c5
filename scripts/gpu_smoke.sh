#!/usr/bin/env bash
# GPU smoke run of the TensorRT-LLM path on an NGC GPU box: build baseline, draft-target and
# Medusa engines from the small real models, inspect them, serve each with Triton, run one
# load-test tier against it, and take a short Nsight Systems trace of the baseline server.
#
#   docker run --rm --gpus all --ipc=host -v "$PWD:/work" -w /work \
#       nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3 bash scripts/gpu_smoke.sh [RUN_DIR]
#   (or, in the trtbench image: docker run --rm --gpus all trtbench:trtllm bash scripts/gpu_smoke.sh)
#
# Environment: SMOKE_PORT (default 18000: HTTP, +1 gRPC, +2 metrics), SMOKE_REQUESTS (16),
# SMOKE_CONCURRENCY (2), TRTBENCH_CACHE (tiny models cache). Exit status != 0 on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${1:-runs/gpu-smoke}
PORT=${SMOKE_PORT:-18000}
REQUESTS=${SMOKE_REQUESTS:-16}
CONCURRENCY=${SMOKE_CONCURRENCY:-2}
VARIANTS=(baseline draft-k4 medusa)
say() { printf '[gpu-smoke] %s\n' "$*"; }

say "GPU: $(nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv,noheader | head -1)"
python3 -c 'import tensorrt_llm; print("[gpu-smoke] TensorRT-LLM", tensorrt_llm.__version__)'
if ! python3 -c 'import trtbench' 2>/dev/null; then
    say "installing trtbench into this image (scripts/ngc_install.sh --editable)"
    bash scripts/ngc_install.sh --editable
fi

say "small real models"
python3 scripts/make_tiny_models.py
MODELS=$(python3 -c 'from trtbench.paths import tiny_models_dir; print(tiny_models_dir())')

mkdir -p "$RUN"
SPEC="$RUN/spec.yaml"
cat > "$SPEC" <<EOF
name: gpu-smoke
backend: trtllm
models:
  target: $MODELS/target
  draft: $MODELS/draft
  medusa: $MODELS/medusa
variants:
  - {name: baseline, mode: baseline, dtype: float16, max_batch_size: 4, max_input_len: 256, max_seq_len: 512, cuda_graphs: true}
  - {name: draft-k4, mode: draft_target, max_draft_len: 4, dtype: float16, max_batch_size: 4, max_input_len: 256, max_seq_len: 512}
  - {name: medusa, mode: medusa, medusa_choices: [[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]], dtype: float16, max_batch_size: 4, max_input_len: 256, max_seq_len: 512, cuda_graphs: true}
deploy: {ready_timeout_s: 600}
EOF

say "plan (dry run) -> $RUN/plan.txt"
trtbench build "$SPEC" --backend trtllm --out "$RUN" --dry-run > "$RUN/plan.txt"
say "build"
trtbench build "$SPEC" --backend trtllm --out "$RUN"
for v in "${VARIANTS[@]}"; do
    trtbench inspect "$RUN/engines/$v"
done

wait_ready() {
    local pid=$1 deadline=$((SECONDS + 600))
    until curl -sf "http://127.0.0.1:$PORT/v2/health/ready" > /dev/null; do
        kill -0 "$pid" 2> /dev/null || { say "server exited before it was ready"; return 1; }
        ((SECONDS < deadline)) || { say "server not ready after 600 s"; return 1; }
        sleep 2
    done
}

serve_and_load() {  # $1 variant, $2... optional command prefix (nsys)
    local v=$1
    shift
    "$@" trtbench deploy "$RUN" --variant "$v" --serve --http-port "$PORT" \
        --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) &
    local pid=$!
    wait_ready "$pid"
    local model
    model=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model_name"])' \
        "$RUN/model_repo/$v/trtbench.json")
    trtbench loadtest --url "127.0.0.1:$((PORT + 1))" --model "$model" --variant "$v" \
        --concurrency "$CONCURRENCY" --requests-per-tier "$REQUESTS" --warmup-requests 2 \
        --input-len-mean 32 --output-len-mean 48 --tokenizer "$MODELS/target" --out "$RUN"
    kill -INT "$pid"
    wait "$pid" || true  # the server exits on SIGINT; its log is $RUN/server/$v.log
}

for v in "${VARIANTS[@]}"; do
    say "serve + load test: $v"
    if [ "$v" = baseline ] && command -v nsys > /dev/null; then
        mkdir -p "$RUN/traces"
        serve_and_load "$v" nsys profile --trace=cuda,nvtx,osrt --cuda-graph-trace=node \
            --sample=none --force-overwrite=true -o "$RUN/traces/$v"
        nsys export --type sqlite --force-overwrite=true -o "$RUN/traces/$v.sqlite" \
            "$RUN/traces/$v.nsys-rep"
        trtbench analyze nsys "$RUN/traces/$v.sqlite" --out "$RUN/traces/$v"
    else
        serve_and_load "$v"
    fi
done

if trtbench report --help > /dev/null 2>&1; then
    trtbench report "$RUN"
fi
say "done: $RUN"
