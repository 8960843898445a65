"""Evidence bundles: one close's events with inclusion proofs against a signed checkpoint, verifiable offline.

A bundle is a zip an auditor can read with any tool: README.md, manifest.json, checkpoint.txt (a C2SP signed note),
verifier.key, events.jsonl (one event per line with its chain hashes, leaf index and inclusion proof) and, since
version 2, decisions.json (each gate's signed facts and the keys of the decisions made with a person's own key:
countersign.audit.decision_proofs). `verify_bundle` needs no database and no Countersign installation beyond this
module's
dependencies; it still reads version 1 bundles, noting that they hold no decision proofs.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from countersign.audit.canonical import canonical_bytes
from countersign.audit.checkpoint import (
    CheckpointError,
    NoteError,
    NoteKeyError,
    NoteVerifier,
    open_checkpoint,
    parse_verifier_key,
)
from countersign.audit.decision_proofs import FILE as DECISIONS_FILE
from countersign.audit.decision_proofs import (
    DecisionCounts,
    DecisionProofInvalid,
    GateEvidence,
    check_decisions,
    decisions_file,
    read_decisions_file,
)
from countersign.audit.merkle import MerkleTree, ProofError, leaf_hash, verify_inclusion
from countersign.audit.trace import TraceEvent, chain_hash

FORMAT = "countersign-evidence-bundle/2"
FORMAT_V1 = "countersign-evidence-bundle/1"
FILES = ("README.md", "manifest.json", "checkpoint.txt", "verifier.key", "events.jsonl", DECISIONS_FILE)
FILES_V1 = FILES[:-1]
LAYOUTS = {FORMAT: FILES, FORMAT_V1: FILES_V1}  # each format's entries, in their order in the archive
FIXED_TIME = (1980, 1, 1, 0, 0, 0)

README = """# Countersign evidence bundle

This archive proves that the events in `events.jsonl` are part of the Countersign close trace whose state is
signed in `checkpoint.txt`.

- `checkpoint.txt` is a C2SP signed note (https://c2sp.org/signed-note) whose text is a C2SP tlog checkpoint
  (https://c2sp.org/tlog-checkpoint): origin, tree size, and the base64 RFC 9162 Merkle root of the whole trace.
  It is signed with Ed25519 by the key in `verifier.key` (Go sumdb/note verifier key format). Compare that key with
  the one posted in the close's chat channel with each checkpoint, or pass it with `--key`, before trusting it.
- Each line of `events.jsonl` holds one event (`event`: seq, ts, close_id, actor, kind, payload, version_set), its
  chain hashes (`prev_hash`, `hash`: hash = SHA-256(prev_hash || canonical(event))), its Merkle `leaf_index`
  (seq - 1) and an RFC 9162 `inclusion_proof` (hex) against the checkpoint's root.
- canonical(event) is RFC 8785 JSON of the `event` object. Leaf hash = SHA-256(0x00 || canonical(event)).
- `decisions.json` lets you check every decision made with a person's own key. `gates` lists every gate of the
  close: `facts` are the gate's columns as the database froze them when it opened (`summary_json` is its summary as
  stored JSON text, `amount` decimal text), and `decisions` the decisions on it made with a person's own key, each
  with its `decision_id`, its `principal`, the names the person may have signed under (`signed_under`: the
  principal id and its login aliases) and the `key` that verifies it: `{"kind": "ed25519", "public_key": standard
  base64 of the raw 32-byte key}` or `{"kind": "passkey", "credential_id", "public_key": base64url of its COSE key}`.
  The proof itself is in the decision's `gate_decided` event (its payload's `proof` and `nonce`), covered by the
  chain. The person signed the canonical decision message (compact JSON, keys sorted, UTF-8, of purpose
  `countersign.decision.v2`, gate_id, principal, decision, reason, nonce, signed_at and summary_digest), where
  summary_digest is the SHA-256 of the gate's canonical facts and equals the `summary_digest` of its `gate_opened`
  event; a passkey assertion's WebAuthn challenge is the SHA-256 of that message. The keys are what the database
  held when the bundle was made: compare them with the keys you know each person registered. Decisions made with a
  Slack or Teams identity carry that platform's word for who clicked, which cannot be checked offline.
- `manifest.json` lists the SHA-256 of every other file.

Verify offline: `countersign trace verify --bundle FILE [--key VERIFIER_KEY]`.
"""


class BundleInvalid(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class BundleReport:
    close_id: str | None
    events: int
    tree_size: int
    root: bytes
    origin: str
    key_name: str
    format: str = FORMAT
    ed25519_decisions: int = 0  # decisions whose Ed25519 signature was verified offline
    passkey_decisions: int = 0  # decisions whose passkey assertion was verified offline
    platform_identity_decisions: int = 0  # Slack and Teams decisions: the platform's identity, not checkable offline
    unchecked_decisions: int = 0  # person's-key decisions the bundle holds no proof of (version 1, or before 0017)
    notes: tuple[str, ...] = ()

    @property
    def decision_proofs(self) -> int:
        """How many decisions were checked against the person's own key."""
        return self.ed25519_decisions + self.passkey_decisions


def _zip_entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
    info.compress_type = zipfile.ZIP_STORED  # stored, so the archive's bytes are the same on every platform
    info.external_attr = 0o644 << 16
    return info


def build_bundle(
    *,
    close_id: str | None,
    events: Sequence[TraceEvent],
    tree: MerkleTree,
    checkpoint_note: bytes,
    verifier_key: str,
    gates: Sequence[GateEvidence] = (),
) -> bytes:
    """The bundle of `events` (one close's, in seq order) proven against the checkpoint, with `gates` (every gate
    of the close and the keys of its person's-key decisions) as decisions.json."""
    lines = []
    for event in events:
        record = {
            "event": event.body(),
            "prev_hash": event.prev_hash.hex(),
            "hash": event.hash.hex(),
            "leaf_index": event.seq - 1,
            "inclusion_proof": [h.hex() for h in tree.inclusion_proof(event.seq - 1)],
        }
        lines.append(json.dumps(record, sort_keys=True, ensure_ascii=False))
    contents = {
        "README.md": README.encode(),
        "checkpoint.txt": checkpoint_note,
        "verifier.key": (verifier_key + "\n").encode(),
        "events.jsonl": ("\n".join(lines) + "\n").encode() if lines else b"",
        DECISIONS_FILE: decisions_file(gates),
    }
    manifest = {
        "format": FORMAT,
        "close_id": close_id,
        "events": len(events),
        "tree_size": tree.size,
        "sha256": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(contents.items())},
    }
    contents["manifest.json"] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    return _archive(contents)


def _archive(contents: dict[str, bytes], names: Sequence[str] = FILES) -> bytes:
    """The one byte layout a bundle may have: fixed entries, order, times and attributes, stored uncompressed."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            archive.writestr(_zip_entry(name), contents[name])
    return buffer.getvalue()


def _read(data: bytes) -> dict[str, bytes]:
    """The bundle's entries: every entry of FILES, or of FILES_V1 for a version 1 bundle (no decisions.json)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            damaged = archive.testzip()
            if damaged is not None:
                raise BundleInvalid(f"{damaged} is damaged (CRC mismatch)")
            names = set(archive.namelist())
            missing = [name for name in FILES_V1 if name not in names]
            if missing:
                raise BundleInvalid(f"missing {', '.join(missing)}")
            return {name: archive.read(name) for name in FILES if name in names}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, zlib.error, NotImplementedError) as exc:
        if isinstance(exc, BundleInvalid):
            raise
        raise BundleInvalid(f"not a readable zip archive: {exc}") from None


def verify_bundle(data: bytes, *, pinned_key: str | None = None) -> BundleReport:
    """Check everything a bundle claims; raise BundleInvalid naming the first thing that is wrong."""
    files = _read(data)
    layout = FILES if DECISIONS_FILE in files else FILES_V1
    if _archive(files, layout) != data:
        raise BundleInvalid("the archive's own bytes were changed (entries, times or attributes differ from a bundle)")
    try:
        manifest = json.loads(files["manifest.json"])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BundleInvalid("manifest.json is not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") not in LAYOUTS:
        raise BundleInvalid(f"manifest.json: format is not {FORMAT} (nor {FORMAT_V1})")
    fmt = str(manifest["format"])
    if LAYOUTS[fmt] != layout:
        raise BundleInvalid(
            f"missing {DECISIONS_FILE}" if fmt == FORMAT else f"a version 1 bundle holds no {DECISIONS_FILE}"
        )
    for name, expected in (manifest.get("sha256") or {}).items():
        if name not in files or hashlib.sha256(files[name]).hexdigest() != expected:
            raise BundleInvalid(f"{name} does not match its SHA-256 in manifest.json")
    if set(manifest.get("sha256") or {}) != set(layout) - {"manifest.json"}:
        raise BundleInvalid("manifest.json does not list every file")
    key_text = files["verifier.key"].decode("utf-8", errors="replace").strip()
    if pinned_key is not None and pinned_key.strip() != key_text:
        raise BundleInvalid("verifier.key is not the key you pinned")
    try:
        verifier: NoteVerifier = parse_verifier_key(key_text)
        checkpoint = open_checkpoint(files["checkpoint.txt"], verifier)
    except (NoteError, NoteKeyError, CheckpointError) as exc:
        raise BundleInvalid(f"checkpoint.txt: {exc}") from None
    events = [
        _check_event(line_no, line, checkpoint.size, checkpoint.root, manifest.get("close_id"))
        for line_no, line in enumerate(files["events.jsonl"].decode("utf-8", errors="strict").splitlines(), start=1)
    ]
    if len(events) != manifest.get("events"):
        raise BundleInvalid(f"events.jsonl has {len(events)} events, manifest.json says {manifest.get('events')}")
    counts = _check_decisions(files, events, manifest.get("close_id"))
    return BundleReport(
        manifest.get("close_id"),
        len(events),
        checkpoint.size,
        checkpoint.root,
        checkpoint.origin,
        verifier.name,
        format=fmt,
        ed25519_decisions=counts.ed25519,
        passkey_decisions=counts.passkey,
        platform_identity_decisions=counts.platform_identity,
        unchecked_decisions=counts.unchecked + counts.untraced,
        notes=tuple(counts.notes),
    )


def _check_decisions(files: dict[str, bytes], events: list[dict[str, Any]], close_id: Any) -> DecisionCounts:
    """Every person's-key decision among the (chain-verified) events, against decisions.json when the bundle has it."""
    try:
        gates = (
            read_decisions_file(files[DECISIONS_FILE], close_id=close_id if isinstance(close_id, str) else None)
            if DECISIONS_FILE in files
            else None
        )
        return check_decisions(events, gates)
    except DecisionProofInvalid as exc:
        raise BundleInvalid(exc.reason) from None


def _check_event(line_no: int, line: str, tree_size: int, root: bytes, close_id: Any) -> dict[str, Any]:
    """The line's event, once its chain hash and inclusion in the signed tree are checked."""
    where = f"events.jsonl line {line_no}"
    try:
        record = json.loads(line)
        event = record["event"]
        prev_hash = bytes.fromhex(record["prev_hash"])
        claimed = bytes.fromhex(record["hash"])
        index = int(record["leaf_index"])
        proof = [bytes.fromhex(h) for h in record["inclusion_proof"]]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise BundleInvalid(f"{where}: malformed ({exc})") from None
    if not isinstance(event, dict) or event.get("seq") != index + 1:
        raise BundleInvalid(f"{where}: seq does not match leaf index {index}")
    if close_id is not None and event.get("close_id") != close_id:
        raise BundleInvalid(f"{where}: event belongs to another close")
    canonical = canonical_bytes(event)
    if chain_hash(prev_hash, canonical) != claimed:
        raise BundleInvalid(f"{where} (seq {index + 1}): event content does not match its chain hash")
    try:
        verify_inclusion(leaf_hash(canonical), index, tree_size, proof, root)
    except ProofError as exc:
        raise BundleInvalid(f"{where} (seq {index + 1}): not included in the signed tree: {exc}") from None
    return event
