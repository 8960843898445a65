"""The construction evidence tables' statements (countersign.store.construction) against real PostgreSQL, as the
engine role runs them: a set inserts once per digest, its records insert in batches and read back as written, and
certificates read in submission order (the date, then contract, number and id)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import date
from typing import Any

import psycopg
import pytest
import pytest_asyncio

from countersign.bootstrap.database import Database
from countersign.store import construction as store


@pytest_asyncio.fixture
async def engine(database: Database) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    async with await psycopg.AsyncConnection.connect(database.engine_url, autocommit=True) as conn:
        yield conn


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _contract(contract_id: str) -> store.ContractRecord:
    return store.ContractRecord(contract_id, "JCT", {"id": contract_id}, _sha(contract_id))


def _certificate(certificate_id: str, contract_id: str, number: int, submitted_on: date) -> store.CertificateRecord:
    period = submitted_on.strftime("%Y-%m")
    doc = {"id": certificate_id, "contract": contract_id, "number": number}
    return store.CertificateRecord(certificate_id, contract_id, number, period, submitted_on, doc, _sha(certificate_id))


OCT, NOV = date(2026, 10, 5), date(2026, 11, 3)
CERTIFICATES = (  # in submission order
    _certificate("C-A1", "A", 1, OCT),
    _certificate("C-B1", "B", 1, OCT),
    _certificate("C-A2", "A", 2, NOV),
    _certificate("C-B2", "B", 2, NOV),
)


async def _loaded(engine: Any, digest: str = _sha("files")) -> int:
    async with engine.transaction():
        set_id = await store.insert_set(engine, source="test-set", digest=digest, loaded_by="test-loader")
        assert set_id is not None
        await store.insert_records(engine, set_id, [_contract("B"), _contract("A")], list(reversed(CERTIFICATES)))
    return set_id


async def test_a_set_inserts_once_per_digest(engine: Any) -> None:
    digest = _sha("files")
    assert await store.set_with_digest(engine, digest) is None
    set_id = await _loaded(engine, digest)
    assert await store.set_with_digest(engine, digest) == set_id
    assert await store.insert_set(engine, source="again", digest=digest, loaded_by="other") is None  # the first won
    assert await store.construction_set(engine, set_id) == store.ConstructionSet(
        set_id, "test-set", digest, "test-loader"
    )
    assert await store.construction_set(engine, set_id + 1) is None


async def test_the_records_read_back_as_written(engine: Any) -> None:
    set_id = await _loaded(engine)
    assert await store.contract_records(engine, set_id) == [_contract("A"), _contract("B")]  # by contract id
    assert await store.contract_record(engine, set_id, "B") == _contract("B")
    assert await store.contract_record(engine, set_id, "Z") is None
    assert await store.certificate_record(engine, set_id, "C-A2") == CERTIFICATES[2]
    assert await store.certificate_record(engine, set_id + 1, "C-A2") is None
    assert await store.latest_set_for_period(engine, "2026-11") == set_id
    assert await store.latest_set_for_period(engine, "2026-12") is None


async def test_certificates_read_in_submission_order(engine: Any) -> None:
    set_id = await _loaded(engine)
    assert await store.certificates_in_set(engine, set_id) == list(CERTIFICATES)
    assert await store.certificates_in_set(engine, set_id, period="2026-11") == list(CERTIFICATES[2:])
    last = CERTIFICATES[3]
    assert await store.certificates_before(engine, set_id, last) == list(CERTIFICATES[:3])
    assert await store.certificates_before(engine, set_id, last, contract_id="B") == [CERTIFICATES[1]]
    assert await store.certificates_before(engine, set_id, CERTIFICATES[0]) == []


async def test_loaded_records_never_change(engine: Any) -> None:
    set_id = await _loaded(engine)
    with pytest.raises(psycopg.errors.UniqueViolation):  # a record is inserted once
        await store.insert_records(engine, set_id, [_contract("A")], [])
