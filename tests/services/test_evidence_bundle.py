"""An evidence bundle of a real close, decided by Ed25519 signed callbacks and by a passkey on the board: every
person's-key decision proof verifies offline from the bundle alone, and a bundle whose decisions.json gives another
key or another gate summary fails naming the decision and its principal."""

from __future__ import annotations

import hashlib
import io
import json
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from countersign.audit.bundle import FILES, BundleInvalid, _archive, verify_bundle
from countersign.audit.checkpoint import generate_signer
from countersign.audit.decision_proofs import ed25519_key_text
from countersign.audit.person_proof import decision_challenge, decision_message, digest_of_gate, public_key_raw
from countersign.bootstrap.runtime import Runtime, connection
from countersign.callbacks.decision_writer import DecisionRequest, record_decision
from countersign.callbacks.passkeys import issue_enrolment
from countersign.engine.books import load_bank_feed
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.scenarios.software_authenticator import SoftwareAuthenticator, b64url
from countersign.services.exports import export_bundle
from countersign.store.gates import read_gate_facts
from tests.cli.test_cli import cli
from tests.engine.workflow_support import approve_open_gates
from tests.support import APPROVERS, count, start_default_close

ORIGIN = "countersign.test/close-trace"
BOARD = "http://localhost:8000"


async def enrol_passkey(runtime: Runtime, conn: Any, principal: str) -> SoftwareAuthenticator:
    """The owner issues a one-time enrolment; the person's device registers a credential, redeemed through the
    database's own function as the callbacks role (what the board does after checking the attestation)."""
    async with conn.transaction():
        token = (await issue_enrolment(conn, principal, issued_by="test-owner")).encode()
    device = SoftwareAuthenticator("localhost", BOARD)
    async with connection(runtime, "callbacks") as callbacks:
        found = await callbacks.execute("SELECT user_handle FROM passkey_enrolment_for(%s)", (token,))
        row = await found.fetchone()
        assert row is not None
        options = {
            "rp": {"id": "localhost"},
            "user": {"id": b64url(bytes(row[0]))},
            "challenge": b64url(uuid.uuid4().bytes),
            "pubKeyCredParams": [{"type": "public-key", "alg": -7}],
        }
        device.register(options)
        credential = next(iter(device.credentials.values()))
        await callbacks.execute(
            "SELECT redeem_passkey_enrolment(%s, %s, %s, %s)",
            (token, b64url(credential.credential_id), credential.cose_public_key(), "laptop"),
        )
    return device


async def decide_on_board(
    runtime: Runtime, conn: Any, device: SoftwareAuthenticator, gate_id: str, principal: str
) -> None:
    """A board decision: the passkey's assertion over SHA-256 of the canonical decision message, recorded by the
    decision writer as the callbacks role."""
    facts = await read_gate_facts(conn, gate_id)
    assert facts is not None
    signed_at, nonce, reason = int(time.time()), uuid.uuid4().hex, "matched to the corrected feed"
    message = decision_message(
        gate_id=gate_id,
        principal=principal,
        decision="approve",
        reason=reason,
        nonce=nonce,
        signed_at=signed_at,
        summary_digest=digest_of_gate(facts.digest_fields(), facts.summary_json),
    )
    assertion = device.assertion_for_challenge(decision_challenge(message))
    proof = {
        "kind": "passkey",
        "credential_id": assertion["id"],
        "authenticator_data": assertion["response"]["authenticatorData"],
        "client_data_json": assertion["response"]["clientDataJSON"],
        "signature": assertion["response"]["signature"],
        "user_handle": assertion["response"]["userHandle"],
        "signed_at": signed_at,
        "rp_id": "localhost",
        "origin": BOARD,
    }
    async with connection(runtime, "callbacks") as callbacks:
        await record_decision(callbacks, DecisionRequest(gate_id, principal, "approve", reason, nonce, "board", proof))


async def _decided_close(conn: Any, runtime: Runtime, engine_ctx: Any, api: Any, books: Path) -> str:
    """The default close to the end: the bank escalation approved with a passkey on the board, every other gate by
    Ed25519 signed callbacks."""
    close_id = await start_default_close(conn, runtime, books)
    assert (await advance(conn, close_id, engine_ctx)).status == "halted"
    escalation = next(g for g in (await close_status(conn, close_id))["gates"] if g["kind"] == "escalation")
    excluded = {escalation["prepared_by"], *escalation["requested_by"]}
    approver = next(p for p in APPROVERS[escalation["approver_role"]] if p not in excluded)
    device = await enrol_passkey(runtime, conn, approver)
    await decide_on_board(runtime, conn, device, escalation["gate_id"], approver)
    found = await conn.execute("SELECT book_set_id FROM close_run WHERE close_id = %s", (close_id,))
    book_set = (await found.fetchone())[0]
    await load_bank_feed(
        conn, book_set, books / "corrected" / "bank_lines.csv", loaded_by="alice.chen", close_id=close_id
    )
    for _ in range(10):
        if (await close_status(conn, close_id))["status"] == "closed":
            break
        await approve_open_gates(api, conn, close_id)
        await advance(conn, close_id, engine_ctx)
    assert (await close_status(conn, close_id))["status"] == "closed"
    return close_id


def _files(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in FILES}


def _rebuilt(files: dict[str, bytes], decisions: dict[str, Any]) -> bytes:
    """The bundle with this decisions.json and a manifest re-hashed to match, so only the proofs can catch it."""
    files = {**files, "decisions.json": (json.dumps(decisions, indent=2, sort_keys=True) + "\n").encode()}
    manifest = json.loads(files["manifest.json"])
    manifest["sha256"]["decisions.json"] = hashlib.sha256(files["decisions.json"]).hexdigest()
    files["manifest.json"] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    return _archive(files)


async def test_a_real_close_bundle_checks_every_passkey_and_ed25519_decision_offline(
    conn: Any, runtime: Runtime, engine_ctx: Any, api: Any, default_books: Path, tmp_path: Path
) -> None:
    close_id = await _decided_close(conn, runtime, engine_ctx, api, default_books)
    exported = await export_bundle(
        lambda role: connection(runtime, role),
        close_id=close_id,
        signer=generate_signer(ORIGIN),
        origin=ORIGIN,
        requested_by="countersign-cli",
        platform="cli",
    )
    signed = await count(
        conn,
        "SELECT count(*) FROM gate_decision d JOIN gate g USING (gate_id)"
        " WHERE g.close_id = %s AND d.channel = 'signed_callback'",
        close_id,
    )
    assert signed >= 5
    report = verify_bundle(exported.data)
    assert (report.ed25519_decisions, report.passkey_decisions, report.platform_identity_decisions) == (signed, 1, 0)
    assert report.unchecked_decisions == 0 and report.notes == ()

    files = _files(exported.data)
    decisions = json.loads(files["decisions.json"])
    gates = await count(conn, "SELECT count(*) FROM gate WHERE close_id = %s", close_id)
    assert len(decisions["gates"]) == gates
    assert verify_bundle(_rebuilt(files, decisions)).decision_proofs == signed + 1  # the negative control

    # Another key in decisions.json for one Ed25519 decision, and for the passkey decision.
    gate, entry = next((g, d) for g in decisions["gates"] for d in g["decisions"] if d["key"]["kind"] == "ed25519")
    entry["key"]["public_key"] = ed25519_key_text(public_key_raw(Ed25519PrivateKey.generate()))
    with pytest.raises(BundleInvalid) as invalid:
        verify_bundle(_rebuilt(files, decisions))
    assert invalid.value.reason.startswith(f"decision {entry['decision_id']} by {entry['principal']} on gate ")
    assert "Ed25519 signature does not verify" in invalid.value.reason

    decisions = json.loads(files["decisions.json"])
    board = next(d for g in decisions["gates"] for d in g["decisions"] if d["key"]["kind"] == "passkey")
    other = SoftwareAuthenticator("localhost", BOARD)
    other.register(
        {"rp": {"id": "localhost"}, "user": {"id": b64url(b"\x01" * 16)}, "challenge": b64url(b"\x02" * 32)}
        | {"pubKeyCredParams": [{"type": "public-key", "alg": -7}]}
    )
    board["key"]["public_key"] = b64url(next(iter(other.credentials.values())).cose_public_key())
    with pytest.raises(BundleInvalid) as invalid:
        verify_bundle(_rebuilt(files, decisions))
    assert invalid.value.reason.startswith(f"decision {board['decision_id']} by {board['principal']} on gate ")
    assert "the passkey assertion does not verify" in invalid.value.reason

    # Another gate summary in decisions.json: not the one signed.
    decisions = json.loads(files["decisions.json"])
    gate = next(g for g in decisions["gates"] if any(d["key"]["kind"] == "passkey" for d in g["decisions"]))
    summary = json.loads(gate["facts"]["summary_json"])
    gate["facts"]["summary_json"] = json.dumps({**summary, "note": "nothing to see"})
    with pytest.raises(BundleInvalid) as invalid:
        verify_bundle(_rebuilt(files, decisions))
    first = gate["decisions"][0]
    assert invalid.value.reason.startswith(f"decision {first['decision_id']} by {first['principal']} on gate ")
    assert "the gate summary in decisions.json is not the one signed (SHA-256 " in invalid.value.reason

    # The auditor's command prints what it checked, with no database at all.
    path = tmp_path / "evidence.zip"
    path.write_bytes(exported.data)

    class NoDatabase:
        url = "postgresql://nobody@127.0.0.1:1/none"

    verified = cli(NoDatabase(), tmp_path, "trace", "verify", "--bundle", str(path))
    assert verified.returncode == 0, verified.stderr
    assert f"decision proofs checked: {signed + 1} ({signed} Ed25519, 1 passkey); 0 platform identity" in (
        verified.stdout
    )
