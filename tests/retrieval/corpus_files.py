"""A small clause corpus in the contract's file format, with hashes computed here from the contract's own words
(not by `countersign.retrieval.corpus`), so the loader's verification is checked against an independent
implementation."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.retrieval import Retriever, load_corpus

REAL_CORPUS = PROJECT_ROOT / "config" / "clauses" / "corpus.json"
REAL_QUERIES = PROJECT_ROOT / "config" / "evals" / "retrieval_queries.yaml"

FORMS = [
    {
        "code": "CSB",
        "name": "Countersign Standard Building Contract",
        "edition": "2024",
        "employer": "Employer",
        "certifier": "Contract Administrator",
        "pricing_document": "Bill of Quantities",
    },
    {
        "code": "CSE",
        "name": "Countersign Engineering and Construction Contract",
        "edition": "2023",
        "employer": "Client",
        "certifier": "Project Manager",
        "pricing_document": "Activity Schedule",
    },
]

# (topic, title, text with {employer} and {certifier}), the same topics in both forms, worded per form.
TOPICS = [
    (
        "retention.rate",
        "Retention percentage",
        "The {employer} may retain five per cent of the value of work executed in each interim certificate.",
    ),
    (
        "retention.cap",
        "Retention limit",
        "The total amount retained by the {employer} shall not exceed three per cent of the contract sum.",
    ),
    (
        "advance.amount",
        "Advance payment",
        "The {employer} shall make an advance payment to the contractor against an advance payment guarantee.",
    ),
    (
        "advance.amortisation_rate",
        "Rate of advance repayment",
        "The advance is repaid by deductions of twenty per cent from each interim certificate until repaid.",
    ),
    (
        "materials.on_site",
        "Materials on site",
        "Unfixed materials delivered to site and adequately protected are included in the valuation by the "
        "{certifier}.",
    ),
    (
        "payment.late_interest",
        "Interest on late payment",
        "If a certified sum is not paid by the final date for payment, simple interest accrues on the overdue amount.",
    ),
    (
        "setoff.right",
        "Right of set-off",
        "The {employer} may deduct from any sum due to the contractor any amount the contractor owes under the "
        "contract.",
    ),
    (
        "certified.duplicate",
        "No payment twice for the same work",
        "No item of work shall be paid for twice; the {certifier} deducts any amount previously certified for it.",
    ),
]
SECTIONS = {"CSB": 4, "CSE": 7}


def clause_sha256(clause: dict[str, Any]) -> str:
    body = {name: clause[name] for name in ("id", "form", "topic", "number", "title", "text")}
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    ).hexdigest()


def corpus_version(clauses: list[dict[str, Any]]) -> str:
    lines = [f"{clause['id']} {clause['sha256']}" for clause in sorted(clauses, key=lambda clause: clause["id"])]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def small_corpus_document() -> dict[str, Any]:
    clauses = []
    for form in FORMS:
        section = SECTIONS[form["code"]]
        for n, (topic, title, text) in enumerate(TOPICS, start=1):
            clause = {
                "id": f"{form['code']}-{section}.{n}",
                "form": form["code"],
                "topic": topic,
                "number": f"{section}.{n}",
                "title": title,
                "text": text.format(employer=form["employer"], certifier=form["certifier"]),
            }
            clause["sha256"] = clause_sha256(clause)
            clauses.append(clause)
    return {
        "schema": "countersign.clause-corpus/1",
        "profile": "clauses",
        "seed": 7,
        "version": corpus_version(clauses),
        "forms": FORMS,
        "clauses": clauses,
    }


def write_corpus(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document, sort_keys=True, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def rehash(document: dict[str, Any]) -> dict[str, Any]:
    """Recompute every clause hash and the version (after a deliberate edit that should then load)."""
    for clause in document["clauses"]:
        clause["sha256"] = clause_sha256(clause)
    document["version"] = corpus_version(document["clauses"])
    return document


REAL_HELDOUT_QUERIES = PROJECT_ROOT / "config" / "evals" / "retrieval_queries_heldout.yaml"


@functools.cache
def real_retriever() -> Retriever:
    """The retriever over the committed corpus, built once per test process (it loads the embedding model)."""
    return Retriever.build(load_corpus(REAL_CORPUS))
