import hashlib
import re
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from countersign.synthetic import format_minor, seed_from_name


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_format_minor_round_trips_through_decimal_with_two_places(minor: int) -> None:
    text = format_minor(minor)
    assert re.fullmatch(r"-?\d+\.\d{2}", text)
    assert Decimal(text) * 100 == minor


def test_format_minor_handles_small_negatives() -> None:
    assert format_minor(-5) == "-0.05"
    assert format_minor(-123450) == "-1234.50"
    assert format_minor(0) == "0.00"


def test_seed_from_name_is_the_first_six_bytes_of_sha256_and_json_safe() -> None:
    expected = int.from_bytes(hashlib.sha256(b"ACME-UK").digest()[:6], "big")
    assert seed_from_name("ACME-UK") < 2**53
    assert seed_from_name("ACME-UK") == expected
    assert seed_from_name("ACME-UK") != seed_from_name("ACME-DE")
