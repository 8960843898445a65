"""Which bank format a file is, from its first bytes: never from its name alone, which people get wrong."""

from __future__ import annotations

import re
from pathlib import Path

from countersign.importers.errors import ImportFileError
from countersign.importers.statement import StatementFormat

_SNIFF_BYTES = 4096
_CAMT = re.compile(rb"urn:iso:std:iso:20022:tech:xsd:camt\.05[23]\.001\.[0-9]{2}")
_MT940_START = re.compile(rb"^\s*(\{1:|:20:)")
_MT940_TAGS = re.compile(rb"^:20:.*?^:25:", re.MULTILINE | re.DOTALL)  # after a bank's own header lines


def detect_statement_format(path: Path) -> StatementFormat:
    """camt.053 (an ISO 20022 XML namespace), MT940 (`{1:` or `:20:` first), OFX (`OFXHEADER` or `<OFX>`), else CSV."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError as exc:
        raise ImportFileError(path.name, "", "(file)", f"cannot read: {exc.strerror or exc}") from None
    head = head.removeprefix(b"\xef\xbb\xbf")
    if not head.strip():
        raise ImportFileError(path.name, "", "(file)", "is empty: expected a bank statement")
    if head.lstrip().startswith(b"<"):
        namespace = _CAMT.search(head)
        if namespace is not None:
            if b"camt.053" not in namespace.group(0):
                raise ImportFileError(
                    path.name, "", "(format)", "is a camt.052 intraday report, not a camt.053 statement"
                )
            return StatementFormat.CAMT053
        if b"<OFX" in head.upper():
            return StatementFormat.OFX
        raise ImportFileError(
            path.name, "", "(format)", "is XML but neither camt.053 (ISO 20022) nor OFX: cannot tell what it holds"
        )
    if head.lstrip().upper().startswith(b"OFXHEADER"):
        return StatementFormat.OFX
    if _MT940_START.match(head) or _MT940_TAGS.search(head):
        return StatementFormat.MT940
    return StatementFormat.CSV
