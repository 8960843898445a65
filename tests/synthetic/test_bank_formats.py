"""The books' bank statements written as camt.053, MT940, OFX and a UK CSV read back to the books' bank lines."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import mt940
import pytest
import xmlschema
import yaml
from lxml import etree
from ofxtools.Parser import OFXTree

from countersign.synthetic import generate_books, load_profile
from countersign.synthetic.bank_formats import (
    CAMT053_FILE,
    CAMT053_NAMESPACE,
    MT940_FILE,
    OFX_FILE,
    AccountStatement,
    BankLine,
    camt053_bytes,
    csv_file_name,
    iban_for,
    iban_is_valid,
    mt940_bytes,
    ofx_bytes,
    read_statements,
    write_bank_exports,
)
from tests.shared_schemas import CAMT053_XSD
from tests.synthetic.books_fixture import DEFAULT_PROFILE, read_rows

XSD = CAMT053_XSD
ALL_FORMATS = ("camt053", "mt940", "ofx", "csv")
CORRECTED = "corrected/bank_lines.csv"
NS = {"c": CAMT053_NAMESPACE}


@dataclass(frozen=True)
class Read:
    """A statement as a test reads it back: GL account, balances and entries (id, date, amount, reference, text)."""

    opening: Decimal | None
    closing: Decimal
    entries: list[tuple[str, date, Decimal, str, str]]


@pytest.fixture(scope="module")
def books(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("books")
    generate_books(load_profile(DEFAULT_PROFILE), 42, out)
    return out


@pytest.fixture(scope="module")
def export(books: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export")
    write_bank_exports(books, out, ALL_FORMATS)
    write_bank_exports(books, out / "corrected", ALL_FORMATS, bank_file=CORRECTED, message_id_suffix="-R")
    return out


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(XSD))


def books_statements(books: Path, bank_file: str) -> dict[str, Read]:
    """What the books say: per account the GL opening line, the bank lines, and opening + lines."""
    opening: dict[str, Decimal] = defaultdict(Decimal)
    for row in read_rows(books / "gl_lines.csv"):
        if row["reference"].startswith("OB-"):
            opening[row["account"]] += Decimal(row["amount"])
    entries: dict[str, list[tuple[str, date, Decimal, str, str]]] = defaultdict(list)
    for row in read_rows(books / bank_file):
        entries[row["account"]].append(
            (
                row["bank_line_id"],
                date.fromisoformat(row["date"]),
                Decimal(row["amount"]),
                row["reference"],
                row["description"],
            )
        )
    return {
        account: Read(opening[account], opening[account] + sum(a for _, _, a, _, _ in lines), lines)
        for account, lines in entries.items()
    }


def accounts_of(export: Path) -> dict[str, str]:
    """IBAN -> GL account, from the mapping beside the first bank CSV."""
    mapping = yaml.safe_load((export / "bank-1000.mapping.yaml").read_text(encoding="utf-8"))
    both = yaml.safe_load((export / "bank-1010.mapping.yaml").read_text(encoding="utf-8"))
    return {**mapping["bank_accounts"], **both["bank_accounts"]}


def signed(indicator: str, amount: str) -> Decimal:
    return Decimal(amount) if indicator == "CRDT" else -Decimal(amount)


def read_camt(path: Path, accounts: dict[str, str]) -> dict[str, Read]:
    root = etree.parse(str(path)).getroot()
    out: dict[str, Read] = {}
    for stmt in root.iterfind("c:BkToCstmrStmt/c:Stmt", NS):
        balances = {
            bal.findtext("c:Tp/c:CdOrPrtry/c:Cd", namespaces=NS): signed(
                bal.findtext("c:CdtDbtInd", namespaces=NS), bal.findtext("c:Amt", namespaces=NS)
            )
            for bal in stmt.iterfind("c:Bal", NS)
        }
        entries = []
        for entry in stmt.iterfind("c:Ntry", NS):
            assert entry.findtext("c:Sts/c:Cd", namespaces=NS) == "BOOK"
            assert entry.findtext("c:ValDt/c:Dt", namespaces=NS) == entry.findtext("c:BookgDt/c:Dt", namespaces=NS)
            reference = entry.findtext("c:NtryDtls/c:TxDtls/c:Refs/c:EndToEndId", namespaces=NS)
            entries.append(
                (
                    entry.findtext("c:AcctSvcrRef", namespaces=NS),
                    date.fromisoformat(entry.findtext("c:BookgDt/c:Dt", namespaces=NS)),
                    signed(entry.findtext("c:CdtDbtInd", namespaces=NS), entry.findtext("c:Amt", namespaces=NS)),
                    "" if reference == "NOTPROVIDED" else reference,
                    "".join(t.text for t in entry.iterfind("c:NtryDtls/c:TxDtls/c:RmtInf/c:Ustrd", NS)),
                )
            )
        account = accounts[stmt.findtext("c:Acct/c:Id/c:IBAN", namespaces=NS)]
        out[account] = Read(balances["OPBD"], balances["CLBD"], entries)
    return out


_MT940_FIELD = re.compile(r"^:(\w+):(.*?)(?=^:\w+:|\Z)", re.MULTILINE | re.DOTALL)
_MT940_LINE = re.compile(r"(\d{6})(\d{4})([CD])([\d,]+)(N[A-Z]{3})(.*?)//(.+)")


def mt940_balance(value: str) -> Decimal:
    amount = Decimal(value[10:].replace(",", "."))
    return amount if value[0] == "C" else -amount


def read_mt940_text(path: Path, accounts: dict[str, str]) -> dict[str, Read]:
    """A minimal MT940 reader: statements end at a `-` line, tags start lines."""
    text = path.read_bytes().decode("ascii")
    out: dict[str, Read] = {}
    for block in text.split("\r\n-\r\n"):
        if not block.strip():
            continue
        fields = [(tag, value.replace("\r\n", "\n").rstrip("\n")) for tag, value in _MT940_FIELD.findall(block)]
        entries: list[tuple[str, date, Decimal, str, str]] = []
        values = dict(fields)
        for tag, value in fields:
            if tag == "61":
                match = _MT940_LINE.fullmatch(value)
                assert match is not None, value
                value_date, entry_date, mark, amount, _, customer, bank = match.groups()
                assert entry_date == value_date[2:]
                number = Decimal(amount.replace(",", "."))
                when = datetime.strptime(value_date, "%y%m%d").date()
                reference = "" if customer == "NONREF" else customer
                entries.append((bank, when, number if mark == "C" else -number, reference, ""))
            elif tag == "86":
                *head, (bank, when, number, reference, _) = entries
                entries = [*head, (bank, when, number, reference, value.replace("\n", ""))]
        out[accounts[values["25"]]] = Read(mt940_balance(values["60F"]), mt940_balance(values["62F"]), entries)
    return out


def read_ofx(path: Path, accounts: dict[str, str]) -> dict[str, Read]:
    tree = OFXTree()
    tree.parse(str(path))
    out: dict[str, Read] = {}
    for statement in tree.convert().statements:
        entries = [(t.fitid, t.dtposted.date(), t.trnamt, t.refnum or "", t.memo or "") for t in statement.transactions]
        out[accounts[statement.account.acctid]] = Read(None, statement.balance.balamt, entries)
    return out


def uk_amount(text: str) -> Decimal:
    return Decimal(text.replace(",", "")) if text else Decimal("0")


def read_uk_csv(export: Path, accounts: dict[str, str]) -> dict[str, Read]:
    out: dict[str, Read] = {}
    for account in sorted(set(accounts.values())):
        path = export / csv_file_name(account)
        mapping = yaml.safe_load((export / f"bank-{account}.mapping.yaml").read_text(encoding="utf-8"))["bank_csv"]
        rows = list(csv.DictReader(io.StringIO(path.read_bytes().decode("utf-8-sig"))))
        balance = Decimal(mapping["opening_balance"])
        entries = []
        for row in rows:
            amount = uk_amount(row["Paid in"]) - uk_amount(row["Paid out"])
            balance += amount
            assert uk_amount(row["Balance"]) == balance, row
            when = datetime.strptime(row["Date"], "%d/%m/%Y").date()
            entries.append(("", when, amount, row["Reference"], row["Description"]))
        assert balance == Decimal(mapping["closing_balance"])
        out[accounts[mapping["bank_account"]]] = Read(Decimal(mapping["opening_balance"]), balance, entries)
    return out


def read_format(name: str, export: Path) -> dict[str, Read]:
    accounts = accounts_of(export)
    if name == "camt053":
        return read_camt(export / CAMT053_FILE, accounts)
    if name == "mt940":
        return read_mt940_text(export / MT940_FILE, accounts)
    if name == "ofx":
        return read_ofx(export / OFX_FILE, accounts)
    return read_uk_csv(export, accounts)


@pytest.mark.parametrize("folder", ["", "corrected"])
@pytest.mark.parametrize("name", ALL_FORMATS)
def test_every_format_reads_back_to_the_books_bank_lines_per_account(
    books: Path, export: Path, name: str, folder: str
) -> None:
    expected = books_statements(books, CORRECTED if folder else "bank_lines.csv")
    found = read_format(name, export / folder)
    assert found.keys() == expected.keys() == {"1000", "1010"}
    for account, want in expected.items():
        got = found[account]
        assert got.closing == want.closing, (name, account)
        assert got.opening in (None, want.opening), (name, account)
        assert sum(entry[2] for entry in got.entries) == want.closing - want.opening
        for got_entry, want_entry in zip(got.entries, want.entries, strict=True):
            bank_line_id, *rest = want_entry
            if name == "csv":  # a UK CSV export carries no bank reference
                bank_line_id = ""
            assert got_entry == (bank_line_id, *rest), (name, account)


def test_opening_balance_is_the_gl_opening_line_and_the_wrong_export_differs(books: Path, export: Path) -> None:
    as_loaded = read_format("camt053", export)["1000"]
    corrected = read_format("camt053", export / "corrected")["1000"]
    opening = next(r for r in read_rows(books / "gl_lines.csv") if r["account"] == "1000")
    assert opening["reference"] == "OB-2026-10"
    assert as_loaded.opening == corrected.opening == Decimal(opening["amount"])
    assert {e[0] for e in as_loaded.entries}.isdisjoint({e[0] for e in corrected.entries})
    assert all(e[3].startswith("EXT-") for e in as_loaded.entries)
    assert as_loaded.closing != corrected.closing


@pytest.mark.parametrize("folder", ["", "corrected"])
def test_camt053_validates_against_the_published_schema(export: Path, schema: xmlschema.XMLSchema, folder: str) -> None:
    document = export / folder / CAMT053_FILE
    schema.validate(str(document))
    root = etree.parse(str(document)).getroot()
    assert root.tag == f"{{{CAMT053_NAMESPACE}}}Document"
    assert root.findtext("c:BkToCstmrStmt/c:GrpHdr/c:CreDtTm", namespaces=NS) == "2026-10-31T23:59:59"
    message_id = root.findtext("c:BkToCstmrStmt/c:GrpHdr/c:MsgId", namespaces=NS)
    assert message_id == ("ACME-UK-2026-10-CAMT053-R" if folder else "ACME-UK-2026-10-CAMT053")


def test_camt053_out_of_order_is_refused_by_the_schema(export: Path, schema: xmlschema.XMLSchema) -> None:
    """Negative control: the schema check can fail; ValDt after AcctSvcrRef breaks the sequence."""
    text = (export / CAMT053_FILE).read_text(encoding="utf-8")
    broken = re.sub(
        r"(<ValDt>\s*<Dt>[^<]+</Dt>\s*</ValDt>)(\s*)(<AcctSvcrRef>[^<]+</AcctSvcrRef>)", r"\3\2\1", text, count=1
    )
    assert broken != text
    assert not schema.is_valid(broken)


def test_long_texts_are_cut_where_each_format_allows() -> None:
    description = "Receipt & payment <" + "x" * 400
    line = BankLine("BNK-1000-0000001", date(2026, 10, 5), -123456, "", description)
    statement = AccountStatement(
        "1000", iban_for("1000"), "GBP", "ACME-UK", "2026-10", date(2026, 10, 1), date(2026, 10, 31), 100, (line,)
    )
    camt = etree.fromstring(camt053_bytes([statement], message_id="M"))
    parts = [u.text for u in camt.iterfind(".//c:Ustrd", NS)]
    assert [len(p) for p in parts] == [140, 140, 139] and "".join(parts) == description
    assert camt.findtext(".//c:EndToEndId", namespaces=NS) == "NOTPROVIDED"

    mt = mt940_bytes([statement]).decode("ascii").split("\r\n")
    assert ":61:2610051005D1234,56NDDTNONREF//BNK-1000-0000001" not in mt  # not a direct debit reference
    assert ":61:2610051005D1234,56NTRFNONREF//BNK-1000-0000001" in mt
    start = next(i for i, text in enumerate(mt) if text.startswith(":86:"))
    narrative = [mt[start][4:], *mt[start + 1 : start + 6]]
    assert [len(text) for text in narrative] == [65] * 6 and "".join(narrative) == description[:390]
    assert mt[start + 6].startswith(":62F:D261031GBP1233,56")

    ofx = ofx_bytes([statement]).decode("cp1252")
    assert "<NAME>" not in ofx and f"<MEMO>Receipt &amp; payment &lt;{'x' * 236}\r\n" in ofx  # MEMO: 255
    short = ofx_bytes([replace(statement, lines=(replace(line, description="BACS & CREDIT"),))]).decode("cp1252")
    assert "<NAME>BACS &amp; CREDIT\r\n<MEMO>BACS &amp; CREDIT\r\n" in short
    assert "<REFNUM>" not in ofx and "<TRNAMT>-1234.56\r\n" in ofx


def test_mt940_and_ofx_use_crlf_and_the_ofx_header_names_windows_1252(export: Path) -> None:
    for name in (MT940_FILE, OFX_FILE):
        data = (export / name).read_bytes()
        assert data.count(b"\n") == data.count(b"\r\n") > 100, name
    ofx = (export / OFX_FILE).read_bytes()
    assert ofx.startswith(b"OFXHEADER:100\r\nDATA:OFXSGML\r\nVERSION:102\r\n")
    assert b"\r\nCHARSET:1252\r\n" in ofx and b"\r\n\r\n<OFX>\r\n" in ofx


def test_mt940_library_reads_every_line_and_balance(export: Path, books: Path) -> None:
    transactions = mt940.parse(str(export / MT940_FILE))
    amounts = [t.data["amount"].amount for t in transactions]
    assert amounts == [Decimal(r["amount"]) for r in read_rows(books / "bank_lines.csv")]
    assert [t.data["bank_reference"] for t in transactions] == [
        r["bank_line_id"] for r in read_rows(books / "bank_lines.csv")
    ]


def test_uk_csv_is_utf8_with_a_bom_crlf_and_thousands_commas(export: Path) -> None:
    data = (export / csv_file_name("1000")).read_bytes()
    assert data.startswith(b"\xef\xbb\xbfDate,Description,Reference,Paid out,Paid in,Balance\r\n")
    assert data.count(b"\n") == data.count(b"\r\n")
    assert re.search(rb'"\d{1,3},\d{3}\.\d{2}"', data)


def test_mapping_headings_are_the_csv_headings(export: Path) -> None:
    for account in ("1000", "1010"):
        mapping = yaml.safe_load((export / f"bank-{account}.mapping.yaml").read_text(encoding="utf-8"))
        assert mapping["version"] == 1
        section = mapping["bank_csv"]
        header = next(csv.reader(io.StringIO((export / csv_file_name(account)).read_bytes().decode("utf-8-sig"))))
        assert set(section["columns"].values()) == set(header)
        assert mapping["bank_accounts"] == {section["bank_account"]: account}


def test_ibans_are_fixed_valid_and_distinct() -> None:
    assert iban_for("1000") == "GB33BUKB20201555555555"
    assert iban_for("1010") == "GB94BARC10201530093459"
    derived = [iban_for(code) for code in ("1020", "1030", "CASH-EUR")]
    assert derived == [iban_for(code) for code in ("1020", "1030", "CASH-EUR")]
    assert len({*derived, iban_for("1000")}) == 4
    assert all(iban_is_valid(iban) and len(iban) == 22 for iban in (*derived, iban_for("1000"), iban_for("1010")))
    assert not iban_is_valid("GB34BUKB20201555555555")  # negative control: one check digit off


def test_same_books_give_the_same_bytes(books: Path, export: Path, tmp_path: Path) -> None:
    write_bank_exports(books, tmp_path, ALL_FORMATS)
    for path in sorted(p for p in export.iterdir() if p.is_file()):
        assert (
            hashlib.sha256((tmp_path / path.name).read_bytes()).digest() == hashlib.sha256(path.read_bytes()).digest()
        )


def test_books_without_an_opening_journal_open_at_zero(books: Path, tmp_path: Path) -> None:
    (tmp_path / "entity.json").write_bytes((books / "entity.json").read_bytes())
    rows = read_rows(books / "gl_lines.csv")
    kept = [r for r in rows if not r["reference"].startswith("OB-")]
    with (tmp_path / "gl_lines.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(kept)
    (tmp_path / "bank_lines.csv").write_bytes((books / "bank_lines.csv").read_bytes())
    statements = {s.account: s for s in read_statements(tmp_path)}
    assert statements["1010"].opening_minor == 0
    with_opening = {s.account: s for s in read_statements(books)}
    assert with_opening["1010"].opening_minor != 0
    assert replace(statements["1010"], opening_minor=with_opening["1010"].opening_minor) == with_opening["1010"]


def test_unknown_format_is_refused_naming_the_choices(books: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown bank format\(s\) \['bai2'\]: expected some of"):
        write_bank_exports(books, tmp_path, ["camt053", "bai2"])
    assert not any(tmp_path.iterdir())


def test_entity_json_is_read_for_currency_and_period(books: Path) -> None:
    entity = json.loads((books / "entity.json").read_text(encoding="utf-8"))
    statements = read_statements(books)
    assert {s.currency for s in statements} == {entity["currency"]}
    assert {(s.from_date, s.to_date) for s in statements} == {(date(2026, 10, 1), date(2026, 10, 31))}


# --- round trips through the importers ---------------------------------------------------------------------------


@pytest.mark.parametrize("folder", ["", "corrected"])
@pytest.mark.parametrize("name", ALL_FORMATS)
def test_importers_read_the_exports_back_to_the_books(books: Path, export: Path, name: str, folder: str) -> None:
    from countersign.importers.mapping import load_mapping

    where = export / folder
    if name == "camt053":
        from countersign.importers.camt053 import read_camt053

        statements = read_camt053(where / CAMT053_FILE, schema=XSD)
    elif name == "mt940":
        from countersign.importers.mt940 import read_mt940

        statements = read_mt940(where / MT940_FILE)
    elif name == "ofx":
        from countersign.importers.ofx import read_ofx

        statements = read_ofx(where / OFX_FILE)
    else:
        from countersign.importers.bank_csv import read_bank_csv

        statements = []
        for account in ("1000", "1010"):
            layout = load_mapping(where / f"bank-{account}.mapping.yaml").bank_csv
            assert layout is not None
            statements += read_bank_csv(where / csv_file_name(account), layout)
    mapping = load_mapping(where / "bank-1000.mapping.yaml")
    accounts = {**mapping.bank_accounts, **load_mapping(where / "bank-1010.mapping.yaml").bank_accounts}
    expected = books_statements(books, CORRECTED if folder else "bank_lines.csv")
    assert sorted(accounts[s.bank_account] for s in statements) == ["1000", "1010"]
    for statement in statements:
        want = expected[accounts[statement.bank_account]]
        assert statement.currency == "GBP"
        if name == "csv":  # a CSV export states no period: its first and last rows' dates stand for it
            assert (statement.from_date, statement.to_date) == (want.entries[0][1], want.entries[-1][1])
        else:
            assert (statement.from_date, statement.to_date) == (date(2026, 10, 1), date(2026, 10, 31))
        assert statement.closing_balance == want.closing
        assert statement.opening_balance == want.opening
        assert statement.opening_stated == (name != "ofx")
        got = [(e.booking_date, e.amount, e.reference, e.description) for e in statement.entries]
        assert got == [(when, amount, reference, text) for _, when, amount, reference, text in want.entries]
        if name != "csv":
            assert [e.bank_reference for e in statement.entries] == [e[0] for e in want.entries]
