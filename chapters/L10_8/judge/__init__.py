"""The judge's helpers of L10.8: the fake target, the statistical check, the tiny-llama judge, wording."""
