"""Evidence bundles: one close's events with inclusion proofs against a signed checkpoint, verifiable offline.

A bundle is a zip an auditor can read with any tool: README.md, manifest.json, checkpoint.txt (a C2SP signed note),
verifier.key, and events.jsonl (one event per line with its chain hashes, leaf index and inclusion proof).
`verify_bundle` needs no database and no Countersign installation beyond this module's dependencies.
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

from audit.canonical import canonical_bytes
from audit.checkpoint import CheckpointError, NoteError, NoteKeyError, NoteVerifier, open_checkpoint, parse_verifier_key
from audit.merkle import MerkleTree, ProofError, leaf_hash, verify_inclusion
from audit.trace import TraceEvent, chain_hash

FORMAT = "countersign-evidence-bundle/1"
FILES = ("README.md", "manifest.json", "checkpoint.txt", "verifier.key", "events.jsonl")
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
) -> bytes:
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


def _archive(contents: dict[str, bytes]) -> bytes:
    """The one byte layout a bundle may have: fixed entries, order, times and attributes, stored uncompressed."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in FILES:
            archive.writestr(_zip_entry(name), contents[name])
    return buffer.getvalue()


def _read(data: bytes) -> dict[str, bytes]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            damaged = archive.testzip()
            if damaged is not None:
                raise BundleInvalid(f"{damaged} is damaged (CRC mismatch)")
            names = set(archive.namelist())
            missing = [name for name in FILES if name not in names]
            if missing:
                raise BundleInvalid(f"missing {', '.join(missing)}")
            return {name: archive.read(name) for name in FILES}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, zlib.error, NotImplementedError) as exc:
        if isinstance(exc, BundleInvalid):
            raise
        raise BundleInvalid(f"not a readable zip archive: {exc}") from None


def verify_bundle(data: bytes, *, pinned_key: str | None = None) -> BundleReport:
    """Check everything a bundle claims; raise BundleInvalid naming the first thing that is wrong."""
    files = _read(data)
    if _archive(files) != data:
        raise BundleInvalid("the archive's own bytes were changed (entries, times or attributes differ from a bundle)")
    try:
        manifest = json.loads(files["manifest.json"])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BundleInvalid("manifest.json is not valid JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleInvalid(f"manifest.json: format is not {FORMAT}")
    for name, expected in (manifest.get("sha256") or {}).items():
        if name not in files or hashlib.sha256(files[name]).hexdigest() != expected:
            raise BundleInvalid(f"{name} does not match its SHA-256 in manifest.json")
    if set(manifest.get("sha256") or {}) != set(FILES) - {"manifest.json"}:
        raise BundleInvalid("manifest.json does not list every file")
    key_text = files["verifier.key"].decode("utf-8", errors="replace").strip()
    if pinned_key is not None and pinned_key.strip() != key_text:
        raise BundleInvalid("verifier.key is not the key you pinned")
    try:
        verifier: NoteVerifier = parse_verifier_key(key_text)
        checkpoint = open_checkpoint(files["checkpoint.txt"], verifier)
    except (NoteError, NoteKeyError, CheckpointError) as exc:
        raise BundleInvalid(f"checkpoint.txt: {exc}") from None
    count = 0
    for line_no, line in enumerate(files["events.jsonl"].decode("utf-8", errors="strict").splitlines(), start=1):
        count += 1
        _check_event(line_no, line, checkpoint.size, checkpoint.root, manifest.get("close_id"))
    if count != manifest.get("events"):
        raise BundleInvalid(f"events.jsonl has {count} events, manifest.json says {manifest.get('events')}")
    return BundleReport(
        manifest.get("close_id"), count, checkpoint.size, checkpoint.root, checkpoint.origin, verifier.name
    )


def _check_event(line_no: int, line: str, tree_size: int, root: bytes, close_id: Any) -> None:
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
