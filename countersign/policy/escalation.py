"""Why work halted for a person: the typed reasons an escalation may carry."""

from enum import StrEnum


class EscalationReason(StrEnum):
    """Each reason has an owner role in risk.yaml (`escalation.owners`); only a human decision resolves it."""

    ANOMALY_OVER_TOLERANCE = "anomaly_over_tolerance"
    CONTRADICTORY_EVIDENCE = "contradictory_evidence"
    MISSING_PARAMETER = "missing_parameter"
    SUSPECTED_INJECTION = "suspected_injection"
    BUDGET_EXHAUSTED = "budget_exhausted"
    SPECIALIST_DEAD_LETTERED = "specialist_dead_lettered"
    UNGROUNDED_NARRATIVE = "ungrounded_narrative"
    GATE_EXPIRED = "gate_expired"
    NO_RECORDED_RESPONSE = "no_recorded_response"  # a model call in replay mode found no recorded response
    # the model server did not answer (429, 5xx, no connection) through every retry its deadline allowed (ADR 0038)
    MODEL_UNAVAILABLE = "model_unavailable"
