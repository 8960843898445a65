"""Schemas published by others, read where CI keeps them: `../shared/schemas/` beside the checkout (never copied into
the repository; its README says why). `COUNTERSIGN_TEST_SCHEMAS_DIR` points elsewhere for a checkout that lives
apart from `../shared`."""

from __future__ import annotations

import os
from pathlib import Path

SCHEMAS_DIR = Path(
    os.environ.get("COUNTERSIGN_TEST_SCHEMAS_DIR") or Path(__file__).resolve().parents[2] / "shared" / "schemas"
)
CAMT053_XSD = SCHEMAS_DIR / "camt.053.001.08.xsd"
"""ISO 20022 BankToCustomerStatementV08, as the ISO 20022 Registration Authority publishes it."""
