"""The month-end close's task handlers, by the names `config/workflows/close.yaml` gives them."""

from countersign.engine.workflows.base import Handlers
from countersign.engine.workflows.close.accruals import Accruals
from countersign.engine.workflows.close.reconciliation import (
    BankReconciliation,
    IntercompanyReconciliation,
    SubledgerReconciliation,
)
from countersign.engine.workflows.close.signoff import CloseSignoff
from countersign.engine.workflows.close.variance import VarianceAnalysis

HANDLERS: Handlers = {
    "close.bank_reconciliation": BankReconciliation(),
    "close.ap_reconciliation": SubledgerReconciliation("ap"),
    "close.ar_reconciliation": SubledgerReconciliation("ar"),
    "close.intercompany": IntercompanyReconciliation(),
    "close.accruals": Accruals(),
    "close.variance_analysis": VarianceAnalysis(),
    "close.close_signoff": CloseSignoff(),
}
