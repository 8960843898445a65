"""Deciding a gate from any door: the one use case Slack, Teams, the signed callback (and later a web board) call.

A door parses its request into a `PlatformIdentity` and the decision, calls `decide_gate`, renders the outcome and
asks for delivery of the returned outbox messages. Here: the platform's verdict that the account is a machine is
refused and traced; a chat identity is resolved to its principal; the decision is recorded (every other refusal is
traced there) and the card updates are enqueued in the decision's own transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection

from countersign.callbacks.decision_writer import (
    DECISIONS,
    DecisionConflict,
    DecisionRefused,
    DecisionRequest,
    GateNotFound,
    GateOutcome,
    OnRecorded,
    Seal,
    record_and_announce,
    refuse,
)
from countersign.callbacks.person_signature import (
    MAX_SIGNED_AT,
    NO_PERSON_KEY,
    PERSON_SIGNATURE_REJECTED,
    ed25519_proof,
)
from countersign.callbacks.person_signature import WINDOW_S as PERSON_WINDOW_S
from countersign.callbacks.principals import resolve_identity
from countersign.callbacks.signature import SignatureRejected
from countersign.callbacks.signature import verify as verify_transport_signature
from countersign.certificates.amendment import Amendment, AmendmentInvalid, parse_amendment
from countersign.states import CHAT_CHANNELS, Channel, RefusalCode

# What a door needs besides `decide_gate` (for the signed callback: the transport HMAC check and the person's Ed25519
# proof), so no door reaches into the modules that run the SQL.
__all__ = [
    "CHAT_CHANNELS",
    "DECISIONS",
    "MAX_SIGNED_AT",
    "NO_PERSON_KEY",
    "PERSON_SIGNATURE_REJECTED",
    "PERSON_WINDOW_S",
    "Amendment",
    "AmendmentInvalid",
    "Channel",
    "Connect",
    "Decided",
    "DecisionConflict",
    "DecisionRefused",
    "GateNotFound",
    "GateOutcome",
    "OnRecorded",
    "PlatformIdentity",
    "Seal",
    "SignatureRejected",
    "decide_gate",
    "ed25519_proof",
    "parse_amendment",
    "verify_transport_signature",
]

Connect = Callable[[], AbstractAsyncContextManager[AsyncConnection[Any]]]
# Chat identities resolve through principal_identity (team/tenant, external id); the others name the principal.


@dataclass(frozen=True)
class PlatformIdentity:
    """Who clicked or called, as the door knows them.

    `external_id` is the Slack user id, the Teams AAD object id, or for the signed callback and the web board the
    principal id the person signs as. `machine` is the platform's own verdict, when it has one, that the account is a
    bot, an app or deactivated (the reason, in words); None when the platform says nothing of the kind. `proof` holds
    the door's person-level proof fields (the Ed25519 signature and `signed_at` for the signed callback).
    """

    channel: Channel
    external_id: str
    tenant: str = ""
    machine: str | None = None
    proof: Mapping[str, Any] = field(default_factory=dict)

    @property
    def claimed_principal(self) -> str:
        """The principal named before resolution: the chat identity itself, or the id the caller signs as."""
        if self.channel in CHAT_CHANNELS:
            return f"{self.channel}:{self.tenant}:{self.external_id}"
        return self.external_id

    def request_proof(self) -> dict[str, Any]:
        if self.channel in CHAT_CHANNELS:
            return {"kind": self.channel, "tenant": self.tenant, "external_id": self.external_id}
        return dict(self.proof)


@dataclass(frozen=True)
class Decided:
    """The gate after the decision, and the outbox messages committed with it (the door asks for their delivery)."""

    outcome: GateOutcome
    message_ids: tuple[int, ...] = ()


async def decide_gate(
    conn: AsyncConnection[Any],
    identity: PlatformIdentity,
    *,
    gate_id: str,
    decision: str,
    reason: str,
    nonce: str,
    on_recorded: OnRecorded | None = None,
    seal: Seal | None = None,
    amendment: Amendment | None = None,
) -> Decided:
    """Decide `gate_id` as `identity`, or raise `DecisionRefused` / `DecisionConflict` / `GateNotFound`.

    `conn` is the decision writer's (callbacks role) connection in autocommit mode. `on_recorded` runs in the
    decision's transaction when a new decision is written (`countersign.callbacks.decision_writer.OnRecorded`). A
    replayed request
    returns the original outcome and enqueues nothing. Every refusal is in the trace before this raises. `amendment`
    makes an approval certify another sum (a quantity surveyor's, signed with their own key: the chat doors pass none).
    """
    request = DecisionRequest(
        gate_id=gate_id,
        principal=identity.claimed_principal,
        decision=decision,
        reason=reason,
        nonce=nonce,
        channel=identity.channel,
        proof=identity.request_proof(),
        amendment=amendment,
    )
    if identity.machine is not None:
        raise await refuse(conn, request, RefusalCode.MACHINE_PRINCIPAL, identity.machine, seal=seal)
    if identity.channel in CHAT_CHANNELS:
        principal = await resolve_identity(conn, identity.channel, identity.external_id, identity.tenant)
        if principal is not None:  # unresolved: recorded as refused (unknown principal) under the chat identity
            request = dataclasses.replace(request, principal=principal.principal_id)
    recorded = await record_and_announce(conn, request, seal=seal, on_recorded=on_recorded)
    return Decided(recorded.outcome, recorded.message_ids)
