"""Triton model repositories (render, validate, write) and the managed tritonserver."""
