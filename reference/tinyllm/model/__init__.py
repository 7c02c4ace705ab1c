"""The model: a llama in numpy float32 (llama.py) and its paged runner over a KvPool (runner.py)."""

from .llama import Llama, LlamaConfig, ModelError, load_llama
from .runner import PagedRunner, Seq, make_pool

__all__ = ["Llama", "LlamaConfig", "ModelError", "load_llama", "PagedRunner", "Seq", "make_pool"]
