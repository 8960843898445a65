"""A statement's format is told by its first bytes, whatever its name says."""

from __future__ import annotations

from pathlib import Path

import pytest

from countersign.importers.detect import detect_statement_format
from countersign.importers.errors import ImportFileError
from countersign.importers.statement import StatementFormat

CAMT = b'<?xml version="1.0"?>\n<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"><BkToCstmrStmt/>'


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (CAMT, StatementFormat.CAMT053),
        (b"\xef\xbb\xbf" + CAMT, StatementFormat.CAMT053),
        (b"{1:F01ABNANL2AXXXX0000000000}{2:I940ABNANL2AXXXXN}{4:\r\n:20:ABN\r\n:25:123\r\n", StatementFormat.MT940),
        (b":20:STARTUMS\n:25:10020030/1234567\n", StatementFormat.MT940),
        (b"ABNANL2A\r\n940\r\nABNANL2A\r\n:20:ABN AMRO BANK NV\r\n:25:517852257\r\n", StatementFormat.MT940),
        (b"OFXHEADER:100\r\nDATA:OFXSGML\r\n", StatementFormat.OFX),
        (b'<?xml version="1.0"?>\n<?OFX OFXHEADER="200"?>\n<OFX>', StatementFormat.OFX),
        (b"Date,Description,Paid out,Paid in,Balance\r\n", StatementFormat.CSV),
    ],
)
def test_the_first_bytes_tell_the_format(tmp_path: Path, content: bytes, expected: StatementFormat) -> None:
    path = tmp_path / "statement.txt"  # the name says nothing
    path.write_bytes(content)
    assert detect_statement_format(path) is expected


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "is empty"),
        (b"<html><body>Your statement</body></html>", r"neither camt\.053 \(ISO 20022\) nor OFX"),
        (CAMT.replace(b"camt.053", b"camt.052"), "camt.052 intraday report"),
    ],
)
def test_what_is_no_statement_is_refused_naming_the_file(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "download.xml"
    path.write_bytes(content)
    with pytest.raises(ImportFileError, match=reason) as refused:
        detect_statement_format(path)
    assert str(refused.value).startswith("download.xml: ")
