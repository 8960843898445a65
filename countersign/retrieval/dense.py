"""The dense arm: wordllama's 256-dimension static token embeddings, loaded offline from the wheel's own folder.

Clause vectors are computed once, at build, and normalised; a query is embedded (about 40 us), normalised, and scored
against every clause with one matrix-vector product (einsum, single-threaded), so the score is the cosine
similarity. Nothing is ever downloaded: `disable_download=True` turns a missing weights file into FileNotFoundError
instead of a fetch from a hub.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt


def _import_wordllama() -> Any:
    """wordllama's import calls logging.basicConfig(level=INFO) on the root logger; undo that so the host's logging
    (configured later, by the composition root) stays its own."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
    finally:
        for handler in [handler for handler in root.handlers if handler not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)
    return wordllama


wordllama = _import_wordllama()

MODEL_CONFIG = "l2_supercat"
DIMENSIONS = 256
EMBED_BATCH = 256
_model_lock = threading.Lock()
_model: Any = None


def load_model() -> Any:
    """The wordllama model, loaded once per process from the files inside the installed package."""
    global _model
    with _model_lock:
        if _model is None:
            package_dir = Path(wordllama.__file__).resolve().parent
            _model = wordllama.WordLlama.load(
                config=MODEL_CONFIG, cache_dir=package_dir, dim=DIMENSIONS, disable_download=True
            )
        return _model


def _normalised(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return unit


@dataclass(frozen=True)
class DenseIndex:
    """Unit-length clause vectors (one row per document, in build order) and the model that embeds queries."""

    _model: Any
    _vectors: npt.NDArray[np.float32]
    _tokenizer_lock: threading.Lock

    @classmethod
    def build(cls, texts: Sequence[str]) -> DenseIndex:
        if not texts:
            raise ValueError("cannot index an empty list of documents")
        model = load_model()
        vectors = np.asarray(model.embed(list(texts), norm=False, batch_size=EMBED_BATCH), dtype=np.float32)
        vectors = np.ascontiguousarray(_normalised(vectors))
        vectors.setflags(write=False)
        return cls(model, vectors, threading.Lock())

    @property
    def documents(self) -> int:
        return int(self._vectors.shape[0])

    def scores(self, query: str) -> npt.NDArray[np.float32]:
        """Cosine similarity of the query with every document, in build order."""
        with self._tokenizer_lock:  # the Rust tokenizer object is shared; one encode at a time keeps it sound
            raw = np.asarray(self._model.embed([query], norm=False), dtype=np.float32)
        query_vector = _normalised(raw)[0]
        # einsum's own loop, not BLAS: a threaded BLAS matrix-vector product waits for its sleeping worker threads,
        # which on a loaded two-core machine costs milliseconds for a product that takes a quarter of one.
        scores: npt.NDArray[np.float32] = np.einsum("ij,j->i", self._vectors, query_vector)
        return scores
