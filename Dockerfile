# trtbench on the NGC Triton + TensorRT-LLM image (TensorRT-LLM 1.2.1, TensorRT 10.14.1,
# CUDA 13.1, Python 3.12 — research/trtllm_build.md §8). The image's torch, TensorRT and
# TensorRT-LLM are kept: scripts/ngc_install.sh installs trtbench with --no-deps and its light
# dependencies under a constraints file of everything already installed, and fails the build
# if torch / tensorrt / tensorrt_llm change.
#   docker build -t trtbench:trtllm .
#   docker run --rm --gpus all -v "$PWD/runs:/opt/trtbench/runs" trtbench:trtllm \
#       trtbench build examples/tiny-cpu.yaml --backend trtllm
FROM nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /opt/trtbench
COPY pyproject.toml README.md ./
COPY trtbench ./trtbench
COPY builders ./builders
COPY profiling ./profiling
COPY triton_repo ./triton_repo
COPY scripts ./scripts
COPY examples ./examples

RUN bash scripts/ngc_install.sh \
    && trtbench --help > /dev/null

CMD ["trtbench", "--help"]
