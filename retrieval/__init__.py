"""Clause retrieval: the canonical, hashed clause corpus and hybrid search over it (BM25 + dense, fused by RRF).

Pure: it reads the corpus file and answers queries. It imports nothing of ours and no database, network, engine or
model code (an import-linter contract holds it).
"""

from retrieval.corpus import Clause, ClauseCorpus, ContractForm, CorpusError, load_corpus
from retrieval.retriever import ARMS, MAX_K, MAX_QUERY_CHARS, OVERFETCH, Hit, Retrieval, Retriever

__all__ = [
    "ARMS",
    "MAX_K",
    "MAX_QUERY_CHARS",
    "OVERFETCH",
    "Clause",
    "ClauseCorpus",
    "ContractForm",
    "CorpusError",
    "Hit",
    "Retrieval",
    "Retriever",
    "load_corpus",
]
