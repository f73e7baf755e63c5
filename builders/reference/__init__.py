"""The PyTorch reference engine: baseline, draft-target and Medusa greedy decoding on CPU or GPU."""
