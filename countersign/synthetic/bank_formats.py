"""The books' bank statements as banks export them: ISO 20022 camt.053.001.08, SWIFT MT940, OFX 1.02 and a UK CSV.

Read back from a written books directory (its `bank_lines.csv`, or `corrected/bank_lines.csv`), so the books stay
byte for byte what `generate_books` wrote. One statement per bank account in the file, from the first to the last
day of the period. The opening balance is the GL cash account's opening line (the opening balances journal, which
never appears on a statement) and the closing balance is the opening plus the lines. Amounts are integer minor
units throughout; the books write money in (a GL cash debit) positive, and so does every format here.

Every writer is deterministic: dates and creation times come from the period, never from the clock.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from countersign.synthetic.bank import BANK_HEADER
from countersign.synthetic.period import period_days

BANK_FORMATS: tuple[str, ...] = ("camt053", "mt940", "ofx", "csv")
CAMT053_NAMESPACE = "urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"
CAMT053_FILE = "bank.camt053.xml"
MT940_FILE = "bank.mt940"
OFX_FILE = "bank.ofx"
MAPPING_FILE = "mapping.yaml"

_KNOWN_IBANS = {"1000": "GB33BUKB20201555555555", "1010": "GB94BARC10201530093459"}
_DERIVED_BANK_CODE = "CSGN"
_DERIVED_SORT_CODE = "404040"
_MAX35 = 35
_MAX140 = 140
_MT940_REFERENCE = 16
_MT940_NARRATIVE_WIDTH = 65
_MT940_NARRATIVE_LINES = 6
_OFX_NAME = 32
_OFX_REFNUM = 32
_OFX_MEMO = 255
_CSV_HEADER = ("Date", "Description", "Reference", "Paid out", "Paid in", "Balance")


@dataclass(frozen=True)
class BankLine:
    bank_line_id: str
    booked: date
    amount_minor: int
    """Signed: money in (credit to the account) positive."""
    reference: str
    description: str


@dataclass(frozen=True)
class AccountStatement:
    """One bank account's statement for the period, as the books' bank lines give it."""

    account: str
    """The GL cash account the statement is booked to."""
    iban: str
    currency: str
    entity: str
    period: str
    from_date: date
    to_date: date
    opening_minor: int
    lines: tuple[BankLine, ...]

    @property
    def closing_minor(self) -> int:
        return self.opening_minor + sum(line.amount_minor for line in self.lines)

    @property
    def statement_id(self) -> str:
        return f"{self.entity}-{self.period}-{self.account}"[-_MAX35:]


@dataclass(frozen=True)
class Export:
    """What a writer put in the export directory: file names relative to it, and the mapping sections for them."""

    files: tuple[str, ...]
    mapping: dict[str, Any]
    described: dict[str, str]
    """Mapping section -> the file(s) it describes, for the comment heading mapping.yaml."""


def iban_for(account: str) -> str:
    """A fixed, valid-looking (check digits right) UK IBAN for a GL cash account: the ECBS and Barclays examples for
    1000 and 1010, and a derived one (bank CSGN, sort code 40-40-40, the account number from the code) otherwise."""
    known = _KNOWN_IBANS.get(account)
    if known is not None:
        return known
    if account.isdigit() and len(account) <= 8:
        number = account.zfill(8)
    else:
        number = f"{int(hashlib.sha256(account.encode()).hexdigest()[:12], 16) % 10**8:08d}"
    bban = f"{_DERIVED_BANK_CODE}{_DERIVED_SORT_CODE}{number}"
    check = 98 - _iban_remainder(f"{bban}GB00")
    return f"GB{check:02d}{bban}"


def iban_is_valid(iban: str) -> bool:
    """ISO 13616 check: letters and digits, moved country and check digits, remainder 1 modulo 97."""
    compact = iban.replace(" ", "").upper()
    if len(compact) < 15 or not compact.isalnum() or not compact[:2].isalpha() or not compact[2:4].isdigit():
        return False
    return _iban_remainder(compact[4:] + compact[:4]) == 1


def _iban_remainder(text: str) -> int:
    return int("".join(str(int(char, 36)) for char in text)) % 97


def sort_code(iban: str) -> str:
    """The six-digit sort code inside a UK IBAN (characters 9 to 14)."""
    return iban[8:14]


def read_statements(books_dir: Path, bank_file: str = "bank_lines.csv") -> list[AccountStatement]:
    """One statement per account in `bank_file` (sorted by account), balances from the GL's opening journal."""
    entity = json.loads((books_dir / "entity.json").read_text(encoding="utf-8"))
    period = str(entity["period"])
    days = period_days(period)
    by_account: dict[str, list[BankLine]] = {}
    with (books_dir / bank_file).open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = tuple(next(reader))
        if header != BANK_HEADER:
            raise ValueError(f"{bank_file}: expected the header {BANK_HEADER}, found {header}")
        for bank_line_id, account, on_date, amount, reference, description in reader:
            by_account.setdefault(account, []).append(
                BankLine(bank_line_id, date.fromisoformat(on_date), minor_units(amount), reference, description)
            )
    openings = opening_balances(books_dir, period)
    return [
        AccountStatement(
            account=account,
            iban=iban_for(account),
            currency=str(entity["currency"]),
            entity=str(entity["entity"]),
            period=period,
            from_date=days[0],
            to_date=days[-1],
            opening_minor=openings.get(account, 0),
            lines=tuple(lines),
        )
        for account, lines in sorted(by_account.items())
    ]


def opening_balances(books_dir: Path, period: str) -> dict[str, int]:
    """Per account, the opening balances journal's line (`OB-<period>`, the first journal of gl_lines.csv)."""
    balances: dict[str, int] = {}
    with (books_dir / "gl_lines.csv").open(encoding="utf-8", newline="") as handle:
        rows = csv.DictReader(handle)
        first_journal: str | None = None
        for row in rows:
            if first_journal is None:
                first_journal = row["journal_id"]
            if row["journal_id"] != first_journal or row["reference"] != f"OB-{period}":
                break
            balances[row["account"]] = balances.get(row["account"], 0) + minor_units(row["amount"])
    return balances


def minor_units(text: str) -> int:
    """ "-1234.50" -> -123450; the books write exactly two decimals."""
    negative = text.startswith("-")
    whole, _, cents = text.lstrip("-").partition(".")
    if not whole.isdigit() or len(cents) != 2 or not cents.isdigit():
        raise ValueError(f"expected an amount with two decimals like -1234.50, found {text!r}")
    value = int(whole) * 100 + int(cents)
    return -value if negative else value


def decimal_text(minor: int, *, separator: str = ".", thousands: str = "") -> str:
    """Minor units as text with two decimals: `1234,50`, `-1,234.50`."""
    magnitude = abs(minor)
    whole = f"{magnitude // 100:,}".replace(",", thousands) if thousands else str(magnitude // 100)
    return f"{'-' if minor < 0 else ''}{whole}{separator}{magnitude % 100:02d}"


def _transaction_code(reference: str) -> str:
    return "NDDT" if reference.upper().startswith("DD-") else "NTRF"


# --- camt.053.001.08 ---------------------------------------------------------------------------------------------


def camt053_bytes(statements: Sequence[AccountStatement], *, message_id: str) -> bytes:
    """A BankToCustomerStatementV08 document, one Stmt per account; validates against the published XSD."""
    if not statements:
        raise ValueError("camt.053 needs at least one statement")
    first = statements[0]
    # Tags are written unqualified under an xmlns attribute on the root: the same document as a default namespace,
    # and ElementTree's default_namespace option refuses the unqualified `Ccy` attribute.
    root = ET.Element("Document", xmlns=CAMT053_NAMESPACE)
    message = ET.SubElement(root, "BkToCstmrStmt")
    header = ET.SubElement(message, "GrpHdr")
    _text(header, "MsgId", message_id[:_MAX35])
    _text(header, "CreDtTm", f"{first.to_date.isoformat()}T23:59:59")
    for statement in statements:
        _camt_statement(message, statement)
    ET.indent(root, space="  ")
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'.encode()


def _text(parent: ET.Element, tag: str, text: str, **attributes: str) -> ET.Element:
    element = ET.SubElement(parent, tag, attributes)
    element.text = text
    return element


def _path(parent: ET.Element, *tags: str) -> ET.Element:
    for tag in tags:
        parent = ET.SubElement(parent, tag)
    return parent


def _camt_amount(parent: ET.Element, minor: int, currency: str) -> None:
    _text(parent, "Amt", decimal_text(abs(minor)), Ccy=currency)
    _text(parent, "CdtDbtInd", "CRDT" if minor >= 0 else "DBIT")


def _camt_statement(message: ET.Element, statement: AccountStatement) -> None:
    element = ET.SubElement(message, "Stmt")
    _text(element, "Id", statement.statement_id)
    _text(element, "CreDtTm", f"{statement.to_date.isoformat()}T23:59:59")
    period = ET.SubElement(element, "FrToDt")
    _text(period, "FrDtTm", f"{statement.from_date.isoformat()}T00:00:00")
    _text(period, "ToDtTm", f"{statement.to_date.isoformat()}T23:59:59")
    account = ET.SubElement(element, "Acct")
    _text(_path(account, "Id"), "IBAN", statement.iban)
    _text(account, "Ccy", statement.currency)
    for code, minor, on_date in (
        ("OPBD", statement.opening_minor, statement.from_date),
        ("CLBD", statement.closing_minor, statement.to_date),
    ):
        balance = ET.SubElement(element, "Bal")
        _text(_path(balance, "Tp", "CdOrPrtry"), "Cd", code)
        _camt_amount(balance, minor, statement.currency)
        _text(_path(balance, "Dt"), "Dt", on_date.isoformat())
    for line in statement.lines:
        entry = ET.SubElement(element, "Ntry")
        _camt_amount(entry, line.amount_minor, statement.currency)
        _text(_path(entry, "Sts"), "Cd", "BOOK")
        _text(_path(entry, "BookgDt"), "Dt", line.booked.isoformat())
        _text(_path(entry, "ValDt"), "Dt", line.booked.isoformat())
        _text(entry, "AcctSvcrRef", line.bank_line_id[:_MAX35])
        _text(_path(entry, "BkTxCd", "Prtry"), "Cd", _transaction_code(line.reference))
        details = _path(entry, "NtryDtls", "TxDtls")
        _text(_path(details, "Refs"), "EndToEndId", (line.reference or "NOTPROVIDED")[:_MAX35])
        if line.description:
            remittance = _path(details, "RmtInf")
            for start in range(0, len(line.description), _MAX140):
                _text(remittance, "Ustrd", line.description[start : start + _MAX140])


# --- MT940 -------------------------------------------------------------------------------------------------------


def mt940_bytes(statements: Sequence[AccountStatement]) -> bytes:
    """SWIFT MT940 customer statements, one per account, each closed by a `-` line; CRLF line endings. `:28C:` is
    the month's number and page 1 on every account, as banks number each account's statements separately.

    `:61:` carries the value date (YYMMDD), the entry date (MMDD), C or D, the amount with a decimal comma, `NTRF`
    (or `NDDT` for direct debits), the customer reference (or NONREF; at most 16 characters) and `//` the bank
    reference (the bank line id). `:86:` is the description wrapped at 65 characters, at most six lines.
    """
    lines: list[str] = []
    for statement in statements:
        lines.append(f":20:{statement.from_date:%Y%m}-{statement.account}"[: 4 + _MT940_REFERENCE])
        lines.append(f":25:{statement.iban}")
        lines.append(f":28C:{statement.from_date.month:05d}/001")  # each account's statement number: the month
        lines.append(f":60F:{_mt940_balance(statement.opening_minor, statement.from_date, statement.currency)}")
        for line in statement.lines:
            mark = "C" if line.amount_minor >= 0 else "D"
            amount = decimal_text(abs(line.amount_minor), separator=",")
            reference = (line.reference or "NONREF")[:_MT940_REFERENCE]
            lines.append(
                f":61:{line.booked:%y%m%d%m%d}{mark}{amount}{_transaction_code(line.reference)}{reference}"
                f"//{line.bank_line_id}"
            )
            narrative = _wrap(line.description, _MT940_NARRATIVE_WIDTH)[:_MT940_NARRATIVE_LINES]
            if narrative:
                lines.append(f":86:{narrative[0]}")
                lines.extend(narrative[1:])
        lines.append(f":62F:{_mt940_balance(statement.closing_minor, statement.to_date, statement.currency)}")
        lines.append("-")
    return ("\r\n".join(lines) + "\r\n").encode("ascii")


def _mt940_balance(minor: int, on_date: date, currency: str) -> str:
    return f"{'C' if minor >= 0 else 'D'}{on_date:%y%m%d}{currency}{decimal_text(abs(minor), separator=',')}"


def _wrap(text: str, width: int) -> list[str]:
    return [text[start : start + width] for start in range(0, len(text), width)]


# --- OFX 1.02 ----------------------------------------------------------------------------------------------------

_OFX_HEADER = (
    "OFXHEADER:100",
    "DATA:OFXSGML",
    "VERSION:102",
    "SECURITY:NONE",
    "ENCODING:USASCII",
    "CHARSET:1252",
    "COMPRESSION:NONE",
    "OLDFILEUID:NONE",
    "NEWFILEUID:NONE",
    "",
)


def ofx_bytes(statements: Sequence[AccountStatement]) -> bytes:
    """OFX 1.02 (SGML, leaf elements unclosed), one STMTTRNRS per account; Windows-1252, CRLF line endings.

    STMTTRN: TRNTYPE CREDIT or DEBIT, DTPOSTED, TRNAMT signed, FITID = bank line id, REFNUM = the reference (when
    there is one), MEMO = the description, and NAME = the description too when it fits NAME's 32 characters (a cut
    NAME beside the MEMO would read back as two texts). LEDGERBAL = the closing balance; OFX states no opening
    balance.
    """
    if not statements:
        raise ValueError("OFX needs at least one statement")
    server_time = f"{statements[0].to_date:%Y%m%d}235959"
    lines = [*_OFX_HEADER, "<OFX>", "<SIGNONMSGSRSV1>", "<SONRS>"]
    lines += ["<STATUS>", "<CODE>0", "<SEVERITY>INFO", "</STATUS>"]
    lines += [f"<DTSERVER>{server_time}", "<LANGUAGE>ENG", "</SONRS>", "</SIGNONMSGSRSV1>", "<BANKMSGSRSV1>"]
    for number, statement in enumerate(statements, start=1):
        lines += ["<STMTTRNRS>", f"<TRNUID>{number}", "<STATUS>", "<CODE>0", "<SEVERITY>INFO", "</STATUS>"]
        lines += ["<STMTRS>", f"<CURDEF>{statement.currency}", "<BANKACCTFROM>"]
        lines += [f"<BANKID>{sort_code(statement.iban)}", f"<ACCTID>{statement.iban}", "<ACCTTYPE>CHECKING"]
        lines += ["</BANKACCTFROM>", "<BANKTRANLIST>"]
        lines += [f"<DTSTART>{statement.from_date:%Y%m%d}", f"<DTEND>{statement.to_date:%Y%m%d}"]
        for line in statement.lines:
            lines += ["<STMTTRN>", f"<TRNTYPE>{'CREDIT' if line.amount_minor >= 0 else 'DEBIT'}"]
            lines += [f"<DTPOSTED>{line.booked:%Y%m%d}", f"<TRNAMT>{decimal_text(line.amount_minor)}"]
            lines.append(f"<FITID>{_sgml(line.bank_line_id)}")
            if line.reference:
                lines.append(f"<REFNUM>{_sgml(line.reference[:_OFX_REFNUM])}")
            if line.description:
                if len(line.description) <= _OFX_NAME:
                    lines.append(f"<NAME>{_sgml(line.description)}")
                lines.append(f"<MEMO>{_sgml(line.description[:_OFX_MEMO])}")
            lines.append("</STMTTRN>")
        lines += ["</BANKTRANLIST>", "<LEDGERBAL>", f"<BALAMT>{decimal_text(statement.closing_minor)}"]
        lines += [f"<DTASOF>{statement.to_date:%Y%m%d}235959", "</LEDGERBAL>", "</STMTRS>", "</STMTTRNRS>"]
    lines += ["</BANKMSGSRSV1>", "</OFX>"]
    return ("\r\n".join(lines) + "\r\n").encode("cp1252")


def _sgml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# --- UK bank CSV -------------------------------------------------------------------------------------------------


def csv_file_name(account: str) -> str:
    return f"bank-{account}.csv"


def csv_bytes(statement: AccountStatement) -> bytes:
    """One account's statement as a UK bank's CSV export: UTF-8 with a BOM, CRLF, dd/mm/yyyy, amounts with
    thousands commas in `Paid out` (money out, unsigned) or `Paid in`, and the running balance after each line."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(_CSV_HEADER)
    balance = statement.opening_minor
    for line in statement.lines:
        balance += line.amount_minor
        amount = decimal_text(abs(line.amount_minor), thousands=",")
        paid_out, paid_in = (amount, "") if line.amount_minor < 0 else ("", amount)
        writer.writerow(
            (
                f"{line.booked:%d/%m/%Y}",
                line.description,
                line.reference,
                paid_out,
                paid_in,
                decimal_text(balance, thousands=","),
            )
        )
    return buffer.getvalue().encode("utf-8-sig")


def csv_mapping(statement: AccountStatement) -> dict[str, Any]:
    """The mapping's bank_csv section for `csv_bytes(statement)`."""
    return {
        "encoding": "utf-8",
        "delimiter": ",",
        "header_row": 1,
        "date_format": "%d/%m/%Y",
        "decimal_separator": ".",
        "thousands_separator": ",",
        "bank_account": statement.iban,
        "currency": statement.currency,
        "statement_id": statement.statement_id,
        "opening_balance": decimal_text(statement.opening_minor),
        "closing_balance": decimal_text(statement.closing_minor),
        "columns": {
            "date": "Date",
            "description": "Description",
            "reference": "Reference",
            "debit": "Paid out",
            "credit": "Paid in",
            "balance": "Balance",
        },
    }


# --- writing an export directory ---------------------------------------------------------------------------------


def write_bank_exports(
    books_dir: Path,
    out_dir: Path,
    formats: Iterable[str],
    *,
    bank_file: str = "bank_lines.csv",
    message_id_suffix: str = "",
) -> Export:
    """Write the statements of `bank_file` in each of `formats` into `out_dir`.

    The mapping sections returned are `bank_accounts` (IBAN -> GL account) and, for csv, `bank_csv` describing the
    first account's file. Every account's CSV also gets its own complete mapping, `bank-<account>.mapping.yaml`,
    since a bank_csv section names one account.
    """
    wanted = tuple(dict.fromkeys(formats))
    unknown = [name for name in wanted if name not in BANK_FORMATS]
    if unknown:
        raise ValueError(f"unknown bank format(s) {unknown}: expected some of {list(BANK_FORMATS)}")
    statements = read_statements(books_dir, bank_file)
    if not statements:
        raise ValueError(f"{bank_file}: no bank lines, so no statement to write")
    out_dir.mkdir(parents=True, exist_ok=True)
    first = statements[0]
    written: list[str] = []
    mapping: dict[str, Any] = {"bank_accounts": {s.iban: s.account for s in statements}}
    for name in wanted:
        if name == "camt053":
            message_id = f"{first.entity}-{first.period}-CAMT053{message_id_suffix}"[-_MAX35:]
            _write(out_dir, CAMT053_FILE, camt053_bytes(statements, message_id=message_id), written)
        elif name == "mt940":
            _write(out_dir, MT940_FILE, mt940_bytes(statements), written)
        elif name == "ofx":
            _write(out_dir, OFX_FILE, ofx_bytes(statements), written)
        else:
            for statement in statements:
                file_name = csv_file_name(statement.account)
                _write(out_dir, file_name, csv_bytes(statement), written)
                section = csv_mapping(statement)
                if statement is first:
                    mapping["bank_csv"] = section
                own = {"version": 1, "bank_accounts": {statement.iban: statement.account}, "bank_csv": section}
                mapping_name = f"bank-{statement.account}.mapping.yaml"
                _write(out_dir, mapping_name, mapping_yaml(own, {"bank_csv": file_name}).encode(), written)
    statement_files = [name for name in written if not name.endswith(".yaml")]
    described = {"bank_accounts": ", ".join(statement_files)}
    if "bank_csv" in mapping:
        described["bank_csv"] = csv_file_name(first.account)
    return Export(files=tuple(written), mapping=mapping, described=described)


class _PlainDumper(yaml.SafeDumper):
    """The safe dumper without anchors: a list shared by two sections is written out in both."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def mapping_yaml(mapping: Mapping[str, Any], described: Mapping[str, str]) -> str:
    """The mapping as YAML, headed by a comment naming the file each section describes."""
    comment = ["# Mapping for the files beside this one (see docs/books-format.md)."]
    comment += [f"#   {section}: {file_name}" for section, file_name in described.items()]
    body = yaml.dump(dict(mapping), Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, width=120)
    return "\n".join(comment) + "\n" + body


def write_mapping(path: Path, sections: Iterable[Mapping[str, Any]], described: Mapping[str, str]) -> None:
    """Write `version: 1` and the union of `sections` to `path` (a later section's key replaces an earlier one)."""
    mapping: dict[str, Any] = {"version": 1}
    for section in sections:
        mapping.update(section)
    path.write_text(mapping_yaml(mapping, described), encoding="utf-8")


def _write(out_dir: Path, name: str, data: bytes, written: list[str]) -> None:
    (out_dir / name).write_bytes(data)
    written.append(name)
