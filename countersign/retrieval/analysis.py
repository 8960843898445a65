"""What the lexical index sees in a text: stemmed words, clause numbers and the corpus's defined terms.

Words are lower-cased `[a-z0-9]+` runs, less bm25s's English stop words and the words a question is built from
("what", "how", "does", "we", "clause", ...), reduced by the Snowball English stemmer, so "tested" and "testing"
meet "test" and "valuations" meets "valuation".

A clause number ("4.2") is its own token, `§4.2`, in its clause and in a query that names it ("clause 4.2",
"cl. 4.2", "what does 4.2 say", "CSB-4.2"), where it stands instead of the words "4" and "2"; a decimal followed by
"%" or "per cent", or money ("GBP 13.10"), is an amount, not a reference.

A defined term is a run of two or more capitalised words in the corpus ("Practical Completion", "Final Date for
Payment", "Pay Less Notice"), found once from the corpus itself. Where a text contains one, in any case, the term is
added as one token (`practic_complet`), so a query naming the whole term outscores one sharing a single word of it.
A term's initials, written in capitals in a query ("PC", "LDs", "APG"), stand for the term.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import snowballstemmer
from bm25s.stopwords import STOPWORDS_EN

WORD: Final = re.compile(r"[a-z0-9]+")
# The words a question or a reference is built from, which say nothing about what it asks for.
QUESTION_WORDS: Final = frozenset(
    (
        *("what", "whats", "how", "when", "which", "who", "whom", "whose", "why", "where"),
        *("does", "do", "did", "can", "could", "would", "should", "shall", "may", "must", "might"),
        *("we", "i", "our", "us", "you", "your", "me", "my", "its"),
        *("much", "many", "has", "have", "had", "get", "gets", "got", "any", "some"),
        *("say", "says", "cl", "clause", "clauses"),
    )
)
STOP_WORDS: Final = frozenset(STOPWORDS_EN) | QUESTION_WORDS
CLAUSE_NUMBER_TOKEN: Final = "§"
# A clause number: one or two digits, a dot, one or two digits, not part of a longer number and not an amount.
CLAUSE_NUMBER: Final = re.compile(
    r"(?<![\d.,£$€])(\d{1,2}\.\d{1,2})(?![\d.,]*\d)(?!\s*(?:%|per\s*cent|percent|pc\b|per\b|x\b|m\b|mm\b|days?\b))",
    re.IGNORECASE,
)
# An amount of money: a currency symbol or an ISO code before a figure ("GBP -1,234.50", "£13.10").
MONEY: Final = re.compile(r"(?:[£$€]\s?|\b[A-Z]{3}\s+)-?\d[\d,]*(?:\.\d+)?")
# A defined term: capitalised words, possibly joined by "of", "for", "in", "on", "to" ("Bill of Quantities").
_CAPITALISED_RUN: Final = re.compile(r"\b[A-Z][a-z]+(?:\s+(?:(?:of|for|in|on|to)\s+)?[A-Z][a-z]+)+\b")
_SENTENCE_START: Final = re.compile(r"(?:^|[.!?:;]\s+|\(\w\)\s+)$")
# Capitals written as an abbreviation in a query ("PC", "LDs", "APG"); a trailing lower-case s is a plural.
_ABBREVIATION: Final = re.compile(r"\b([A-Z]{2,5})s?\b")
MIN_TERM_OCCURRENCES: Final = 2
STEM_CACHE_WORDS: Final = 65_536
TERM_SEPARATOR: Final = "_"

_local = threading.local()  # a Snowball stemmer keeps the word it works on in itself: one per thread


@functools.lru_cache(maxsize=STEM_CACHE_WORDS)
def stem(word: str) -> str:
    """The Snowball English stem; cached, as a corpus and its queries repeat a few thousand words."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = snowballstemmer.stemmer("english")
    stemmed: str = stemmer.stemWord(word)
    return stemmed


def words(text: str) -> list[str]:
    """Stemmed content words, in order."""
    return [stem(word) for word in WORD.findall(text.lower()) if word not in STOP_WORDS]


def clause_number_token(number: str) -> str:
    return f"{CLAUSE_NUMBER_TOKEN}{number}"


def clause_references(text: str) -> list[str]:
    """The clause-number tokens of every clause number the text names, each once, in order; money ("GBP 13.10",
    "£4.20") is not a reference."""
    found = CLAUSE_NUMBER.finditer(MONEY.sub(" ", text))
    return list(dict.fromkeys(clause_number_token(match.group(1)) for match in found))


def without_clause_references(text: str) -> str:
    """The text with its clause numbers blanked, so "4.2" is not also read as the numbers 4 and 2."""
    return "".join(_blank_references(text))


def _blank_references(text: str) -> list[str]:
    money = [match.span() for match in MONEY.finditer(text)]
    pieces, last = [], 0
    for match in CLAUSE_NUMBER.finditer(text):
        if any(start <= match.start() < end for start, end in money):
            continue
        pieces.extend([text[last : match.start()], " "])
        last = match.end()
    pieces.append(text[last:])
    return pieces


@dataclass(frozen=True)
class DefinedTerms:
    """The corpus's defined terms, each as its stemmed words, and the capitalised initials that stand for them."""

    terms: frozenset[tuple[str, ...]]
    abbreviations: Mapping[str, tuple[str, ...]]  # initials -> the most frequent term with them

    @classmethod
    def find(cls, texts: Iterable[str]) -> DefinedTerms:
        """Every capitalised run (leading stop words dropped) of two or more words seen MIN_TERM_OCCURRENCES times.

        A run that opens a sentence may owe its first capital to the sentence ("Until Practical Completion"), so it
        counts for itself and for the run without that word; where the shorter run is a term and the longer one
        never appears inside a sentence, only the shorter is kept. Initials shared by two terms stand for the more
        frequent one."""
        counts: Counter[tuple[str, ...]] = Counter()
        inside_a_sentence: set[tuple[str, ...]] = set()
        for text in texts:
            for match in _CAPITALISED_RUN.finditer(text):
                raw = match.group(0).split()
                while raw and raw[0].lower() in STOP_WORDS:
                    raw = raw[1:]
                term = tuple(words(" ".join(raw)))
                opens_sentence = len(raw) == len(match.group(0).split()) and _SENTENCE_START.search(
                    text[: match.start()]
                )
                counts[term] += 1
                if opens_sentence:
                    counts[tuple(words(" ".join(raw[1:])))] += 1
                else:
                    inside_a_sentence.add(term)
        frequent = {term for term, count in counts.items() if len(term) >= 2 and count >= MIN_TERM_OCCURRENCES}
        terms = frozenset(term for term in frequent if term[1:] not in frequent or term in inside_a_sentence)
        initials: dict[str, tuple[str, ...]] = {}
        for term in sorted(terms, key=lambda term: (-counts[term], term)):
            initials.setdefault("".join(word[0] for word in term).upper(), term)
        return cls(terms, initials)

    @property
    def longest(self) -> int:
        return max((len(term) for term in self.terms), default=0)

    def tokens_in(self, stems: Sequence[str]) -> list[str]:
        """One token per occurrence of a defined term in a sequence of stemmed words."""
        found = []
        for start in range(len(stems)):
            for length in range(2, min(self.longest, len(stems) - start) + 1):
                candidate = tuple(stems[start : start + length])
                if candidate in self.terms:
                    found.append(TERM_SEPARATOR.join(candidate))
        return found

    def expand_abbreviations(self, text: str) -> list[tuple[str, ...]]:
        """The defined terms that capitalised abbreviations in the text stand for ("PC" for Practical Completion)."""
        expanded = [self.abbreviations.get(match.group(1)) for match in _ABBREVIATION.finditer(text)]
        return [term for term in expanded if term is not None]
