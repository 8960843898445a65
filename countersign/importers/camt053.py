"""ISO 20022 camt.053 bank-to-customer statements, validated against the official XSD before anything is read.

Versions camt.053.001.02 to .13 read the same: elements are found by local name inside the document's own
namespace, and an entry's status is read in both shapes (`<Sts>BOOK</Sts>` up to .06, `<Sts><Cd>BOOK</Cd></Sts>`
from .08). Validation needs the XSD of the document's version; `schema` is one .xsd file or a folder of them.

Hostile files are refused before they cost anything: a size cap, no DOCTYPE (no entities, no external fetches),
no network, a bound on entries.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path

import xmlschema
from lxml import etree

from countersign.importers.amounts import checked_amount, checked_currency
from countersign.importers.errors import ImportFileError
from countersign.importers.files import read_bounded
from countersign.importers.statement import BankStatement, StatementEntry, StatementFormat

NAMESPACE_PREFIX = "urn:iso:std:iso:20022:tech:xsd:camt.053.001."
MAX_BYTES = 200 * 1024 * 1024
MAX_ENTRIES = 1_000_000
"""Entries (booked or not) in one file; a month of a busy account is tens of thousands."""
MAX_DESCRIPTION_CHARS = 512
MAX_REASON_CHARS = 200
SCHEMA_NOT_CONFIGURED = (
    "camt.053 files are validated against the ISO 20022 XSD before import: set COUNTERSIGN_CAMT053_XSD to the"
    " camt.053 .xsd file or a folder of them"
)

_NAMESPACE = re.compile(re.escape(NAMESPACE_PREFIX) + r"[0-9]{2}")
_DOCTYPE_MARKS = tuple("<!DOCTYPE".encode(codec) for codec in ("utf-8", "utf-16-le", "utf-16-be"))
_LINE_COLUMN = re.compile(r",? line \d+, column \d+$")
_BOOKED = "BOOK"
_NOT_PROVIDED = "NOTPROVIDED"


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, remove_comments=True
    )


def read_camt053(path: Path, *, schema: Path | None, max_bytes: int = MAX_BYTES) -> list[BankStatement]:
    """Every statement (`BkToCstmrStmt/Stmt`) in the camt.053 file at `path`, booked entries only.

    Raises ImportFileError naming the file, the line (and statement/entry) and the element for anything it cannot
    import: too large, not XML, a DOCTYPE, not camt.053, no XSD for its version, invalid against the XSD, an entry
    in another currency, balances that do not add up, a statement Id given twice.
    """
    file = path.name
    data = read_bounded(path, file, max_bytes)
    if schema is None:
        raise ImportFileError(file, "", "(schema)", SCHEMA_NOT_CONFIGURED)
    root = _parse(data, file)
    namespace = _camt053_namespace(root, file)
    entries = sum(1 for _ in root.iter(f"{{{namespace}}}Ntry"))
    if entries > MAX_ENTRIES:
        raise ImportFileError(
            file, "", "Ntry", f"expected at most {MAX_ENTRIES:,} entries in one file, found {entries:,}"
        )
    _validate(root, _xsd_for(namespace, schema, root, file), namespace, file)
    return _Reader(file, namespace).statements(root)


def _refuse_doctype(file: str, data: bytes) -> ImportFileError:
    at = data.find(_DOCTYPE_MARKS[0])
    line = data[:at].count(b"\n") + 1 if at >= 0 else None  # a UTF-16 file is named without a line
    return ImportFileError(
        file,
        f"line {line}" if line else "",
        "DOCTYPE",
        "a camt.053 file has no document type declaration; this one declares one (entities or an external DTD"
        " are never read)",
    )


def _parse(data: bytes, file: str) -> etree._Element:
    try:
        root = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as error:
        if any(mark in data for mark in _DOCTYPE_MARKS):  # billion laughs stops the parser; say why
            raise _refuse_doctype(file, data) from None
        message = _LINE_COLUMN.sub("", str(error.msg or error)).strip()
        raise ImportFileError(file, f"line {error.lineno or 1}", "(XML)", f"not well-formed XML: {message}") from None
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None or docinfo.externalDTD is not None:
        raise _refuse_doctype(file, data)
    return root


def _camt053_namespace(root: etree._Element, file: str) -> str:
    tag = etree.QName(root)
    namespace = tag.namespace or ""
    if tag.localname != "Document" or not _NAMESPACE.fullmatch(namespace):
        found = f"{tag.localname} in the namespace {namespace}" if namespace else f"{tag.localname} in no namespace"
        raise ImportFileError(
            file,
            f"line {root.sourceline}",
            "Document",
            f"expected a camt.053 Document in the namespace {NAMESPACE_PREFIX}NN, found {found}",
        )
    return namespace


@functools.lru_cache(maxsize=32)
def _target_namespace(xsd: Path) -> str | None:
    """The targetNamespace an XSD declares; None when the file is not an XSD."""
    try:
        root = etree.parse(str(xsd), _parser()).getroot()
    except (OSError, etree.XMLSyntaxError):
        return None
    declared: str | None = root.get("targetNamespace")
    return declared


@functools.lru_cache(maxsize=8)
def _compiled_schema(xsd: Path) -> xmlschema.XMLSchema:
    """The XSD compiled once per process: the 106 KB camt.053.001.08 XSD takes 0.4 to 0.8 s."""
    return xmlschema.XMLSchema(str(xsd), allow="sandbox")


def _xsd_for(namespace: str, schema: Path, root: etree._Element, file: str) -> Path:
    """The XSD file, of `schema` (a file or a folder), declaring the document's namespace."""
    if schema.is_dir():
        candidates = sorted(schema.glob("*.xsd"))
    elif schema.is_file():
        candidates = [schema]
    else:
        raise ImportFileError(file, "", "(schema)", f"{schema.name} does not exist: {SCHEMA_NOT_CONFIGURED}")
    by_namespace: dict[str, Path] = {}
    for candidate in candidates:
        declared = _target_namespace(candidate.resolve())
        if declared is not None:
            by_namespace.setdefault(declared, candidate.resolve())
    if namespace not in by_namespace:
        available = ", ".join(sorted(by_namespace)) or "none"
        raise ImportFileError(
            file,
            f"line {root.sourceline}",
            "Document",
            f"no XSD for the namespace {namespace} in {schema.name}; the XSDs there declare: {available}",
        )
    return by_namespace[namespace]


@functools.lru_cache(maxsize=8)
def _libxml2_schema(xsd: Path) -> etree.XMLSchema | None:
    """The XSD compiled by libxml2 (lxml), which validates a 50,000-entry statement in a fraction of a second; None
    when libxml2 cannot compile it (then xmlschema alone decides)."""
    try:
        return etree.XMLSchema(etree.parse(str(xsd), _parser()))
    except (etree.XMLSchemaParseError, etree.XMLSyntaxError, OSError):
        return None


def _compiled(xsd: Path, file: str) -> xmlschema.XMLSchema:
    try:
        return _compiled_schema(xsd)
    except (xmlschema.XMLSchemaException, OSError) as error:
        reason = _one_line(str(error), MAX_REASON_CHARS)
        raise ImportFileError(file, "", "(schema)", f"{xsd.name} does not compile: {reason}") from None


def _validate(root: etree._Element, xsd: Path, namespace: str, file: str) -> None:
    """Valid against the XSD, or one error naming the line and the element. libxml2 validates first (fast); a
    document it refuses, or an XSD it cannot compile, goes to xmlschema, whose reasons name the element's path."""
    fast = _libxml2_schema(xsd)
    if fast is not None and fast.validate(root.getroottree()):
        return
    compiled = _compiled(xsd, file)
    document = xmlschema.XMLResource(root.getroottree(), allow="none")  # the document fetches nothing
    error = next(iter(compiled.iter_errors(document, use_location_hints=False)), None)
    if error is None:
        if fast is None:
            return
        first = fast.error_log[0]  # the validators disagree: libxml2's refusal stands, in its own words
        reason = first.message.replace(f"{{{namespace}}}", "")
        raise ImportFileError(
            file, f"line {first.line}", "Document", _one_line(f"not valid against the XSD: {reason}", MAX_REASON_CHARS)
        )
    element = error.elem if isinstance(error.elem, etree._Element) else None
    line = error.sourceline or (element.sourceline if element is not None else None)
    location = ", ".join(part for part in (f"line {line}" if line else "", _where(element, namespace)) if part)
    field = error.path or (etree.QName(element).localname if element is not None else "Document")
    reason = (error.reason or str(error)).replace(f"{{{namespace}}}", "")
    raise ImportFileError(file, location, field, _one_line(f"not valid against the XSD: {reason}", MAX_REASON_CHARS))


def _where(element: etree._Element | None, namespace: str) -> str:
    """`entry 3 of statement X` or `statement X` for an element inside one, else ""."""
    statement = entry = None
    while element is not None:
        if element.tag == f"{{{namespace}}}Ntry":
            entry = element
        elif element.tag == f"{{{namespace}}}Stmt":
            statement = element
        element = element.getparent()
    if statement is None:
        return ""
    statement_id = (statement.findtext(f"{{{namespace}}}Id") or "").strip() or "(no Id)"
    if entry is None:
        return f"statement {statement_id}"
    number = statement.findall(f"{{{namespace}}}Ntry").index(entry) + 1
    return f"entry {number} of statement {statement_id}"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class _Booked:
    """A booked entry before its id is chosen (the choice needs every entry in the file)."""

    number: int
    booking_date: date
    value_date: date | None
    amount: Decimal
    reference: str
    bank_reference: str
    entry_reference: str
    description: str
    reversal: bool
    transactions: int


@dataclass(frozen=True)
class _Statement:
    statement_id: str
    bank_account: str
    currency: str
    from_date: date
    to_date: date
    opening_balance: Decimal
    closing_balance: Decimal
    entries: tuple[_Booked, ...]


@dataclass(frozen=True)
class _Reader:
    """Reads a validated document by local names inside its namespace."""

    file: str
    namespace: str

    def find(self, element: etree._Element, path: str) -> etree._Element | None:
        return element.find(_qualified(self.namespace, path))

    def findall(self, element: etree._Element, path: str) -> list[etree._Element]:
        found: list[etree._Element] = element.findall(_qualified(self.namespace, path))
        return found

    def text(self, element: etree._Element, path: str) -> str:
        found = self.find(element, path)
        return (found.text or "").strip() if found is not None else ""

    def error(self, element: etree._Element, where: str, field: str, reason: str) -> ImportFileError:
        return ImportFileError(self.file, f"line {element.sourceline}, {where}", field, reason)

    def statements(self, root: etree._Element) -> list[BankStatement]:
        created = self._date_or_none(root, "BkToCstmrStmt/GrpHdr/CreDtTm", "group header")
        seen: dict[str, int] = {}
        read: list[_Statement] = []
        for element in self.findall(root, "BkToCstmrStmt/Stmt"):
            statement_id = self.text(element, "Id")
            where = f"statement {statement_id}"
            if statement_id in seen:
                raise self.error(
                    element,
                    where,
                    "Id",
                    f"statement {statement_id} appears twice in the file (first at line"
                    f" {seen[statement_id]}); expected each statement once",
                )
            seen[statement_id] = element.sourceline or 0
            read.append(self._statement(element, statement_id, created))
        return self._with_entry_ids(read)

    def _statement(self, element: etree._Element, statement_id: str, created: date | None) -> _Statement:
        where = f"statement {statement_id}"
        account = self.text(element, "Acct/Id/IBAN") or self.text(element, "Acct/Id/Othr/Id")
        if not account:
            raise self.error(element, where, "Acct/Id", "expected the account's IBAN or Othr/Id, found neither")
        balances = self.findall(element, "Bal")
        balance_currencies = [amount.get("Ccy", "") for balance in balances for amount in self.findall(balance, "Amt")]
        currency_text = self.text(element, "Acct/Ccy") or next(iter(balance_currencies), "")
        try:
            currency = checked_currency(currency_text)
        except ValueError as error:
            raise self.error(element, where, "Acct/Ccy", str(error)) from None
        by_code = self._balances(balances, where, currency)
        opening = by_code.get("OPBD", by_code.get("PRCD"))
        if opening is None:
            found = ", ".join(by_code) or "none"
            raise self.error(
                element, where, "Bal", f"expected an opening booked balance (OPBD, or PRCD), found balances: {found}"
            )
        closing = by_code.get("CLBD")
        if closing is None:
            found = ", ".join(by_code) or "none"
            raise self.error(
                element, where, "Bal", f"expected a closing booked balance (CLBD), found balances: {found}"
            )
        entries = tuple(self._entries(element, statement_id, currency))
        from_date, to_date = self._period(element, where, entries, created)
        movements = sum((entry.amount for entry in entries), Decimal("0"))
        if opening + movements != closing:
            raise ImportFileError(
                self.file,
                where,
                "CLBD",
                f"opening {_money(currency, opening)} + movements {_money(currency, movements)} ="
                f" {_money(currency, opening + movements)}, but the closing balance is {_money(currency, closing)}"
                f" (difference {_money(currency, closing - opening - movements)})",
            )
        return _Statement(statement_id, account, currency, from_date, to_date, opening, closing, entries)

    def _balances(self, balances: list[etree._Element], where: str, currency: str) -> dict[str, Decimal]:
        """Signed balance amounts by their code (OPBD, PRCD, CLBD, CLAV, ...); proprietary types are not read."""
        by_code: dict[str, Decimal] = {}
        for balance in balances:
            code = self.text(balance, "Tp/CdOrPrtry/Cd")
            if not code:
                continue
            amount = self._signed_amount(balance, f"{code} balance of {where}", currency)
            if code in by_code and by_code[code] != amount:
                raise self.error(
                    balance,
                    where,
                    "Bal",
                    f"expected one {code} balance, found two that differ: {_money(currency, by_code[code])} and"
                    f" {_money(currency, amount)}",
                )
            by_code[code] = amount
        return by_code

    def _signed_amount(self, element: etree._Element, what: str, currency: str) -> Decimal:
        """`Amt` signed by `CdtDbtInd` (DBIT negative), in `currency`; `what` names the balance or entry."""
        amount_element = self.find(element, "Amt")
        if amount_element is None:
            raise self.error(element, what, "Amt", "expected an amount, found none")
        found_currency = amount_element.get("Ccy", "")
        if found_currency != currency:
            raise self.error(
                amount_element,
                what,
                "Amt@Ccy",
                f"expected the statement's currency {currency}, found {found_currency or 'none'}",
            )
        raw = (amount_element.text or "").strip()
        try:
            amount = checked_amount(Decimal(raw), raw)
        except (InvalidOperation, ValueError) as error:
            reason = str(error) if isinstance(error, ValueError) else f"expected an amount like 1234.56, found {raw!r}"
            raise self.error(amount_element, what, "Amt", reason) from None
        if amount < 0:
            raise self.error(
                amount_element, what, "Amt", f"expected an unsigned amount (CdtDbtInd gives the sign), found {raw!r}"
            )
        indicator = self.text(element, "CdtDbtInd")
        if indicator not in ("CRDT", "DBIT"):
            raise self.error(element, what, "CdtDbtInd", f"expected CRDT or DBIT, found {indicator or 'none'!r}")
        return checked_amount(-amount if indicator == "DBIT" else amount, raw)

    def _entries(self, statement: etree._Element, statement_id: str, currency: str) -> Iterator[_Booked]:
        for number, element in enumerate(self.findall(statement, "Ntry"), start=1):
            status = self.find(element, "Sts")
            code = (self.text(status, "Cd") or (status.text or "").strip()) if status is not None else ""
            if code != _BOOKED:
                continue  # pending (PDNG), information (INFO) and future (FUTR) entries are not movements
            where = f"entry {number} of statement {statement_id}"
            booking_date = self._date_or_none(element, "BookgDt", where)
            if booking_date is None:
                raise self.error(element, where, "BookgDt", "expected the booking date of a booked entry, found none")
            transactions = self.findall(element, "NtryDtls/TxDtls")
            yield _Booked(
                number=number,
                booking_date=booking_date,
                value_date=self._date_or_none(element, "ValDt", where),
                amount=self._signed_amount(element, where, currency),
                reference=self._reference(element, transactions),
                bank_reference=self.text(element, "AcctSvcrRef"),
                entry_reference=self.text(element, "NtryRef"),
                description=self._description(element, transactions),
                reversal=self.text(element, "RvslInd").lower() in ("true", "1"),
                transactions=self._transaction_count(element, transactions, where),
            )

    def _reference(self, entry: etree._Element, transactions: list[etree._Element]) -> str:
        for path in ("Refs/EndToEndId", "RmtInf/Strd/CdtrRefInf/Ref", "Refs/InstrId", "Refs/MsgId"):
            for transaction in transactions:
                for found in self.findall(transaction, path):
                    value = (found.text or "").strip()
                    if value and value.upper() != _NOT_PROVIDED:
                        return value
        return self.text(entry, "NtryDtls/Btch/MsgId")

    def _description(self, entry: etree._Element, transactions: list[etree._Element]) -> str:
        remittance = [
            (line.text or "").strip()
            for transaction in transactions
            for line in self.findall(transaction, "RmtInf/Ustrd")
        ]
        text = " ".join(line for line in remittance if line)
        text = text or self.text(entry, "AddtlNtryInf") or self.text(entry, "BkTxCd/Prtry/Cd")
        return _one_line(text, MAX_DESCRIPTION_CHARS)

    def _transaction_count(self, entry: etree._Element, transactions: list[etree._Element], where: str) -> int:
        declared = [found for found in self.findall(entry, "NtryDtls/Btch/NbOfTxs") if (found.text or "").strip()]
        if not declared:
            return max(1, len(transactions))
        total = 0
        for found in declared:
            raw = (found.text or "").strip()
            if not raw.isdigit() or len(raw) > 15:
                raise self.error(found, where, "NbOfTxs", f"expected a count of transactions, found {raw!r}")
            total += int(raw)
        return max(1, total)

    def _date_or_none(self, element: etree._Element, path: str, where: str) -> date | None:
        """The date of `path/Dt` or `path/DtTm` (or of `path` itself when it holds a date-time), as written."""
        for candidate in (f"{path}/Dt", f"{path}/DtTm", path):
            found = self.find(element, candidate)
            if found is not None and (found.text or "").strip():
                raw = (found.text or "").strip()
                try:
                    return date.fromisoformat(raw[:10])
                except ValueError:
                    raise self.error(
                        found, where, candidate, f"expected a date like 2026-11-30, found {raw!r}"
                    ) from None
        return None

    def _period(
        self, element: etree._Element, where: str, entries: tuple[_Booked, ...], created: date | None
    ) -> tuple[date, date]:
        from_date = self._date_or_none(element, "FrToDt/FrDtTm", where)
        to_date = self._date_or_none(element, "FrToDt/ToDtTm", where)
        if from_date is not None and to_date is not None:
            if from_date > to_date:
                raise self.error(
                    element, where, "FrToDt", f"expected FrDtTm on or before ToDtTm, found {from_date} after {to_date}"
                )
            return from_date, to_date
        if entries:
            dates = [entry.booking_date for entry in entries]
            return min(dates), max(dates)
        fallback = self._date_or_none(element, "CreDtTm", where) or created
        if fallback is None:  # pragma: no cover - GrpHdr/CreDtTm is mandatory in every version's XSD
            raise self.error(element, where, "FrToDt", "expected the statement period or a creation date, found none")
        return fallback, fallback

    def _with_entry_ids(self, statements: list[_Statement]) -> list[BankStatement]:
        """Entry ids unique in the file: AcctSvcrRef where unique, else NtryRef where unique, else `<stmt>-<n>`."""
        bank_references = Counter(entry.bank_reference for s in statements for entry in s.entries)
        entry_references = Counter(entry.entry_reference for s in statements for entry in s.entries)
        taken: set[str] = set()
        result = []
        for statement in statements:
            entries = []
            for entry in statement.entries:
                if entry.bank_reference and bank_references[entry.bank_reference] == 1:
                    entry_id = entry.bank_reference
                elif entry.entry_reference and entry_references[entry.entry_reference] == 1:
                    entry_id = entry.entry_reference
                else:
                    entry_id = f"{statement.statement_id}-{entry.number}"
                if entry_id in taken:
                    raise ImportFileError(
                        self.file,
                        f"entry {entry.number} of statement {statement.statement_id}",
                        "AcctSvcrRef",
                        f"expected a reference unique in the file, found {entry_id!r} twice",
                    )
                taken.add(entry_id)
                entries.append(
                    StatementEntry(
                        entry_id=entry_id,
                        booking_date=entry.booking_date,
                        value_date=entry.value_date,
                        amount=entry.amount,
                        reference=entry.reference,
                        bank_reference=entry.bank_reference,
                        description=entry.description,
                        reversal=entry.reversal,
                        transactions=entry.transactions,
                    )
                )
            result.append(
                BankStatement(
                    statement_id=statement.statement_id,
                    bank_account=statement.bank_account,
                    currency=statement.currency,
                    from_date=statement.from_date,
                    to_date=statement.to_date,
                    opening_balance=statement.opening_balance,
                    closing_balance=statement.closing_balance,
                    entries=tuple(entries),
                    source=self.file,
                    format=StatementFormat.CAMT053,
                )
            )
        return result


@functools.lru_cache(maxsize=256)
def _qualified(namespace: str, path: str) -> str:
    """`Acct/Id/IBAN` as lxml finds it in `namespace`: `{ns}Acct/{ns}Id/{ns}IBAN`."""
    return "/".join(f"{{{namespace}}}{step}" for step in path.split("/"))


def _money(currency: str, amount: Decimal) -> str:
    return f"{currency} {amount + 0:.2f}"
