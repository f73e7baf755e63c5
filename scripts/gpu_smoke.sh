#!/usr/bin/env bash
# GPU smoke run of both TensorRT-LLM paths on an NGC GPU box. Engine path: build baseline,
# draft-target and Medusa engines from the small real models, inspect them. LLM-API path
# (PyTorch backend): write llm_api.yaml for baseline, DraftTarget and NGram (the tiny models have
# no EAGLE-3 or MTP checkpoints). Serve each with Triton (the LLM-API ones through TensorRT-LLM's
# llmapi model, when LLMAPI_MODEL_DIR or one of two guessed image paths holds it), run one load-test tier
# against it, and take a short Nsight Systems trace of the baseline server.
#
#   docker run --rm --gpus all --ipc=host -v "$PWD:/work" -w /work \
#       nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3 bash scripts/gpu_smoke.sh [RUN_DIR]
#   (or, in the trtbench image: docker run --rm --gpus all trtbench:trtllm bash scripts/gpu_smoke.sh)
#
# Environment: SMOKE_PORT (default 18000: HTTP, +1 gRPC, +2 metrics), SMOKE_REQUESTS (16),
# SMOKE_CONCURRENCY (2), TRTBENCH_CACHE (tiny models cache), LLMAPI_MODEL_DIR (TensorRT-LLM's
# triton_backend/all_models/llmapi/tensorrt_llm; without it the LLM-API variants are built only).
# Exit status != 0 on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${1:-runs/gpu-smoke}
PORT=${SMOKE_PORT:-18000}
REQUESTS=${SMOKE_REQUESTS:-16}
CONCURRENCY=${SMOKE_CONCURRENCY:-2}
VARIANTS=(baseline draft-k4 medusa)
LLMAPI_VARIANTS=(llmapi-baseline llmapi-draft-k4 llmapi-ngram)
if [ -z "${LLMAPI_MODEL_DIR:-}" ]; then
    for d in /app/all_models/llmapi/tensorrt_llm /opt/tritonserver/tensorrtllm_backend/all_models/llmapi/tensorrt_llm; do
        [ -f "$d/1/model.py" ] && LLMAPI_MODEL_DIR=$d && break
    done
fi
say() { printf '[gpu-smoke] %s\n' "$*"; }

say "GPU: $(nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv,noheader | head -1)"
python3 -c 'import tensorrt_llm; print("[gpu-smoke] TensorRT-LLM", tensorrt_llm.__version__)'
if ! python3 -c 'import trtbench' 2>/dev/null; then
    say "installing trtbench into this image (scripts/ngc_install.sh --editable)"
    bash scripts/ngc_install.sh --editable
fi

say "small real models"
python3 scripts/make_tiny_models.py
MODELS=$(python3 -c 'from trtbench.core.paths import tiny_models_dir; print(tiny_models_dir())')

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
  - {name: llmapi-baseline, backend: trtllm-pytorch, mode: baseline, dtype: float16, max_batch_size: 4, max_input_len: 256, max_seq_len: 512, cuda_graphs: true, cuda_graph_padding: true}
  - {name: llmapi-draft-k4, backend: trtllm-pytorch, mode: draft_target, max_draft_len: 4, dtype: float16, max_batch_size: 4, max_input_len: 256, max_seq_len: 512, cuda_graphs: true}
  - {name: llmapi-ngram, backend: trtllm-pytorch, mode: ngram, max_draft_len: 4, max_matching_ngram_size: 2, dtype: float16, max_batch_size: 4, max_input_len: 256, max_seq_len: 512}
deploy: {ready_timeout_s: 600${LLMAPI_MODEL_DIR:+, llmapi_model_dir: $LLMAPI_MODEL_DIR}}
EOF

say "plan (dry run) -> $RUN/plan.txt"
trtbench build "$SPEC" --out "$RUN" --dry-run > "$RUN/plan.txt"
say "build"
trtbench build "$SPEC" --out "$RUN"
for v in "${VARIANTS[@]}"; do
    trtbench inspect "$RUN/engines/$v"
done
for v in "${LLMAPI_VARIANTS[@]}"; do
    say "LLM-API plan $v: $RUN/engines/$v/llm_api.yaml"
    cat "$RUN/engines/$v/llm_api.yaml"
done
if [ -n "${LLMAPI_MODEL_DIR:-}" ]; then
    VARIANTS+=("${LLMAPI_VARIANTS[@]}")
else
    say "no llmapi model.py found (set LLMAPI_MODEL_DIR): LLM-API variants built, not served"
fi

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
