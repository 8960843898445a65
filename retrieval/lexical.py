"""The lexical arm: BM25 (bm25s, Lucene variant) over lower-cased, stop-worded, S-stemmed word tokens.

The tokenizer is ours rather than bm25s's so that a query and the clauses go through exactly the same function,
with no vocabulary state and no optional stemming package: lower-case `[a-z0-9]+` words, bm25s's English stop
words removed, then Harman's S-stemmer (1991), which only folds plurals ("retentions", "sums", "liabilities").
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

import bm25s
import numpy as np
import numpy.typing as npt
from bm25s.stopwords import STOPWORDS_EN

# bm25s sets its own logger to DEBUG on import, so its debug lines would reach a host's handlers whatever the root
# logger's level; hold it at WARNING.
logging.getLogger("bm25s").setLevel(logging.WARNING)

WORD = re.compile(r"[a-z0-9]+")
STOP_WORDS = frozenset(STOPWORDS_EN)


def s_stem(word: str) -> str:
    """Harman's S-stemmer: -ies to -y, -es to -e, drop a final -s (not after u or s); short words untouched."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    return [s_stem(word) for word in WORD.findall(text.lower()) if word not in STOP_WORDS]


@dataclass(frozen=True)
class LexicalIndex:
    """BM25 scores for every document at once; read-only after build, so safe to query from many threads."""

    _bm25: bm25s.BM25
    _vocabulary: dict[str, int]
    documents: int

    @classmethod
    def build(cls, texts: Sequence[str]) -> LexicalIndex:
        if not texts:
            raise ValueError("cannot index an empty list of documents")
        bm25 = bm25s.BM25(method="lucene")
        bm25.index([tokenize(text) for text in texts], show_progress=False)
        return cls(bm25, dict(bm25.vocab_dict), len(texts))

    def scores(self, query: str) -> npt.NDArray[np.float32]:
        """One BM25 score per document, in build order; zero where the document shares no term with the query."""
        token_ids = [self._vocabulary[token] for token in tokenize(query) if token in self._vocabulary]
        if not token_ids:
            return np.zeros(self.documents, dtype=np.float32)
        scores: npt.NDArray[np.float32] = self._bm25.get_scores_from_ids(token_ids)
        return scores
