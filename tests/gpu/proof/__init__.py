"""The GPU proof harness (scripts/gpu_proof.py): every backend and method on one GPU, the
figures the CPU cannot give. See docs/gpu_proof.md."""
