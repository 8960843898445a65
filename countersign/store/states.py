"""The states the tables store, as StrEnums whose values are the stored strings. Pure: no I/O.

A StrEnum member equals its string, so rows read as plain text compare equal to these, and the database's CHECKs
and views (migrations 0002, 0003, 0009) keep using the same words.
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


class Channel(StrEnum):
    """The door a decision came through (`gate_decision.channel`; migration 0017 maps each to the proof it carries)."""

    SLACK = "slack"
    TEAMS = "teams"
    SIGNED_CALLBACK = "signed_callback"
    BOARD = "board"  # the Close Board: a passkey assertion


CHAT_CHANNELS = frozenset({Channel.SLACK, Channel.TEAMS})


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
