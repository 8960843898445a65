"""The payment-certificate workflow's task handlers, by the names `config/workflows/certificates.yaml` gives them."""

from ..base import Handlers
from .adjudication import Adjudication
from .clause_retrieval import ClauseRetrieval, RetrieverSource
from .duplicate_check import DuplicateCheck
from .extraction import Extraction
from .intake import Intake
from .payment import Payment
from .reconstruction import Reconstruction


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
