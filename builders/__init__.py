"""Engine builders: TensorRT-LLM plans, the PyTorch reference engine, Medusa trees."""
