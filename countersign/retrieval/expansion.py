"""Query expansion: the words a surveyor, a contractor or a client uses for what the contract calls something else.

Each entry maps colloquial phrases and trade shorthand ("held back", "ret", "MOS", "handover", "contra") to the
contract's own words ("retention", "materials on site", "Practical Completion", "set-off"). A phrase matches when
its stemmed words appear, in order and adjacent, among the query's stemmed words, so "withheld" and "withholding"
need separate entries but "payments" and "payment" do not. What is added is only ever extra text for the lexical
arm (scored at `lexical.EXPANSION_WEIGHT`) and, where it helps, the dense arm; the asker's own words always stay.

Two lists. ABBREVIATIONS is the trade's shorthand (ret, valn, cert, MOS, LDs, FDP, contra, ...), standard usage, and
the same shorthand the held-out queries (`config/evals/retrieval_queries_heldout.yaml`) were written in, by the same
author, before this list: on those queries its gain is not an independent measurement (docs/benchmarks.md reports
the held-out set with and without it). COLLOQUIAL was written from the tuning queries' misses
(`config/evals/retrieval_queries.yaml`) and general usage; a phrase found only in a held-out query is not in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from countersign.retrieval.analysis import words


@dataclass(frozen=True)
class Synonym:
    phrases: tuple[str, ...]  # what an asker may write
    means: str  # the contract's words for it


# The trade's abbreviations and shorthand, as a UK quantity surveyor writes them.
ABBREVIATIONS: Final[tuple[Synonym, ...]] = (
    Synonym(("ret",), "retention"),
    Synonym(("mob",), "advance payment"),
    Synonym(("valn", "valns"), "valuation"),
    Synonym(("cert", "certs"), "certificate"),
    Synonym(("bq", "boq"), "bill of quantities"),
    Synonym(("nrm", "smm"), "method of measurement"),
    Synonym(("ps",), "provisional sum"),
    Synonym(("dw",), "dayworks"),
    Synonym(("mos",), "materials on site unfixed"),
    Synonym(("dlp",), "defects rectification period"),
    Synonym(("fa",), "final account"),
    Synonym(("lds", "lads"), "liquidated damages"),
    Synonym(("eot",), "completion date extended"),
    Synonym(("app",), "application for payment"),
    Synonym(("fdp",), "final date for payment"),
    Synonym(("pn",), "payment notice"),
    Synonym(("pln",), "pay less notice"),
    Synonym(("vo", "vi"), "variation"),
    Synonym(("pb",), "performance bond"),
    Synonym(("apg",), "advance payment guarantee"),
    Synonym(("car",), "insurance all risks"),
    Synonym(("contra", "contras", "contra charge", "contra-charge", "back charge", "backcharge"), "set-off deduct"),
)

# Colloquial phrases for what the contract names otherwise.
COLLOQUIAL: Final[tuple[Synonym, ...]] = (
    Synonym(
        (
            "held back",
            "hold back",
            "holding back",
            "kept back",
            "keep back",
            "withheld",
            "withhold",
            "withholding",
            "hang on to",
            "security money",
            "held-back",
            "kept-back",
        ),
        "retention",
    ),
    Synonym(("ring-fenced", "ring fenced", "ringfenced", "goes bust", "go bust", "insolvent"), "trust insolvency"),
    Synonym(("mobilisation", "mobilization", "upfront", "up front", "up-front", "set up site"), "advance payment"),
    Synonym(
        ("claw back", "clawed back", "clawback", "paid back", "pay back", "paying back", "recoup", "recouped"),
        "repayment recovered deduction",
    ),
    Synonym(("valuation", "assessment", "assessed", "put a figure on"), "valuation assessment"),
    Synonym(("bill", "tender quantities", "tender estimate", "estimate"), "bill of quantities"),
    Synonym(("measurement rules", "measured", "measures up", "take off", "taken off"), "method of measurement"),
    Synonym(("contingency", "contingency allowance", "allowances"), "provisional sum"),
    Synonym(("blows past", "overrun"), "quantity exceed"),
    Synonym(("to-date", "to date", "since the start"), "cumulative"),
    Synonym(("price list", "schedule of rates", "price schedule", "trade price"), "rate card rates"),
    Synonym(("out-of-date price", "old price", "out of date"), "superseded rate"),
    Synonym(("time-and-materials", "time and materials", "time sheet", "daywork"), "dayworks"),
    Synonym(("inflation", "index-linked", "indexation"), "fluctuations price adjustment"),
    Synonym(("margin", "head-office", "head office"), "overheads profit"),
    Synonym(("wages",), "labour"),
    Synonym(("payment document", "sign-off", "signed off"), "certificate"),
    Synonym(("already certified",), "previously certified"),
    Synonym(("sums wrong", "maths"), "arithmetic"),
    Synonym(("charged twice", "paid twice", "double counting", "double-counting"), "paid for twice duplicated"),
    Synonym(("stock", "loose stock", "delivered goods", "unfixed"), "materials on site unfixed"),
    Synonym(("built in", "installed", "fixed in", "built-in"), "incorporated"),
    Synonym(("suppliers yard", "off-site", "offsite"), "materials off site"),
    Synonym(("stolen", "theft"), "lost insurance"),
    Synonym(("handover", "handed over", "hand over", "handing over"), "practical completion"),
    Synonym(("snag", "snags", "snagging", "faults"), "defects"),
    Synonym(("maintenance period", "defects liability period"), "defects rectification period"),
    Synonym(("final accounts",), "final account"),
    Synonym(("penalty", "penalties", "delay damages"), "liquidated damages"),
    Synonym(("extension of time",), "completion date extended"),
    Synonym(("payment claim", "claim for payment"), "application for payment"),
    Synonym(("last day", "settle up", "deadline to pay"), "final date for payment"),
    Synonym(("docking", "dock", "reducing a payment", "pay less than"), "pay less notice"),
    Synonym(("paid late", "late payment", "after the deadline", "overdue"), "late payment interest"),
    Synonym(("down tools", "walk off", "walking off", "stop work"), "suspension suspend"),
    Synonym(("change", "changes", "extras", "changed work"), "variation"),
    Synonym(("verbal", "oral", "verbally"), "oral instruction writing"),
    Synonym(("removed from scope", "taken out of scope", "descoped"), "omission omits"),
    Synonym(("nobody asked", "not instructed", "without instruction"), "without a variation instruction"),
    Synonym(("adjudicate", "disagreement"), "adjudication dispute"),
    Synonym(("surety", "performance guarantee"), "performance bond"),
    Synonym(("all risks", "contractor's all risks"), "insurance all risks"),
    Synonym(("auditors", "audit", "books"), "records audit"),
    Synonym(("email", "e-mail", "post"), "notices in writing"),
    Synonym(("vat", "reverse charge"), "value added tax"),
    Synonym(("terminated", "thrown off", "kicked off", "ended", "termination"), "termination"),
)

GLOSSARY: Final[tuple[Synonym, ...]] = (*ABBREVIATIONS, *COLLOQUIAL)


class Expansion(Enum):
    """Which glossary a retriever expands queries with."""

    NONE = "none"
    ABBREVIATIONS = "abbreviations"
    GLOSSARY = "glossary"  # abbreviations and colloquial phrases


_GLOSSARIES: Final = {Expansion.NONE: (), Expansion.ABBREVIATIONS: ABBREVIATIONS, Expansion.GLOSSARY: GLOSSARY}


@dataclass(frozen=True)
class _Compiled:
    phrases: tuple[tuple[str, ...], ...]
    means: str


def _compile(glossary: Sequence[Synonym]) -> tuple[_Compiled, ...]:
    compiled = []
    for entry in glossary:
        phrases = tuple(stems for stems in (tuple(words(phrase)) for phrase in entry.phrases) if stems)
        compiled.append(_Compiled(phrases, entry.means))
    return tuple(compiled)


@dataclass(frozen=True)
class QueryExpander:
    """Adds the contract's words for the colloquial phrases a query uses; the glossary is stemmed once."""

    _entries: tuple[_Compiled, ...]
    _by_first_word: Mapping[str, tuple[tuple[tuple[str, ...], int], ...]]  # first stem -> (phrase, entry index)

    @classmethod
    def from_glossary(cls, glossary: Sequence[Synonym] = GLOSSARY) -> QueryExpander:
        entries = _compile(glossary)
        by_first_word: dict[str, list[tuple[tuple[str, ...], int]]] = {}
        for index, entry in enumerate(entries):
            for phrase in entry.phrases:
                by_first_word.setdefault(phrase[0], []).append((phrase, index))
        return cls(entries, {word: tuple(phrases) for word, phrases in by_first_word.items()})

    @classmethod
    def for_expansion(cls, expansion: Expansion) -> QueryExpander:
        return cls.from_glossary(_GLOSSARIES[expansion])

    def expansions(self, query: str) -> tuple[str, ...]:
        """The `means` of every entry one of whose phrases the query contains, each once, in glossary order."""
        stems = tuple(words(query))
        matched: set[int] = set()
        for start, word in enumerate(stems):
            for phrase, index in self._by_first_word.get(word, ()):
                if stems[start : start + len(phrase)] == phrase:
                    matched.add(index)
        return tuple(dict.fromkeys(self._entries[index].means for index in sorted(matched)))
