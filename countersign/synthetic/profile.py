import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import yaml

from countersign.synthetic.chart import CASH_ACCOUNTS, INTERCOMPANY_ACCOUNTS
from countersign.synthetic.period import parse_period

MIN_GL_LINES = 50
MAX_BANK_LAG_DAYS = 7
_CURRENCY = re.compile(r"^[A-Z]{3}$")
_MONEY = re.compile(r"^-?\d+\.\d{2}$")
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


class ProfileError(ValueError):
    """A synthetic-books profile is malformed: `source` is the file, `field` the offending key."""

    def __init__(self, source: str, field: str, reason: str) -> None:
        self.source = source
        self.field = field
        self.reason = reason
        super().__init__(f"{source}: {field}: {reason}")


@dataclass(frozen=True)
class BankFeedMismatch:
    """The statement for `account` holds `bank_lines` lines from the wrong export: none matches the GL."""

    account: str
    bank_lines: int
    kind: str = "bank_feed_mismatch"


@dataclass(frozen=True)
class IntercompanyMismatch:
    """The counterparty reports a balance that differs from ours by `difference` (our sign convention)."""

    counterparty: str
    difference_minor: int
    kind: str = "intercompany_mismatch"


Anomaly = BankFeedMismatch | IntercompanyMismatch


@dataclass(frozen=True)
class IntercompanyPair:
    counterparty: str
    account: str


@dataclass(frozen=True)
class Profile:
    name: str
    source: str
    entity: str
    period: str
    currency: str
    gl_lines: int
    customers: int
    vendors: int
    opening_ar_invoices: int
    opening_ap_invoices: int
    grni_receipts: int
    bank_accounts: tuple[str, ...]
    bank_lag_days: int
    outstanding_items: int
    intercompany: tuple[IntercompanyPair, ...]
    variance_flags: int
    anomalies: tuple[Anomaly, ...]


_REQUIRED_KEYS = (
    "entity",
    "period",
    "currency",
    "gl_lines",
    "customers",
    "vendors",
    "opening_ar_invoices",
    "opening_ap_invoices",
    "grni_receipts",
    "bank_accounts",
    "bank_lag_days",
    "outstanding_items",
    "intercompany",
    "variance_flags",
    "anomalies",
)


def load_profile(path: Path) -> Profile:
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ProfileError(source, "<file>", f"cannot read profile: {exc.strerror or exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ProfileError(source, "<file>", f"not valid UTF-8 (line {line}, byte offset {exc.start})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ProfileError(source, "<yaml>", f"invalid YAML: {exc}") from exc
    except RecursionError:
        raise ProfileError(source, "<yaml>", "invalid YAML: nested too deeply") from None
    except (ValueError, TypeError) as exc:
        # PyYAML's scalar constructors raise these for e.g. `2026-13-45` or an integer of over 4300 digits.
        raise ProfileError(source, "<yaml>", f"invalid YAML: unreadable value ({exc})") from exc
    return parse_profile(data, source)


def parse_profile(data: object, source: str) -> Profile:
    mapping = _mapping(data, source, "<root>")
    unknown = sorted(str(key) for key in mapping if key not in _REQUIRED_KEYS)
    if unknown:
        raise ProfileError(source, unknown[0], f"unknown key (allowed: {', '.join(_REQUIRED_KEYS)})")
    for key in _REQUIRED_KEYS:
        if key not in mapping:
            raise ProfileError(source, key, "missing")

    entity = _text(mapping["entity"], source, "entity")
    period = _text(mapping["period"], source, "period")
    try:
        parse_period(period)
    except ValueError as exc:
        raise ProfileError(source, "period", str(exc)) from exc
    currency = _text(mapping["currency"], source, "currency")
    if not _CURRENCY.match(currency):
        raise ProfileError(source, "currency", f"expected a 3-letter upper-case ISO code, got {currency!r}")

    bank_accounts = _bank_accounts(mapping["bank_accounts"], source)
    intercompany = _intercompany(mapping["intercompany"], source)
    return Profile(
        name=Path(source).stem,
        source=source,
        entity=entity,
        period=period,
        currency=currency,
        gl_lines=read_count(mapping["gl_lines"], source, "gl_lines", minimum=MIN_GL_LINES),
        customers=read_count(mapping["customers"], source, "customers", minimum=1),
        vendors=read_count(mapping["vendors"], source, "vendors", minimum=1),
        opening_ar_invoices=read_count(mapping["opening_ar_invoices"], source, "opening_ar_invoices"),
        opening_ap_invoices=read_count(mapping["opening_ap_invoices"], source, "opening_ap_invoices"),
        grni_receipts=read_count(mapping["grni_receipts"], source, "grni_receipts"),
        bank_accounts=bank_accounts,
        bank_lag_days=read_count(mapping["bank_lag_days"], source, "bank_lag_days", maximum=MAX_BANK_LAG_DAYS),
        outstanding_items=read_count(mapping["outstanding_items"], source, "outstanding_items"),
        intercompany=intercompany,
        variance_flags=read_count(mapping["variance_flags"], source, "variance_flags"),
        anomalies=_anomalies(mapping["anomalies"], source, bank_accounts, intercompany),
    )


def _mapping(value: object, source: str, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProfileError(source, field, f"expected a mapping, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise ProfileError(source, f"{field}.{key!r}", "keys must be strings")
    return value


def _text(value: object, source: str, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ProfileError(source, field, f"expected a non-empty string, got {value!r}")
    if _UNSTORABLE.search(value):
        raise ProfileError(source, field, "contains a NUL character or a lone surrogate (cannot be stored)")
    return value


def read_count(value: object, source: str, field: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer (never a bool) within [minimum, maximum], or ProfileError naming the field."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ProfileError(source, field, f"expected an integer, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ProfileError(source, field, f"must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ProfileError(source, field, f"must be <= {maximum}, got {value}")
    return value


def _list(value: object, source: str, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProfileError(source, field, f"expected a list, got {type(value).__name__}")
    return value


def _bank_accounts(value: object, source: str) -> tuple[str, ...]:
    accounts: list[str] = []
    for index, item in enumerate(_list(value, source, "bank_accounts")):
        field = f"bank_accounts[{index}]"
        account = _text(item, source, field)
        if account not in CASH_ACCOUNTS:
            raise ProfileError(source, field, f"{account!r} is not a cash account ({', '.join(CASH_ACCOUNTS)})")
        if account in accounts:
            raise ProfileError(source, field, f"duplicate account {account!r}")
        accounts.append(account)
    return tuple(sorted(accounts))


def _intercompany(value: object, source: str) -> tuple[IntercompanyPair, ...]:
    pairs: list[IntercompanyPair] = []
    for index, item in enumerate(_list(value, source, "intercompany")):
        field = f"intercompany[{index}]"
        mapping = _mapping(item, source, field)
        _exact_keys(mapping, ("counterparty", "account"), source, field)
        counterparty = _text(mapping["counterparty"], source, f"{field}.counterparty")
        account = _text(mapping["account"], source, f"{field}.account")
        if account not in INTERCOMPANY_ACCOUNTS:
            raise ProfileError(
                source, f"{field}.account", f"{account!r} is not one of {', '.join(INTERCOMPANY_ACCOUNTS)}"
            )
        if any(pair.account == account for pair in pairs):
            raise ProfileError(source, f"{field}.account", f"account {account!r} already has a counterparty")
        if any(pair.counterparty == counterparty for pair in pairs):
            raise ProfileError(source, f"{field}.counterparty", f"duplicate counterparty {counterparty!r}")
        pairs.append(IntercompanyPair(counterparty=counterparty, account=account))
    return tuple(pairs)


def _exact_keys(mapping: dict[str, Any], keys: tuple[str, ...], source: str, field: str) -> None:
    for key in mapping:
        if key not in keys:
            raise ProfileError(source, f"{field}.{key}", f"unknown key (allowed: {', '.join(keys)})")
    for key in keys:
        if key not in mapping:
            raise ProfileError(source, f"{field}.{key}", "missing")


def _anomalies(
    value: object, source: str, bank_accounts: tuple[str, ...], intercompany: tuple[IntercompanyPair, ...]
) -> tuple[Anomaly, ...]:
    anomalies: list[Anomaly] = []
    for index, item in enumerate(_list(value, source, "anomalies")):
        field = f"anomalies[{index}]"
        mapping = _mapping(item, source, field)
        kind = mapping.get("kind")
        if kind == "bank_feed_mismatch":
            _exact_keys(mapping, ("kind", "account", "bank_lines"), source, field)
            account = _text(mapping["account"], source, f"{field}.account")
            if account not in bank_accounts:
                raise ProfileError(source, f"{field}.account", f"{account!r} is not in bank_accounts")
            if any(isinstance(a, BankFeedMismatch) and a.account == account for a in anomalies):
                raise ProfileError(source, f"{field}.account", f"second bank_feed_mismatch for {account!r}")
            bank_lines = read_count(mapping["bank_lines"], source, f"{field}.bank_lines", minimum=1)
            anomalies.append(BankFeedMismatch(account=account, bank_lines=bank_lines))
        elif kind == "intercompany_mismatch":
            _exact_keys(mapping, ("kind", "counterparty", "difference"), source, field)
            counterparty = _text(mapping["counterparty"], source, f"{field}.counterparty")
            if all(pair.counterparty != counterparty for pair in intercompany):
                raise ProfileError(source, f"{field}.counterparty", f"{counterparty!r} is not in intercompany")
            if any(isinstance(a, IntercompanyMismatch) and a.counterparty == counterparty for a in anomalies):
                raise ProfileError(
                    source, f"{field}.counterparty", f"second intercompany_mismatch for {counterparty!r}"
                )
            anomalies.append(
                IntercompanyMismatch(
                    counterparty=counterparty,
                    difference_minor=_money_minor(mapping["difference"], source, f"{field}.difference"),
                )
            )
        else:
            raise ProfileError(
                source,
                f"{field}.kind",
                f"unknown anomaly kind {kind!r} (known: bank_feed_mismatch, intercompany_mismatch)",
            )
    return tuple(anomalies)


def _money_minor(value: object, source: str, field: str) -> int:
    if not isinstance(value, str) or not _MONEY.match(value):
        raise ProfileError(source, field, f"expected a decimal string with 2 places like '250.00', got {value!r}")
    try:
        minor = int(Decimal(value) * 100)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise ProfileError(source, field, f"not a decimal: {value!r}") from exc
    if minor == 0:
        raise ProfileError(source, field, "must not be zero")
    return minor
