"""Inference: the sampler (L10.1), speculative decoding (L10.8) and the runner-backed target."""
