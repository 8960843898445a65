"""The mapping file: how a bank's or an ERP's tables are laid out, and which GL account each bank account books to.

One YAML file (docs/books-format.md) read strictly: an unknown key, a wrong type or a layout that cannot be read
unambiguously is one ImportFileError naming the mapping file and the dotted key (`gl.columns.amount`). A section that
is absent reads our own books format (`gl_lines.csv`, `accounts.csv`, `ap_subledger.csv`, `ar_subledger.csv`: UTF-8,
comma-delimited, ISO dates, "." decimals), so files already in our format import as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from countersign.importers.amounts import checked_currency, parse_amount
from countersign.importers.errors import ImportFileError

MAX_MAPPING_BYTES = 1 << 20
MAX_HEADER_ROW = 1000
ENCODINGS = ("utf-8", "utf-8-sig", "cp1252", "latin-1", "iso-8859-15")
DECIMAL_SEPARATORS = (".", ",")
THOUSANDS_SEPARATORS = ("", ",", ".", " ", "'")
ACCOUNT_TYPES = ("asset", "liability", "equity", "revenue", "expense")
_SPACES = re.compile(r"[\s\u00a0\u202f]")


class Sign(StrEnum):
    """What a single amount column's sign means: a debit is positive, or a credit is."""

    DEBIT_POSITIVE = "debit_positive"
    CREDIT_POSITIVE = "credit_positive"


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, kw_only=True)
class TableLayout:
    """How one table is written: a CSV file or an XLSX sheet, its header row and how it writes dates and amounts."""

    columns: Mapping[str, str]
    """Our field -> the file's column heading (exact, after trimming spaces)."""
    encoding: str = "utf-8"
    """CSV only; "utf-8" also skips a byte order mark."""
    delimiter: str = ","
    sheet: str | None = None
    """XLSX only: the sheet's name; None reads the first sheet."""
    header_row: int = 1
    """1-based row of the column headings; rows above it (report titles) are skipped."""
    date_format: str = "%Y-%m-%d"
    decimal_separator: str = "."
    thousands_separator: str = ""
    sign: Sign | None = None
    """For a single amount column: None is the books' own convention for what is read (GL: debit positive; AP: a
    credit, what we owe, positive; AR: a debit, what we are owed, positive; a bank statement: money in positive)."""
    skip_rows_starting_with: tuple[str, ...] = ()
    """Rows whose first non-empty cell starts so (case-insensitive) are skipped: totals. "Total" always is."""
    may_be_absent: frozenset[str] = frozenset()
    """Mapped fields whose column a file may lack (read as empty). Only the default layouts set it, for the columns
    the books format added in version 2 (currencies); a mapping file's columns must all be in the file."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", _frozen(self.columns))


@dataclass(frozen=True, kw_only=True)
class ChartLayout(TableLayout):
    type_values: Mapping[str, str] = field(default_factory=lambda: {t: t for t in ACCOUNT_TYPES})
    """The file's account type -> ours (asset, liability, equity, revenue, expense)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "type_values", _frozen(self.type_values))


@dataclass(frozen=True, kw_only=True)
class BankCsvLayout(TableLayout):
    bank_account: str
    """The account the export is of, as the bank names it (spaces removed, upper case)."""
    currency: str
    statement_id: str | None = None
    """None: the file's stem."""
    opening_balance: Decimal | None = None
    closing_balance: Decimal | None = None


GL_COLUMNS = ("line_id", "journal_id", "date", "account", "amount", "reference", "description")
CHART_COLUMNS = ("account", "name", "type", "subtype")
AP_COLUMNS = ("invoice_id", "vendor", "invoice_date", "due_date", "amount")
AR_COLUMNS = ("invoice_id", "customer", "invoice_date", "due_date", "amount")
_GL_CURRENCY = ("currency", "currency_amount")

DEFAULT_GL = TableLayout(
    columns={name: name for name in (*GL_COLUMNS, *_GL_CURRENCY)}, may_be_absent=frozenset(_GL_CURRENCY)
)
DEFAULT_CHART = ChartLayout(
    columns={name: name for name in (*CHART_COLUMNS, "currency")}, may_be_absent=frozenset({"currency"})
)
DEFAULT_AP = TableLayout(columns={name: name for name in AP_COLUMNS})
DEFAULT_AR = TableLayout(columns={name: name for name in AR_COLUMNS})


@dataclass(frozen=True, kw_only=True)
class ImportMapping:
    bank_accounts: Mapping[str, str] = field(default_factory=dict)
    """The bank's account name (spaces removed, upper case) -> the GL account it is booked to."""
    account_subtypes: Mapping[str, str] = field(default_factory=dict)
    """GL account -> what the close does with it (cash, payable_control, receivable_control, ...), for a chart
    exported without our subtypes; overrides the chart's own subtype for the accounts it names."""
    gl: TableLayout = DEFAULT_GL
    chart: ChartLayout = DEFAULT_CHART
    bank_csv: BankCsvLayout | None = None
    ap: TableLayout = DEFAULT_AP
    ar: TableLayout = DEFAULT_AR

    def __post_init__(self) -> None:
        object.__setattr__(self, "bank_accounts", _frozen(self.bank_accounts))
        object.__setattr__(self, "account_subtypes", _frozen(self.account_subtypes))

    def gl_account_of(self, bank_account: str) -> str | None:
        """The GL account a bank account books to, matched with spaces ignored and in any case."""
        return self.bank_accounts.get(normalised_bank_account(bank_account))


def default_mapping() -> ImportMapping:
    """The mapping when there is no mapping file: every table in our own books format, no bank accounts."""
    return ImportMapping()


def normalised_bank_account(text: str) -> str:
    """An account as the mapping matches it: spaces (also no-break) removed, upper case."""
    return _SPACES.sub("", text).upper()


# --- the fields each section maps ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Section:
    name: str
    fields: tuple[str, ...]
    required: tuple[str, ...]
    keys: tuple[str, ...]
    amount_or_debit_credit: bool


_COMMON_KEYS = (
    "encoding",
    "delimiter",
    "sheet",
    "header_row",
    "date_format",
    "decimal_separator",
    "thousands_separator",
    "skip_rows_starting_with",
    "columns",
)
_SECTIONS = {
    "gl": _Section(
        "gl",
        (*GL_COLUMNS, "debit", "credit", "currency", "currency_amount"),
        ("journal_id", "date", "account"),
        (*_COMMON_KEYS, "sign"),
        True,
    ),
    "chart": _Section(
        "chart", (*CHART_COLUMNS, "currency"), ("account", "name", "type"), (*_COMMON_KEYS, "type_values"), False
    ),
    "bank_csv": _Section(
        "bank_csv",
        ("date", "value_date", "amount", "debit", "credit", "reference", "bank_reference", "description", "balance"),
        ("date",),
        (*_COMMON_KEYS, "sign", "bank_account", "currency", "statement_id", "opening_balance", "closing_balance"),
        True,
    ),
    "ap": _Section("ap", AP_COLUMNS, AP_COLUMNS, (*_COMMON_KEYS, "sign"), False),
    "ar": _Section("ar", AR_COLUMNS, AR_COLUMNS, (*_COMMON_KEYS, "sign"), False),
}
_TOP_KEYS = ("version", "bank_accounts", "account_subtypes", *_SECTIONS)
_SUBTYPE = re.compile(r"[a-z][a-z0-9_]{0,63}")


# --- reading the file ---------------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """The safe loader, refusing a key given twice (PyYAML would keep the last silently)."""


def _no_duplicate_keys(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, str | int | float | bool) and key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} is given twice", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicate_keys)


def load_mapping(path: Path) -> ImportMapping:
    """The mapping file at `path`, validated; ImportFileError names the file and the dotted key at fault."""
    return _Reader(path.name).mapping(_document(path))


def _document(path: Path) -> object:
    name = path.name
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_MAPPING_BYTES + 1)
    except OSError as exc:
        raise ImportFileError(name, "", "(file)", f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_MAPPING_BYTES:
        raise ImportFileError(name, "", "(file)", f"larger than {MAX_MAPPING_BYTES} bytes: not a mapping file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ImportFileError(name, f"line {line}", "(encoding)", "expected UTF-8 text") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = " ".join(part for part in (exc.context, exc.problem) if part)
        raise ImportFileError(name, where, "(yaml)", f"not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise ImportFileError(name, "", "(yaml)", f"not valid YAML: {exc}") from None


def _found(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return repr(value)
    return f"a {'list' if isinstance(value, list) else 'mapping' if isinstance(value, dict) else type(value).__name__}"


class _Reader:
    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, key: str, reason: str) -> ImportFileError:
        return ImportFileError(self.file, "", key, reason)

    def table(self, value: object, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a mapping of keys to values, found {_found(value)}")
        return value

    def known(self, table: Mapping[str, Any], allowed: tuple[str, ...], key: str) -> None:
        for name in table:
            if name not in allowed:
                where = f"{key}.{name}" if key else str(name)
                raise self.fail(where, f"unknown key (expected one of {', '.join(allowed)})")

    def text(self, value: object, key: str) -> str:
        if isinstance(value, str):
            if not value.strip():
                raise self.fail(key, "expected a non-empty string, found an empty one")
            return value
        hint = " (quote it: YAML reads 0100 as 64 and 1.10 as 1.1)" if isinstance(value, int | float) else ""
        raise self.fail(key, f"expected a quoted string, found {_found(value)}{hint}")

    def string_map(self, value: object, key: str) -> dict[str, str]:
        table = self.table(value, key)
        out: dict[str, str] = {}
        for name, item in table.items():
            if not isinstance(name, str):
                raise self.fail(f"{key}.{name}", f"expected a quoted string as the key, found {_found(name)}")
            out[name] = self.text(item, f"{key}.{name}")
        return out

    def mapping(self, document: object) -> ImportMapping:
        if document is None:
            raise self.fail("version", "the file is empty: expected at least `version: 1`")
        top = self.table(document, "(root)")
        self.known(top, _TOP_KEYS, "")
        if "version" not in top:
            raise self.fail("version", "missing: expected `version: 1`")
        version = top["version"]
        if isinstance(version, bool) or version != 1:
            raise self.fail("version", f"expected 1 (the only version there is), found {_found(version)}")
        accounts = self.bank_accounts(top.get("bank_accounts", {}))
        return ImportMapping(
            bank_accounts=accounts,
            account_subtypes=self.account_subtypes(top.get("account_subtypes", {})),
            gl=self.layout(top["gl"], "gl") if "gl" in top else DEFAULT_GL,
            chart=self.chart(top["chart"]) if "chart" in top else DEFAULT_CHART,
            bank_csv=self.bank_csv(top["bank_csv"]) if "bank_csv" in top else None,
            ap=self.layout(top["ap"], "ap") if "ap" in top else DEFAULT_AP,
            ar=self.layout(top["ar"], "ar") if "ar" in top else DEFAULT_AR,
        )

    def account_subtypes(self, value: object) -> dict[str, str]:
        subtypes: dict[str, str] = {}
        for account, subtype in self.string_map(value, "account_subtypes").items():
            word = subtype.strip()
            if not _SUBTYPE.fullmatch(word):
                raise self.fail(
                    f"account_subtypes.{account}", f"expected a lower_snake_case subtype like cash, found {subtype!r}"
                )
            subtypes[account.strip()] = word
        return subtypes

    def bank_accounts(self, value: object) -> dict[str, str]:
        accounts: dict[str, str] = {}
        for name, account in self.string_map(value, "bank_accounts").items():
            key = normalised_bank_account(name)
            if not key:
                raise self.fail(f"bank_accounts.{name}", "expected a bank account, found only spaces")
            if key in accounts:
                raise self.fail(f"bank_accounts.{name}", f"the account {key} is listed twice (spaces are ignored)")
            accounts[key] = account.strip()
        return accounts

    def common(self, value: object, section: _Section) -> tuple[dict[str, Any], dict[str, Any]]:
        """(the section's keys, TableLayout keyword arguments for the keys every layout has)."""
        key = section.name
        table = self.table(value, key)
        self.known(table, section.keys, key)
        if "columns" not in table:
            raise self.fail(f"{key}.columns", "missing: expected our field -> the file's column heading")
        layout: dict[str, Any] = {"columns": self.columns(table["columns"], section)}
        if "encoding" in table:
            encoding = self.text(table["encoding"], f"{key}.encoding").strip().lower()
            if encoding not in ENCODINGS:
                raise self.fail(f"{key}.encoding", f"expected one of {', '.join(ENCODINGS)}, found {encoding!r}")
            layout["encoding"] = encoding
        if "delimiter" in table:
            delimiter = table["delimiter"]
            if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '"\r\n':
                raise self.fail(
                    f"{key}.delimiter", f"expected one character like ',' or ';', found {_found(delimiter)}"
                )
            layout["delimiter"] = delimiter
        if "sheet" in table:
            layout["sheet"] = self.text(table["sheet"], f"{key}.sheet").strip()
        if "header_row" in table:
            row = table["header_row"]
            if isinstance(row, bool) or not isinstance(row, int) or not 1 <= row <= MAX_HEADER_ROW:
                raise self.fail(
                    f"{key}.header_row", f"expected a row number 1 to {MAX_HEADER_ROW}, found {_found(row)}"
                )
            layout["header_row"] = row
        if "date_format" in table:
            layout["date_format"] = self.date_format(table["date_format"], f"{key}.date_format")
        if "decimal_separator" in table:
            layout["decimal_separator"] = self.choice(
                table["decimal_separator"], DECIMAL_SEPARATORS, f"{key}.decimal_separator"
            )
        if "thousands_separator" in table:
            layout["thousands_separator"] = self.choice(
                table["thousands_separator"], THOUSANDS_SEPARATORS, f"{key}.thousands_separator"
            )
        if layout.get("decimal_separator", ".") == layout.get("thousands_separator", ""):
            raise self.fail(
                f"{key}.thousands_separator",
                f"the same as the decimal separator {layout.get('decimal_separator', '.')!r}: an amount would be"
                " ambiguous",
            )
        if "sign" in table:
            sign = table["sign"]
            if sign not in tuple(Sign):
                raise self.fail(f"{key}.sign", f"expected debit_positive or credit_positive, found {_found(sign)}")
            columns = layout["columns"]
            if "amount" not in columns and "currency_amount" not in columns:
                raise self.fail(
                    f"{key}.sign",
                    "applies to a single amount column, and this section maps debit and credit columns instead",
                )
            layout["sign"] = Sign(sign)
        if "skip_rows_starting_with" in table:
            prefixes = table["skip_rows_starting_with"]
            if not isinstance(prefixes, list):
                raise self.fail(
                    f"{key}.skip_rows_starting_with", f"expected a list of strings, found {_found(prefixes)}"
                )
            layout["skip_rows_starting_with"] = tuple(
                self.text(prefix, f"{key}.skip_rows_starting_with[{index}]").strip()
                for index, prefix in enumerate(prefixes)
            )
        return table, layout

    def columns(self, value: object, section: _Section) -> dict[str, str]:
        key = f"{section.name}.columns"
        table = self.table(value, key)
        self.known(table, section.fields, key)
        columns = {name: heading.strip() for name, heading in self.string_map(table, key).items()}
        headings: dict[str, str] = {}
        for name, heading in columns.items():
            if heading in headings:
                raise self.fail(f"{key}.{name}", f"the heading {heading!r} is also mapped to {headings[heading]}")
            headings[heading] = name
        for name in section.required:
            if name not in columns:
                raise self.fail(f"{key}.{name}", f"missing: the {section.name} needs a column for {name}")
        if section.amount_or_debit_credit:
            debit_credit = [name for name in ("debit", "credit") if name in columns]
            if "amount" in columns and debit_credit:
                raise self.fail(
                    f"{key}.amount",
                    f"both amount and {' and '.join(debit_credit)} are mapped: expected one or the other",
                )
            if "amount" not in columns and len(debit_credit) != 2:
                missing = "debit and credit" if not debit_credit else "credit" if "debit" in columns else "debit"
                raise self.fail(
                    f"{key}.{'amount' if not debit_credit else missing}",
                    f"missing: expected either amount, or both debit and credit (found no {missing})",
                )
        if "currency_amount" in columns and "currency" not in columns:
            raise self.fail(f"{key}.currency_amount", "needs currency: an amount in an unnamed currency means nothing")
        return columns

    def choice(self, value: object, allowed: tuple[str, ...], key: str) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise self.fail(key, f"expected one of {', '.join(repr(a) for a in allowed)}, found {_found(value)}")
        return value

    def date_format(self, value: object, key: str) -> str:
        text = self.text(value, key)
        probe = date(2026, 11, 30)
        try:
            ok = datetime.strptime(probe.strftime(text), text).date() == probe
        except ValueError:
            ok = False
        if not ok:
            raise self.fail(key, f"expected strptime codes naming day, month and year like %d.%m.%Y, found {text!r}")
        return text

    def layout(self, value: object, name: str) -> TableLayout:
        _, layout = self.common(value, _SECTIONS[name])
        return TableLayout(**layout)

    def chart(self, value: object) -> ChartLayout:
        table, layout = self.common(value, _SECTIONS["chart"])
        if "type_values" in table:
            types = self.string_map(table["type_values"], "chart.type_values")
            folded: dict[str, str] = {}
            for name, ours in types.items():
                where = f"chart.type_values.{name}"
                if ours not in ACCOUNT_TYPES:
                    raise self.fail(where, f"expected one of {', '.join(ACCOUNT_TYPES)}, found {ours!r}")
                other = folded.setdefault(name.strip().casefold(), ours)
                if other != ours:
                    raise self.fail(where, f"differs only in case from a value mapped to {other}")
            layout["type_values"] = {name.strip(): ours for name, ours in types.items()}
        return ChartLayout(**layout)

    def bank_csv(self, value: object) -> BankCsvLayout:
        table, layout = self.common(value, _SECTIONS["bank_csv"])
        for required in ("bank_account", "currency"):
            if required not in table:
                raise self.fail(f"bank_csv.{required}", "missing: a CSV export does not say it")
        account = normalised_bank_account(self.text(table["bank_account"], "bank_csv.bank_account"))
        try:
            currency = checked_currency(self.text(table["currency"], "bank_csv.currency"))
        except ValueError as exc:
            raise self.fail("bank_csv.currency", str(exc)) from None
        statement_id = (
            self.text(table["statement_id"], "bank_csv.statement_id").strip() if "statement_id" in table else None
        )
        return BankCsvLayout(
            bank_account=account,
            currency=currency,
            statement_id=statement_id,
            opening_balance=self.balance(table, "opening_balance"),
            closing_balance=self.balance(table, "closing_balance"),
            **layout,
        )

    def balance(self, table: Mapping[str, Any], name: str) -> Decimal | None:
        if name not in table:
            return None
        value, key = table[name], f"bank_csv.{name}"
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            hint = " (quote it: YAML reads 1000.10 as a binary float)" if isinstance(value, float) else ""
            raise self.fail(key, f'expected an amount as a quoted string like "1000.00", found {_found(value)}{hint}')
        try:
            return parse_amount(value)
        except ValueError as exc:
            raise self.fail(key, str(exc)) from None
