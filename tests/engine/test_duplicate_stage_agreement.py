"""The engine's duplicate stage and the pure pipeline hold the same certificates against the same originals, when the
certificates people reject at their payment gate are those the pipeline holds (a duplicate or an invariant violation:
neither is ever paid). Compared on a generated set with issue 22's variations, and on a set loaded into PostgreSQL so
that the stage's own reading (earlier certificates in the database's submission order, the contracts) is the input.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from countersign.certificates import Certificate, Contract
from countersign.certificates.duplicates import Thresholds
from countersign.certificates.pipeline import run_pipeline, submission_order
from countersign.engine.construction import (
    certificates_in_set,
    contract_records,
    load_construction_set,
    prior_certificates,
)
from countersign.engine.workflows.certificates.duplicate_check import best_hold, rejected_at_payment_gate
from tests.certificates.duplicate_variations import vary
from tests.certificates.generated import generate
from tests.engine import payment_run_support as support

SEED = 37


def _pipeline_holds(
    contracts: dict[str, Contract], certificates: Sequence[Certificate]
) -> tuple[dict[str, str], frozenset[str]]:
    run = run_pipeline(contracts, certificates)
    return {hold.certificate: hold.other_certificate for hold in run.holds}, run.certified


@dataclasses.dataclass(frozen=True)
class _Set:
    contracts: dict[str, Contract]
    certificates: list[Certificate]
    faulted: Certificate
    """A certificate the pipeline holds for a violation; `again` re-submits it unchanged five days later."""
    again: Certificate


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> _Set:
    data = generate(tmp_path_factory.mktemp("construction"), SEED, contracts=24, months=20)
    varied = vary(data.contracts, data.certificates, data.truth.duplicates, SEED)
    _, certified = _pipeline_holds(varied.contracts, varied.certificates)
    faulted = next(
        c
        for c in sorted(varied.certificates, key=submission_order)
        if c.id in data.truth.faults and c.id not in certified and c.totals.amount_due_minor > 0
    )
    again = dataclasses.replace(
        faulted, id="IPC-AGAIN", invoice_number="AGAIN-1", date=faulted.date + timedelta(days=5)
    )
    return _Set(varied.contracts, [*varied.certificates, again], faulted, again)


def _stage_holds(
    contracts: dict[str, Contract], certificates: Sequence[Certificate], certified: frozenset[str]
) -> dict[str, str]:
    """The stage's hold for every certificate, earlier ones in submission order, those the pipeline did not certify
    taken as rejected at their payment gate."""
    ordered = sorted(certificates, key=submission_order)
    holds: dict[str, str] = {}
    for index, candidate in enumerate(ordered):
        earlier = ordered[:index]
        never_paid = {c.id for c in earlier} - certified
        hold = best_hold(candidate, earlier, contracts, Thresholds(), never_paid=never_paid)
        if hold is not None:
            holds[candidate.id] = hold.other_certificate
    return holds


def test_the_stage_and_the_pipeline_agree_on_a_varied_generated_set(generated: _Set) -> None:
    expected, certified = _pipeline_holds(generated.contracts, generated.certificates)
    assert len(expected) >= 5, "the set exercises holds"
    assert generated.again.id not in expected, "a re-submission of a certificate never paid is not held"
    assert _stage_holds(generated.contracts, generated.certificates, certified) == expected


def test_comparing_with_never_paid_certificates_would_disagree(generated: _Set) -> None:
    """Negative control: a stage that compared with certificates nobody paid holds the re-submission of one."""
    ordered = sorted(generated.certificates, key=submission_order)
    at = ordered.index(generated.again)
    every_earlier = best_hold(generated.again, ordered[:at], generated.contracts, Thresholds())
    assert every_earlier is not None and every_earlier.other_certificate == generated.faulted.id


def _with_resends(data_dir: Path) -> None:
    """A re-submission four days later, and a same-day re-send numbered as the next application whose id sorts first."""
    certificates = support.read_certificates(data_dir)
    support.add_duplicate(certificates)
    original = support.find(certificates, "CT-0002", 3)
    resend = copy.deepcopy(original)
    resend["id"] = "IPC-000000000001"
    resend["invoice_number"] = "RESEND-0001"
    resend["number"] = original["number"] + 1
    certificates.append(resend)
    support.write_certificates(data_dir, certificates)


async def test_the_stage_reading_postgresql_agrees_with_the_pipeline(conn: Any, tmp_path: Path) -> None:
    data_dir = support.generate(tmp_path / "construction")
    _with_resends(data_dir)
    set_id = await load_construction_set(conn, data_dir, loaded_by="test-loader")
    contracts = {record.contract_id: record.parsed() for record in await contract_records(conn, set_id)}
    loaded = [record.parsed() for record in await certificates_in_set(conn, set_id)]
    expected, certified = _pipeline_holds(contracts, loaded)
    assert {"IPC-DUPLICATE0001", "IPC-000000000001"} <= set(expected)
    assert await rejected_at_payment_gate(conn, set_id) == frozenset()
    stage: dict[str, str] = {}
    for certificate in loaded:
        earlier = [record.parsed() for record in await prior_certificates(conn, set_id, certificate.id)]
        assert [c.id for c in earlier] == [
            c.id for c in sorted(loaded, key=submission_order) if submission_order(c) < submission_order(certificate)
        ]
        never_paid = {c.id for c in earlier} - certified
        hold = best_hold(certificate, earlier, contracts, Thresholds(), never_paid=never_paid)
        if hold is not None:
            stage[certificate.id] = hold.other_certificate
    assert stage == expected
