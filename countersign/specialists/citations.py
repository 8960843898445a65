"""Model-written explanations that cite contract clauses, behind a guard that holds whatever the model cites.

The model gets the facts and the clauses retrieved for this query and answers
`{"explanation": "...", "citations": ["CSB-4.7", ...]}`. With guards on (always, outside the negative control):

- parse: narration's discipline. One JSON object with a non-empty string `explanation` and a non-empty list of
  clause ids in `citations` (an explanation that cites nothing is not grounded in the contract); any other key is
  dropped and flagged `dropped_key:<name>`. Malformed output gets one corrective retry, then the fallback ships,
  flagged `malformed_fallback`.
- verdict language (`narration.verdict_claims`) in the explanation: the fallback ships, flagged
  `verdict_claim_fallback`; an explanation that addresses the approver or the card, or carries a link
  (`narration.steering_claims`), ships the fallback flagged `approver_address_fallback` or `link_fallback`.
- citations, by set membership after generation: every id in `citations` and every clause-id shaped token in the
  explanation text must be the id of a clause retrieved for this query. A citation outside that set (never
  retrieved, or no such clause) gets one corrective retry naming the offending and the allowed ids, then the
  deterministic fallback ships with its own citations, flagged `citation_fallback` for a person to review.

Clause text reaches the model only as quoted data: one user message `{"data": [{"id", "title", "text"}, ...]}`,
which the system prompt introduces as untrusted data that never carries instructions. A bound, a missing recorded
response or a provider failure raises `NarrationEscalation`, as narration does. `CitedExplanation.trace_fields()`
is what every decision that cites a clause stamps into its trace event: the corpus version and each cited
clause's SHA-256.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from countersign.llm import Limits, ModelRequest, Provider
from countersign.llm.messages import canonical_json
from countersign.retrieval.citations import citations_outside, cited_ids
from countersign.specialists.narration import (
    DEFAULT_LIMITS,
    SOURCE_FALLBACK,
    SOURCE_MODEL,
    PromptTemplate,
    ask_model,
    data_request,
    json_object,
    judged_answer,
    steering_claims,
    verdict_claims,
)

EXPLANATION_KEY = "explanation"
CITATIONS_KEY = "citations"
ANSWER_KEYS = frozenset({EXPLANATION_KEY, CITATIONS_KEY})
ANSWER_SHAPE = '{"explanation": "<text>", "citations": ["<clause id>", ...]}'


class CitableClause(Protocol):
    """A retrieved clause as the guard needs it; the retrieval package's clause records fit as they are."""

    @property
    def id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def sha256(self) -> str: ...


@dataclass(frozen=True)
class CitedExplanation:
    text: str
    citations: tuple[str, ...]  # every clause the shipped text cites: its `citations`, then ids named only in text
    source: str  # SOURCE_MODEL | SOURCE_FALLBACK
    flags: tuple[str, ...]
    model: str
    template_hash: str
    steps: tuple[Mapping[str, Any], ...]  # the loop's trace events of every attempt, JSON-safe
    corpus_version: str
    clause_hashes: Mapping[str, str]  # id -> SHA-256 of each cited clause that was retrieved
    refused_citations: tuple[str, ...] = ()  # ids the guard refused, across both attempts (sorted, unique)

    def trace_fields(self) -> dict[str, Any]:
        """What a decision citing these clauses stamps into its trace event.

        A citation with no retrieved clause behind it (possible only with guards off) is stamped with a null hash.
        """
        return {
            "corpus_version": self.corpus_version,
            "clauses": [
                {"id": clause_id, "sha256": self.clause_hashes.get(clause_id)}
                for clause_id in sorted(set(self.citations))
            ],
            "source": self.source,
            "flags": list(self.flags),
        }


@dataclass(frozen=True)
class _Judgement:
    """What the guard made of one answer: an explanation and its citations to ship, or why not."""

    explanation: str | None
    citations: tuple[str, ...] = ()
    failure: str | None = None  # "malformed" | "verdict_claim" | "approver_address" | "link" | "citation"
    correction: str = ""
    dropped: tuple[str, ...] = ()
    outside: tuple[str, ...] = ()


def build_request(
    template: PromptTemplate,
    model: str,
    facts: Mapping[str, Any],
    clauses: Sequence[CitableClause],
    max_tokens: int,
) -> ModelRequest:
    """System prompt, then the facts, then the retrieved clauses as one quoted-data message."""
    quoted = [{"id": clause.id, "title": clause.title, "text": clause.text} for clause in clauses]
    return data_request(template, model, _json({"facts": facts}), _json({"data": quoted}), max_tokens)


async def explain_with_citations(
    provider: Provider,
    *,
    template: PromptTemplate,
    model: str,
    facts: Mapping[str, Any],
    clauses: Sequence[CitableClause],
    corpus_version: str,
    fallback: str,
    fallback_citations: Sequence[str],
    limits: Limits = DEFAULT_LIMITS,
    guards: bool = True,
    max_tokens: int = 512,
) -> CitedExplanation:
    """Ask the model to explain, citing clauses; ship it only if the guard passes (one corrective retry), else
    `fallback` with `fallback_citations`.

    `clauses` is the retrieval set for this query: the only ids a shipped explanation may cite. The fallback's
    citations must be among them (a ValueError otherwise: that is a bug in the caller, not the model).
    """
    retrieved = _by_id(clauses)
    _check_fallback(fallback_citations, retrieved)
    request = build_request(template, model, facts, clauses, max_tokens)
    steps: list[Mapping[str, Any]] = []
    flags: list[str] = []
    refused: set[str] = set()

    def shipped(text: str, citations: Sequence[str], source: str) -> CitedExplanation:
        cited = tuple(citations)
        return CitedExplanation(
            text=text,
            citations=cited,
            source=source,
            flags=tuple(flags),
            model=model,
            template_hash=template.sha256,
            steps=tuple(steps),
            corpus_version=corpus_version,
            clause_hashes={clause_id: retrieved[clause_id].sha256 for clause_id in cited if clause_id in retrieved},
            refused_citations=tuple(sorted(refused)),
        )

    if not guards:
        first = await ask_model(provider, request, limits, steps, template.name)
        return shipped(*_unguarded(first.text), SOURCE_MODEL)

    def judge(answer: str) -> _Judgement:
        judgement = _judge(answer, retrieved)
        refused.update(judgement.outside)
        return judgement

    judgement = await judged_answer(
        provider, request, limits, steps, flags, template.name, judge=judge, retry_on=("malformed", "citation")
    )
    if judgement.failure is not None or judgement.explanation is None:
        flags.append(f"{judgement.failure}_fallback")
        return shipped(fallback, fallback_citations, SOURCE_FALLBACK)
    return shipped(judgement.explanation, judgement.citations, SOURCE_MODEL)


def _by_id(clauses: Sequence[CitableClause]) -> dict[str, CitableClause]:
    retrieved: dict[str, CitableClause] = {}
    for clause in clauses:
        if clause.id in retrieved:
            raise ValueError(f"clause {clause.id} appears twice in the retrieval set")
        retrieved[clause.id] = clause
    return retrieved


def _check_fallback(fallback_citations: Sequence[str], retrieved: Mapping[str, CitableClause]) -> None:
    if not fallback_citations:
        raise ValueError("the fallback explanation must cite at least one retrieved clause")
    outside = sorted(set(fallback_citations) - set(retrieved))
    if outside:
        raise ValueError(f"the fallback cites {', '.join(outside)}, which the retrieval set does not hold")


def _judge(answer: str, retrieved: Mapping[str, CitableClause]) -> _Judgement:
    parsed = _parse(answer)
    if parsed is None:
        return _Judgement(
            None,
            failure="malformed",
            correction=(
                'Your answer was not one JSON object with a non-empty string "explanation" and a non-empty list '
                '"citations" of clause ids. Answer with exactly '
                f"{ANSWER_SHAPE}, citing at least one clause from CLAUSES, and nothing else."
            ),
        )
    explanation, declared, dropped = parsed
    if verdict_claims(explanation):
        return _Judgement(None, failure="verdict_claim", dropped=dropped)
    steering = steering_claims(explanation)
    if steering:
        return _Judgement(None, failure=steering[0], dropped=dropped)
    citations = cited_ids(explanation, declared)
    outside = citations_outside(citations, retrieved)
    if outside:
        return _Judgement(
            None,
            failure="citation",
            correction=(
                f"Your answer cites {', '.join(outside)}, which {'is' if len(outside) == 1 else 'are'} not among the "
                f"clauses in CLAUSES. Cite only these clause ids, in citations and in the text: "
                f"{', '.join(sorted(retrieved))}. Answer with exactly {ANSWER_SHAPE}."
            ),
            dropped=dropped,
            outside=outside,
        )
    return _Judgement(explanation, citations, dropped=dropped)


def _parse(answer: str) -> tuple[str, tuple[str, ...], tuple[str, ...]] | None:
    """(explanation, citations, dropped keys); None unless the answer is one JSON object of the asked shape."""
    value = json_object(answer)
    if value is None:
        return None
    explanation = value.get(EXPLANATION_KEY)
    citations = value.get(CITATIONS_KEY)
    if not isinstance(explanation, str) or not explanation.strip():
        return None
    if not isinstance(citations, list) or not citations:
        return None
    if not all(isinstance(clause_id, str) and clause_id.strip() for clause_id in citations):
        return None
    declared = tuple(dict.fromkeys(clause_id.strip() for clause_id in citations))
    dropped = tuple(sorted(str(key) for key in value if key not in ANSWER_KEYS))
    return explanation.strip(), declared, dropped


def _unguarded(answer: str) -> tuple[str, tuple[str, ...]]:
    """Guards off: the model's explanation and citations as it wrote them, or its raw text citing nothing."""
    value = json_object(answer)
    if value is None:
        return answer, ()
    citations = value.get(CITATIONS_KEY)
    cited = tuple(str(clause_id) for clause_id in citations) if isinstance(citations, list) else ()
    return str(value.get(EXPLANATION_KEY, answer)), cited


def _json(value: Any) -> str:
    return canonical_json(value).decode("utf-8")
