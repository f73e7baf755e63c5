"""Engine builders: one variant of a bench spec -> engines/<variant>/ with its build.json.

Lives here: build (every variant, one backend), manifest (build.json), medusa_tree; reference/ and trtllm/.
May import: core.
"""
