"""The decisions of an evidence bundle: `decisions.json`, and the offline check of every person's-key decision.

`decisions.json` holds, for every gate of the close, the columns a person's signature covers (as the database froze
them) and, for each decision made with the person's own key, which names the person may have signed under and the
public key that verifies it. The proof itself comes from the hash-chained `gate_decided` event, never from this file:
the check rebuilds the canonical decision message from the event and the gate's facts, holds the facts to the
`summary_digest` the `gate_opened` event recorded, and verifies the proof against the key
(countersign.audit.person_proof).
Pure: no I/O, so an auditor runs it with nothing but the bundle.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from countersign.audit.person_proof import (
    decision_message,
    digest_of_gate,
    parse_public_key,
    passkey_proof_problem,
    verify_signature,
)
from countersign.states import TraceKind

FILE = "decisions.json"
ED25519 = "ed25519"
PASSKEY = "passkey"
# The channel a decision came through, and the proof of the person's own key it carries there.
KEY_CHANNELS = {"signed_callback": ED25519, "board": PASSKEY}
PLATFORM_CHANNELS = ("slack", "teams")
FACT_FIELDS = (
    "gate_id",
    "close_id",
    "task",
    "attempt",
    "kind",
    "tier",
    "quorum",
    "approver_role",
    "rule",
    "subject",
    "amount",
    "summary_json",
)
_INT_FIELDS = ("attempt", "quorum")
MAX_SIGNED_UNDER = 64  # a principal's id and its login aliases; a longer list is not one a database wrote


class DecisionProofInvalid(Exception):
    """A person's-key decision in the bundle whose proof does not hold, or a decisions.json that cannot be read."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class DecisionKey:
    """The key that verifies one decision: Ed25519 (`public_key` standard base64 of the raw 32 bytes) or a passkey
    (`public_key` base64url of its COSE key, with its `credential_id`)."""

    decision_id: int
    principal: str
    signed_under: tuple[str, ...]  # the principal id and its login aliases: the names the person may have signed
    kind: str  # ED25519 or PASSKEY
    public_key: str
    credential_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        key: dict[str, Any] = {"kind": self.kind, "public_key": self.public_key}
        if self.kind == PASSKEY:
            key["credential_id"] = self.credential_id
        return {
            "decision_id": self.decision_id,
            "principal": self.principal,
            "signed_under": list(self.signed_under),
            "key": key,
        }


@dataclass(frozen=True)
class GateEvidence:
    """One gate: its signed facts (FACT_FIELDS; `amount` as decimal text or None, `summary_json` the stored JSON text)
    and the keys of the decisions on it made with a person's own key."""

    facts: Mapping[str, Any]
    decisions: tuple[DecisionKey, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "facts": {name: self.facts[name] for name in FACT_FIELDS},
            "decisions": [d.as_json() for d in self.decisions],
        }


@dataclass
class DecisionCounts:
    """What the check found, by proof: each counted decision was verified, or (platform) could not be."""

    ed25519: int = 0
    passkey: int = 0
    platform_identity: int = 0
    unchecked: int = 0  # person's-key decisions in a bundle without decisions.json (version 1)
    untraced: int = 0  # recorded before the database traced each decision's proof (migration 0017)
    notes: list[str] = field(default_factory=list)


def ed25519_key_text(raw: bytes) -> str:
    return base64.b64encode(bytes(raw)).decode("ascii")


def passkey_key_text(cose: bytes) -> str:
    return base64.urlsafe_b64encode(bytes(cose)).rstrip(b"=").decode("ascii")


def decisions_file(gates: Sequence[GateEvidence]) -> bytes:
    """The bytes of decisions.json: every gate in the order given, sorted keys, one trailing newline."""
    document = {"gates": [g.as_json() for g in gates]}
    return (json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def _from_b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def read_decisions_file(data: bytes, *, close_id: str | None) -> dict[str, GateEvidence]:
    """decisions.json's gates by gate id; DecisionProofInvalid naming what is malformed."""
    try:
        document = json.loads(data.decode("utf-8"))
        gates = document["gates"]
        if not isinstance(gates, list):
            raise TypeError("gates is not a list")
        out: dict[str, GateEvidence] = {}
        for index, gate in enumerate(gates):
            facts = gate["facts"]
            if not isinstance(facts, dict) or set(facts) != set(FACT_FIELDS):
                raise ValueError(f"gate {index}: facts must have exactly {', '.join(FACT_FIELDS)}")
            for name in FACT_FIELDS:
                value = facts[name]
                if name in _INT_FIELDS:
                    if isinstance(value, bool) or not isinstance(value, int):
                        raise ValueError(f"gate {index}: {name} is not an integer")
                elif name == "amount":
                    if value is not None and not isinstance(value, str):
                        raise ValueError(f"gate {index}: amount is not decimal text")
                elif not isinstance(value, str):
                    raise ValueError(f"gate {index}: {name} is not text")
            gate_id = facts["gate_id"]
            if close_id is not None and facts["close_id"] != close_id:
                raise ValueError(f"gate {gate_id} belongs to another close")
            if gate_id in out:
                raise ValueError(f"gate {gate_id} is listed twice")
            out[gate_id] = GateEvidence(facts, tuple(_decision_key(d) for d in gate["decisions"]))
        return out
    except DecisionProofInvalid:
        raise
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DecisionProofInvalid(f"{FILE} is malformed: {exc}") from None


def _decision_key(entry: Any) -> DecisionKey:
    key = entry["key"]
    signed_under = entry["signed_under"]
    if not isinstance(signed_under, list) or len(signed_under) > MAX_SIGNED_UNDER:
        raise ValueError(f"decision {entry.get('decision_id')}: signed_under is not a short list of names")
    decision_id, principal = entry["decision_id"], entry["principal"]
    if isinstance(decision_id, bool) or not isinstance(decision_id, int) or not isinstance(principal, str):
        raise ValueError("a decision needs an integer decision_id and a principal")
    if key["kind"] not in (ED25519, PASSKEY) or not isinstance(key["public_key"], str):
        raise ValueError(f"decision {decision_id}: key kind must be {ED25519} or {PASSKEY}, with a public_key")
    credential_id = key.get("credential_id") if key["kind"] == PASSKEY else None
    if key["kind"] == PASSKEY and not isinstance(credential_id, str):
        raise ValueError(f"decision {decision_id}: a passkey key names its credential_id")
    return DecisionKey(
        decision_id, principal, tuple(str(n) for n in signed_under), key["kind"], key["public_key"], credential_id
    )


def gate_digest(facts: Mapping[str, Any]) -> str:
    """The SHA-256 a person signed for this gate (countersign.audit.person_proof.gate_summary_digest of its facts)."""
    fields = {name: facts[name] for name in FACT_FIELDS if name != "summary_json"}
    return digest_of_gate(fields, facts["summary_json"])


def check_decisions(events: Sequence[Mapping[str, Any]], gates: Mapping[str, GateEvidence] | None) -> DecisionCounts:
    """Check every decision in the close's events (each `event` object of events.jsonl, already verified against the
    chain); raise DecisionProofInvalid naming the first decision whose proof does not hold. `gates` None: a bundle
    with no decisions.json, whose person's-key decisions are noted as not checked."""
    counts = DecisionCounts()
    opened: dict[str, Any] = {}
    for event in events:
        payload = event.get("payload")
        if event.get("kind") == TraceKind.GATE_OPENED and isinstance(payload, dict) and "summary_digest" in payload:
            opened[str(payload.get("gate_id"))] = payload["summary_digest"]
    for event in events:
        payload = event.get("payload")
        if event.get("kind") != TraceKind.GATE_DECIDED or not isinstance(payload, dict):
            continue
        channel = payload.get("channel")
        if channel in PLATFORM_CHANNELS:
            counts.platform_identity += 1
        elif channel in KEY_CHANNELS:
            if gates is None:
                counts.unchecked += 1
            elif "proof" not in payload or "nonce" not in payload:
                counts.untraced += 1
            else:
                kind = _check_one(event, payload, gates, opened)
                counts.ed25519 += kind == ED25519
                counts.passkey += kind == PASSKEY
        else:
            raise DecisionProofInvalid(f"{_who(event, payload)}: unknown decision channel {channel!r}")
    if gates is None:
        counts.notes.append(
            "no decision proofs in a version 1 bundle"
            f" (not checked: {counts.unchecked} decisions made with a person's own key)"
        )
    if counts.untraced:
        counts.notes.append(f"not checked: {counts.untraced} decisions recorded before the trace carried their proofs")
    return counts


def _who(event: Mapping[str, Any], payload: Mapping[str, Any]) -> str:
    gate_id = str(payload.get("gate_id"))
    return f"decision {payload.get('decision_id')} by {event.get('actor')} on gate {gate_id[:8]}…"


def _check_one(
    event: Mapping[str, Any], payload: Mapping[str, Any], gates: Mapping[str, GateEvidence], opened: Mapping[str, Any]
) -> str:
    """Verify one person's-key decision; return its proof kind."""
    who = _who(event, payload)
    gate_id, principal = payload.get("gate_id"), event.get("actor")
    gate = gates.get(str(gate_id))
    if gate is None:
        raise DecisionProofInvalid(f"{who}: {FILE} holds no facts of its gate")
    digest = gate_digest(gate.facts)
    signed_digest = opened.get(str(gate_id))
    if signed_digest is not None and signed_digest != digest:
        raise DecisionProofInvalid(
            f"{who}: the gate summary in {FILE} is not the one signed (SHA-256 {digest} in {FILE},"
            f" {signed_digest} when the gate opened)"
        )
    key = next((d for d in gate.decisions if d.decision_id == payload.get("decision_id")), None)
    if key is None:
        raise DecisionProofInvalid(f"{who}: {FILE} holds no key for it")
    if key.principal != principal:
        raise DecisionProofInvalid(f"{who}: {FILE} gives the key of {key.principal}, not of {principal}")
    expected = KEY_CHANNELS[str(payload.get("channel"))]
    proof = payload.get("proof")
    if not isinstance(proof, dict) or proof.get("kind") != expected or key.kind != expected:
        raise DecisionProofInvalid(f"{who}: a {payload.get('channel')} decision needs a {expected} proof and key")
    signed_at = proof.get("signed_at")
    fields = (payload.get("decision"), payload.get("reason"), payload.get("nonce"), gate_id, principal)
    if isinstance(signed_at, bool) or not isinstance(signed_at, int) or not all(isinstance(f, str) for f in fields):
        raise DecisionProofInvalid(f"{who}: the event does not hold the decision message's fields")

    def message(name: str) -> bytes:
        return decision_message(
            gate_id=str(gate_id),
            principal=name,
            decision=str(payload["decision"]),
            reason=str(payload["reason"]),
            nonce=str(payload["nonce"]),
            signed_at=signed_at,
            summary_digest=digest,
            amendment_digest=amended if isinstance(amended := proof.get("amendment_digest"), str) else None,
        )

    if expected == ED25519:
        try:
            raw = parse_public_key(key.public_key)
        except ValueError as exc:
            raise DecisionProofInvalid(f"{who}: the key in {FILE} is unusable: {exc}") from None
        names = dict.fromkeys((str(principal), *key.signed_under))  # the person may have signed under a login alias
        signature = proof.get("signature")
        if not isinstance(signature, str) or not any(verify_signature(raw, message(n), signature) for n in names):
            raise DecisionProofInvalid(f"{who}: the Ed25519 signature does not verify against the key in {FILE}")
        return ED25519
    if proof.get("credential_id") != key.credential_id:
        raise DecisionProofInvalid(f"{who}: the assertion names another passkey than the one in {FILE}")
    rp_id, origin = proof.get("rp_id"), proof.get("origin")
    if not isinstance(rp_id, str) or not isinstance(origin, str):
        raise DecisionProofInvalid(f"{who}: the passkey proof does not say which board it was made for")
    try:
        cose = _from_b64url(key.public_key)
    except (binascii.Error, ValueError):
        raise DecisionProofInvalid(f"{who}: the passkey key in {FILE} is not base64url") from None
    # A board decision is signed under the principal id
    # (countersign.callbacks.person_signature.check_passkey_assertion).
    problem = passkey_proof_problem(
        proof=proof, credential_public_key=cose, message=message(str(principal)), rp_id=rp_id, origin=origin
    )
    if problem is not None:
        raise DecisionProofInvalid(f"{who}: {problem}")
    return PASSKEY
