"""The trace's checkpoint signing key: from COUNTERSIGN_TRACE_SIGNING_KEY, or a key file made on first use."""

from __future__ import annotations

import os
from pathlib import Path

from audit.checkpoint import NoteSigner, encode_signer_key, encode_verifier_key, generate_signer, parse_signer_key

from .settings import Settings


def trace_origin(settings: Settings) -> str:
    return settings.trace_origin


def key_file(settings: Settings) -> Path:
    return settings.state_dir / "keys" / "trace-signer.key"


def load_trace_signer(settings: Settings) -> NoteSigner:
    if settings.trace_signing_key:
        return parse_signer_key(settings.trace_signing_key)
    path = key_file(settings)
    if path.is_file():
        return parse_signer_key(path.read_text(encoding="utf-8").strip())
    signer = generate_signer(settings.trace_origin)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(encode_signer_key(signer) + "\n")
    return signer


def verifier_key_text(signer: NoteSigner) -> str:
    return encode_verifier_key(signer.verifier())
