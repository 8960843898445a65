"""Clause retrieval: for each violated invariant, the contract form's clauses that bear on it, from the canonical
corpus (hybrid search), plus the clauses the invariant names and the two every certificate rests on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg import AsyncConnection

from countersign.engine.workflows.base import Escalate, TaskContext, TaskHandler
from countersign.engine.workflows.certificates.evidence import stage_results
from countersign.engine.workflows.certificates.stages import RECONSTRUCTION
from countersign.policy import EscalationReason
from countersign.retrieval import MAX_QUERY_CHARS, Retriever

SEARCH_K = 5
NO_CORPUS = "no clause corpus configured"
STANDING_TOPICS = ("certified.previous", "payment.certificate_content")
"""Every certificate rests on these two clauses of its form: previously certified amounts, and what it must state."""


RetrieverSource = Retriever | Callable[[], Retriever]
"""A built retriever, or a loader the handler calls when it first needs one (building it loads the embedding
model, so a process that never retrieves a clause never pays for it)."""


class ClauseRetrieval(TaskHandler):
    def __init__(self, retriever: RetrieverSource | None) -> None:
        self._source = retriever

    @property
    def retriever(self) -> Retriever | None:
        return self._source() if callable(self._source) else self._source

    async def compute(self, conn: AsyncConnection[Any], tc: TaskContext) -> dict[str, Any]:
        reconstruction = (await stage_results(conn, tc))[RECONSTRUCTION]
        form = str(reconstruction["form"])
        retriever = self.retriever
        if retriever is None:
            if tc.escalation != EscalationReason.MISSING_PARAMETER:
                raise Escalate(EscalationReason.MISSING_PARAMETER, NO_CORPUS)
            # A person has seen that there is no corpus and let the run go on: findings reach the gate uncited.
            return {
                "kind": "clause_retrieval",
                "form": form,
                "corpus_version": "",
                "k": SEARCH_K,
                "clauses": [],
                "violations": [],
                "note": NO_CORPUS,
            }
        corpus = retriever.corpus
        chosen: set[str] = {
            clause.id for clause in corpus.clauses if clause.form == form and clause.topic in STANDING_TOPICS
        }
        per_violation = []
        for violation in reconstruction["violations"]:
            query = f"{violation['title']}. {violation['explanation']}"[:MAX_QUERY_CHARS]
            found = retriever.search(query, k=SEARCH_K, form=form)
            own = [clause_id for clause_id in violation["clause_ids"] if clause_id in corpus.by_id]
            retrieved = [hit.clause_id for hit in found.hits]
            chosen |= set(retrieved) | set(own)
            per_violation.append({"invariant": violation["invariant"], "retrieved": retrieved, "own": own})
        return {
            "kind": "clause_retrieval",
            "form": form,
            "corpus_version": corpus.version,
            "k": SEARCH_K,
            "clauses": [
                {"id": clause.id, "title": clause.title, "text": clause.text, "sha256": clause.sha256}
                for clause in (corpus.by_id[clause_id] for clause_id in sorted(chosen))
            ],
            "violations": per_violation,
        }
