"""Kept for the server's import of `release_claims`; stopping gracefully lives in `engine.shutdown`."""

from __future__ import annotations

from engine.shutdown import release_claims as release_claims
