"""camt.053 statements read after XSD validation: balances, booked entries with their signs, references and batch
counts; and every refusal is one ImportFileError naming the file, the line (statement, entry) and the element.

The good files are in data/camt053; each bad file is a good one with one thing broken."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.importers import camt053
from countersign.importers.camt053 import read_camt053
from countersign.importers.errors import ImportFileError
from countersign.importers.statement import BankStatement, StatementFormat
from tests.shared_schemas import CAMT053_XSD, SCHEMAS_DIR

DATA = Path(__file__).resolve().parent / "data" / "camt053"
SCHEMAS = SCHEMAS_DIR
XSD = CAMT053_XSD
V08 = "urn:iso:std:iso:20022:tech:xsd:camt.053.001.08"


def _read(name: str) -> list[BankStatement]:
    return read_camt053(DATA / name, schema=XSD)


def _broken(tmp_path: Path, name: str, old: str, new: str, *, count: int = 1, target: str | None = None) -> Path:
    """The good file `name` with `old` replaced by `new` (found exactly `count` times), written to tmp_path."""
    text = (DATA / name).read_text(encoding="utf-8")
    assert text.count(old) == count, f"{old!r} appears {text.count(old)} times in {name}"
    path = tmp_path / (target or name)
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def _refusal(path: Path, *, schema: Path | None = XSD, max_bytes: int = camt053.MAX_BYTES) -> ImportFileError:
    with pytest.raises(ImportFileError) as refused:
        read_camt053(path, schema=schema, max_bytes=max_bytes)
    message = str(refused.value)
    assert message.startswith(f"{path.name} ") or message.startswith(f"{path.name}:"), message
    assert str(path.parent) not in message  # the file's name, never its directory
    assert "\n" not in message
    return refused.value


# --- files that read -------------------------------------------------------------------------------------------


def test_a_month_of_a_current_account_reads_its_balances_period_and_every_booked_entry() -> None:
    [statement] = _read("single.xml")
    assert statement.statement_id == "STMT-2026-11-0555"
    assert statement.bank_account == "GB33BUKB20201555555555"
    assert statement.currency == "GBP"
    assert (statement.from_date, statement.to_date) == (date(2026, 11, 1), date(2026, 11, 30))
    assert (statement.opening_balance, statement.closing_balance) == (Decimal("12345.67"), Decimal("12984.02"))
    assert statement.source == "single.xml"
    assert statement.format is StatementFormat.CAMT053
    assert statement.opening_stated
    assert [entry.amount for entry in statement.entries] == [
        Decimal("1250.00"),
        Decimal("-480.50"),
        Decimal("-12.75"),
        Decimal("-95.00"),
        Decimal("-23.40"),
    ]
    assert statement.opening_balance + statement.movements == statement.closing_balance
    assert [entry.booking_date for entry in statement.entries] == [
        date(2026, 11, 3),
        date(2026, 11, 9),
        date(2026, 11, 14),
        date(2026, 11, 16),
        date(2026, 11, 27),  # BookgDt/DtTm: the date as the bank wrote it
    ]
    assert [entry.value_date for entry in statement.entries] == [
        date(2026, 11, 3),
        date(2026, 11, 9),
        None,
        date(2026, 11, 16),
        date(2026, 11, 26),
    ]
    assert not any(entry.reversal for entry in statement.entries)
    assert all(entry.transactions == 1 for entry in statement.entries)


def test_references_fall_back_from_end_to_end_id_to_creditor_reference_to_instruction_id() -> None:
    [statement] = _read("single.xml")
    assert [entry.reference for entry in statement.entries] == [
        "INV-2026-0142",  # EndToEndId
        "RF18539007547034",  # EndToEndId NOTPROVIDED: the structured creditor reference
        "",  # no details at all
        "DD-7781-202611",  # no EndToEndId: the instruction id
        "",
    ]
    assert [entry.bank_reference for entry in statement.entries] == [
        "BUKB20261103FP000001",
        "BUKB20261109FP000214",
        "",
        "BUKB20261116DD000031",
        "BUKB20261127CD004410",
    ]


def test_descriptions_are_remittance_else_entry_information_else_the_bank_code_on_one_line() -> None:
    [statement] = _read("single.xml")
    assert [entry.description for entry in statement.entries] == [
        "INV-2026-0142 CALDER FM",  # runs of spaces collapsed
        "FASTER PAYMENT TO NORTHWIND SUPPLIES LTD",  # AddtlNtryInf over two lines, joined
        "ACCOUNT FEE",  # BkTxCd/Prtry/Cd
        "KINGSGATE BUSINESS RATES ACCOUNT 40117",  # two Ustrd lines joined with a space
        "CARD 4417 TIMBER & FIXINGS LEEDS",
    ]


def test_a_description_longer_than_512_characters_is_cut(tmp_path: Path) -> None:
    long_line = "X" * 140
    lines = "".join(f"<Ustrd>{long_line}</Ustrd>" for _ in range(5))  # 5 x 140 + 4 spaces = 704 characters
    path = _broken(tmp_path, "single.xml", "<Ustrd>INV-2026-0142   CALDER FM</Ustrd>", lines)
    [statement] = read_camt053(path, schema=XSD)
    assert len(statement.entries[0].description) == 512
    assert statement.entries[0].description.startswith("X" * 140 + " " + "X" * 140)


def test_entry_ids_are_the_bank_reference_where_unique_in_the_file_else_the_entry_reference_else_the_position() -> None:
    [single] = _read("single.xml")
    # entry 3 has no AcctSvcrRef; its NtryRef 3 is unique in the file
    assert [entry.entry_id for entry in single.entries] == [
        "BUKB20261103FP000001",
        "BUKB20261109FP000214",
        "3",
        "BUKB20261116DD000031",
        "BUKB20261127CD004410",
    ]
    sterling, euro = _read("multi.xml")
    # FEES is the bank reference of two entries and NtryRef 1, 2 repeat in both statements
    assert [entry.entry_id for entry in sterling.entries] == ["BUKB20261105FP000077", "GB33-2026-11-2"]
    assert [entry.entry_id for entry in euro.entries] == ["EUR-30093459-2026-11-1", "EUR-30093459-2026-11-2"]
    assert [entry.bank_reference for entry in sterling.entries + euro.entries] == [
        "BUKB20261105FP000077",
        "FEES",
        "FEES",
        "",
    ]


def test_several_statements_in_one_file_each_keep_their_account_currency_balances_and_period() -> None:
    statements = _read("multi.xml")
    assert [(s.statement_id, s.bank_account, s.currency) for s in statements] == [
        ("GB33-2026-11", "GB33BUKB20201555555555", "GBP"),
        ("EUR-30093459-2026-11", "EUR-30093459", "EUR"),  # Othr/Id; no Acct/Ccy: the balances' currency
    ]
    sterling, euro = statements
    assert (sterling.opening_balance, sterling.closing_balance) == (Decimal("5000.00"), Decimal("5725.00"))
    assert (euro.opening_balance, euro.closing_balance) == (Decimal("2000.00"), Decimal("2100.00"))  # from PRCD
    assert [entry.amount for entry in euro.entries] == [Decimal("-150.00"), Decimal("250.00")]
    assert (sterling.from_date, sterling.to_date) == (date(2026, 11, 1), date(2026, 11, 30))
    assert (euro.from_date, euro.to_date) == (date(2026, 11, 12), date(2026, 11, 20))  # no FrToDt: booking dates
    assert euro.entries[1].reference == ""  # EndToEndId NOTPROVIDED and nothing else


def test_a_statement_without_period_or_entries_is_dated_by_its_creation(tmp_path: Path) -> None:
    text = (DATA / "multi.xml").read_text(encoding="utf-8")
    start, end = (
        text.index('      <Ntry>\n        <NtryRef>1</NtryRef>\n        <Amt Ccy="EUR">'),
        text.rindex("    </Stmt>"),
    )
    path = tmp_path / "empty.xml"
    path.write_text((text[:start] + text[end:]).replace("2100.00", "2000.00"), encoding="utf-8")
    euro = read_camt053(path, schema=XSD)[1]
    assert euro.entries == ()
    assert (euro.from_date, euro.to_date) == (date(2026, 12, 1), date(2026, 12, 1))


def test_a_batch_booking_is_one_entry_carrying_its_transaction_count() -> None:
    [statement] = _read("batch.xml")
    run, collection, payroll = statement.entries
    assert run.amount == Decimal("-3150.00")  # the bank moved the total once
    assert run.transactions == 3  # Btch/NbOfTxs
    assert run.reference == "PO-88121"  # the first transaction's end-to-end id
    assert run.description == "NORTHWIND SUPPLIES PO-88121 ASHDOWN TIMBER PO-88122 KESTREL HIRE PO-88125"
    assert collection.amount == Decimal("400.00")
    assert collection.transactions == 2  # no Btch: the TxDtls counted
    assert collection.description == "DIRECT DEBIT COLLECTION 2 ITEMS"
    assert payroll.amount == Decimal("-8640.00")
    assert payroll.transactions == 12  # Btch/NbOfTxs, with no TxDtls listed
    assert payroll.reference == "PAYROLL-2026-11"  # no transaction details: the batch's message id
    assert statement.closing_balance == Decimal("8610.00")


def test_a_reversal_is_marked_and_keeps_the_sign_of_the_reversing_booking() -> None:
    [statement] = _read("reversal.xml")
    assert [(entry.amount, entry.reversal) for entry in statement.entries] == [
        (Decimal("300.00"), False),
        (Decimal("-300.00"), True),  # the returned receipt: a debit
        (Decimal("12.75"), True),  # the refunded charge: a credit (RvslInd written 1)
    ]
    assert statement.entries[1].reference == "INV-2026-0161"
    assert statement.closing_balance == Decimal("1012.75")


def test_pending_and_information_entries_are_not_movements(tmp_path: Path) -> None:
    [statement] = _read("pending.xml")
    assert [(entry.entry_id, entry.amount) for entry in statement.entries] == [
        ("BUKB20261118FP000301", Decimal("100.00"))
    ]
    assert statement.opening_balance + statement.movements == statement.closing_balance
    # control: the same pending card payment booked would be a movement, and the balances would not add up
    booked = _broken(
        tmp_path,
        "pending.xml",
        "<Cd>PDNG</Cd>\n        </Sts>",
        "<Cd>BOOK</Cd>\n        </Sts>\n        <BookgDt><Dt>2026-11-30</Dt></BookgDt>",
    )
    assert "difference GBP 50.00" in str(_refusal(booked))


def test_a_negative_zero_amount_is_zero() -> None:
    [statement] = _read("negative_zero.xml")
    interest = statement.entries[0]
    assert interest.amount == 0 and not interest.amount.is_signed() and str(interest.amount) == "0.00"
    assert not statement.opening_balance.is_signed()  # a DBIT balance of 0.00
    assert statement.bank_account == "GB94BARC10201530093459"
    assert statement.closing_balance == Decimal("25.00")


def test_a_byte_order_mark_and_crlf_line_endings_read_like_plain_utf8() -> None:
    raw = (DATA / "bom_crlf.xml").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw  # the file is what it says
    [statement] = _read("bom_crlf.xml")
    assert statement.statement_id == "BOM-2026-11"
    assert [(entry.amount, entry.description) for entry in statement.entries] == [
        (Decimal("20.00"), "Café Zoë Łódź – Rechnung Nr. 7")
    ]


def test_an_overdrawn_opening_balance_is_negative() -> None:
    [statement] = _read("overdraft.xml")
    assert statement.opening_balance == Decimal("-1500.00")
    assert statement.closing_balance == Decimal("200.00")
    assert statement.entries[0].reference == "STAGE-PAYMENT-3"  # EndToEndId before InstrId


def test_a_folder_of_xsds_picks_the_one_for_the_documents_version_and_older_versions_read_the_same(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "xsd"
    folder.mkdir()
    (folder / "camt.053.001.08.xsd").symlink_to(XSD.resolve())
    # A stand-in for the .02 XSD (not the official one): accepts any content, so the reading is what is tested.
    v02 = "urn:iso:std:iso:20022:tech:xsd:camt.053.001.02"
    (folder / "camt.053.001.02.xsd").write_text(
        f'<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema" targetNamespace="{v02}"'
        ' elementFormDefault="qualified"><xs:element name="Document"><xs:complexType><xs:sequence>'
        '<xs:any processContents="skip" maxOccurs="unbounded"/></xs:sequence></xs:complexType></xs:element>'
        "</xs:schema>",
        encoding="utf-8",
    )
    [current] = read_camt053(DATA / "single.xml", schema=folder)
    assert current.closing_balance == Decimal("12984.02")
    # the .02 shape: the status is text, not a Cd element
    text = (DATA / "pending.xml").read_text(encoding="utf-8").replace(V08, v02)
    text = text.replace("<Sts>\n          <Cd>BOOK</Cd>\n        </Sts>", "<Sts>BOOK</Sts>")
    text = text.replace("<Sts>\n          <Cd>PDNG</Cd>\n        </Sts>", "<Sts>PDNG</Sts>")
    text = text.replace("<Sts>\n          <Cd>INFO</Cd>\n        </Sts>", "<Sts>INFO</Sts>")
    assert text.count("<Sts>BOOK</Sts>") == 1 and "<Cd>BOOK</Cd>" not in text
    (tmp_path / "v02.xml").write_text(text, encoding="utf-8")
    [older] = read_camt053(tmp_path / "v02.xml", schema=folder)
    assert [(entry.entry_id, entry.amount) for entry in older.entries] == [("BUKB20261118FP000301", Decimal("100.00"))]
    assert (older.opening_balance, older.closing_balance) == (Decimal("200.00"), Decimal("300.00"))


def test_the_xsd_is_compiled_once_per_path_and_a_valid_file_never_needs_the_slow_validator() -> None:
    _read("single.xml")
    before = camt053._libxml2_schema.cache_info(), camt053._compiled_schema.cache_info()
    _read("reversal.xml")
    after = camt053._libxml2_schema.cache_info(), camt053._compiled_schema.cache_info()
    assert after[0].hits == before[0].hits + 1 and after[0].misses == before[0].misses
    assert after[1] == before[1]  # xmlschema (pure Python, ~0.6 ms an entry) is asked only to word a refusal


# --- refusals --------------------------------------------------------------------------------------------------


def test_an_entry_without_its_credit_debit_indicator_fails_the_xsd_naming_the_line_entry_and_element(
    tmp_path: Path,
) -> None:
    amount = '<Amt Ccy="GBP">480.50</Amt>\n'
    path = _broken(tmp_path, "single.xml", amount + "        <CdtDbtInd>DBIT</CdtDbtInd>\n", amount)
    error = _refusal(path)
    assert str(error) == (
        "single.xml line 128, entry 2 of statement STMT-2026-11-0555: /Document/BkToCstmrStmt/Stmt/Ntry[2]: not"
        " valid against the XSD: Unexpected child with tag 'Sts' at position 3. Tag 'CdtDbtInd' expected."
    )
    assert (error.file, error.location) == ("single.xml", "line 128, entry 2 of statement STMT-2026-11-0555")


def test_an_amount_that_is_not_a_number_fails_the_xsd(tmp_path: Path) -> None:
    path = _broken(tmp_path, "single.xml", '<Amt Ccy="GBP">480.50</Amt>', '<Amt Ccy="GBP">480,50</Amt>')
    assert str(_refusal(path)) == (
        "single.xml line 130, entry 2 of statement STMT-2026-11-0555: /Document/BkToCstmrStmt/Stmt/Ntry[2]/Amt: not"
        " valid against the XSD: invalid value '480,50' for xs:decimal"
    )


def test_an_amount_with_three_decimals_passes_the_xsd_but_is_refused(tmp_path: Path) -> None:
    path = _broken(tmp_path, "single.xml", '<Amt Ccy="GBP">480.50</Amt>', '<Amt Ccy="GBP">480.505</Amt>')
    assert str(_refusal(path)) == (
        "single.xml line 130, entry 2 of statement STMT-2026-11-0555: Amt: expected at most 2 decimal places,"
        " found '480.505'"
    )


def test_another_iso_20022_message_is_refused_naming_its_namespace(tmp_path: Path) -> None:
    camt052 = "urn:iso:std:iso:20022:tech:xsd:camt.052.001.08"
    path = _broken(tmp_path, "single.xml", V08, camt052)
    assert str(_refusal(path)) == (
        f"single.xml line 3: Document: expected a camt.053 Document in the namespace"
        f" urn:iso:std:iso:20022:tech:xsd:camt.053.001.NN, found Document in the namespace {camt052}"
    )


def test_a_camt053_version_without_its_xsd_names_the_namespaces_available(tmp_path: Path) -> None:
    v02 = "urn:iso:std:iso:20022:tech:xsd:camt.053.001.02"
    path = _broken(tmp_path, "single.xml", V08, v02)
    assert str(_refusal(path, schema=SCHEMAS)) == (
        f"single.xml line 3: Document: no XSD for the namespace {v02} in schemas; the XSDs there declare: {V08}"
    )


def test_a_file_that_is_not_xml_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "export.xml"
    path.write_text("Date,Amount,Description\n2026-11-03,1250.00,INV-2026-0142\n", encoding="utf-8")
    assert str(_refusal(path)) == ("export.xml line 1: (XML): not well-formed XML: Start tag expected, '<' not found")


def test_a_truncated_file_is_refused_with_the_line_where_it_stops(tmp_path: Path) -> None:
    text = (DATA / "single.xml").read_text(encoding="utf-8")
    path = tmp_path / "single.xml"
    path.write_text(text[: text.index("<Ntry>")], encoding="utf-8")
    error = _refusal(path)
    assert error.location == "line 80" and error.field == "(XML)"  # the first <Ntry> was on line 80
    assert str(error).startswith("single.xml line 80: (XML): not well-formed XML: ")


def test_a_doctype_with_an_external_entity_is_refused(tmp_path: Path) -> None:
    doctype = '<!DOCTYPE Document [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n<Document'
    path = _broken(tmp_path, "single.xml", "<Document", doctype)
    path.write_text(path.read_text().replace("<Id>STMT-2026-11-0555</Id>", "<Id>&xxe;</Id>"))
    error = _refusal(path)
    assert str(error) == (
        "single.xml line 3: DOCTYPE: a camt.053 file has no document type declaration; this one declares one"
        " (entities or an external DTD are never read)"
    )


def test_an_exponential_entity_expansion_is_refused_as_a_doctype(tmp_path: Path) -> None:
    entities = ['<!ENTITY a0 "lol">'] + [f'<!ENTITY a{n} "{f"&a{n - 1};" * 10}">' for n in range(1, 10)]
    doctype = f"<!DOCTYPE Document [{''.join(entities)}]>\n<Document"
    path = _broken(tmp_path, "single.xml", "<Document", doctype)
    path.write_text(path.read_text().replace("<Nm>Harbour Joinery Ltd Current Account</Nm>", "<Nm>&a9;</Nm>"))
    error = _refusal(path)
    assert (error.location, error.field) == ("line 3", "DOCTYPE")  # the parser stopped expanding; the DOCTYPE is why
    assert str(error).startswith("single.xml line 3: DOCTYPE: a camt.053 file has no document type declaration")


def test_balances_that_do_not_add_up_name_the_statement_and_every_figure(tmp_path: Path) -> None:
    path = _broken(tmp_path, "single.xml", '<Amt Ccy="GBP">12984.02</Amt>', '<Amt Ccy="GBP">12985.02</Amt>')
    assert str(_refusal(path)) == (
        "single.xml statement STMT-2026-11-0555: CLBD: opening GBP 12345.67 + movements GBP 638.35 = GBP 12984.02,"
        " but the closing balance is GBP 12985.02 (difference GBP 1.00)"
    )


def test_an_entry_in_another_currency_is_refused_naming_both_currencies(tmp_path: Path) -> None:
    path = _broken(tmp_path, "single.xml", '<Amt Ccy="GBP">95.00</Amt>', '<Amt Ccy="EUR">95.00</Amt>')
    assert str(_refusal(path)) == (
        "single.xml line 193, entry 4 of statement STMT-2026-11-0555: Amt@Ccy: expected the statement's currency"
        " GBP, found EUR"
    )


def test_a_balance_in_another_currency_is_refused(tmp_path: Path) -> None:
    path = _broken(tmp_path, "single.xml", '<Amt Ccy="GBP">12345.67</Amt>', '<Amt Ccy="USD">12345.67</Amt>')
    assert str(_refusal(path)) == (
        "single.xml line 39, OPBD balance of statement STMT-2026-11-0555: Amt@Ccy: expected the statement's"
        " currency GBP, found USD"
    )


def test_a_statement_id_given_twice_in_one_file_is_refused(tmp_path: Path) -> None:
    path = _broken(tmp_path, "multi.xml", "<Id>EUR-30093459-2026-11</Id>", "<Id>GB33-2026-11</Id>")
    assert str(_refusal(path)) == (
        "multi.xml line 100, statement GB33-2026-11: Id: statement GB33-2026-11 appears twice in the file (first at"
        " line 11); expected each statement once"
    )


def test_a_statement_without_a_closing_booked_balance_is_refused(tmp_path: Path) -> None:
    path = _broken(tmp_path, "single.xml", "<Cd>CLBD</Cd>", "<Cd>ITBD</Cd>")
    assert str(_refusal(path)) == (
        "single.xml line 13, statement STMT-2026-11-0555: Bal: expected a closing booked balance (CLBD), found"
        " balances: OPBD, ITBD, CLAV"
    )


def test_a_statement_without_an_opening_booked_balance_is_refused(tmp_path: Path) -> None:
    path = _broken(tmp_path, "single.xml", "<Cd>OPBD</Cd>", "<Cd>OPAV</Cd>")
    assert str(_refusal(path)) == (
        "single.xml line 13, statement STMT-2026-11-0555: Bal: expected an opening booked balance (OPBD, or"
        " PRCD), found balances: OPAV, CLBD, CLAV"
    )


def test_a_booked_entry_without_a_booking_date_is_refused(tmp_path: Path) -> None:
    path = _broken(tmp_path, "single.xml", "<BookgDt>\n          <Dt>2026-11-14</Dt>\n        </BookgDt>\n", "")
    assert str(_refusal(path)) == (
        "single.xml line 174, entry 3 of statement STMT-2026-11-0555: BookgDt: expected the booking date of a"
        " booked entry, found none"
    )


def test_without_a_configured_xsd_nothing_is_read() -> None:
    assert str(_refusal(DATA / "single.xml", schema=None)) == (
        "single.xml: (schema): camt.053 files are validated against the ISO 20022 XSD before import: set"
        " COUNTERSIGN_CAMT053_XSD to the camt.053 .xsd file or a folder of them"
    )


def test_a_configured_xsd_that_does_not_exist_is_named(tmp_path: Path) -> None:
    error = _refusal(DATA / "single.xml", schema=tmp_path / "missing.xsd")
    assert str(error).startswith("single.xml: (schema): missing.xsd does not exist: camt.053 files are validated")


def test_a_file_over_the_size_cap_is_refused_before_it_is_parsed() -> None:
    size = (DATA / "single.xml").stat().st_size
    assert str(_refusal(DATA / "single.xml", max_bytes=1024)) == (
        f"single.xml: (size): expected at most 1,024 bytes, found {size:,}"
    )
    assert read_camt053(DATA / "single.xml", schema=XSD, max_bytes=size)  # control: at the cap it reads


def test_more_entries_than_the_bound_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(camt053, "MAX_ENTRIES", 4)
    assert str(_refusal(DATA / "single.xml")) == "single.xml: Ntry: expected at most 4 entries in one file, found 5"
    monkeypatch.setattr(camt053, "MAX_ENTRIES", 5)
    assert read_camt053(DATA / "single.xml", schema=XSD)  # control: at the bound it reads


# --- property ---------------------------------------------------------------------------------------------------

_ENTRY = st.tuples(st.integers(min_value=0, max_value=10**12), st.booleans(), st.booleans())


def _document(opening_minor: int, entries: list[tuple[int, bool, bool]], closing_minor: int) -> str:
    def amount(minor: int) -> str:
        return f"{abs(minor) // 100}.{abs(minor) % 100:02d}"

    def balance(code: str, minor: int) -> str:
        sign = "DBIT" if minor < 0 else "CRDT"
        return (
            f"<Bal><Tp><CdOrPrtry><Cd>{code}</Cd></CdOrPrtry></Tp><Amt Ccy='GBP'>{amount(minor)}</Amt>"
            f"<CdtDbtInd>{sign}</CdtDbtInd><Dt><Dt>2026-11-30</Dt></Dt></Bal>"
        )

    rows = "".join(
        f"<Ntry><Amt Ccy='GBP'>{amount(minor)}</Amt><CdtDbtInd>{'CRDT' if credit else 'DBIT'}</CdtDbtInd>"
        f"<RvslInd>{'true' if reversal else 'false'}</RvslInd><Sts><Cd>BOOK</Cd></Sts>"
        f"<BookgDt><Dt>2026-11-{1 + n % 28:02d}</Dt></BookgDt><BkTxCd/></Ntry>"
        for n, (minor, credit, reversal) in enumerate(entries)
    )
    return (
        f"<?xml version='1.0' encoding='UTF-8'?><Document xmlns='{V08}'><BkToCstmrStmt><GrpHdr><MsgId>P</MsgId>"
        "<CreDtTm>2026-12-01T00:00:00</CreDtTm></GrpHdr><Stmt><Id>P-1</Id><Acct><Id><IBAN>GB33BUKB20201555555555"
        f"</IBAN></Id><Ccy>GBP</Ccy></Acct>{balance('OPBD', opening_minor)}{balance('CLBD', closing_minor)}{rows}"
        "</Stmt></BkToCstmrStmt></Document>"
    )


@settings(max_examples=30, deadline=None)
@given(
    opening_minor=st.integers(min_value=-(10**12), max_value=10**12),
    entries=st.lists(_ENTRY, max_size=12),
)
def test_written_entries_read_back_with_their_signs_and_balances_that_add_up(
    tmp_path_factory: pytest.TempPathFactory, opening_minor: int, entries: list[tuple[int, bool, bool]]
) -> None:
    signed = [minor if credit else -minor for minor, credit, _ in entries]
    closing_minor = opening_minor + sum(signed)
    path = tmp_path_factory.mktemp("camt053-property") / "generated.xml"
    path.write_text(_document(opening_minor, entries, closing_minor), encoding="utf-8")
    [statement] = read_camt053(path, schema=XSD)
    assert [entry.amount for entry in statement.entries] == [Decimal(minor) / 100 for minor in signed]
    assert not any(entry.amount.is_signed() for entry in statement.entries if entry.amount == 0)
    assert [entry.reversal for entry in statement.entries] == [reversal for _, _, reversal in entries]
    assert statement.opening_balance == Decimal(opening_minor) / 100
    assert statement.opening_balance + statement.movements == statement.closing_balance == Decimal(closing_minor) / 100
    assert len({entry.entry_id for entry in statement.entries}) == len(entries)
