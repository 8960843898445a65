"""The verifier's fast canonical path must give exactly canonical_bytes' bytes whenever it answers at all."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.canonical import NonCanonicalValue, canonical_bytes
from audit.trace import TraceEvent, _fast_canonical, _loads_jsonb

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**60), 2**60), st.text(max_size=12), st.floats(allow_nan=False)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(payload=st.dictionaries(st.text(max_size=6), JSON, max_size=5), actor=st.text(max_size=8))
def test_fast_canonical_equals_canonical_bytes_or_declines(payload: dict[str, Any], actor: str) -> None:
    """Events as the verifier reads them: JSON decoded the way iter_events decodes jsonb."""
    as_read = _loads_jsonb(json.dumps(payload))
    event = TraceEvent(1, "2026-10-31T00:00:00.000000Z", None, actor, "k", as_read, {}, bytes(32), bytes(32))
    fast = _fast_canonical(event)
    try:
        slow = canonical_bytes(event.body())
    except NonCanonicalValue:
        assert fast is None  # whatever canonical_bytes refuses, the fast path must not accept
        return
    if fast is not None:
        assert fast == slow
