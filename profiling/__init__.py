"""Load generation, metrics, memory sampling, trace analysis and the report."""
