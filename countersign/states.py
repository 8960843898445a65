"""The states the tables store, as StrEnums whose values are the stored strings. Pure: no I/O.

A StrEnum member equals its string, so rows read as plain text compare equal to these, and the database's CHECKs
and views (migrations 0002, 0003, 0009, 0017) keep using the same words.
"""

from __future__ import annotations

from enum import StrEnum


class GateStatus(StrEnum):
    """A gate's outcome as the `gate_state` view derives it from the decisions recorded on it."""

    OPEN = "open"
    APPROVED = "approved"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    VOIDED = "voided"  # approved, then a change to what it approved voided it (docs/adr/0046)


DECIDED = frozenset({GateStatus.APPROVED, GateStatus.REJECTED})


class Decision(StrEnum):
    """What a person decided on a gate (`gate_decision.decision`)."""

    APPROVE = "approve"
    REJECT = "reject"

    @property
    def outcome(self) -> GateStatus:
        """The gate status this decision leads to once it is decisive."""
        return GateStatus.APPROVED if self is Decision.APPROVE else GateStatus.REJECTED


class OutboxStatus(StrEnum):
    """Where an outbox message is in its delivery (`outbox_message.status`)."""

    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


class OutboxKind(StrEnum):
    """What an outbox message announces (`outbox_message.kind`)."""

    GATE_CARD = "gate_card"
    CARD_UPDATE = "card_update"
    NOTICE = "notice"


class NoticeKind(StrEnum):
    """Which statutory notice a row is: the payer's in `payment_notice` (migration 0018), the payee's in
    `payee_default_notice` (the payee default notice migration)."""

    PAY_LESS = "pay_less"
    PAYMENT = "payment"  # the payment notice proper, s. 110A (migration 0025)
    PAYEE_DEFAULT = "payee_default"  # the payee's default notice, s. 110B


class PrincipalKind(StrEnum):
    """Who a principal is (`principal.kind`): only humans decide gates."""

    HUMAN = "human"
    MACHINE = "machine"


class DispatchStatus(StrEnum):
    """Where a specialist call stands (`dispatch.status`): `dead` after MAX_DISPATCH_FAILURES, until replayed."""

    PENDING = "pending"
    COMPLETED = "completed"
    FAILED = "failed"
    DEAD = "dead"


class JobState(StrEnum):
    """Where a job stands in the job library's table (`procrastinate.procrastinate_jobs.status`, the library's enum
    type `procrastinate_job_status`; ADR 0040). Only successful jobs are deleted: a failed one stays."""

    TODO = "todo"  # queued (ready once its `scheduled_at` has come)
    DOING = "doing"  # fetched by a worker
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ABORTING = "aborting"  # the library's legacy word, unused since its 3.0
    ABORTED = "aborted"


class Channel(StrEnum):
    """The door a decision came through (`gate_decision.channel`; migration 0017 maps each to the proof it carries)."""

    SLACK = "slack"
    TEAMS = "teams"
    SIGNED_CALLBACK = "signed_callback"
    BOARD = "board"  # the Close Board: a passkey assertion


CHAT_CHANNELS = frozenset({Channel.SLACK, Channel.TEAMS})


class ChatPlatform(StrEnum):
    """The chat platform an outbox message goes to (`outbox_message.platform`, migration 0003)."""

    SLACK = "slack"
    TEAMS = "teams"


class IdentityChannel(StrEnum):
    """Where a principal's identity is known (`principal_identity.channel`, migration 0002): a chat platform's user,
    or the login name a person signs in with."""

    SLACK = "slack"
    TEAMS = "teams"
    LOGIN = "login"


class ProofKind(StrEnum):
    """What proves that a person made a decision (`policy_tier.accepted_proofs`, `gate.accepted_proofs`).

    A platform identity is a Slack or Teams user id the chat platform vouches for; it proves only what that platform's
    shared secret proves. A person's own key is an Ed25519 signature (the signed callback) or a passkey assertion
    (the Close Board): only the person holds it.
    """

    PLATFORM_IDENTITY = "platform_identity"
    ED25519 = "ed25519"
    PASSKEY = "passkey"


PERSON_KEYS = frozenset({ProofKind.ED25519, ProofKind.PASSKEY})


class DecisionProof(StrEnum):
    """What a recorded decision's proof is (`gate_decision.proof->>'kind'`): the admission trigger (migration 0017)
    admits an Ed25519 signature on a signed callback, a passkey assertion on the board, and on a chat door that door's
    own platform identity, named by the channel."""

    SLACK = "slack"
    TEAMS = "teams"
    ED25519 = "ed25519"
    PASSKEY = "passkey"


class ChallengePurpose(StrEnum):
    """What a WebAuthn challenge was issued for (`webauthn_challenge.purpose`, migration 0017): it answers only that."""

    SIGN_IN = "sign_in"
    ENROL = "enrol"
    DECIDE = "decide"  # a decision on a gate: the challenge is the SHA-256 of the decision message


class Machine(StrEnum):
    """The three state machines of a close (`lifecycle_transition.machine`, migration 0011)."""

    RUN = "run"
    TASK = "task"
    GATE = "gate"


class RunState(StrEnum):
    """A close run's status (`close_run.status`), derived from its tasks and gates after every step."""

    RUNNING = "running"
    HALTED = "halted"
    AWAITING_APPROVAL = "awaiting_approval"
    BLOCKED = "blocked"
    CLOSED = "closed"


class TaskState(StrEnum):
    """A task's status. `halted` is the escalated state: the task waits for a person to decide.

    Escalated work never completes on its own: it leaves `halted` only through its escalation gate (a person
    approves a re-run or rejects it; a gate that expires undecided re-runs it, still escalated), and after that it
    reaches `done` only through an approved gate.
    """

    PENDING = "pending"
    RUNNING = "running"
    AWAITING_GATE = "awaiting_gate"
    HALTED = "halted"
    DONE = "done"
    REJECTED = "rejected"
    FAILED = "failed"


class GateKind(StrEnum):
    """What a gate asks (`gate.kind`, migration 0001): approve the work, or decide what becomes of escalated work."""

    APPROVAL = "approval"
    ESCALATION = "escalation"


class GateLifecycle(StrEnum):
    """What the engine did with a gate: open until it acts, then applied, expired or cancelled for good."""

    OPEN = "open"
    APPLIED = "applied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class PeriodState(StrEnum):
    """An entity's accounting period (`accounting_period.status`): a closed period stays closed (migration 0001)."""

    OPEN = "open"
    CLOSED = "closed"


class RefusalCode(StrEnum):
    """Why a decision was refused: `DecisionRefused.code`, the `code` of its `decision_refused` trace event and the
    decision endpoint's answer (README: "Refusal reasons"). Not a column; the trace and the answers carry these words.

    The first seven are who-may-decide's bars (`countersign.policy.deciders`), in the order the decision writer
    checks them; the rest are the proof's and the database's.
    """

    UNKNOWN_PRINCIPAL = "unknown_principal"
    MACHINE_PRINCIPAL = "machine_principal"
    MISSING_ROLE = "missing_role"
    PREPARER = "preparer"
    GATE_EXPIRED = "gate_expired"
    GATE_CANCELLED = "gate_cancelled"
    ALREADY_DECIDED = "already_decided"
    ALREADY_VOTED = "already_voted"
    NO_PERSON_KEY = "no_person_key"  # a signed callback or board decision by a person with no key registered: 403
    PERSON_SIGNATURE_REJECTED = "person_signature_rejected"  # the person's proof does not verify: 401
    NEEDS_PERSON_KEY = "needs_person_key"  # the gate accepts only a person's own key, and this door carries none
    REASON_REQUIRED = "reason_required"
    REFUSED_BY_DATABASE = "refused_by_database"  # the admission trigger refused the row (migration 0017)
    CONFLICT = "conflict"  # the doors' word for a DecisionConflict (409): it contradicts what is recorded
    AMENDMENT_INVALID = "amendment_invalid"  # an approval with edits that does not fit its gate (422)
    DUTIES_SEGREGATED = "duties_segregated"
    """The database refused the approval (migration 0028, ADR 0050): the person approved the other side of a certified
    accrual, a certificate's payment gate and the accruals gate of the close that carries its certified sum."""


class AccessReason(StrEnum):
    """Why a caller may or may not run a command or read a close (`countersign.policy.command_roles.check_access`):
    the `reason` of a `command_refused` trace event and of a 403's detail. Not a column."""

    ALLOWED = "allowed"
    UNKNOWN_PRINCIPAL = "unknown_principal"
    MACHINE_PRINCIPAL = "machine_principal"
    INACTIVE_PRINCIPAL = "inactive_principal"
    MISSING_ROLE = "missing_role"


class ErrorCode(StrEnum):
    """The `error` of an HTTP door's refusal body (`{"error": code, "detail": ...}`), beside a decision's
    `RefusalCode`: the words on the wire (README, the OpenAPI pages). Not a column."""

    UNAUTHENTICATED = "unauthenticated"  # no valid caller credential
    FORBIDDEN = "forbidden"  # a known caller without the role
    CLOSE_NOT_FOUND = "close_not_found"
    GATE_NOT_FOUND = "gate_not_found"
    BODY_TOO_LARGE = "body_too_large"
    INVALID_BODY = "invalid_body"  # the signed callback's body, naming the field
    SIGNATURE_REJECTED = "signature_rejected"  # a door's HMAC (the signed callback, Slack's signing secret)
    INVALID_ACTIVITY = "invalid_activity"  # a Teams activity that does not parse
    UNAUTHORIZED = "unauthorized"  # a Bot Framework token that does not verify
    TENANT_NOT_ALLOWED = "tenant_not_allowed"
    MALFORMED_SLACK_REQUEST = "malformed_slack_request"


class ViewerState(StrEnum):
    """What the one person a card is rendered for may still do on its gate (a Teams refresh renders one card per
    person: `countersign.cards.model.Viewer`). Not stored; the words the chat door renders by."""

    MAY_DECIDE = "may_decide"  # the gate waits on them
    APPROVED = "approved"  # they approved it
    REJECTED = "rejected"  # they rejected it
    PREPARED = "prepared"  # they prepared or requested the work: someone else decides
    NOT_ENTITLED = "not_entitled"  # not a known person, or without the gate's role


class TraceKind(StrEnum):
    """What a trace event records (`trace_pending.kind`, `trace_event.kind`): the words the hashed events carry.

    The decision side (the callbacks role) alone writes `gate_decided`, `decision_refused`, `trace_exported` and
    `command_refused`; the engine role writes the rest (migration 0006's trace writers). The database writes six
    itself: `gate_decided` from the decision it admits (migration 0015), `passkey_enrolled` and `passkey_revoked`
    (migration 0017), `delegation_set`, `delegation_revoked` and `gate_rerouted` (the delegation migration).
    """

    # a close and its tasks
    CLOSE_STARTED = "close_started"
    CLOSE_STATUS = "close_status"
    BOOKS_LOADED = "books_loaded"
    BANK_FEED_LOADED = "bank_feed_loaded"
    CONSTRUCTION_SET_LOADED = "construction_set_loaded"
    TASK_STARTED = "task_started"
    TASK_DONE = "task_done"
    TASK_FAILED = "task_failed"
    TASK_HALTED = "task_halted"
    TASK_REQUEUED = "task_requeued"
    MODEL_STEP = "model_step"  # a specialist's recorded model step
    TOOL_CALL = "tool_call"  # a specialist's recorded tool call
    JOURNAL_POSTED = "journal_posted"
    PERIOD_CLOSED = "period_closed"
    # specialist calls
    DISPATCHED = "dispatched"
    DISPATCH_REUSED = "dispatch_reused"
    DISPATCH_FAILED = "dispatch_failed"
    DISPATCH_DEAD_LETTERED = "dispatch_dead_lettered"
    DISPATCH_REPLAYED = "dispatch_replayed"
    SPECIALIST_RESULT = "specialist_result"
    # gates
    GATE_OPENED = "gate_opened"
    GATE_DECIDED = "gate_decided"  # written by the database (migration 0015)
    DECISION_REFUSED = "decision_refused"
    DECISION_PROOF_INVALID = "decision_proof_invalid"
    GATE_OVERDUE = "gate_overdue"
    GATE_EXPIRED = "gate_expired"
    GATE_PASSED = "gate_passed"
    GATE_REJECTED_APPLIED = "gate_rejected_applied"
    GATE_REROUTED = "gate_rerouted"  # written by the database as it routes an overdue gate (delegation migration)
    SIGN_OFF_VOIDED = "sign_off_voided"  # a change after approval voided the gate; the task runs again (ADR 0046)
    # construction certificates
    CLAUSES_CITED = "clauses_cited"
    CERTIFICATE_CERTIFIED = "certificate_certified"
    PAYMENT_NOTICE_SERVED = "payment_notice_served"  # s. 110A (migration 0025)
    PAY_LESS_NOTICE_SERVED = "pay_less_notice_served"
    PAYEE_DEFAULT_NOTICE_RECORDED = "payee_default_notice_recorded"  # s. 110B
    # people, access and the log
    COMMAND_REFUSED = "command_refused"
    TRACE_EXPORTED = "trace_exported"
    PASSKEY_ENROLMENT_ISSUED = "passkey_enrolment_issued"
    PASSKEY_ENROLLED = "passkey_enrolled"  # written by the database (migration 0017)
    PASSKEY_REVOKED = "passkey_revoked"  # written by the database (migration 0017)
    DELEGATION_SET = "delegation_set"  # written by the database (the delegation migration)
    DELEGATION_REVOKED = "delegation_revoked"  # written by the database (the delegation migration)
    CHECKPOINT_SIGNED = "checkpoint_signed"
