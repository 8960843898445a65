"""The canonical clause corpus: one clause per (contract form, topic), generated from a profile and an integer seed.

The profile (`config/profiles/clauses.yaml`) names the forms and their commercial parameters; the seed picks, per
form, the section numbering and which wording template each topic uses. The same profile and seed always give the
same bytes (`canonical_corpus_bytes`), each clause carries the sha256 of its content and the corpus `version` is the
sha256 over all clause hashes, so a citation can name exactly the text it rested on.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final

import yaml

from countersign.synthetic.clause_text import TEMPLATES
from countersign.synthetic.clause_topics import TOPICS
from countersign.synthetic.profile import ProfileError

SCHEMA: Final = "countersign.clause-corpus/1"
CORPUS_FILE_NAME: Final = "corpus.json"
CLAUSE_ID: Final = re.compile(r"^CS[BEIDM]-\d{1,2}\.\d{1,2}$")
FORM_CODES: Final[tuple[str, ...]] = ("CSB", "CSE", "CSI", "CSD", "CSM")
MODALS: Final[tuple[str, ...]] = ("shall", "must", "will")
CONTRACTOR: Final = "Contractor"
_FIRST_SECTION_CHOICES: Final = 4  # a form's first topic section is numbered 2..5 (earlier ones: definitions etc.)
_CURRENCY: Final = re.compile(r"^[A-Z]{3}$")
_CURRENCY_SYMBOLS: Final[dict[str, str]] = {"GBP": "£", "EUR": "€", "USD": "$"}
_PERCENT: Final = re.compile(r"^\d{1,3}(\.\d{1,2})?$")
_MONEY: Final = re.compile(r"^\d+\.\d{2}$")
_EDITION: Final = re.compile(r"^\d{4}$")
_UNSTORABLE: Final = re.compile(r"[\x00\ud800-\udfff]")

_ROOT_KEYS: Final = ("kind", "currency", "forms")
_FORM_KEYS: Final = ("code", "name", "edition", "employer", "certifier", "pricing_document", "modal", "parameters")

# Parameter name -> (kind, minimum, maximum). Percentages and amounts are Decimals; the rest are integers.
_PERCENT_KIND: Final = "percent"
_AMOUNT_KIND: Final = "amount"
_INTEGER_KIND: Final = "integer"
PARAMETERS: Final[dict[str, tuple[str, int, int]]] = {
    "retention_percent": (_PERCENT_KIND, 0, 20),
    "retention_cap_percent": (_PERCENT_KIND, 0, 20),
    "retention_release_percent": (_PERCENT_KIND, 0, 100),
    "retention_trust_days": (_INTEGER_KIND, 1, 60),
    "advance_percent": (_PERCENT_KIND, 0, 30),
    "advance_repayment_start_percent": (_PERCENT_KIND, 0, 100),
    "advance_repayment_rate_percent": (_PERCENT_KIND, 0, 100),
    "advance_full_repayment_percent": (_PERCENT_KIND, 0, 100),
    "quantity_overrun_percent": (_PERCENT_KIND, 0, 100),
    "rate_version_notice_days": (_INTEGER_KIND, 1, 90),
    "dayworks_labour_percent": (_PERCENT_KIND, 0, 300),
    "dayworks_materials_percent": (_PERCENT_KIND, 0, 100),
    "dayworks_sheet_days": (_INTEGER_KIND, 1, 30),
    "fluctuations_threshold_percent": (_PERCENT_KIND, 0, 20),
    "variation_notice_days": (_INTEGER_KIND, 1, 120),
    "off_site_bond_amount": (_AMOUNT_KIND, 0, 0),
    "valuation_day": (_INTEGER_KIND, 1, 28),
    "application_days": (_INTEGER_KIND, 1, 21),
    "due_date_days": (_INTEGER_KIND, 1, 60),
    "final_date_days": (_INTEGER_KIND, 1, 60),
    "payment_notice_days": (_INTEGER_KIND, 1, 10),
    "pay_less_days": (_INTEGER_KIND, 1, 30),
    "interest_margin_percent": (_PERCENT_KIND, 0, 20),
    "suspension_notice_days": (_INTEGER_KIND, 7, 60),
    "minimum_certificate_amount": (_AMOUNT_KIND, 0, 0),
    "setoff_notice_days": (_INTEGER_KIND, 1, 30),
    "setoff_limit_percent": (_PERCENT_KIND, 0, 100),
    "defects_period_months": (_INTEGER_KIND, 1, 60),
    "final_account_months": (_INTEGER_KIND, 1, 24),
    "liquidated_damages_per_week": (_AMOUNT_KIND, 0, 0),
    "records_years": (_INTEGER_KIND, 1, 15),
    "insurance_fees_percent": (_PERCENT_KIND, 0, 50),
    "performance_bond_percent": (_PERCENT_KIND, 0, 30),
}

ParameterValue = Decimal | int


class ClauseProfileError(ProfileError):
    """A clauses profile is malformed: `source` is the file, `field` the offending key (a `ProfileError`)."""


@dataclass(frozen=True)
class ClauseForm:
    """One contract form: its published identity, the nouns its conditions use, and its commercial parameters."""

    code: str
    name: str
    edition: str
    employer: str
    certifier: str
    pricing_document: str
    modal: str
    parameters: Mapping[str, ParameterValue]


@dataclass(frozen=True)
class ClauseProfile:
    name: str
    source: str
    currency: str
    forms: tuple[ClauseForm, ...]


def load_clause_profile(path: Path) -> ClauseProfile:
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ClauseProfileError(source, "<file>", f"cannot read profile: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ClauseProfileError(source, "<file>", f"not valid UTF-8 (byte offset {exc.start})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ClauseProfileError(source, "<yaml>", f"invalid YAML: {exc}") from exc
    except (RecursionError, ValueError, TypeError) as exc:
        raise ClauseProfileError(source, "<yaml>", f"invalid YAML: unreadable value ({type(exc).__name__})") from exc
    return parse_clause_profile(data, source)


def parse_clause_profile(data: object, source: str) -> ClauseProfile:
    root = _mapping(data, source, "<root>")
    _exact_keys(root, _ROOT_KEYS, source, "")
    if root["kind"] != "clauses":
        raise ClauseProfileError(source, "kind", f"expected 'clauses', got {root['kind']!r}")
    currency = _text(root["currency"], source, "currency")
    if not _CURRENCY.match(currency):
        raise ClauseProfileError(source, "currency", f"expected a 3-letter upper-case ISO code, got {currency!r}")
    items = root["forms"]
    if not isinstance(items, list) or not items:
        raise ClauseProfileError(source, "forms", "expected a non-empty list of forms")
    forms: list[ClauseForm] = []
    for index, item in enumerate(items):
        form = _form(item, source, f"forms[{index}]")
        if any(existing.code == form.code for existing in forms):
            raise ClauseProfileError(source, f"forms[{index}].code", f"duplicate form {form.code!r}")
        forms.append(form)
    return ClauseProfile(name=Path(source).stem, source=source, currency=currency, forms=tuple(forms))


def generate_clause_corpus(profile: ClauseProfile, seed: int) -> dict[str, Any]:
    """The canonical corpus object: forms in profile order, clauses ordered by form then section and number."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an integer, got {type(seed).__name__}")
    clauses: list[dict[str, str]] = []
    for form_index, form in enumerate(profile.forms):
        clauses.extend(_form_clauses(form, form_index, profile.currency, seed))
    return {
        "schema": SCHEMA,
        "profile": profile.name,
        "seed": seed,
        "version": corpus_version(clauses),
        "forms": [
            {
                "code": form.code,
                "name": form.name,
                "edition": form.edition,
                "employer": form.employer,
                "certifier": form.certifier,
                "pricing_document": form.pricing_document,
            }
            for form in profile.forms
        ],
        "clauses": clauses,
    }


def clause_sha256(clause: Mapping[str, Any]) -> str:
    content = {key: clause[key] for key in ("id", "form", "topic", "number", "title", "text")}
    encoded = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(encoded).hexdigest()


def corpus_version(clauses: Sequence[Mapping[str, Any]]) -> str:
    lines = sorted(f"{clause['id']} {clause['sha256']}" for clause in clauses)
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def canonical_corpus_bytes(corpus: Mapping[str, Any]) -> bytes:
    return (json.dumps(corpus, sort_keys=True, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def write_clause_corpus(profile: ClauseProfile, seed: int, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / CORPUS_FILE_NAME
    path.write_bytes(canonical_corpus_bytes(generate_clause_corpus(profile, seed)))
    return path


def clause_ids_by_topic(corpus: Mapping[str, Any], form: str) -> dict[str, str]:
    """Topic key -> clause id within `form`; a form the corpus does not hold is a `ValueError`."""
    if all(entry["code"] != form for entry in corpus["forms"]):
        raise ValueError(f"form {form!r} is not in the corpus")
    return {clause["topic"]: clause["id"] for clause in corpus["clauses"] if clause["form"] == form}


def _form_clauses(form: ClauseForm, form_index: int, currency: str, seed: int) -> list[dict[str, str]]:
    numbering = _numbering(seed, form.code)
    values = _rendered_values(form, currency)
    clauses: list[tuple[tuple[int, int], dict[str, str]]] = []
    for topic, title in TOPICS:
        section, number = numbering[topic]
        templates = TEMPLATES[topic]
        variant = (_derived(seed, "wording", topic) + form_index) % len(templates)
        clause = {
            "id": f"{form.code}-{section}.{number}",
            "form": form.code,
            "topic": topic,
            "number": f"{section}.{number}",
            "title": title,
            "text": templates[variant].format_map(values),
        }
        assert CLAUSE_ID.match(clause["id"]), clause["id"]
        clause["sha256"] = clause_sha256(clause)
        clauses.append(((section, number), clause))
    clauses.sort(key=lambda pair: pair[0])
    return [clause for _, clause in clauses]


def _numbering(seed: int, form_code: str) -> dict[str, tuple[int, int]]:
    """Topic -> (section, number): the topic groups in a seeded order per form, numbered from a seeded section."""
    groups: list[str] = []
    for topic, _ in TOPICS:
        group = topic.split(".", 1)[0]
        if group not in groups:
            groups.append(group)
    ordered = sorted(groups, key=lambda group: _derived(seed, "section", form_code, group))
    first_section = 2 + _derived(seed, "first-section", form_code) % _FIRST_SECTION_CHOICES
    numbering: dict[str, tuple[int, int]] = {}
    counters: dict[str, int] = {}
    for topic, _ in TOPICS:
        group = topic.split(".", 1)[0]
        counters[group] = counters.get(group, 0) + 1
        numbering[topic] = (first_section + ordered.index(group), counters[group])
    return numbering


def _derived(seed: int, *parts: str) -> int:
    digest = hashlib.sha256("|".join((str(seed), *parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def _rendered_values(form: ClauseForm, currency: str) -> dict[str, str]:
    values = {
        "employer": form.employer,
        "certifier": form.certifier,
        "pricing": form.pricing_document,
        "shall": form.modal,
        "currency": currency,
    }
    for name, value in form.parameters.items():
        kind = PARAMETERS[name][0]
        if name == "valuation_day":
            values[name] = _ordinal(int(value))
        elif kind == _AMOUNT_KIND:
            values[name] = _money(Decimal(value), currency)
        elif kind == _PERCENT_KIND:
            values[name] = _plain_decimal(Decimal(value))
        else:
            values[name] = str(value)
    return values


def _plain_decimal(value: Decimal) -> str:
    return format(value.normalize(), "f")


def _money(value: Decimal, currency: str) -> str:
    symbol = _CURRENCY_SYMBOLS.get(currency, f"{currency} ")
    figure = f"{value:,.0f}" if value == value.to_integral_value() else f"{value:,.2f}"
    return f"{symbol}{figure}"


def _ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _form(value: object, source: str, field: str) -> ClauseForm:
    mapping = _mapping(value, source, field)
    _exact_keys(mapping, _FORM_KEYS, source, field)
    code = _text(mapping["code"], source, f"{field}.code")
    if code not in FORM_CODES:
        raise ClauseProfileError(
            source, f"{field}.code", f"unknown form code {code!r} (known: {', '.join(FORM_CODES)})"
        )
    edition = _text(mapping["edition"], source, f"{field}.edition")
    if not _EDITION.match(edition):
        raise ClauseProfileError(source, f"{field}.edition", f"expected a quoted year like '2024', got {edition!r}")
    modal = _text(mapping["modal"], source, f"{field}.modal")
    if modal not in MODALS:
        raise ClauseProfileError(source, f"{field}.modal", f"expected one of {', '.join(MODALS)}, got {modal!r}")
    return ClauseForm(
        code=code,
        name=_text(mapping["name"], source, f"{field}.name"),
        edition=edition,
        employer=_text(mapping["employer"], source, f"{field}.employer"),
        certifier=_text(mapping["certifier"], source, f"{field}.certifier"),
        pricing_document=_text(mapping["pricing_document"], source, f"{field}.pricing_document"),
        modal=modal,
        parameters=_parameters(mapping["parameters"], source, f"{field}.parameters"),
    )


def _parameters(value: object, source: str, field: str) -> dict[str, ParameterValue]:
    mapping = _mapping(value, source, field)
    _exact_keys(mapping, tuple(PARAMETERS), source, field)
    parameters: dict[str, ParameterValue] = {}
    for name, (kind, minimum, maximum) in PARAMETERS.items():
        key = f"{field}.{name}"
        if kind == _INTEGER_KIND:
            parameters[name] = _integer(mapping[name], source, key, minimum, maximum)
        elif kind == _PERCENT_KIND:
            parameters[name] = _percent(mapping[name], source, key, maximum)
        else:
            parameters[name] = _amount(mapping[name], source, key)
    _check_consistency(parameters, source, field)
    return parameters


def _check_consistency(parameters: Mapping[str, ParameterValue], source: str, field: str) -> None:
    def fail(name: str, reason: str) -> None:
        raise ClauseProfileError(source, f"{field}.{name}", reason)

    if parameters["retention_cap_percent"] > parameters["retention_percent"]:
        fail("retention_cap_percent", "the cap (of the Contract Sum) must not exceed retention_percent")
    start = Decimal(parameters["advance_repayment_start_percent"])
    full = Decimal(parameters["advance_full_repayment_percent"])
    if full <= start:
        fail("advance_full_repayment_percent", "must be greater than advance_repayment_start_percent")
    recoverable = Decimal(parameters["advance_repayment_rate_percent"]) * (full - start) / 100
    if recoverable < Decimal(parameters["advance_percent"]):
        fail(
            "advance_repayment_rate_percent",
            f"deducting it between {start}% and {full}% of the Contract Sum recovers only {recoverable}%, "
            f"less than advance_percent",
        )
    if parameters["payment_notice_days"] >= parameters["final_date_days"]:
        fail("payment_notice_days", "the payment notice must fall before the final date (final_date_days)")
    if parameters["pay_less_days"] >= parameters["final_date_days"]:
        fail("pay_less_days", "the pay less deadline must fall after the due date (less than final_date_days)")


def _mapping(value: object, source: str, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ClauseProfileError(source, field, f"expected a mapping, got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise ClauseProfileError(source, f"{field}.{key!r}", "keys must be strings")
    return value


def _exact_keys(mapping: dict[str, Any], keys: tuple[str, ...], source: str, field: str) -> None:
    prefix = f"{field}." if field else ""
    for key in sorted(mapping):
        if key not in keys:
            raise ClauseProfileError(source, f"{prefix}{key}", f"unknown key (allowed: {', '.join(keys)})")
    for key in keys:
        if key not in mapping:
            raise ClauseProfileError(source, f"{prefix}{key}", "missing")


def _text(value: object, source: str, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ClauseProfileError(source, field, f"expected a non-empty string, got {value!r}")
    if _UNSTORABLE.search(value) or "{" in value or "}" in value:
        raise ClauseProfileError(source, field, "contains a NUL, a lone surrogate or a brace")
    return value


def _integer(value: object, source: str, field: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ClauseProfileError(source, field, f"expected an integer, got {type(value).__name__} {value!r}")
    if not minimum <= value <= maximum:
        raise ClauseProfileError(source, field, f"must be between {minimum} and {maximum}, got {value}")
    return value


def _percent(value: object, source: str, field: str, maximum: int) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | str) or not _PERCENT.match(str(value)):
        raise ClauseProfileError(
            source, field, f"expected a percentage as an integer or a quoted decimal like '2.5', got {value!r}"
        )
    percent = Decimal(str(value))
    if not 0 < percent <= maximum:
        raise ClauseProfileError(source, field, f"must be above 0 and at most {maximum}, got {percent}")
    return percent


def _amount(value: object, source: str, field: str) -> Decimal:
    if not isinstance(value, str) or not _MONEY.match(value):
        raise ClauseProfileError(
            source, field, f"expected a decimal string with 2 places like '2500.00', got {value!r}"
        )
    try:
        amount = Decimal(value)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid decimals
        raise ClauseProfileError(source, field, f"not a decimal: {value!r}") from exc
    if amount <= 0:
        raise ClauseProfileError(source, field, "must be above zero")
    return amount
