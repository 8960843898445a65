"""Adjudication specialist: explain a certificate's findings in prose that cites only the clauses retrieved for it.

The findings are the engine's: which invariants are violated, their amounts, the duplicate holds, the amount to
certify. This specialist explains them and never returns an amount or a verdict of its own. `handle` (no model)
ships the deterministic explanation (the violations' own explanations) with its citations, flagged `no_model`;
`handle_with_model` asks the model through `explain_with_citations` (`config/prompts/clause_explanation.md`),
whose guard holds the citations to the retrieval set and the prose free of verdict language, with the same
deterministic explanation as its fallback. A model explanation citing a number that neither the facts nor the
retrieved clauses hold ships the deterministic one too, flagged `ungrounded_fallback`. Either way
`citation_trace` carries the corpus version and each cited clause's SHA-256. A bound, a missing recorded response
or a provider failure halts with that escalation; on the attempt after a person approved one the model cannot get
past by being asked again (`model_off` in the payload), the deterministic explanation ships without asking it,
flagged `<reason>_fallback` (docs/adr/0036).

The fallback cites the violations' clauses that are in the set; with none (a clean certificate), the clauses
clause_retrieval always includes: amounts previously certified and the contents of an interim certificate. A
clause's topic is not in the message, but its SHA-256 commits to it (the corpus contract hashes id, form, topic,
number, title and text), so the topic is recognised by recomputing the hash, never guessed from a title.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from countersign.retrieval.citations import CLAUSE_REFERENCE
from countersign.retrieval.corpus import clause_sha256
from countersign.specialists.citations import CitedExplanation, explain_with_citations
from countersign.specialists.errors import SpecialistInputError
from countersign.specialists.grounding import UngroundedFigureError, extract_figures, ground_figures
from countersign.specialists.narration import SOURCE_FALLBACK, NarrationEscalation, Narrator, model_off, model_off_flag

KIND = "adjudication"
EXPLANATION_TEMPLATE = "clause_explanation"
NO_MODEL_FLAG = "no_model"
EXPLANATION_MAX_TOKENS = 1024
ALWAYS_RETRIEVED_TOPICS = ("certified.previous", "payment.certificate_content")
DUPLICATE_TOPIC = "certified.duplicate"
MAX_CLAUSES = 50
MAX_VIOLATIONS = 50
MAX_HOLDS = 50

_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/]{0,63}")
_SNAKE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_DECIMAL = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,2})?")
_CURRENCY = re.compile(r"[A-Z]{3}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CLAUSE_ID = re.compile(r"([A-Z]{2,5})-([0-9]{1,2}(?:\.[0-9]{1,2})+)")


@dataclass(frozen=True)
class RetrievedClause:
    """A clause of the retrieval set as the message carries it (fits `citations.CitableClause`)."""

    id: str
    title: str
    text: str
    sha256: str

    def has_topic(self, topic: str) -> bool:
        """Whether the clause's hash commits to `topic` (the corpus contract's hash, recomputed)."""
        matched = _CLAUSE_ID.fullmatch(self.id)
        if matched is None:
            return False
        form, number = matched.groups()
        return clause_sha256(self.id, form, topic, number, self.title, self.text) == self.sha256


@dataclass(frozen=True)
class Violation:
    invariant: str
    title: str
    amounts: Mapping[str, str]
    explanation: str
    clause_ids: tuple[str, ...]


@dataclass(frozen=True)
class Hold:
    kind: str
    other: str
    overlap: str


@dataclass(frozen=True)
class AdjudicationRequest:
    certificate_id: str
    contract_id: str
    corpus_version: str
    amount_to_certify: str
    previously_certified: str
    currency: str
    violations: tuple[Violation, ...]
    holds: tuple[Hold, ...]
    clauses: tuple[RetrievedClause, ...]

    def facts(self) -> dict[str, Any]:
        """What the model may explain: the engine's findings and figures, as the engine computed them."""
        return {
            "certificate_id": self.certificate_id,
            "contract_id": self.contract_id,
            "currency": self.currency,
            "amount_to_certify": self.amount_to_certify,
            "previously_certified": self.previously_certified,
            "violations": [
                {
                    "invariant": violation.invariant,
                    "title": violation.title,
                    "amounts": dict(violation.amounts),
                    "explanation": violation.explanation,
                    "clause_ids": list(violation.clause_ids),
                }
                for violation in self.violations
            ],
            "holds": [{"kind": hold.kind, "other": hold.other, "overlap": hold.overlap} for hold in self.holds],
        }


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    """No model: the deterministic explanation and its citations, flagged `no_model`."""
    request = parse_request(payload)
    return _result(_deterministic(request, (NO_MODEL_FLAG,)))


async def handle_with_model(payload: dict[str, Any], narrator: Narrator) -> dict[str, Any]:
    """The model explains behind the citation guard; a narration escalation halts with that reason.

    On the attempt after a person approved such an escalation (`model_off` in the payload), the model is not asked:
    the deterministic explanation and its citations ship, flagged `<reason>_fallback`.
    """
    off = model_off(payload)
    request = parse_request(payload)
    if off is not None:
        return _result(_deterministic(request, (model_off_flag(off),)))
    try:
        cited = await explain_with_citations(
            narrator.provider,
            template=narrator.template(EXPLANATION_TEMPLATE),
            model=narrator.model,
            facts=request.facts(),
            clauses=request.clauses,
            corpus_version=request.corpus_version,
            fallback=fallback_explanation(request),
            fallback_citations=fallback_citations(request),
            limits=narrator.limits,
            guards=narrator.guards,
            max_tokens=EXPLANATION_MAX_TOKENS,
        )
    except NarrationEscalation as escalation:
        halted = _result(_deterministic(request, (f"{escalation.reason}_escalation",), escalation.steps))
        halted.update(
            {
                "halted": True,
                "escalation": escalation.reason,
                "halt_reason": f"adjudication explanation: {escalation.detail}",
            }
        )
        return halted
    if cited.source == SOURCE_FALLBACK or not narrator.guards:
        return _result(cited)
    return _result(_grounded(cited, request))


def fallback_explanation(request: AdjudicationRequest) -> str:
    """The violations' own explanations, then each duplicate hold; for a clean certificate, a sentence saying so."""
    sentences = [f"{violation.title}: {violation.explanation}." for violation in request.violations]
    sentences += [
        f"Duplicate hold ({hold.kind}): this certificate overlaps {hold.other} by {request.currency} {hold.overlap}."
        for hold in request.holds
    ]
    if sentences:
        return " ".join(sentences)
    return (
        "No invariant is violated; the amount to certify, "
        f"{request.currency} {request.amount_to_certify}, is the cumulative position rebuilt from every prior "
        f"certificate less the {request.currency} {request.previously_certified} previously certified."
    )


def fallback_citations(request: AdjudicationRequest) -> tuple[str, ...]:
    """The violations' clauses in the set, then (for holds) the duplicates clause; with none, the clauses
    clause_retrieval always includes. SpecialistInputError if the set holds none of them."""
    in_set = {clause.id for clause in request.clauses}
    cited = [clause_id for violation in request.violations for clause_id in violation.clause_ids if clause_id in in_set]
    if request.holds:
        cited += [clause.id for clause in request.clauses if clause.has_topic(DUPLICATE_TOPIC)]
    if not cited:
        cited = [
            clause.id for topic in ALWAYS_RETRIEVED_TOPICS for clause in request.clauses if clause.has_topic(topic)
        ]
    if not cited:
        raise SpecialistInputError(
            "clauses",
            "the retrieval set holds none of the violations' clauses and neither of the clauses always retrieved "
            f"({', '.join(ALWAYS_RETRIEVED_TOPICS)}), so no explanation could cite it",
        )
    return tuple(dict.fromkeys(cited))


def allowed_figures(request: AdjudicationRequest) -> list[Decimal]:
    """Every number the explanation may cite: the engine's figures and findings, and the retrieved clauses' text."""
    texts = [
        request.certificate_id,
        request.contract_id,
        request.amount_to_certify,
        request.previously_certified,
        *(clause.title for clause in request.clauses),
        *(clause.text for clause in request.clauses),
    ]
    for violation in request.violations:
        texts += [violation.title, violation.explanation, *violation.amounts.values()]
    for hold in request.holds:
        texts += [hold.other, hold.overlap]
    return [figure.value for text in texts for figure in extract_figures(CLAUSE_REFERENCE.sub(" ", text))]


def _grounded(cited: CitedExplanation, request: AdjudicationRequest) -> CitedExplanation:
    """The model's explanation if every number in it is one the facts or the clauses hold; else the deterministic
    explanation, with the model's steps and flags and `ungrounded_fallback` (the citation guard checks no figure)."""
    # A clause reference is checked by the citation guard; its number parts ("CSB-7.1") are not figures.
    prose = CLAUSE_REFERENCE.sub(" ", cited.text)
    try:
        ground_figures(prose, allowed_figures(request), Decimal(0))
    except UngroundedFigureError:
        fallback = _deterministic(request, (*cited.flags, "ungrounded_fallback"), cited.steps)
        return replace(fallback, model=cited.model, template_hash=cited.template_hash)
    return cited


def _deterministic(
    request: AdjudicationRequest, flags: Sequence[str], steps: Sequence[Mapping[str, Any]] = ()
) -> CitedExplanation:
    citations = fallback_citations(request)
    hashes = {clause.id: clause.sha256 for clause in request.clauses}
    return CitedExplanation(
        text=fallback_explanation(request),
        citations=citations,
        source=SOURCE_FALLBACK,
        flags=tuple(flags),
        model="",
        template_hash="",
        steps=tuple(steps),
        corpus_version=request.corpus_version,
        clause_hashes={clause_id: hashes[clause_id] for clause_id in citations},
    )


def _result(cited: CitedExplanation) -> dict[str, Any]:
    """The output shape: the explanation, what it cites and the trace stamp. No amount, no verdict."""
    return {
        "kind": KIND,
        "explanation": cited.text,
        "citations": list(cited.citations),
        "source": cited.source,
        "flags": list(cited.flags),
        "citation_trace": cited.trace_fields(),
        "model_steps": [dict(step) for step in cited.steps],
    }


# --- the input ---------------------------------------------------------------------------------------------


def parse_request(payload: Any) -> AdjudicationRequest:
    if not isinstance(payload, Mapping):
        raise SpecialistInputError("payload", f"expected an object, got {type(payload).__name__}")
    if payload.get("kind") != KIND:
        raise SpecialistInputError("kind", f"expected {KIND!r}, got {payload.get('kind')!r}")
    corpus_version = payload.get("corpus_version")
    if not isinstance(corpus_version, str) or not _SHA256.fullmatch(corpus_version):
        raise SpecialistInputError(
            "corpus_version", f"expected a lower-case SHA-256 hex digest, got {corpus_version!r}"
        )
    facts = payload.get("facts")
    if not isinstance(facts, Mapping):
        raise SpecialistInputError("facts", f"expected an object, got {type(facts).__name__}")
    currency = facts.get("currency")
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise SpecialistInputError("facts.currency", f"expected a three-letter currency code, got {currency!r}")
    return AdjudicationRequest(
        certificate_id=_matching(payload, "certificate_id", _IDENTIFIER, "an identifier"),
        contract_id=_matching(payload, "contract_id", _IDENTIFIER, "an identifier"),
        corpus_version=corpus_version,
        amount_to_certify=_matching(facts, "amount_to_certify", _DECIMAL, "a decimal string", "facts"),
        previously_certified=_matching(facts, "previously_certified", _DECIMAL, "a decimal string", "facts"),
        currency=currency,
        violations=tuple(
            _violation(raw, f"facts.violations[{index}]")
            for index, raw in enumerate(_list(facts, "violations", "facts", MAX_VIOLATIONS))
        ),
        holds=tuple(
            _hold(raw, f"facts.holds[{index}]") for index, raw in enumerate(_list(facts, "holds", "facts", MAX_HOLDS))
        ),
        clauses=_clauses(payload),
    )


def _violation(raw: Any, where: str) -> Violation:
    if not isinstance(raw, Mapping):
        raise SpecialistInputError(where, f"expected an object, got {type(raw).__name__}")
    amounts = raw.get("amounts")
    if not isinstance(amounts, Mapping):
        raise SpecialistInputError(f"{where}.amounts", "expected an object of name -> decimal string")
    for name, amount in amounts.items():
        if not isinstance(name, str) or not _SNAKE.fullmatch(name):
            raise SpecialistInputError(f"{where}.amounts", f"expected snake_case amount names, got {name!r}")
        if not isinstance(amount, str) or not _DECIMAL.fullmatch(amount):
            raise SpecialistInputError(f"{where}.amounts.{name}", f"expected a decimal string, got {amount!r}")
    clause_ids = raw.get("clause_ids")
    if not isinstance(clause_ids, list) or not all(isinstance(item, str) and item for item in clause_ids):
        raise SpecialistInputError(f"{where}.clause_ids", "expected a list of clause ids")
    return Violation(
        invariant=_matching(raw, "invariant", _SNAKE, "a snake_case invariant name", where),
        title=_text(raw, "title", where),
        amounts={str(name): str(amount) for name, amount in amounts.items()},
        explanation=_text(raw, "explanation", where),
        clause_ids=tuple(clause_ids),
    )


def _hold(raw: Any, where: str) -> Hold:
    if not isinstance(raw, Mapping):
        raise SpecialistInputError(where, f"expected an object, got {type(raw).__name__}")
    overlap = _matching(raw, "overlap", _DECIMAL, "a decimal string", where)
    if Decimal(overlap) < 0:
        raise SpecialistInputError(f"{where}.overlap", f"expected a non-negative amount, got {overlap!r}")
    return Hold(
        kind=_matching(raw, "kind", _SNAKE, "a snake_case hold kind", where),
        other=_text(raw, "other", where),
        overlap=overlap,
    )


def _clauses(payload: Mapping[str, Any]) -> tuple[RetrievedClause, ...]:
    raw_clauses = _list(payload, "clauses", "", MAX_CLAUSES)
    if not raw_clauses:
        raise SpecialistInputError("clauses", "expected the non-empty retrieval set of the clause_retrieval stage")
    clauses: list[RetrievedClause] = []
    for index, raw in enumerate(raw_clauses):
        where = f"clauses[{index}]"
        if not isinstance(raw, Mapping):
            raise SpecialistInputError(where, f"expected an object, got {type(raw).__name__}")
        clause = RetrievedClause(
            id=_matching(raw, "id", _CLAUSE_ID, "a clause id such as CSB-4.7", where),
            title=_text(raw, "title", where),
            text=_text(raw, "text", where),
            sha256=_matching(raw, "sha256", _SHA256, "a lower-case SHA-256 hex digest", where),
        )
        if any(seen.id == clause.id for seen in clauses):
            raise SpecialistInputError(f"{where}.id", f"{clause.id} appears twice in the retrieval set")
        clauses.append(clause)
    return tuple(clauses)


def _list(source: Mapping[str, Any], key: str, where: str, limit: int) -> list[Any]:
    path = f"{where}.{key}" if where else key
    value = source.get(key)
    if not isinstance(value, list):
        raise SpecialistInputError(path, f"expected a list, got {type(value).__name__}")
    if len(value) > limit:
        raise SpecialistInputError(path, f"{len(value)} entries; at most {limit}")
    return value


def _matching(source: Mapping[str, Any], key: str, pattern: re.Pattern[str], expected: str, where: str = "") -> str:
    value = source.get(key)
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise SpecialistInputError(f"{where}.{key}" if where else key, f"expected {expected}, got {value!r}")
    return value


def _text(source: Mapping[str, Any], key: str, where: str) -> str:
    value = source.get(key)
    if not isinstance(value, str) or not value.strip():
        raise SpecialistInputError(f"{where}.{key}", f"expected a non-empty string, got {value!r}")
    return value
