"""SWIFT MT940 statements: what the importer reads from realistic files and how it refuses malformed ones."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import mt940
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.importers.errors import ImportFileError
from countersign.importers.mt940 import read_mt940
from countersign.importers.statement import BankStatement, StatementFormat

DATA = Path(__file__).resolve().parent / "data" / "mt940"
TWO_DAYS = DATA / "two_days_cp1252.sta"
STRUCTURED = DATA / "structured_utf8_bom.sta"

MINIMAL = """:20:STMT-1
:25:GB33BUKB20201555555555
:28C:00042/001
:60F:C261130GBP1000,00
{lines}:62F:C261130GBP{closing}
"""


def _write(tmp_path: Path, text: str, name: str = "statement.sta", encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def _minimal(tmp_path: Path, lines: str, closing: str = "1000,00") -> Path:
    return _write(tmp_path, MINIMAL.format(lines=lines, closing=closing))


def _refused(path: Path, *fragments: str, encoding: str = "utf-8") -> ImportFileError:
    """Reads `path`, expecting one ImportFileError whose message names the file and each fragment."""
    with pytest.raises(ImportFileError) as caught:
        read_mt940(path, encoding=encoding)
    message = str(caught.value)
    assert message.startswith((path.name + " ", path.name + ":")), message
    assert str(path.parent) not in message, "the message names the file, never its directory"
    for fragment in fragments:
        assert fragment in message, message
    return caught.value


@pytest.fixture(scope="module")
def two_days() -> list[BankStatement]:
    return read_mt940(TWO_DAYS, encoding="cp1252")


def test_a_file_of_two_days_reads_as_two_statements_that_balance(two_days: list[BankStatement]) -> None:
    assert TWO_DAYS.read_bytes().count(b"\r\n") == 33 and b"\n:" not in TWO_DAYS.read_bytes().replace(b"\r\n", b"")
    assert [s.statement_id for s in two_days] == ["00123/001", "00124/001"]
    first, second = two_days
    assert {s.bank_account for s in two_days} == {"GB33BUKB20201555555555"}
    assert {s.currency for s in two_days} == {"GBP"}
    assert {s.format for s in two_days} == {StatementFormat.MT940}
    assert {s.source for s in two_days} == {"two_days_cp1252.sta"}
    assert (first.opening_balance, first.closing_balance) == (Decimal("2450.00"), Decimal("3655.60"))
    assert (second.opening_balance, second.closing_balance) == (Decimal("3655.60"), Decimal("2703.35"))
    assert [e.amount for e in first.entries] == [Decimal(x) for x in ("1250.00", "-89.40", "45.00", "0.00")]
    assert [e.amount for e in second.entries] == [Decimal(x) for x in ("-1250.00", "310.50", "-12.75")]
    for statement in two_days:
        assert statement.opening_balance + statement.movements == statement.closing_balance
        assert statement.opening_stated
    assert (str(first.from_date), str(first.to_date)) == ("2026-12-30", "2026-12-31")
    assert (str(second.from_date), str(second.to_date)) == ("2026-12-31", "2027-01-04")


def test_reversals_carry_the_sign_of_what_they_undo(two_days: list[BankStatement]) -> None:
    refund = two_days[0].entries[2]  # RD: a reversed debit puts the money back
    returned = two_days[1].entries[0]  # RC: a reversed credit takes it away again
    assert (refund.amount, refund.reversal) == (Decimal("45.00"), True)
    assert (returned.amount, returned.reversal) == (Decimal("-1250.00"), True)
    assert not two_days[0].entries[0].reversal and not two_days[0].entries[1].reversal  # C and D are not reversals


def test_the_library_left_alone_would_read_a_reversed_credit_as_money_in() -> None:
    """Why the importer opts in to mt940.Options: by default the library gives RC a positive amount."""
    line = ":61:2701040104RC1250,00NTRFINV-2026-118//BUKB0401R001"
    default = mt940.models.Transactions()
    default.parse(f":60F:C261231GBP3655,60\n{line}")
    assert default[0].data["amount"].amount == Decimal("1250.00")


def test_an_entry_date_across_the_year_end_is_booked_in_the_earlier_year(two_days: list[BankStatement]) -> None:
    water = two_days[0].entries[1]  # :61:2701021231D89,40 - value 2 January 2027, entered 31 December
    assert (str(water.value_date), str(water.booking_date)) == ("2027-01-02", "2026-12-31")
    returned = two_days[1].entries[0]  # :61:2701040104 - the same year
    assert (str(returned.value_date), str(returned.booking_date)) == ("2027-01-04", "2027-01-04")
    no_entry_date = two_days[1].entries[1]  # :61:270104C - booked on the value date
    assert no_entry_date.booking_date == no_entry_date.value_date


def test_a_zero_debit_and_a_zero_debit_balance_are_zero_not_negative_zero(two_days: list[BankStatement]) -> None:
    waived = two_days[0].entries[3]  # :61:261231D0,00
    assert waived.amount == 0 and not waived.amount.is_signed()
    opening = read_mt940(STRUCTURED)[0].opening_balance  # :60F:D261127EUR0,00
    assert opening == 0 and not opening.is_signed()


def test_references_and_entry_ids(two_days: list[BankStatement]) -> None:
    first = two_days[0].entries
    assert [e.entry_id for e in first] == ["BUKB3112A001", "BUKB3112A002", "BUKB3112A003", "00123/001-4"]
    assert [e.bank_reference for e in first] == ["BUKB3112A001", "BUKB3112A002", "BUKB3112A003", ""]
    assert [e.reference for e in first] == ["INV-2026-118", "DD-WATER-77", "", ""]  # NONREF is no reference
    assert two_days[1].entries[2].entry_id == "00124/001-3"


def test_a_bank_reference_given_twice_is_not_an_entry_id(tmp_path: Path) -> None:
    lines = ":61:261130C5,00NTRFNONREF//SAMEREF\n:61:261130D5,00NTRFNONREF//SAMEREF\n:61:261130C1,00NTRFA//OTHER\n"
    statement = read_mt940(_minimal(tmp_path, lines, closing="1001,00"))[0]
    assert [e.entry_id for e in statement.entries] == ["00042/001-1", "00042/001-2", "OTHER"]
    assert [e.bank_reference for e in statement.entries] == ["SAMEREF", "SAMEREF", "OTHER"]


def test_narrative_lines_join_into_one_line_in_the_files_encoding(two_days: list[BankStatement]) -> None:
    first = two_days[0].entries
    # The first :86: line is 65 characters, cut by the bank mid-word: it joins without a space.
    assert first[0].description == (
        "Payment from Harrow & Finch Ltd ref INV-2026-118 for café supplies and delivery, £1,250.00 received with"
        " thanks"
    )
    # A shorter line ended at a word: it joins with one.
    assert first[1].description == "DIRECT DEBIT THAMES WATER UTILITIES MANDATE 77-0042 DECEMBER"
    assert two_days[1].entries[1].description == "Crédit de Société Générale Paris, réf. FAC 2026/991"


def test_statement_information_after_the_closing_balance_describes_no_entry(two_days: list[BankStatement]) -> None:
    assert two_days[0].entries[-1].description == "ACCOUNT FEE DECEMBER WAIVED"
    assert all("STATEMENT 123" not in e.description for s in two_days for e in s.entries)


def test_supplementary_details_describe_an_entry_without_86(two_days: list[BankStatement]) -> None:
    assert two_days[1].entries[2].description == "CARD 4421 COFFEE LONDON"


def test_a_long_narrative_is_cut_to_512_characters(tmp_path: Path) -> None:
    narrative = "\n".join("W" * 30 + f" line {n:02d}" for n in range(30))
    statement = read_mt940(_minimal(tmp_path, f":61:261130C0,00NTRFNONREF\n:86:{narrative}\n"))[0]
    description = statement.entries[0].description
    assert len(description) == 512 and "\n" not in description
    assert description.startswith("W" * 30 + " line 00 " + "W" * 30 + " line 01")


def test_structured_86_subfields_become_description_and_reference() -> None:
    statements = read_mt940(STRUCTURED)  # utf-8 with a BOM, `-` between statements, no SWIFT blocks
    credit = statements[0].entries[0]
    assert credit.description == "SEPA-GUTSCHRIFT Muster Immobilien GmbH Rechnung RE-2026-0815 Miete November"
    assert credit.reference == "RE-2026-0815"  # :61: says NONREF; the EREF+ subfield names the payment
    assert credit.amount == Decimal("1500.00")  # mark C with the funds code R (third letter of EUR)
    debit = statements[1].entries[0]
    assert debit.description == "SEPA-LASTSCHRIFT Stadtwerke Köln GmbH Stromabschlag Nov"
    assert (debit.amount, debit.entry_id) == (Decimal("-249.99"), "DB30110001")
    assert statements[0].bank_account == "37040044/0532013000"


def test_a_kref_subfield_does_not_change_the_61_customer_reference(tmp_path: Path) -> None:
    lines = ":61:261130C5,00NTRFINV-9//B1\n:86:166?00GUTSCHRIFT?20KREF+K-77?21SVWZ+Rent?32Tenant Ltd\n"
    (statement,) = read_mt940(_minimal(tmp_path, lines, closing="1005,00"))
    assert (statement.entries[0].reference, statement.entries[0].description) == ("INV-9", "GUTSCHRIFT Tenant Ltd Rent")


def test_statements_numbered_alike_are_told_apart_by_their_closing_date() -> None:
    statements = read_mt940(STRUCTURED)  # both :28C:0 and :20:STARTUMS, as some banks write every day
    assert [s.statement_id for s in statements] == ["0@2026-11-27", "0@2026-11-30"]
    assert statements[0].entries[0].entry_id == "0@2026-11-27-1"


def test_the_same_statement_twice_in_a_file_is_refused(tmp_path: Path) -> None:
    once = MINIMAL.format(lines="", closing="1000,00")
    _refused(_write(tmp_path, once + "-\n" + once), "statement 00042/001", ":28C:", "expected each statement once")
    other_account = once.replace("GB33BUKB20201555555555", "GB94BARC10201530093459")
    ids = [s.statement_id for s in read_mt940(_write(tmp_path, once + "-\n" + other_account))]
    assert ids == [
        "GB33BUKB20201555555555:00042/001@2026-11-30",
        "GB94BARC10201530093459:00042/001@2026-11-30",
    ]


def test_without_28c_the_statement_is_named_by_20(tmp_path: Path) -> None:
    text = MINIMAL.format(lines="", closing="1000,00").replace(":28C:00042/001\n", "")
    assert read_mt940(_write(tmp_path, text))[0].statement_id == "STMT-1"


# Malformed files: one ImportFileError naming the file, the place and the field.


def test_missing_closing_balance() -> None:
    _refused(DATA / "missing_62f.sta", "statement 00311/001", ":62F:", "found none")


def test_balances_that_do_not_add_up() -> None:
    error = _refused(DATA / "balance_mismatch.sta", "statement 00311/001", ":62F:")
    assert error.reason == (
        "opening GBP 500.00 + movements GBP -20.00 = GBP 480.00, but the closing balance (line 7) is GBP 490.00"
        " (difference GBP 10.00)"
    )


def test_an_amount_with_a_decimal_point_in_61() -> None:
    error = _refused(DATA / "bad_amount_61.sta", "line 5", ":61:", "decimal comma", "'20.00'")
    assert (error.location, error.field) == ("line 5", ":61:")


def test_a_closing_balance_in_another_currency() -> None:
    _refused(DATA / "currency_mismatch.sta", "line 7", ":62F:", "expected GBP", "found EUR")


def test_a_cp1252_file_read_as_utf8_names_the_line_and_byte() -> None:
    error = _refused(TWO_DAYS, "line 7", ":86:", "0xE9", "column 61")
    assert error.location == "line 7"


def test_a_byte_cp1252_does_not_define(tmp_path: Path) -> None:
    path = tmp_path / "undefined.sta"
    path.write_bytes(MINIMAL.format(lines=":61:261130C0,00NTRFNONREF\n:86:BAD \x81 BYTE\n", closing="1000,00").encode())
    path.write_bytes(path.read_bytes().replace(b"\xc2\x81", b"\x81"))
    _refused(path, "line 6", ":86:", "0x81", "cp1252", encoding="cp1252")
    assert read_mt940(path, encoding="latin-1")[0].entries[0].description == "BAD \x81 BYTE"  # latin-1 reads any byte


@pytest.mark.parametrize(
    ("lines", "closing", "fragments"),
    [
        (":61:261130C5,00NTRFNONREF\n", "1005,00XYZ", ("line 6", ":62F:", "'1005,00XYZ'")),
        (":61:261131C5,00NTRFNONREF\n", "1005,00", ("line 5", ":61:", "value date YYMMDD")),
        (":61:261130X5,00NTRFNONREF\n", "1005,00", ("line 5", ":61:", "mark C, D, RC or RD")),
        (":61:261130C5,00//B1\n", "1005,00", ("line 5", ":61:", "transaction type")),
        (":61:261130C5,00NTRFA-REFERENCE-OF-20CH\n", "1005,00", ("line 5", ":61:", "at most 16 characters")),
        (":61:2611301340C5,00NTRFNONREF\n", "1005,00", ("line 5", ":61:", "entry date MMDD")),
        (":61:261130C5,00NTRFNONREF\nline two\nline three\n", "1005,00", ("line 7", ":61:", "at most 2 line(s)")),
        (":61:261130CD5,00NTRFNONREF\n", "1005,00", ("line 5", ":61:", "funds code P", "'D'")),
        (":61:261130C5,00NTRFNONREF\n:99:WHAT\n", "1005,00", ("line 6", ":99:", "expected an MT940 tag")),
        (":61:261130C5,005NTRFNONREF\n", "1005,005", ("line 5", ":61:", "at most 2 decimal places")),
    ],
)
def test_a_tag_out_of_layout_names_its_line_and_subfield(
    tmp_path: Path, lines: str, closing: str, fragments: tuple[str, ...]
) -> None:
    _refused(_minimal(tmp_path, lines, closing), *fragments)


def test_a_trailing_text_the_library_would_drop_is_refused() -> None:
    """The library reads `:62F:C261130GBP1005,00XYZ` as 1005.00 without a word; the importer refuses it (above)."""
    lenient = mt940.models.Transactions()
    lenient.parse(":62F:C261130GBP1005,00XYZ")
    assert lenient.data["final_closing_balance"].amount.amount == Decimal("1005.00")


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (MINIMAL.format(lines=":61:261130C5,00NTRFNONREF\n", closing="1005,00").replace(":60F:", ":60X:"), (":60X:",)),
        (":25:GB33BUKB20201555555555\n:20:X\n", ("line 1", ":25:", "expected :20: to start a statement")),
        (
            ":20:X\n:25:GB33BUKB20201555555555\n:61:261130C5,00NTRFNONREF\n:60F:C261130GBP1,00\n",
            ("line 3", ":60F:", "before :61:"),
        ),
        (
            ":20:X\n:25:GB33BUKB20201555555555\n:60F:C261130GBP1,00\n:62F:C261130GBP1,00\n:61:261130C0,00NTRFNONREF\n",
            ("line 5", ":61:", "before the closing balance :62F: (line 4)"),
        ),
        (":20:X\n:60F:C261130GBP1,00\n:62F:C261130GBP1,00\n", ("line 2", ":25:", "before the opening balance")),
        (
            ":20:X\n:25:A\n:60F:C261130GBP1,00\n:60F:C261130GBP1,00\n:62F:C261130GBP1,00\n",
            ("line 4", ":60F:", "found a second (the first at line 3)"),
        ),
        (":20:X\n:25:A\n:28C:ONE\n:60F:C261130GBP1,00\n:62F:C261130GBP1,00\n", ("line 3", ":28C:", "'ONE'")),
        (":20:X\n:25:A\n:60F:C261130GBP1,00\n:62F:C261129GBP1,00\n", ("line 4", ":62F:", "on or after")),
        (":20:X\n:25:A\n:60F:C261130GB1,00\n:62F:C261130GBP1,00\n", ("line 3", ":60F:", "C261130GBP1000,00")),
        ("Date,Amount,Description\n2026-11-30,12.00,Coffee\n", ("", ":20:", "expected at least one statement")),
        ("", (":20:", "found none")),
    ],
)
def test_a_file_not_in_mt940_order_is_refused(tmp_path: Path, text: str, fragments: tuple[str, ...]) -> None:
    _refused(_write(tmp_path, text), *fragments)


def test_every_failure_inside_the_library_becomes_one_error(tmp_path: Path) -> None:
    # 29 February exists in the year after the value date, so the layout holds; the library then builds the entry
    # date in the value date's own year and raises ValueError from inside datetime.
    path = _minimal(tmp_path, ":61:2703010229C5,00NTRFNONREF\n", closing="1005,00")
    _refused(path, "line 5", ":61:", "the mt940 library cannot read", "ValueError")


def test_an_unexpected_library_exception_is_still_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object, data: str) -> None:
        raise KeyError("surprise")

    monkeypatch.setattr(mt940.models.Transactions, "parse", broken)
    _refused(_minimal(tmp_path, ""), "line 1", ":20:", "KeyError")


def test_file_limits_and_options(tmp_path: Path) -> None:
    path = _minimal(tmp_path, "")
    _refused(tmp_path / "missing.sta", "(file)", "cannot be read")
    with pytest.raises(ImportFileError, match=r"statement\.sta: \(size\): expected at most 10 bytes"):
        read_mt940(path, max_bytes=10)
    with pytest.raises(ImportFileError, match=r"\(encoding\): expected utf-8, cp1252 or latin-1, found 'cp852'"):
        read_mt940(path, encoding="cp852")
    assert len(read_mt940(path, max_bytes=path.stat().st_size)) == 1  # the limit itself is allowed


_MARK_SIGN = {"C": 1, "D": -1, "RC": -1, "RD": 1}


def _swift_amount(cents: int) -> str:
    return f"{abs(cents) // 100},{abs(cents) % 100:02d}"


@settings(max_examples=30, deadline=None)
@given(
    opening_cents=st.integers(-(10**11), 10**11),
    entries=st.lists(
        st.tuples(st.sampled_from(sorted(_MARK_SIGN)), st.integers(0, 10**11), st.booleans()), max_size=12
    ),
    crlf=st.booleans(),
)
def test_generated_entries_read_back_with_their_signs(
    tmp_path_factory: pytest.TempPathFactory, opening_cents: int, entries: list[tuple[str, int, bool]], crlf: bool
) -> None:
    expected = [Decimal(_MARK_SIGN[mark] * cents) / 100 for mark, cents, _ in entries]
    closing_cents = opening_cents + sum(_MARK_SIGN[mark] * cents for mark, cents, _ in entries)
    lines = [
        ":20:PROPERTY",
        ":25:GB33BUKB20201555555555",
        ":28C:7/1",
        f":60F:{'D' if opening_cents < 0 else 'C'}261130GBP{_swift_amount(opening_cents)}",
    ]
    for number, (mark, cents, with_reference) in enumerate(entries, start=1):
        lines.append(
            f":61:2611301130{mark}{_swift_amount(cents)}NTRFNONREF" + (f"//B{number}" if with_reference else "")
        )
        lines.append(f":86:entry {number}")
    lines.append(f":62F:{'D' if closing_cents < 0 else 'C'}261130GBP{_swift_amount(closing_cents)}")
    path = tmp_path_factory.mktemp("mt940") / "generated.sta"
    path.write_bytes(("\r\n" if crlf else "\n").join(lines).encode())

    (statement,) = read_mt940(path)

    assert [e.amount for e in statement.entries] == expected
    assert statement.opening_balance == Decimal(opening_cents) / 100
    assert statement.closing_balance == Decimal(closing_cents) / 100
    assert statement.opening_balance + statement.movements == statement.closing_balance
    assert [e.description for e in statement.entries] == [f"entry {n}" for n in range(1, len(entries) + 1)]
    assert len({e.entry_id for e in statement.entries}) == len(entries)
