"""The benchmark matrix fanned out over a Slurm cluster: shards submitted, waited on, cancelled, gathered into one run.

Lives here: shards (the matrix cut into shards, each with the baseline), slurm (Slurm's own CLI: the job-array script, sbatch, squeue, scontrol, scancel), state (cluster/state.json: what was submitted), gather (the shards' run directories merged into one), report (the merged report.md and recommendation.json), watch (each shard now, the status line, the wait, scancel), driver (`trtbench run --executor slurm`, `trtbench collect`).
May import: core, spec, pipeline.
"""
