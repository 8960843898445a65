"""Clause retrieval: the canonical, hashed clause corpus and hybrid search over it (BM25 + dense, fused by RRF).

BM25 sees stemmed words, clause numbers and the corpus's defined terms; a trade glossary expands a query with the
contract's own words; the fusion is a weighted RRF that keeps each arm's first hit.

Pure: it reads the corpus file and answers queries. It imports nothing of ours and no database, network, engine or
model code (an import-linter contract holds it).
"""

from countersign.retrieval.corpus import Clause, ClauseCorpus, ContractForm, CorpusError, load_corpus
from countersign.retrieval.expansion import Expansion
from countersign.retrieval.retriever import (
    ARMS,
    DEFAULT_TUNING,
    MAX_K,
    MAX_QUERY_CHARS,
    OVERFETCH,
    Hit,
    Retrieval,
    Retriever,
    Tuning,
)

__all__ = [
    "ARMS",
    "DEFAULT_TUNING",
    "MAX_K",
    "MAX_QUERY_CHARS",
    "OVERFETCH",
    "Clause",
    "ClauseCorpus",
    "ContractForm",
    "CorpusError",
    "Expansion",
    "Hit",
    "Retrieval",
    "Retriever",
    "Tuning",
    "load_corpus",
]
