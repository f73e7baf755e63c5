"""Engine builders: one variant of a bench spec -> engines/<variant>/ with its build.json.

Lives here: build (every variant, one backend; all checked first), manifest (build.json), medusa_tree, checkpoint (weights against config.json); reference/ and trtllm/; tiny/ (the tiny-model workshop).
May import: core, spec.
"""
