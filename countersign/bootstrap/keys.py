"""The trace's checkpoint signing key: from COUNTERSIGN_TRACE_SIGNING_KEY, or a key file made on first use."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from countersign.audit.checkpoint import (
    NoteSigner,
    encode_signer_key,
    encode_verifier_key,
    generate_signer,
    parse_signer_key,
)
from countersign.bootstrap.settings import Settings


def trace_origin(settings: Settings) -> str:
    return settings.trace_origin


def key_file(settings: Settings) -> Path:
    return settings.state_dir / "keys" / "trace-signer.key"


def load_trace_signer(settings: Settings) -> NoteSigner:
    """The configured key, else the key file; the first process to need one creates it.

    Several workers can start at once on a fresh state directory. Each writes a complete candidate key to a private
    temporary file and hard-links it into place; `link` fails when the name exists, so exactly one candidate wins,
    and nobody can read a half-written key. The losers read the winner's key, so every process signs with the same one.
    """
    if settings.trace_signing_key:
        return parse_signer_key(settings.trace_signing_key)
    path = key_file(settings)
    if not path.is_file():
        _create_key_file(path, generate_signer(settings.trace_origin))
    return parse_signer_key(path.read_text(encoding="utf-8").strip())


def _create_key_file(path: Path, signer: NoteSigner) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, candidate = tempfile.mkstemp(dir=path.parent, prefix=".trace-signer-", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(encode_signer_key(signer) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process won: its key is the one everyone uses
            os.link(candidate, path)
    finally:
        os.unlink(candidate)


def verifier_key_text(signer: NoteSigner) -> str:
    return encode_verifier_key(signer.verifier())
