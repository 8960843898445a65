"""SWIFT MT940 customer statements, read with the `mt-940` library into BankStatements.

A file holds one or more statements, each starting at `:20:`, with or without the SWIFT envelope (`{1:...}{2:...}{4:`
before, `-}` after). This module splits the file into tags itself, so every error names its line, checks their order,
and hands each statement's tags to `mt940.models.Transactions.parse`; the library reads the fields (balances, the
`:61:` statement line with its entry date across the year end, the structured `:86:` subfields). When the library
fails, the statement is read again tag by tag to name the tag. The library's patterns are lenient on purpose (a
balance with trailing text, an amount with a dot, a customer reference longer than 16 characters are silently cut or
misread), so each tag is first checked against the SWIFT layout and refused with the subfield that is wrong.

Signs follow the statement model: C and RD (reversal of a debit) positive, D and RC (reversal of a credit) negative.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import mt940

from countersign.importers.amounts import checked_amount, checked_currency
from countersign.importers.errors import ImportFileError
from countersign.importers.files import read_bounded
from countersign.importers.statement import BankStatement, StatementEntry, StatementFormat

MAX_BYTES = 200 * 1024 * 1024
MAX_DESCRIPTION_CHARS = 512
SWIFT_LINE_CHARS = 65
"""A `:86:` line this long was cut by the bank mid-text: it joins the next line without a space."""
ENCODINGS = {"utf-8": "utf-8", "utf8": "utf-8", "cp1252": "cp1252", "windows-1252": "cp1252", "latin-1": "latin-1"}
ENCODINGS |= {"latin1": "latin-1", "iso-8859-1": "latin-1"}

_OPTIONS = mt940.Options.all()
"""Every fix the library offers: RC signed negative, lowercase marks, `:86:` not cut after 9 x 65 characters, ..."""
_BOM = b"\xef\xbb\xbf"
_NEWLINE = re.compile(r"\r\n|\r|\n")
_NEWLINE_BYTES = re.compile(rb"\r\n|\r|\n")
_TAG_LINE = re.compile(r":(?P<tag>[0-9]{2}[A-Z]?|NS):(?P<value>.*)")
_OPENING = ("60F", "60M")
_CLOSING = ("62F", "62M")
_READ = frozenset({"20", "25", "25P", "28", "28C", *_OPENING, "61", "86", *_CLOSING})
_IGNORED = frozenset({"13D", "21", "34F", "64", "65", "90C", "90D", "NS"})
"""Known tags this importer has no use for: report time, related reference, floor limit, available and forward
available balances, sums of entries, bank extensions."""
_MULTI_LINE = {"61": 2, "86": None, "NS": None, "25P": 2}
_NO_REFERENCE = "NONREF"
_NOT_PROVIDED = "NOTPROVIDED"
_BALANCE = re.compile(r"(?P<mark>[CD])(?P<date>[0-9]{6})(?P<currency>[A-Z]{3})(?P<amount>.*)")
_AMOUNT = re.compile(r"[0-9]{1,14},[0-9]*")
_STATEMENT_NUMBER = re.compile(r"[0-9]{1,5}(/[0-9]{1,5})?")
_TRANSACTION_TYPE = re.compile(r"[A-Z][A-Z0-9]{3}")
_BALANCE_LAYOUT = "mark C or D, date YYMMDD, currency, amount with a decimal comma, e.g. C261130GBP1000,00"


@dataclass
class _Tag:
    line: int
    tag: str
    lines: list[str]

    @property
    def label(self) -> str:
        return f":{self.tag}:"

    @property
    def value(self) -> str:
        return "\n".join(self.lines)


@dataclass
class _Entry:
    number: int
    line: int
    booking_date: date
    value_date: date
    amount: Decimal
    reference: str
    bank_reference: str
    reversal: bool
    funds_code: str
    supplementary: str
    details: dict[str, Any]
    """Everything the library read for the entry: its `:61:` and, when it has one, its `:86:`."""


@dataclass
class _Statement:
    line: int
    base_id: str
    account: str
    currency: str
    opening: Decimal
    closing: Decimal
    from_date: date
    to_date: date
    entries: list[_Entry]


def read_mt940(path: Path, *, encoding: str = "utf-8", max_bytes: int = MAX_BYTES) -> list[BankStatement]:
    """Every statement in the MT940 file at `path`, in file order.

    `encoding` is utf-8 (a BOM is skipped), cp1252 or latin-1. Raises ImportFileError naming the file, the line or
    statement and the tag for anything it cannot import: a byte the encoding cannot read, a tag out of place or not
    in the SWIFT layout, a currency that differs from the opening balance's, balances that do not add up.
    """
    file = path.name
    text = _decode(read_bounded(path, file, max_bytes), file, encoding)
    groups = _statement_tags(_tags(text, file), file)
    if not groups:
        raise ImportFileError(file, "", ":20:", "expected at least one statement starting with :20:, found none")
    statements = [_read_statement(tags, file) for tags in groups]
    return _finished(statements, file)


def _decode(data: bytes, file: str, encoding: str) -> str:
    codec = ENCODINGS.get(encoding.strip().lower())
    if codec is None:
        raise ImportFileError(file, "", "(encoding)", f"expected utf-8, cp1252 or latin-1, found {encoding!r}")
    start = len(_BOM) if codec == "utf-8" and data.startswith(_BOM) else 0
    try:
        return data[start:].decode(codec)
    except UnicodeDecodeError as error:
        offset = start + error.start
        lines = _NEWLINE_BYTES.split(data[:offset])
        line, column = len(lines), len(lines[-1]) + 1
        readable = _NEWLINE.split(data.decode(codec, errors="replace"))
        raise ImportFileError(
            file,
            f"line {line}",
            _tag_of_line(readable, line),
            f"expected {encoding} text, found the byte 0x{data[offset]:02X} at column {column} (byte {offset + 1} of"
            " the file), which is not valid in that encoding",
        ) from None


def _tag_of_line(lines: list[str], line: int) -> str:
    """The tag whose value the 1-based `line` belongs to, for naming the field of an encoding error."""
    for text in reversed(lines[:line]):
        match = _TAG_LINE.match(text)
        if match:
            return f":{match['tag']}:"
    return "(encoding)"


def _tags(text: str, file: str) -> list[_Tag]:
    """The file's tags with their line numbers and continuation lines; the SWIFT envelope is dropped.

    Lines before the first tag of a message (a bank's header lines, `{1:...}{2:...}{4:`) and after its end (`-` or
    `-}`, `{5:...}` trailers) are outside any statement and skipped.
    """
    tags: list[_Tag] = []
    current: _Tag | None = None
    for number, raw in enumerate(_NEWLINE.split(text), start=1):
        line = raw.rstrip()
        if line.startswith("{"):  # the envelope: {1:...}{2:...}{3:...}{4: then the text block
            current = None
            block = line.find("{4:")
            line = line[block + 3 :].rstrip() if block >= 0 else ""
        if not line.strip():
            continue
        if line.strip() == "-" or line.startswith("-}"):  # a lone `-` ends a message in files without blocks
            current = None
            continue
        match = _TAG_LINE.match(line)
        if match:
            tag = match["tag"]
            if tag not in _READ and tag not in _IGNORED:
                known = ", ".join(f":{name}:" for name in sorted(_READ | _IGNORED))
                raise ImportFileError(
                    file, f"line {number}", f":{tag}:", f"expected an MT940 tag ({known}), found :{tag}:"
                )
            current = _Tag(number, tag, [match["value"]])
            tags.append(current)
        elif current is not None:
            limit = _MULTI_LINE.get(current.tag, 1)
            if limit is not None and len(current.lines) >= limit:
                raise ImportFileError(
                    file,
                    f"line {number}",
                    current.label,
                    f"expected {current.label} (line {current.line}) to have at most {limit} line(s), found another:"
                    f" {line!r}",
                )
            current.lines.append(line)
    return tags


def _statement_tags(tags: list[_Tag], file: str) -> list[list[_Tag]]:
    groups: list[list[_Tag]] = []
    for tag in tags:
        if tag.tag == "20":
            groups.append([tag])
        elif not groups:
            raise ImportFileError(
                file, f"line {tag.line}", tag.label, f"expected :20: to start a statement, found {tag.label}"
            )
        else:
            groups[-1].append(tag)
    return groups


def _read_statement(tags: list[_Tag], file: str) -> _Statement:
    """One statement: the order and layout of its tags checked here, their values read by the mt940 library."""
    first = tags[0]
    reference = first.value.strip()
    if not reference:
        raise ImportFileError(file, f"line {first.line}", ":20:", "expected a transaction reference, found none")
    seen: dict[str, _Tag] = {}
    fed: list[_Tag] = []
    after_entry = False  # an :86: directly after a :61: (or its :86:) belongs to that entry
    for tag in tags:
        kind = _kind(tag.tag)
        if tag.tag in _IGNORED:
            continue
        if kind in ("25", "28", "opening", "closing"):
            if kind in seen:
                raise ImportFileError(
                    file,
                    f"line {tag.line}",
                    tag.label,
                    f"expected one {seen[kind].label} per statement, found a second (the first at line"
                    f" {seen[kind].line})",
                )
            if kind in ("25", "28") and "opening" in seen:
                raise ImportFileError(
                    file,
                    f"line {tag.line}",
                    tag.label,
                    f"expected {tag.label} before the opening balance, found it after",
                )
            seen[kind] = tag
        if kind == "opening" and "25" not in seen:
            raise ImportFileError(
                file, f"line {tag.line}", ":25:", "expected the account :25: before the opening balance, found none"
            )
        if kind in ("61", "closing") and "opening" not in seen:
            raise ImportFileError(
                file, f"line {tag.line}", ":60F:", f"expected the opening balance :60F: before {tag.label}, found none"
            )
        if kind == "61" and "closing" in seen:
            raise ImportFileError(
                file,
                f"line {tag.line}",
                ":61:",
                f"expected every :61: before the closing balance {seen['closing'].label} (line {seen['closing'].line}),"
                " found one after it",
            )
        if kind == "86" and not after_entry:
            continue  # information for the whole statement, not an entry's
        _check_layout(tag, file)
        fed.append(tag)
        after_entry = kind in ("61", "86")
    base_id = seen["28"].value.strip() if "28" in seen else reference
    where = f"statement {base_id}"
    for kind, name in (("25", ":25:"), ("opening", ":60F:"), ("closing", ":62F:")):
        if kind not in seen:
            raise ImportFileError(
                file,
                where,
                name,
                f"expected {_EXPECTED[kind]} in the statement on lines {first.line} to"
                f" {tags[-1].line + len(tags[-1].lines) - 1}, found none",
            )
    transactions = _parsed(fed, file)
    lines = [tag for tag in fed if tag.tag == "61"]
    if len(transactions) != len(lines):  # pragma: no cover - every :61: checked above opens one transaction
        raise ImportFileError(
            file, where, ":61:", f"expected {len(lines)} statement lines, the mt940 library read {len(transactions)}"
        )
    entries = [
        _entry(t.data, number, tag, file) for number, (t, tag) in enumerate(zip(transactions, lines, strict=True), 1)
    ]
    return _balanced(transactions, seen, entries, base_id, first.line, file)


def _parsed(tags: list[_Tag], file: str) -> mt940.models.Transactions:
    """The statement read by the library in one go; when it fails, again tag by tag to name the tag it fails on."""
    transactions = mt940.models.Transactions(options=_OPTIONS)
    try:
        transactions.parse("\n".join(f"{tag.label}{tag.value}" for tag in tags))
    except Exception as error:  # the library raises RuntimeError, ValueError, decimal errors, KeyError ...
        located = mt940.models.Transactions(options=_OPTIONS)
        for tag in tags:
            _feed(located, tag, file)
        raise ImportFileError(  # pragma: no cover - what fails on the whole statement fails on one of its tags
            file, f"line {tags[0].line}", tags[0].label, f"the mt940 library cannot read the statement: {error!r}"
        ) from None
    return transactions


_EXPECTED = {
    "25": "the account :25:",
    "opening": "an opening balance :60F: or :60M:",
    "closing": "a closing balance :62F: or :62M:",
}


def _kind(tag: str) -> str:
    if tag in _OPENING:
        return "opening"
    if tag in _CLOSING:
        return "closing"
    return tag[:2]


def _check_layout(tag: _Tag, file: str) -> None:
    """Refuses what the library would read leniently into a wrong value; says which subfield is wrong."""
    value = tag.value.strip()
    problem: str | None = None
    if tag.tag in ("25", "25P") and not tag.lines[0].strip():
        problem = "expected the account (an IBAN, or bank code and account number), found none"
    elif tag.tag in ("28", "28C") and not _STATEMENT_NUMBER.fullmatch(value):
        problem = f"expected a statement number like 00042/001 (5 digits, optionally / and 5 digits), found {value!r}"
    elif tag.tag in _OPENING or tag.tag in _CLOSING:
        problem = _balance_problem(value)
    elif tag.tag == "61":
        problem = _statement_line_problem(tag.lines[0].strip())
    if problem:
        raise ImportFileError(file, f"line {tag.line}", tag.label, problem)


def _balance_problem(value: str) -> str | None:
    match = _BALANCE.fullmatch(value)
    if match is None:
        return f"expected a balance ({_BALANCE_LAYOUT}), found {value!r}"
    if _yymmdd(match["date"]) is None:
        return f"expected a date YYMMDD after the mark, found {match['date']!r} in {value!r}"
    amount = match["amount"]
    if not _AMOUNT.fullmatch(amount) or len(amount) > 15:
        return f"expected an amount with a decimal comma like 1000,00 after the currency, found {amount!r} in {value!r}"
    return None


def _statement_line_problem(line: str) -> str | None:
    """The first subfield of a `:61:` first line that is not in the layout 6!n[4!n]2a[1!a]15d1!a3!c16x[//16x]."""
    rest = line
    if _yymmdd(rest[:6]) is None:
        return f"expected the value date YYMMDD at the start, found {rest[:6]!r} in {line!r}"
    value_date = _yymmdd(rest[:6])
    rest = rest[6:]
    entry = re.match(r"[0-9]{4}", rest)
    if entry:
        if value_date is not None and not _entry_date_exists(entry[0], value_date.year):
            return f"expected the entry date MMDD after the value date, found {entry[0]!r} in {line!r}"
        rest = rest[4:]
    mark = re.match(r"R?[CD]", rest)
    if not mark:
        return f"expected the debit/credit mark C, D, RC or RD after the date, found {rest[:2]!r} in {line!r}"
    rest = rest[len(mark[0]) :]
    if rest[:1].isalpha():
        rest = rest[1:]  # the funds code; checked against the currency once it is known
    amount = re.match(r"[0-9.,]*", rest)
    amount_text = amount[0] if amount else ""
    if not _AMOUNT.fullmatch(amount_text) or len(amount_text) > 15:
        return f"expected an amount with a decimal comma like 25,00 after the mark, found {amount_text!r} in {line!r}"
    rest = rest[len(amount_text) :]
    if not _TRANSACTION_TYPE.match(rest):
        return f"expected a transaction type like NTRF after the amount, found {rest[:4]!r} in {line!r}"
    rest = rest[4:]
    customer, _, bank = rest.partition("//")
    if len(customer) > 16:
        return f"expected a customer reference of at most 16 characters (NONREF when none), found {customer!r}"
    if len(bank) > 23:
        return f"expected a bank reference of at most 23 characters after //, found {bank!r}"
    return None


def _yymmdd(text: str) -> date | None:
    if not re.fullmatch(r"[0-9]{6}", text):
        return None
    try:
        return date(2000 + int(text[:2]), int(text[2:4]), int(text[4:6]))
    except ValueError:
        return None


def _entry_date_exists(mmdd: str, year: int) -> bool:
    for candidate in (year - 1, year, year + 1):  # the entry date may fall across the year end from the value date
        try:
            date(candidate, int(mmdd[:2]), int(mmdd[2:]))
        except ValueError:
            continue
        return True
    return False


def _feed(transactions: mt940.models.Transactions, tag: _Tag, file: str) -> None:
    try:
        transactions.parse(f"{tag.label}{tag.value}")
    except Exception as error:  # the library raises RuntimeError, ValueError, decimal errors, KeyError ...
        raise ImportFileError(
            file,
            f"line {tag.line}",
            tag.label,
            f"the mt940 library cannot read {tag.value!r}: {type(error).__name__}: {error}",
        ) from None


def _entry(data: dict[str, Any], number: int, tag: _Tag, file: str) -> _Entry:
    where = f"line {tag.line}"
    try:
        amount = checked_amount(data["amount"].amount, tag.value)
    except ValueError as error:
        raise ImportFileError(file, where, ":61:", str(error)) from None
    value_date = _plain(data["date"])
    entry_date = data.get("entry_date")
    status = str(data.get("status") or "").upper()
    # A structured :86: with a KREF+ subfield appends it to the :61: customer reference on a new line.
    customer = str(data.get("customer_reference") or "").split("\n")[0].strip()
    return _Entry(
        number=number,
        line=tag.line,
        booking_date=_plain(entry_date) if entry_date is not None else value_date,
        value_date=value_date,
        amount=amount,
        reference="" if customer.upper() == _NO_REFERENCE else customer,
        bank_reference=str(data.get("bank_reference") or "").strip(),
        reversal=status.startswith("R"),
        funds_code=str(data.get("funds_code") or ""),
        supplementary=str(data.get("extra_details") or "").strip(),
        details=data,
    )


def _plain(value: date) -> date:
    return date(value.year, value.month, value.day)


def _balanced(
    transactions: mt940.models.Transactions,
    seen: dict[str, _Tag],
    entries: list[_Entry],
    base_id: str,
    line: int,
    file: str,
) -> _Statement:
    opening_tag, closing_tag = seen["opening"], seen["closing"]
    data = transactions.data
    opening: Any = data.get("final_opening_balance") or data.get("intermediate_opening_balance")
    closing: Any = data.get("final_closing_balance") or data.get("intermediate_closing_balance")
    opening_amount = _balance_amount(opening, opening_tag, file)
    closing_amount = _balance_amount(closing, closing_tag, file)
    try:
        currency = checked_currency(str(opening.amount.currency))
    except ValueError as error:
        raise ImportFileError(file, f"line {opening_tag.line}", opening_tag.label, str(error)) from None
    closing_currency = str(closing.amount.currency)
    if closing_currency != currency:
        raise ImportFileError(
            file,
            f"line {closing_tag.line}",
            closing_tag.label,
            f"expected {currency}, the currency of {opening_tag.label} (line {opening_tag.line}) of statement"
            f" {base_id}, found {closing_currency}",
        )
    for entry in entries:
        funds_code = entry.funds_code
        if funds_code and funds_code.upper() != currency[2]:
            raise ImportFileError(
                file,
                f"line {entry.line}",
                ":61:",
                f"expected the funds code {currency[2]} (the third letter of the statement's currency {currency}) or"
                f" none, found {funds_code!r}",
            )
    from_date, to_date = _plain(opening.date), _plain(closing.date)
    if to_date < from_date:
        raise ImportFileError(
            file,
            f"line {closing_tag.line}",
            closing_tag.label,
            f"expected the closing date on or after the opening date {from_date} (line {opening_tag.line}), found"
            f" {to_date}",
        )
    movements = sum((entry.amount for entry in entries), Decimal("0"))
    difference = closing_amount - opening_amount - movements
    if difference:
        raise ImportFileError(
            file,
            f"statement {base_id}",
            closing_tag.label,
            f"opening {_money(currency, opening_amount)} + movements {_money(currency, movements)} ="
            f" {_money(currency, opening_amount + movements)}, but the closing balance (line {closing_tag.line}) is"
            f" {_money(currency, closing_amount)} (difference {_money(currency, difference)})",
        )
    account_tag = seen["25"]
    return _Statement(
        line=line,
        base_id=base_id,
        account=account_tag.lines[0].strip(),
        currency=currency,
        opening=opening_amount,
        closing=closing_amount,
        from_date=from_date,
        to_date=to_date,
        entries=entries,
    )


def _balance_amount(balance: Any, tag: _Tag, file: str) -> Decimal:
    try:
        return checked_amount(balance.amount.amount, tag.value)
    except (AttributeError, ValueError) as error:
        raise ImportFileError(file, f"line {tag.line}", tag.label, f"expected a balance amount: {error}") from None


def _finished(statements: list[_Statement], file: str) -> list[BankStatement]:
    ids = _statement_ids(statements, file)
    fallback_ids = {f"{ids[index]}-{entry.number}" for index, s in enumerate(statements) for entry in s.entries}
    bank_references = Counter(entry.bank_reference for s in statements for entry in s.entries if entry.bank_reference)
    result = []
    for index, statement in enumerate(statements):
        statement_id = ids[index]
        entries = []
        for entry in statement.entries:
            unique = bank_references[entry.bank_reference] == 1 and entry.bank_reference not in fallback_ids
            entries.append(
                StatementEntry(
                    entry_id=entry.bank_reference
                    if entry.bank_reference and unique
                    else f"{statement_id}-{entry.number}",
                    booking_date=entry.booking_date,
                    value_date=entry.value_date,
                    amount=entry.amount,
                    reference=entry.reference or _end_to_end(entry),
                    bank_reference=entry.bank_reference,
                    description=_description(entry),
                    reversal=entry.reversal,
                )
            )
        result.append(
            BankStatement(
                statement_id=statement_id,
                bank_account=statement.account,
                currency=statement.currency,
                from_date=statement.from_date,
                to_date=statement.to_date,
                opening_balance=statement.opening,
                closing_balance=statement.closing,
                entries=tuple(entries),
                source=file,
                format=StatementFormat.MT940,
            )
        )
    return result


def _statement_ids(statements: list[_Statement], file: str) -> list[str]:
    """`:28C:` (else `:20:`), unique in the file: banks that number every statement 0 or 1/1 get the closing date
    added (`0@2026-11-30`), and where that still repeats, the account in front (`GB33...:0@2026-11-30`)."""
    ids = [statement.base_id for statement in statements]
    for with_account in (False, True):
        counts = Counter(ids)
        ids = [_qualified(s, with_account) if counts[ids[i]] > 1 else ids[i] for i, s in enumerate(statements)]
    counts = Counter(ids)
    for index, statement in enumerate(statements):
        if counts[ids[index]] > 1:
            first = next(s for i, s in enumerate(statements) if ids[i] == ids[index])
            raise ImportFileError(
                file,
                f"statement {statement.base_id}",
                ":28C:",
                f"expected each statement once, found statement {statement.base_id} of account {statement.account}"
                f" closing {statement.to_date} twice (lines {first.line} and {statement.line})",
            )
    return ids


def _qualified(statement: _Statement, with_account: bool) -> str:
    dated = f"{statement.base_id}@{statement.to_date.isoformat()}"
    return f"{statement.account}:{dated}" if with_account else dated


def _end_to_end(entry: _Entry) -> str:
    """The `EREF+` end-to-end reference of a structured `:86:`, for an entry whose `:61:` says NONREF."""
    reference = str(entry.details.get("end_to_end_reference") or "").strip()
    return "" if reference.upper() == _NOT_PROVIDED else reference


def _description(entry: _Entry) -> str:
    details = entry.details
    if "transaction_details" in details:
        text = _joined(str(details["transaction_details"] or ""))
    elif "posting_text" in details:  # the library recognised `?00`-style subfields (German banks) and split them
        parts = (details.get("posting_text"), details.get("applicant_name"), details.get("purpose"))
        text = " ".join(str(part) for part in parts if part)
    else:
        text = entry.supplementary
    flat = " ".join(text.split())
    return flat[:MAX_DESCRIPTION_CHARS].rstrip()


def _joined(text: str) -> str:
    """`:86:` lines as one: a line the bank filled to 65 characters was cut mid-word and joins without a space."""
    lines = text.split("\n")
    joined = lines[0]
    for previous, line in pairwise(lines):
        joined += line if len(previous) >= SWIFT_LINE_CHARS else f" {line}"
    return joined


def _money(currency: str, amount: Decimal) -> str:
    return f"{currency} {amount + 0:.2f}"
