"""The payment-certificate workflow's task handlers, by the names `config/workflows/certificates.yaml` gives them."""

from countersign.engine.workflows.base import Handlers
from countersign.engine.workflows.certificates.adjudication import Adjudication
from countersign.engine.workflows.certificates.clause_retrieval import ClauseRetrieval, RetrieverSource
from countersign.engine.workflows.certificates.duplicate_check import DuplicateCheck
from countersign.engine.workflows.certificates.extraction import Extraction
from countersign.engine.workflows.certificates.intake import Intake
from countersign.engine.workflows.certificates.payment import Payment
from countersign.engine.workflows.certificates.reconstruction import Reconstruction


def certificate_handlers(retriever: RetrieverSource | None) -> Handlers:
    """The handlers; without a retriever, clause retrieval escalates (no clause corpus configured)."""
    return {
        "certificates.intake": Intake(),
        "certificates.extraction": Extraction(),
        "certificates.duplicate_check": DuplicateCheck(),
        "certificates.reconstruction": Reconstruction(),
        "certificates.clause_retrieval": ClauseRetrieval(retriever),
        "certificates.adjudication": Adjudication(),
        "certificates.payment": Payment(),
    }


__all__ = ["RetrieverSource", "certificate_handlers"]
