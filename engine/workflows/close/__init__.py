"""The month-end close's task handlers, by the names `config/workflows/close.yaml` gives them."""

from ..base import Handlers
from .accruals import Accruals
from .reconciliation import BankReconciliation, IntercompanyReconciliation, SubledgerReconciliation
from .signoff import CloseSignoff
from .variance import VarianceAnalysis

HANDLERS: Handlers = {
    "close.bank_reconciliation": BankReconciliation(),
    "close.ap_reconciliation": SubledgerReconciliation("ap"),
    "close.ar_reconciliation": SubledgerReconciliation("ar"),
    "close.intercompany": IntercompanyReconciliation(),
    "close.accruals": Accruals(),
    "close.variance_analysis": VarianceAnalysis(),
    "close.close_signoff": CloseSignoff(),
}
