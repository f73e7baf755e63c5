#!/usr/bin/env bash
# GPU smoke run of both TensorRT-LLM paths on an NGC GPU box. Engine path: build baseline,
# draft-target and Medusa engines from the small real models, inspect them. LLM-API path
# (PyTorch backend): write llm_api.yaml for baseline, DraftTarget and NGram (the tiny models have
# no EAGLE-3 or MTP checkpoints). Serve each with Triton (the LLM-API ones through TensorRT-LLM's
# llmapi model, when LLMAPI_MODEL_DIR or one of two guessed image paths holds it), run one load-test tier
# against it, and take a short Nsight Systems trace of the baseline server. Where `trtllm-serve`
# is on PATH, also serve an n-gram variant with `server: trtllm-serve`, load-test it over OpenAI
# completions with no warm-up, and check trtbench's per-tier draft counts against the server's own
# totals (`/prometheus/metrics` counters since start, and `/metrics` iteration stats). The
# variant turns return_perf_metrics on for that check: the Prometheus speculative counters exist
# from TensorRT-LLM 1.3; on older servers the check prints what it found and compares nothing.
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
  - {name: serve-ngram, backend: trtllm-pytorch, server: trtllm-serve, mode: ngram, max_draft_len: 4, max_matching_ngram_size: 2, dtype: float16, max_batch_size: 4, max_input_len: 256, max_seq_len: 512, llm_api_options: {enable_iter_perf_stats: true, return_perf_metrics: true}}
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

serve_openai_and_check() {  # $1 a server: trtllm-serve variant
    local v=$1 port=$((PORT + 3))
    trtbench deploy "$RUN" --variant "$v" --serve --http-port "$port" &
    local pid=$! deadline=$((SECONDS + 900))
    until curl -sf "http://127.0.0.1:$port/health" > /dev/null; do
        kill -0 "$pid" 2> /dev/null || { say "trtllm-serve exited before it was ready"; return 1; }
        ((SECONDS < deadline)) || { say "trtllm-serve not ready after 900 s"; return 1; }
        sleep 2
    done
    local model
    model=$(basename "$MODELS/target")  # trtllm-serve serves the model directory's name
    trtbench loadtest --api openai-completions --url "http://127.0.0.1:$port/v1" \
        --model "$model" --variant "$v" --concurrency "$CONCURRENCY" \
        --requests-per-tier "$REQUESTS" --warmup-requests 0 --input-len-mean 32 \
        --output-len-mean 48 --tokenizer "$MODELS/target" --out "$RUN"
    curl -sf "http://127.0.0.1:$port/prometheus/metrics" > "$RUN/server/$v.prometheus.txt" || true
    curl -sf "http://127.0.0.1:$port/metrics" > "$RUN/server/$v.iteration_stats.json" || true
    kill -INT "$pid"
    wait "$pid" || true
    # With no warm-up and one tier, the server's totals since start are the tier's counts.
    python3 - "$RUN" "$v" <<'PY'
import json, re, sys
from pathlib import Path

import pandas as pd

run, variant = Path(sys.argv[1]), sys.argv[2]
rows = pd.read_csv(run / "loadtest" / "summary.csv")
row = rows[rows.variant == variant].iloc[-1]
ours = (row.proposed_draft_tokens_count, row.accepted_draft_tokens_count)
print(f"[gpu-smoke] trtbench {variant}: drafts {ours[0]}, accepted {ours[1]}, "
      f"source {row.spec_decode_counts_source}")
text = (run / "server" / f"{variant}.prometheus.txt").read_text() if (
    run / "server" / f"{variant}.prometheus.txt").exists() else ""
def total(name):
    found = re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    return sum(float(v) for v in found) if found else None
prom = (total("trtllm_spec_decode_num_draft_tokens_total"),
        total("trtllm_spec_decode_num_accepted_tokens_total"))
print(f"[gpu-smoke] /prometheus/metrics totals: drafts {prom[0]}, accepted {prom[1]}")
stats_file = run / "server" / f"{variant}.iteration_stats.json"
entries = json.loads(stats_file.read_text() or "[]") if stats_file.exists() else []
spec = [e.get("specDecodingStats") or {} for e in entries]
left = (sum(s.get("numDraftTokens", 0) for s in spec),
        sum(s.get("numAcceptedTokens", 0) for s in spec))
print(f"[gpu-smoke] /metrics iteration stats left unread by trtbench: {len(entries)} "
      f"iterations, drafts {left[0]}, accepted {left[1]}")
if prom[0] is not None and (prom[0], prom[1]) != (float(ours[0]), float(ours[1])):
    sys.exit("[gpu-smoke] trtbench's counts differ from the server's Prometheus totals")
PY
}

if command -v trtllm-serve > /dev/null; then
    say "serve + load test + counter check: serve-ngram (trtllm-serve)"
    serve_openai_and_check serve-ngram
else
    say "no trtllm-serve on PATH: the server: trtllm-serve variant is built, not served"
fi

if trtbench report --help > /dev/null 2>&1; then
    trtbench report "$RUN"
fi
say "done: $RUN"
