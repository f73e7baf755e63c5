"""Triton model repositories (render, validate, write) and the managed tritonserver process.

Lives here: interface, render (+ render_trtllm, render_llmapi, llmapi_interface, manifest_fields), pbtxt, validate, write, binary, ports, server (+ server_log: its log header and error lines); templates/ (data).
May import: core, spec, builders.manifest.
"""
