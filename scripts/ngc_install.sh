#!/usr/bin/env bash
# Install trtbench into an NGC TensorRT-LLM image without replacing what the image carries.
#   scripts/ngc_install.sh [--editable]      (run from anywhere; installs this checkout)
# The image (nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3) already has torch, TensorRT
# 10.14 and TensorRT-LLM 1.2.1 (triton-inference-server/server docs/introduction/compatibility.md).
# trtbench itself goes in with --no-deps; its own light dependencies (pyproject
# [project].dependencies) are installed under a constraints file that pins every package already
# in the image, so pip can add what is missing but never upgrade or downgrade torch, tensorrt,
# tensorrt_llm or anything they depend on.
# The versions of torch / tensorrt / tensorrt_llm are compared before and after; a change fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PIP=("$PY" -m pip --disable-pip-version-check --no-cache-dir)
say() { printf '[ngc-install] %s\n' "$*"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${PIP[@]}" list --format=freeze > "$work/constraints.txt"
grep -iE '^(torch|tensorrt|tensorrt[-_]llm|tensorrt[-_]cu[0-9]+)==' "$work/constraints.txt" \
    > "$work/before.txt" || true
say "image packages kept as they are: $(tr '\n' ' ' < "$work/before.txt")"

"$PY" - > "$work/requirements.txt" <<'PYEOF'
import tomllib
with open("pyproject.toml", "rb") as handle:
    print("\n".join(tomllib.load(handle)["project"]["dependencies"]))
PYEOF
say "trtbench dependencies (missing ones only): $(tr '\n' ' ' < "$work/requirements.txt")"
"${PIP[@]}" install --constraint "$work/constraints.txt" --requirement "$work/requirements.txt"

if [ "${1:-}" = "--editable" ]; then
    "${PIP[@]}" install --no-deps --editable .
else
    "${PIP[@]}" install --no-deps .
fi

"${PIP[@]}" list --format=freeze \
    | grep -iE '^(torch|tensorrt|tensorrt[-_]llm|tensorrt[-_]cu[0-9]+)==' > "$work/after.txt" || true
if ! diff -u "$work/before.txt" "$work/after.txt"; then
    say "torch / TensorRT / TensorRT-LLM changed during the install; refusing this image"
    exit 1
fi
say "done: $(trtbench --version)"
