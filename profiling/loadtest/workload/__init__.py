"""What a load test sends and when: prompts, arrival schedules, slots, repeats and the run's design.

Lives here: prompts, tokenizer_source (--tokenizer: a model directory or a Hugging Face hub id), datasets (dataset files in several formats read, checked and mixed by weight), schedule (closed/open loop arrivals), slots, tasks, partition (requests split over N client processes), repeats (passes of a tier), design (when each variant x tier cell is measured).
May import: core, profiling.loadtest.records.
"""
