"""Model helpers: tiny random-weight models of real architectures for tests, demos and
benchmarks.
"""

from __future__ import annotations

from culture_probe.models.tiny import save_tiny, tiny_model, train_tokenizer

__all__ = ["save_tiny", "tiny_model", "train_tokenizer"]
