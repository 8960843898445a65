"""OFX bank and credit card statements (OFX 1.x SGML and 2.x XML) read with `ofxtools` into BankStatements.

ofxtools reads the header (and with it the body's character set: CHARSET 1252, ISO-8859-1 or none for OFX 1, UTF-8 for
OFX 2), splits the body into elements and converts each statement (`STMTRS`, `CCSTMTRS`) into typed values. What it
lets through is checked here: its tree builder accepts a mismatched or missing end tag (a truncated file reads as a
shorter one), so every aggregate must close; a document type declaration is refused outright.

OFX states only the closing balance (`LEDGERBAL`, as of `DTASOF`); the opening is derived as closing - movements and
the statement says so (`opening_stated=False`). Amounts are signed from the account holder's view already (money in
positive), credit cards included (a purchase is negative).
"""

from __future__ import annotations

import bisect
import io
import re
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import ofxtools.models
from ofxtools import Types
from ofxtools.header import parse_header
from ofxtools.models.base import Aggregate
from ofxtools.Parser import ParseError, TreeBuilder

from countersign.importers.amounts import checked_amount, checked_currency
from countersign.importers.errors import ImportFileError
from countersign.importers.files import read_bounded
from countersign.importers.statement import BankStatement, StatementEntry, StatementFormat

MAX_BYTES = 50 * 1024 * 1024
MAX_DESCRIPTION_CHARS = 512
MAX_REASON_CHARS = 200
STATEMENTS = {"STMTTRNRS": "STMTRS", "CCSTMTTRNRS": "CCSTMTRS"}
"""The transaction wrappers this importer reads and the statement each holds: bank, credit card."""

_BOM = b"\xef\xbb\xbf"
_SNIFF_BYTES = 4096
_DOCTYPE = re.compile(rb"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)
_NEWLINE = re.compile(r"\r\n|\r|\n")
_NEWLINE_BYTES = re.compile(rb"\r\n|\r|\n")
_POSITION = re.compile(r" - position=\[(\d+):(\d+)\]$")
_TAIL_TEXT = re.compile(r"Tail text '(.*?)' (?:in|after)", re.DOTALL)
_MISMATCH = re.compile(r"Mismatched tags: open='(.*?)', close='(.*?)'")
_OPEN_TAG = re.compile(r"<([A-Z0-9./_ ]+?)>")
_AMOUNT = re.compile(r"[+-]?([0-9]+([.,][0-9]*)?|[.,][0-9]+)")
_OFX_DATE = re.compile(r"([0-9]{4})([0-9]{2})([0-9]{2})")
_CHARACTER_REFERENCE = re.compile(r"&#(?:([0-9]{1,7})|[xX]([0-9A-Fa-f]{1,6}));")
_HEADER_HELP = (
    "an OFX file: OFXHEADER:100 and the other OFX 1 header lines, or <?xml ...?> then"
    ' <?OFX OFXHEADER="200" VERSION=... ?> for OFX 2'
)


def read_ofx(path: Path, *, max_bytes: int = MAX_BYTES) -> list[BankStatement]:
    """Every bank (`STMTRS`) and credit card (`CCSTMTRS`) statement in the OFX file at `path`, in file order.

    Raises ImportFileError naming the file, the line (and statement and entry) and the OFX element for anything it
    cannot import: not OFX, a DOCTYPE, a byte the declared character set cannot read, a cut or badly nested file, an
    element ofxtools cannot convert, no LEDGERBAL, a FITID given twice for one account, a transaction in another
    currency, a correction of an earlier transaction.
    """
    file = path.name
    data = read_bounded(path, file, max_bytes).removeprefix(_BOM)
    _refuse_doctype(data, file)
    body, lines = _header_and_body(data, file)
    root, element_lines = _tree(body, lines, file)
    reader = _Reader(file, element_lines)
    statements = [reader.statement(element, number) for number, element in enumerate(_statements(root, reader), 1)]
    return _finished(statements, file)


def _refuse_doctype(data: bytes, file: str) -> None:
    match = _DOCTYPE.search(data)
    if match:
        line = len(_NEWLINE_BYTES.split(data[: match.start()]))
        raise ImportFileError(
            file,
            f"line {line}",
            "DOCTYPE",
            "an OFX file has no document type declaration or entities; this one declares one (refused unread, so"
            " no entity is ever expanded or fetched)",
        )


class _Lines:
    """Line numbers of positions in the OFX body, counted in the whole file."""

    def __init__(self, text: str, body_start: int) -> None:
        self._starts = [0, *(match.end() for match in _NEWLINE.finditer(text))]
        self._body_start = body_start
        self.last = len(self._starts)

    def of(self, position: int) -> int:
        if self._body_start < 0 or position < 0:
            return 0
        return bisect.bisect_right(self._starts, self._body_start + position)


def _header_and_body(data: bytes, file: str) -> tuple[str, _Lines]:
    head = data[:_SNIFF_BYTES].lstrip()
    if not (head.upper().startswith(b"OFXHEADER") or (head.startswith(b"<?xml") and b"<?OFX" in head.upper())):
        first = next((line for line in _NEWLINE.split(head.decode("latin-1")) if line.strip()), "")
        raise ImportFileError(file, "line 1", "(header)", f"expected {_HEADER_HELP}; found {_clip(first, 60)!r}")
    try:
        header, body = parse_header(io.BytesIO(data))
    except UnicodeDecodeError as error:
        raise _undecodable(data, str(error.encoding), file) from None
    except Exception as error:  # OFXHeaderError (a SyntaxError), ValueError from its typed fields
        raise ImportFileError(
            file, "line 1", "(header)", f"expected {_HEADER_HELP}; ofxtools: {_clip(str(error), 120)}"
        ) from None
    text = data.decode(str(header.codec), errors="replace")
    return body, _Lines(text, text.find(body))


def _undecodable(data: bytes, encoding: str, file: str) -> ImportFileError:
    """Where the first byte the header's character set cannot read is: line, column, the element it is in."""
    try:
        data.decode(encoding)
    except UnicodeDecodeError as error:
        lines = _NEWLINE_BYTES.split(data[: error.start])
        before = data[: error.start].decode(encoding, errors="replace")
        element = ([f"<{tag}>" for tag in _OPEN_TAG.findall(before)] or ["(header)"])[-1]
        return ImportFileError(
            file,
            f"line {len(lines)}",
            element,
            f"expected {encoding} text (the header's character set), found the byte 0x{data[error.start]:02X} at"
            f" column {len(lines[-1]) + 1} (byte {error.start + 1} of the file)",
        )
    except LookupError:
        pass
    return ImportFileError(file, "", "(header)", f"cannot be read in the character set {encoding}")


class _ClosingTreeBuilder(TreeBuilder):
    """ofxtools' builder, holding every aggregate to its end tag and noting the line each element starts on."""

    def __init__(self, starts: list[int], lines: _Lines) -> None:
        super().__init__()
        self.open_tags: list[str] = []
        self.lines: dict[ET.Element, int] = {}
        self._starts = iter(starts)
        self._lines = lines
        self._root_closed = False

    def start(self, tag: str, attrs: dict[str, str], /) -> ET.Element:
        if self._root_closed:
            raise ParseError(f"Element <{tag}> after the end of <OFX>")
        element = super().start(tag, attrs)
        self.open_tags.append(tag)
        self.lines[element] = self._lines.of(next(self._starts, -1))
        return element

    def end(self, tag: str, /) -> ET.Element:
        if not self.open_tags:
            raise ParseError(f"End tag </{tag}> without a start tag")
        if self.open_tags[-1] != tag:
            raise ParseError(f"Mismatched tags: open='{self.open_tags[-1]}', close='{tag}'")
        self.open_tags.pop()
        self._root_closed = not self.open_tags
        return super().end(tag)


def _tree(body: str, lines: _Lines, file: str) -> tuple[ET.Element, dict[ET.Element, int]]:
    starts = [match.start() for match in TreeBuilder.regex.finditer(body) if not match["tag"].startswith("/")]
    builder = _ClosingTreeBuilder(starts, lines)
    try:
        builder.feed(body)
    except ParseError as error:
        raise _parse_error(str(error), body, lines, file) from None
    except Exception as error:  # the stdlib builder underneath raises its own on nonsense
        raise ImportFileError(file, "", "(OFX)", f"ofxtools cannot read the body: {_clip(str(error))}") from None
    if builder.open_tags:
        innermost = builder.open_tags[-1]
        closing = "".join(f"</{tag}>" for tag in reversed(builder.open_tags))
        raise ImportFileError(
            file,
            f"line {lines.last}",
            innermost,
            f"expected {_clip(closing, 120)} before the end of the file, found the end: the file is cut short",
        )
    if not builder.lines:
        raise ImportFileError(file, "", "OFX", "expected the <OFX> element after the header, found no elements")
    root = builder.close()
    if root.tag != "OFX":
        raise ImportFileError(file, f"line {builder.lines[root]}", root.tag, f"expected <OFX>, found <{root.tag}>")
    return root, builder.lines


def _parse_error(message: str, body: str, lines: _Lines, file: str) -> ImportFileError:
    position = _POSITION.search(message)
    start = int(position[1]) if position else -1
    line = lines.of(start)
    location = f"line {line}" if line else ""
    opened = _OPEN_TAG.match(body, start) if start >= 0 else None
    element = opened[1].lstrip("/") if opened else "(OFX)"
    tail, mismatch = _TAIL_TEXT.search(message), _MISMATCH.search(message)
    if tail:
        reason = f"expected the next element, found text outside any element: {_clip(tail[1], 60)!r}"
    elif mismatch:
        element = mismatch[2]
        reason = f"expected </{mismatch[1]}> before </{mismatch[2]}>, found </{mismatch[2]}>: the elements do not nest"
    else:
        reason = _clip(_POSITION.sub("", message))
    return ImportFileError(file, location, element, reason)


def _statements(root: ET.Element, reader: _Reader) -> list[ET.Element]:
    found: list[ET.Element] = []
    for wrapper in root.iter():
        statement_tag = STATEMENTS.get(wrapper.tag)
        if statement_tag is None:
            continue
        statement = wrapper.find(statement_tag)
        if statement is None:
            code = (wrapper.findtext("STATUS/CODE") or "").strip()
            message = (wrapper.findtext("STATUS/MESSAGE") or "").strip()
            raise ImportFileError(
                reader.file,
                f"line {reader.lines.get(wrapper, 0)}",
                statement_tag,
                f"expected a statement in <{wrapper.tag}>, found none (STATUS CODE {code or 'none'}"
                + (f": {_clip(message, 80)}" if message else "")
                + ")",
            )
        found.append(statement)
    if not found:
        message_sets = ", ".join(child.tag for child in root) or "none"
        raise ImportFileError(
            reader.file,
            "",
            "STMTRS",
            f"expected a bank (STMTRS) or credit card (CCSTMTRS) statement, found none (message sets: {message_sets})",
        )
    return found


@dataclass(frozen=True)
class _Entry:
    number: int
    line: int
    fitid: str
    booking_date: date
    value_date: date | None
    amount: Decimal
    reference: str
    description: str


@dataclass(frozen=True)
class _Statement:
    number: int
    line: int
    account: str
    currency: str
    from_date: date
    to_date: date
    closing: Decimal
    entries: tuple[_Entry, ...]


@dataclass(frozen=True)
class _Reader:
    file: str
    lines: dict[ET.Element, int]

    def error(self, element: ET.Element, where: str, field: str, reason: str) -> ImportFileError:
        line = self.lines.get(element, 0)
        return ImportFileError(self.file, f"line {line}, {where}" if line else where, field, reason)

    def statement(self, element: ET.Element, number: int) -> _Statement:
        where = f"statement {number}"
        if element.find("LEDGERBAL") is None:
            found = (
                "only AVAILBAL, the available balance, which is not the booked one"
                if element.find("AVAILBAL") is not None
                else "none"
            )
            raise self.error(
                element, where, "LEDGERBAL", f"expected LEDGERBAL, the ledger (closing) balance, found {found}"
            )
        model = self._converted(element, number)
        try:
            currency = checked_currency(str(model.curdef))
        except ValueError as error:
            raise self.error(element, where, "CURDEF", str(error)) from None
        account = str(model.account.acctid).strip()
        ledger = element.find("LEDGERBAL")
        assert ledger is not None  # checked above
        closing = self._amount(ledger, "BALAMT", model.ledgerbal.balamt, where)
        as_of = self._date(ledger, "DTASOF", where)
        transactions = element.find("BANKTRANLIST")
        if transactions is None or model.banktranlist is None:
            return _Statement(number, self.lines.get(element, 0), account, currency, as_of, as_of, closing, ())
        from_date = self._date(transactions, "DTSTART", where)
        to_date = self._date(transactions, "DTEND", where)
        if from_date > to_date:
            raise self.error(
                transactions, where, "DTEND", f"expected DTEND on or after DTSTART {from_date}, found {to_date}"
            )
        elements = transactions.findall("STMTTRN")
        if len(elements) != len(model.banktranlist):  # pragma: no cover - ofxtools converts each STMTTRN it is given
            raise self.error(transactions, where, "STMTTRN", "ofxtools did not convert every STMTTRN")
        entries = tuple(
            self._entry(raw, converted, index, number, currency)
            for index, (raw, converted) in enumerate(zip(elements, model.banktranlist, strict=True), start=1)
        )
        return _Statement(number, self.lines.get(element, 0), account, currency, from_date, to_date, closing, entries)

    def _converted(self, element: ET.Element, number: int) -> Any:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # unknown and private (INTU.XXX) elements are skipped, as OFX says
                return Aggregate.from_etree(element)
        except Exception as error:  # ofxtools raises ValueError, SyntaxError, TypeError, decimal errors ...
            path, field, reason = _culprit(element, error)
            raise self.error(path[-1], _where(path, number), field, reason) from None

    def _entry(self, element: ET.Element, model: Any, index: int, number: int, currency: str) -> _Entry:
        fitid = str(model.fitid).strip()
        where = f"entry {index} (FITID {fitid}) of statement {number}"
        for field in ("CURRENCY", "ORIGCURRENCY"):
            foreign = getattr(model, field.lower())
            if foreign is not None and foreign.cursym != currency:
                raise self.error(
                    element,
                    where,
                    field,
                    f"expected the statement's currency {currency} (CURDEF) for FITID {fitid}, found"
                    f" {foreign.cursym}: a transaction in another currency is not imported",
                )
        if model.correctaction is not None or model.correctfitid is not None:
            raise self.error(
                element,
                where,
                "CORRECTACTION",
                f"expected a transaction, found a correction ({model.correctaction or 'CORRECTFITID'} of FITID"
                f" {model.correctfitid}): corrections of earlier downloads are not imported",
            )
        name = model.extdname or model.name or (model.payee.name if model.payee is not None else None)
        parts = [str(part).strip() for part in (name, model.memo) if part and str(part).strip()]
        if len(parts) == 2 and parts[0] == parts[1]:
            parts = parts[:1]
        value_date = self._date(element, "DTUSER", where) if element.find("DTUSER") is not None else None
        return _Entry(
            number=index,
            line=self.lines.get(element, 0),
            fitid=fitid,
            booking_date=self._date(element, "DTPOSTED", where),
            value_date=value_date,
            amount=self._amount(element, "TRNAMT", model.trnamt, where),
            reference=str(model.checknum or model.refnum or "").strip(),
            description=_one_line(_characters(" / ".join(parts))),
        )

    def _amount(self, element: ET.Element, tag: str, value: Decimal, where: str) -> Decimal:
        raw = (element.findtext(tag) or "").strip()
        child = element.find(tag)
        at = child if child is not None else element
        if not _AMOUNT.fullmatch(raw):
            raise self.error(at, where, tag, f"expected an amount like -12.50 (no thousands separator), found {raw!r}")
        try:
            return checked_amount(value, raw)
        except ValueError as error:
            raise self.error(at, where, tag, str(error)) from None

    def _date(self, element: ET.Element, tag: str, where: str) -> date:
        """The date as the bank wrote it: ofxtools moves a time with an offset to UTC, which can change the day."""
        raw = (element.findtext(tag) or "").strip()
        match = _OFX_DATE.match(raw)
        try:
            if match is None:
                raise ValueError(raw)
            return date(int(match[1]), int(match[2]), int(match[3]))
        except ValueError:
            child = element.find(tag)
            raise self.error(
                child if child is not None else element, where, tag, f"expected a date like 20261130, found {raw!r}"
            ) from None


def _culprit(element: ET.Element, error: Exception) -> tuple[list[ET.Element], str, str]:
    """The element ofxtools cannot convert, as the path to it from `element`, its tag and what was expected.

    ofxtools converts a whole aggregate at once and its errors rarely say where (a bad TRNAMT is a bare
    decimal.InvalidOperation), so each child aggregate is converted on its own to find the innermost that fails, then
    its elements one by one with the converters ofxtools declares for them.
    """
    model = getattr(ofxtools.models, element.tag, None)
    if not (isinstance(model, type) and issubclass(model, Aggregate)):
        return [element], element.tag, f"ofxtools does not know the aggregate <{element.tag}>"
    for child in element:
        if child.tag.lower() in model.subaggregates:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    Aggregate.from_etree(child)
            except Exception as inner:
                path, field, reason = _culprit(child, inner)
                return [element, *path], field, reason
    for child in element:
        converter = model.elements.get(child.tag.lower())
        if converter is None or isinstance(converter, (Types.ListAggregate, Types.ListElement)):
            continue
        try:
            if child.text is None:
                converter.enforce_required(None)
            else:
                converter.convert(child.text)
        except Exception as inner:
            return [element, child], child.tag, _expected(converter, child.text, inner)
    for name, converter in model.spec.items():
        if converter.required and element.find(name.upper()) is None:
            listed = isinstance(converter, (Types.ListAggregate, Types.ListElement))
            if not listed:
                return [element], name.upper(), f"expected <{name.upper()}> in <{element.tag}>, found none"
    return [element], element.tag, f"ofxtools cannot read <{element.tag}>: {_clip(str(error) or type(error).__name__)}"


def _expected(converter: Types.Element, text: str | None, error: Exception) -> str:
    found = f"found {text!r}" if text is not None else "found it empty"
    if isinstance(converter, Types.Decimal):
        return f"expected an amount like -12.50 (no thousands separator), {found}"
    if isinstance(converter, Types.DateTime):
        return f"expected a date like 20261130 or 20261130120000[0:GMT], {found}"
    if isinstance(converter, Types.OneOf):
        valid = [str(value) for value in converter.valid]
        choices = ", ".join(valid) if len(valid) <= 20 else "an ISO code (e.g. " + ", ".join(valid[:3]) + ")"
        return f"expected one of {choices}, {found}"
    if isinstance(converter, Types.Bool):
        return f"expected Y or N, {found}"
    if isinstance(converter, Types.Integer):
        return f"expected a whole number, {found}"
    too_long = isinstance(converter, Types.String) and text is not None and len(text) > (converter.length or len(text))
    if too_long:
        return f"expected at most {getattr(converter, 'length', 0)} characters, {found}"
    return f"{_clip(str(error) or type(error).__name__)}, {found}"


def _where(path: list[ET.Element], number: int) -> str:
    """`entry 3 (FITID X) of statement 1` for an element inside a STMTTRN, else `statement 1`."""
    for element in path:
        if element.tag == "STMTTRN":
            parent = next((p for p in path if p.tag == "BANKTRANLIST"), None)
            index = parent.findall("STMTTRN").index(element) + 1 if parent is not None else 0
            fitid = (element.findtext("FITID") or "").strip()
            return f"entry {index} (FITID {fitid or 'none'}) of statement {number}"
    return f"statement {number}"


def _finished(statements: list[_Statement], file: str) -> list[BankStatement]:
    """Checks FITIDs (unique per account) and statement ids (unique in the file); entry id = FITID, with the account
    in front (`55555555:FITID`) only where another account in the file uses the same FITID."""
    first_use: dict[tuple[str, str], tuple[int, int]] = {}
    accounts_of_fitid: dict[str, set[str]] = {}
    for statement in statements:
        for entry in statement.entries:
            key = (statement.account, entry.fitid)
            if key in first_use:
                earlier_entry, earlier_statement = first_use[key]
                raise ImportFileError(
                    file,
                    f"line {entry.line}, entry {entry.number} of statement {statement.number}",
                    "FITID",
                    f"expected FITIDs unique for account {statement.account}, found {entry.fitid!r} again (first"
                    f" as entry {earlier_entry} of statement {earlier_statement})",
                )
            first_use[key] = (entry.number, statement.number)
            accounts_of_fitid.setdefault(entry.fitid, set()).add(statement.account)
    ids = [f"{s.account}:{s.from_date:%Y%m%d}-{s.to_date:%Y%m%d}" for s in statements]
    first_statement: dict[str, int] = {}
    for statement, statement_id in zip(statements, ids, strict=True):
        if statement_id in first_statement:
            raise ImportFileError(
                file,
                f"line {statement.line}, statement {statement.number}",
                "BANKTRANLIST",
                f"expected each account and period once, found account {statement.account} from"
                f" {statement.from_date} to {statement.to_date} again (first in statement"
                f" {first_statement[statement_id]})",
            )
        first_statement[statement_id] = statement.number
    result = []
    for statement, statement_id in zip(statements, ids, strict=True):
        entries = tuple(
            StatementEntry(
                entry_id=entry.fitid
                if len(accounts_of_fitid[entry.fitid]) == 1
                else f"{statement.account}:{entry.fitid}",
                booking_date=entry.booking_date,
                value_date=entry.value_date,
                amount=entry.amount,
                reference=entry.reference,
                bank_reference=entry.fitid,
                description=entry.description,
            )
            for entry in statement.entries
        )
        movements = sum((entry.amount for entry in entries), Decimal("0"))
        result.append(
            BankStatement(
                statement_id=statement_id,
                bank_account=statement.account,
                currency=statement.currency,
                from_date=statement.from_date,
                to_date=statement.to_date,
                opening_balance=checked_amount(statement.closing - movements, "closing - movements"),
                closing_balance=statement.closing,
                entries=entries,
                source=file,
                format=StatementFormat.OFX,
                opening_stated=False,
            )
        )
    return result


def _characters(text: str) -> str:
    """Numeric character references (`&#233;`) as the characters they stand for; ofxtools decodes named ones only."""

    def character(match: re.Match[str]) -> str:
        code = int(match[1]) if match[1] else int(match[2], 16)
        return chr(code) if 0 < code <= 0x10FFFF else match[0]

    return _CHARACTER_REFERENCE.sub(character, text)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:MAX_DESCRIPTION_CHARS].rstrip()


def _clip(text: str, limit: int = MAX_REASON_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
