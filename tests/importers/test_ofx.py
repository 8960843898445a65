"""OFX statements (1.x SGML and 2.x XML): what the importer reads from realistic files and how it refuses bad ones."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ofxtools.models.base import Aggregate
from ofxtools.Parser import OFXTree

from countersign.importers.errors import ImportFileError
from countersign.importers.ofx import read_ofx
from countersign.importers.statement import BankStatement, StatementFormat

DATA = Path(__file__).resolve().parent / "data" / "ofx"
BANK = DATA / "bank_102_cp1252.ofx"
CARD = DATA / "creditcard_220.ofx"

HEADER_V1 = (
    "OFXHEADER:100\nDATA:OFXSGML\nVERSION:102\nSECURITY:NONE\nENCODING:USASCII\nCHARSET:{charset}\n"
    "COMPRESSION:NONE\nOLDFILEUID:NONE\nNEWFILEUID:NONE\n\n"
)
LEDGER = "<LEDGERBAL><BALAMT>1000.00<DTASOF>20261130</LEDGERBAL>\n"
DEBIT = "<STMTTRN><TRNTYPE>DEBIT<DTPOSTED>20261103<TRNAMT>-45.00<FITID>F1<NAME>BRITISH GAS</STMTTRN>\n"


def _statement(transactions: str, balances: str = LEDGER, account: str = "55555555", currency: str = "GBP") -> str:
    return (
        f"<STMTTRNRS><TRNUID>1<STATUS><CODE>0<SEVERITY>INFO</STATUS><STMTRS><CURDEF>{currency}\n"
        f"<BANKACCTFROM><BANKID>202015<ACCTID>{account}<ACCTTYPE>CHECKING</BANKACCTFROM>\n"
        f"<BANKTRANLIST><DTSTART>20261101<DTEND>20261130\n{transactions}</BANKTRANLIST>\n{balances}</STMTRS></STMTTRNRS>\n"
    )


def _sgml(*statements: str, charset: str = "1252") -> str:
    return (
        HEADER_V1.format(charset=charset)
        + "<OFX>\n<BANKMSGSRSV1>\n"
        + "".join(statements)
        + "</BANKMSGSRSV1>\n</OFX>\n"
    )


def _write(tmp_path: Path, text: str, name: str = "statement.ofx", encoding: str = "cp1252") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def _refused(path: Path, *fragments: str) -> ImportFileError:
    """Reads `path`, expecting one ImportFileError whose message names the file and each fragment."""
    with pytest.raises(ImportFileError) as caught:
        read_ofx(path)
    message = str(caught.value)
    assert message.startswith((path.name + " ", path.name + ":")), message
    assert str(path.parent) not in message, "the message names the file, never its directory"
    for fragment in fragments:
        assert fragment in message, message
    return caught.value


@pytest.fixture(scope="module")
def bank() -> list[BankStatement]:
    return read_ofx(BANK)


def test_an_ofx1_file_with_two_accounts_reads_as_two_statements(bank: list[BankStatement]) -> None:
    assert BANK.read_bytes().count(b"\r\n") > 100 and b"CHARSET:1252" in BANK.read_bytes()  # CRLF, Windows-1252
    checking, savings = bank
    assert [s.bank_account for s in bank] == ["93459001", "93459002"]  # ACCTID; BANKID is not part of it
    assert [s.statement_id for s in bank] == ["93459001:20261101-20261130", "93459002:20261101-20261130"]
    assert {(s.currency, s.format, s.source) for s in bank} == {("GBP", StatementFormat.OFX, "bank_102_cp1252.ofx")}
    assert (checking.from_date, checking.to_date) == (date(2026, 11, 1), date(2026, 11, 30))
    assert [e.amount for e in checking.entries] == [Decimal(x) for x in ("-64.20", "-250.00", "1180.00", "-18.45")]
    assert [e.amount for e in savings.entries] == [Decimal("12.07")]  # written +12.07


def test_the_opening_balance_is_derived_from_the_ledger_balance(bank: list[BankStatement]) -> None:
    checking, savings = bank
    assert checking.closing_balance == Decimal("3147.35")  # LEDGERBAL, not AVAILBAL (2947.35)
    assert checking.opening_balance == Decimal("3147.35") - Decimal("847.35")
    assert savings.opening_balance == Decimal("9000.00")
    for statement in bank:
        assert statement.opening_stated is False
        assert statement.opening_balance + statement.movements == statement.closing_balance


def test_fitid_dates_references_and_descriptions(bank: list[BankStatement]) -> None:
    water, cheque, payment, food = bank[0].entries
    assert [e.entry_id for e in bank[0].entries] == ["20261102-0001", "20261105-0001", "20261112-0007", "20261128-0003"]
    assert all(e.bank_reference == e.entry_id for e in bank[0].entries)
    assert (water.booking_date, water.value_date) == (date(2026, 11, 2), date(2026, 11, 1))  # DTPOSTED, DTUSER
    assert cheque.value_date is None
    assert (cheque.reference, payment.reference, water.reference) == ("100482", "INV-2026-121", "")  # CHECKNUM, REFNUM
    assert water.description == "THAMES WATER / DD REF 77-0042 NOVEMBER"
    assert payment.description == "Café Renée Ltd / Payment £1,180.00 for INV-2026-121"  # read as Windows-1252
    assert food.description == "M&S SIMPLY FOOD"  # NAME and MEMO alike are said once; &amp; read as &


@pytest.mark.filterwarnings("ignore:Encountered private extension tag")
def test_a_posting_time_with_an_offset_keeps_the_banks_own_date(bank: list[BankStatement]) -> None:
    """DTPOSTED 20261112230000[-5:EST]: ofxtools moves it to 13 November UTC; the statement says the 12th."""
    assert bank[0].entries[2].booking_date == date(2026, 11, 12)
    tree = OFXTree()
    tree.parse(str(BANK))
    converted = tree.convert().statements[0].banktranlist[2].dtposted
    assert converted.date() == date(2026, 11, 13)


def test_an_ofx2_credit_card_statement() -> None:
    (card,) = read_ofx(CARD)
    assert (card.bank_account, card.statement_id) == ("4929000000006789", "4929000000006789:20261104-20261203")
    assert [e.amount for e in card.entries] == [Decimal(x) for x in ("-42.90", "-1299.00", "89.99", "1500.00")]
    assert (card.closing_balance, card.opening_balance) == (Decimal("-1751.91"), Decimal("-2000.00"))
    assert card.entries[0].description == "Crêperie Béatrice / Table for 3 <Soho>"  # UTF-8 and CDATA
    assert card.entries[1].description == "Smith & Jones Office Supply / Desks x3 ref PO-5512"
    assert (card.entries[0].booking_date, card.entries[0].value_date) == (date(2026, 11, 6), date(2026, 11, 4))
    assert card.entries[3].reference == "DD-CARD-1100"


def test_numeric_character_references_are_read_as_characters(tmp_path: Path) -> None:
    text = _sgml(
        _statement(
            DEBIT.replace("BRITISH GAS", "Caf&#233; &#x263A;"), "<LEDGERBAL><BALAMT>-45<DTASOF>20261130</LEDGERBAL>"
        )
    )
    assert read_ofx(_write(tmp_path, text))[0].entries[0].description == "Café ☺"


def test_a_statement_without_a_transaction_list(tmp_path: Path) -> None:
    statement = _statement("").replace("<BANKTRANLIST><DTSTART>20261101<DTEND>20261130\n</BANKTRANLIST>", "")
    (read,) = read_ofx(_write(tmp_path, _sgml(statement)))
    assert read.entries == ()
    assert (read.from_date, read.to_date, read.opening_balance) == (
        date(2026, 11, 30),
        date(2026, 11, 30),
        Decimal("1000.00"),
    )


def test_a_fitid_two_accounts_share_is_made_unique_by_the_account(tmp_path: Path) -> None:
    one = _statement(DEBIT, "<LEDGERBAL><BALAMT>0<DTASOF>20261130</LEDGERBAL>", account="11111111")
    two = _statement(DEBIT.replace("F1", "F2") + DEBIT, "<LEDGERBAL><BALAMT>0<DTASOF>20261130</LEDGERBAL>", "22222222")
    first, second = read_ofx(_write(tmp_path, _sgml(one, two)))
    assert [e.entry_id for e in first.entries] == ["11111111:F1"]
    assert [e.entry_id for e in second.entries] == ["F2", "22222222:F1"]
    assert [e.bank_reference for e in second.entries] == ["F2", "F1"]


def test_a_transaction_in_the_statements_own_currency_is_read(tmp_path: Path) -> None:
    same = DEBIT.replace("</STMTTRN>", "<CURRENCY><CURRATE>1.0<CURSYM>GBP</CURRENCY></STMTTRN>")
    assert read_ofx(_write(tmp_path, _sgml(_statement(same))))[0].entries[0].amount == Decimal("-45.00")


# Malformed files: one ImportFileError naming the file, the place and the element.


def test_missing_ledger_balance() -> None:
    error = _refused(DATA / "missing_ledgerbal.ofx", "statement 1", "LEDGERBAL", "found only AVAILBAL")
    assert error.location == "line 17, statement 1"


def test_an_amount_with_a_thousands_separator() -> None:
    error = _refused(DATA / "bad_trnamt.ofx", "entry 2 (FITID BUKB-1110-01) of statement 1", "TRNAMT", "'1,180.00'")
    assert (error.location, error.field) == ("line 24, entry 2 (FITID BUKB-1110-01) of statement 1", "TRNAMT")


def test_a_fitid_given_twice_for_one_account() -> None:
    _refused(DATA / "duplicate_fitid.ofx", "line 24, entry 2 of statement 1", "FITID", "'BUKB-1103-01' again")


def test_a_doctype_with_an_entity_is_refused_unread() -> None:
    error = _refused(DATA / "doctype_entity.ofx", "line 3", "DOCTYPE")
    assert "root:" not in str(error)  # /etc/passwd was never read


def test_a_csv_export_is_not_ofx() -> None:
    _refused(DATA / "not_ofx.ofx", "line 1", "(header)", "expected an OFX file", "'Date,Description,Amount,Balance'")


def test_a_truncated_file() -> None:
    _refused(DATA / "truncated.ofx", "line 24", "STMTTRN", "</STMTTRN></BANKTRANLIST>", "cut short")


def test_ofxtools_alone_reads_a_truncated_file_as_a_shorter_one() -> None:
    """Why the importer holds every aggregate to its end tag: ofxtools' tree builder closes them silently."""
    tree = OFXTree()
    root = tree.parse(str(DATA / "truncated.ofx"))
    assert len(root.findall(".//STMTTRN")) == 2


@pytest.mark.parametrize(
    ("transactions", "fragments"),
    [
        (DEBIT.replace("-45.00", "-45.001"), ("entry 1 (FITID F1) of statement 1", "TRNAMT", "2 decimal places")),
        (DEBIT.replace("-45.00", "-4.5e1"), ("entry 1 (FITID F1) of statement 1", "TRNAMT", "'-4.5e1'")),
        (DEBIT.replace("20261103", "20261131"), ("line 16, entry 1 (FITID F1)", "DTPOSTED", "'20261131'")),
        (DEBIT.replace("<TRNTYPE>DEBIT", "<TRNTYPE>WITHDRAWAL"), ("entry 1 (FITID F1)", "TRNTYPE", "DIRECTDEBIT")),
        (DEBIT.replace("<FITID>F1", ""), ("entry 1 (FITID none) of statement 1", "FITID", "found none")),
        (
            DEBIT.replace("</STMTTRN>", "<CURRENCY><CURRATE>1.17<CURSYM>EUR</CURRENCY></STMTTRN>"),
            ("entry 1 (FITID F1) of statement 1", "CURRENCY", "FITID F1", "found EUR"),
        ),
        (
            DEBIT.replace("</STMTTRN>", "<ORIGCURRENCY><CURRATE>1.17<CURSYM>USD</ORIGCURRENCY></STMTTRN>"),
            ("entry 1 (FITID F1) of statement 1", "ORIGCURRENCY", "found USD"),
        ),
        (
            DEBIT.replace("<NAME>", "<CORRECTFITID>F0<CORRECTACTION>REPLACE<NAME>"),
            ("entry 1 (FITID F1)", "CORRECTACTION", "REPLACE of FITID F0"),
        ),
        (DEBIT.replace("</STMTTRN>", "</STMTTRX>"), ("line 16", "STMTTRX", "expected </STMTTRN> before </STMTTRX>")),
        (DEBIT.replace("</STMTTRN>", "</STMTTRN>stray"), ("line 16", "STMTTRN", "'stray'")),
    ],
)
def test_a_bad_transaction_names_its_entry_and_element(
    tmp_path: Path, transactions: str, fragments: tuple[str, ...]
) -> None:
    _refused(_write(tmp_path, _sgml(_statement(transactions))), *fragments)


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (_sgml(_statement(DEBIT).replace("<ACCTTYPE>CHECKING", "<ACCTTYPE>CURRENT")), ("statement 1", "ACCTTYPE")),
        (_sgml(_statement(DEBIT).replace("<CURDEF>GBP", "<CURDEF>QQQ")), ("statement 1", "CURDEF", "'QQQ'")),
        (_sgml(_statement(DEBIT).replace("<DTEND>20261130", "<DTEND>20261030")), ("statement 1", "DTEND", "after")),
        (_sgml(_statement(DEBIT).replace("<DTSTART>20261101", "")), ("statement 1", "DTSTART", "found none")),
        (_sgml(_statement(DEBIT, "")), ("statement 1", "LEDGERBAL", "found none")),
        (_sgml(_statement(DEBIT, LEDGER.replace("1000.00", "ten"))), ("statement 1", "BALAMT", "'ten'")),
        (
            _sgml(_statement(DEBIT), _statement(DEBIT.replace("F1", "F9"))),
            ("statement 2", "each account and period once"),
        ),
        (
            _sgml("<STMTTRNRS><TRNUID>1<STATUS><CODE>2000<SEVERITY>ERROR<MESSAGE>General error</STATUS></STMTTRNRS>"),
            ("STMTRS", "STATUS CODE 2000: General error"),
        ),
        (_sgml(""), ("STMTRS", "found none (message sets: BANKMSGSRSV1)")),
        (HEADER_V1.format(charset="1252") + "<FOO>\n</FOO>\n", ("line 11", "FOO", "expected <OFX>")),
        (HEADER_V1.format(charset="1252"), ("OFX", "found no elements")),
        (HEADER_V1.format(charset="UTF-16") + "<OFX></OFX>", ("line 1", "(header)", "UTF-16")),
        ("<OFX>\n" + _statement(DEBIT) + "</OFX>\n", ("line 1", "(header)", "found '<OFX>'")),
        ("", ("line 1", "(header)", "expected an OFX file")),
    ],
)
def test_a_file_ofx_cannot_hold_is_refused(tmp_path: Path, text: str, fragments: tuple[str, ...]) -> None:
    _refused(_write(tmp_path, text), *fragments)


def test_a_byte_the_declared_character_set_cannot_read(tmp_path: Path) -> None:
    text = _sgml(_statement(DEBIT.replace("BRITISH GAS", "CAFÉ ROUGE")), charset="NONE")  # NONE means UTF-8
    path = _write(tmp_path, text, encoding="cp1252")
    _refused(path, "line 16", "<NAME>", "0xC9", "utf-8")
    assert read_ofx(_write(tmp_path, text.replace("CHARSET:NONE", "CHARSET:1252"), "declared.ofx"))  # control


def test_every_failure_inside_ofxtools_becomes_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(cls: type, element: object) -> None:
        raise RuntimeError("deep inside")

    monkeypatch.setattr(Aggregate, "from_etree", classmethod(broken))
    _refused(_write(tmp_path, _sgml(_statement(DEBIT))), "statement 1", "deep inside")


def test_file_limits(tmp_path: Path) -> None:
    path = _write(tmp_path, _sgml(_statement(DEBIT)))
    _refused(tmp_path / "missing.ofx", "(file)", "cannot be read")
    with pytest.raises(ImportFileError, match=r"statement\.ofx: \(size\): expected at most 100 bytes"):
        read_ofx(path, max_bytes=100)
    assert len(read_ofx(path, max_bytes=path.stat().st_size)) == 1


def _ofx2(transactions: list[str], closing: str) -> str:
    body = "".join(
        f"<STMTTRN><TRNTYPE>OTHER</TRNTYPE><DTPOSTED>20261115</DTPOSTED><TRNAMT>{amount}</TRNAMT>"
        f"<FITID>G{number}</FITID><NAME>generated {number}</NAME></STMTTRN>\n"
        for number, amount in enumerate(transactions, start=1)
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<?OFX OFXHEADER="200" VERSION="220" SECURITY="NONE" OLDFILEUID="NONE" NEWFILEUID="NONE"?>\n'
        "<OFX><BANKMSGSRSV1><STMTTRNRS><TRNUID>1</TRNUID><STATUS><CODE>0</CODE><SEVERITY>INFO</SEVERITY></STATUS>"
        "<STMTRS><CURDEF>GBP</CURDEF><BANKACCTFROM><BANKID>202015</BANKID><ACCTID>55555555</ACCTID>"
        "<ACCTTYPE>CHECKING</ACCTTYPE></BANKACCTFROM><BANKTRANLIST><DTSTART>20261101</DTSTART><DTEND>20261130</DTEND>\n"
        f"{body}</BANKTRANLIST><LEDGERBAL><BALAMT>{closing}</BALAMT><DTASOF>20261130</DTASOF></LEDGERBAL></STMTRS>"
        "</STMTTRNRS></BANKMSGSRSV1></OFX>\n"
    )


def _ofx_amount(cents: int, style: int) -> str:
    text = f"{abs(cents) // 100}.{abs(cents) % 100:02d}"
    if style == 1:
        text = text.replace(".", ",")  # some banks write a decimal comma; ofxtools reads it
    sign = "-" if cents < 0 else ("+" if style == 2 else "")
    return sign + text


@settings(max_examples=30, deadline=None)
@given(
    cents=st.lists(st.integers(-(10**11), 10**11), max_size=12),
    closing_cents=st.integers(-(10**11), 10**11),
    style=st.integers(0, 2),
    version=st.sampled_from(["sgml-crlf", "sgml-lf", "xml"]),
)
def test_generated_transactions_read_back_with_their_signs(
    tmp_path_factory: pytest.TempPathFactory, cents: list[int], closing_cents: int, style: int, version: str
) -> None:
    amounts = [_ofx_amount(value, style) for value in cents]
    closing = _ofx_amount(closing_cents, 0)
    if version == "xml":
        text = _ofx2(amounts, closing)
    else:
        transactions = "".join(
            f"<STMTTRN><TRNTYPE>OTHER<DTPOSTED>20261115<TRNAMT>{amount}<FITID>G{n}<NAME>generated {n}</STMTTRN>\n"
            for n, amount in enumerate(amounts, start=1)
        )
        text = _sgml(_statement(transactions, f"<LEDGERBAL><BALAMT>{closing}<DTASOF>20261130</LEDGERBAL>\n"))
        text = text.replace("\n", "\r\n") if version == "sgml-crlf" else text
    path = tmp_path_factory.mktemp("ofx") / "generated.ofx"
    path.write_bytes(text.encode("utf-8"))

    (statement,) = read_ofx(path)

    assert [e.amount for e in statement.entries] == [Decimal(value) / 100 for value in cents]
    assert statement.closing_balance == Decimal(closing_cents) / 100
    assert statement.opening_balance == Decimal(closing_cents - sum(cents)) / 100
    assert statement.opening_balance + statement.movements == statement.closing_balance
    assert [e.entry_id for e in statement.entries] == [f"G{n}" for n in range(1, len(cents) + 1)]
