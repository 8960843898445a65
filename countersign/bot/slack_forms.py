"""The Slack decision form: what its `private_metadata` carries and what a submission of it says. Pure.

Approve and Reject open a modal (`countersign.cards.slack.decision_modal`); its `private_metadata` names the gate, the
decision,
and who clicked where. Slack hands the metadata back with the `view_submission`; the door treats it as a claim and
re-checks all of it (countersign/bot/slack.py): the submitter must be the person who clicked, the gate must still be
open.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from countersign.cards.model import REASON_MAX_CHARS
from countersign.cards.slack import REASON_ACTION_ID, REASON_BLOCK_ID
from countersign.http_edge.storable import storable_text
from countersign.states import Decision

FORM_VERSION = 1
MAX_FIELD_CHARS = 200  # of an id carried in the metadata


@dataclass(frozen=True)
class DecisionForm:
    gate_id: str
    decision: Decision
    user: str  # the Slack user who clicked
    team: str
    channel: str  # where refusals are answered (ephemeral)

    def metadata(self) -> str:
        return json.dumps(
            {
                "v": FORM_VERSION,
                "gate_id": self.gate_id,
                "decision": self.decision.value,
                "user": self.user,
                "team": self.team,
                "channel": self.channel,
            },
            separators=(",", ":"),
        )


def parse_form(metadata: object) -> DecisionForm | None:
    """The form the metadata names, or None when it is not one of ours (any field missing, too long or invalid)."""
    if not isinstance(metadata, str) or len(metadata) > 3000:
        return None
    try:
        raw = json.loads(metadata)
    except ValueError:
        return None
    if not isinstance(raw, dict) or raw.get("v") != FORM_VERSION:
        return None
    fields = {key: raw.get(key) for key in ("gate_id", "decision", "user", "team", "channel")}
    if not all(isinstance(v, str) and v and len(v) <= MAX_FIELD_CHARS and storable_text(v) for v in fields.values()):
        return None
    try:
        gate_id = str(uuid.UUID(str(fields["gate_id"])))
        decision = Decision(str(fields["decision"]))
    except ValueError:
        return None
    return DecisionForm(gate_id, decision, str(fields["user"]), str(fields["team"]), str(fields["channel"]))


class ReasonRejected(ValueError):
    """The typed reason cannot be recorded; the message is for the person."""


def submitted_reason(view: dict[str, Any]) -> str:
    """The reason typed into the form, stripped ("" when none); ReasonRejected when it cannot be stored."""
    state = view.get("state")
    values = state.get("values") if isinstance(state, dict) else None
    block = values.get(REASON_BLOCK_ID) if isinstance(values, dict) else None
    element = block.get(REASON_ACTION_ID) if isinstance(block, dict) else None
    value = element.get("value") if isinstance(element, dict) else None
    if value is None:
        return ""
    if not isinstance(value, str) or not storable_text(value):
        raise ReasonRejected("This reason holds characters that cannot be stored.")
    if len(value) > REASON_MAX_CHARS:
        raise ReasonRejected(f"A reason is at most {REASON_MAX_CHARS} characters.")
    return value.strip()
