# trtbench on an NGC image that carries TensorRT-LLM. Two image families, chosen with BASE_IMAGE:
#  - nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3 (default): Triton + TensorRT-LLM 1.2.1,
#    TensorRT 10.14.1, CUDA 13.1, Python 3.12 (triton-inference-server/server
#    docs/introduction/compatibility.md). Both TensorRT-LLM paths: the engine path (backend:
#    trtllm; the only Medusa path) and the LLM API (backend: trtllm-pytorch, served by Triton's
#    llmapi model). NGC 26.04-26.07 carry 1.2.1.
#  - nvcr.io/nvidia/tensorrt-llm/release:<version> (TensorRT-LLM's own image; the tag is the
#    tensorrt_llm version, e.g. 1.3.0rc5 in its quick-start guide): the LLM API with trtllm-serve.
#    Releases after 1.3.0rc20 have no engine path (trtbench refuses backend: trtllm there, exit 2);
#    give deploy.tritonserver / deploy.llmapi_model_dir where the image has no Triton.
# The image's torch, TensorRT and TensorRT-LLM are kept: scripts/ngc_install.sh installs trtbench
# with --no-deps and its light dependencies under a constraints file of everything already
# installed, and fails the build if torch / tensorrt / tensorrt_llm change.
#   docker build -t trtbench:trtllm .
#   docker build -t trtbench:llmapi --build-arg BASE_IMAGE=nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5 .
#   docker run --rm --gpus all -v "$PWD/runs:/opt/trtbench/runs" trtbench:trtllm \
#       trtbench build examples/tiny-cpu.yaml --backend trtllm
ARG BASE_IMAGE=nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3
FROM ${BASE_IMAGE}
ARG BASE_IMAGE
LABEL org.opencontainers.image.base.name="${BASE_IMAGE}"

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /opt/trtbench
COPY pyproject.toml README.md ./
COPY trtbench ./trtbench
COPY builders ./builders
COPY profiling ./profiling
COPY triton_repo ./triton_repo
COPY vllm_server ./vllm_server
COPY scripts ./scripts
COPY examples ./examples

RUN bash scripts/ngc_install.sh \
    && trtbench --help > /dev/null

CMD ["trtbench", "--help"]
