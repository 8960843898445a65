"""The signed callback's published description says what a client must sign today (countersign/web/callbacks.py).

A client that follows the OpenAPI text builds its signature from it: a stale purpose or a missing field there is a
signature that never verifies. The message the writer checks is `countersign.audit.person_proof`'s.
"""

from __future__ import annotations

import inspect

from countersign.audit import person_proof
from countersign.web.callbacks import DECIDE_DESCRIPTION


def test_the_description_names_the_purpose_and_every_field_the_person_signs() -> None:
    assert f'"purpose": "{person_proof.DECISION_PURPOSE}"' in DECIDE_DESCRIPTION
    signed = inspect.signature(person_proof.decision_message).parameters
    for field in signed:
        if field != "amendment_digest":  # optional: described with approve with edits
            assert f'"{field}"' in DECIDE_DESCRIPTION, field
