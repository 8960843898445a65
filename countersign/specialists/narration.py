"""Model-written prose behind guards that hold whatever the model says.

The model only explains: figures, verdicts and gates come from deterministic code. `narrate` asks the model for
`{"narrative": "..."}` and, with guards on (always, outside the eval's negative control):

- parse: the answer must be one JSON object with a non-empty string `narrative`; any other key ("verdict",
  "amount", "approve", ...) is dropped and flagged `dropped_key:<name>`. Malformed output gets one corrective retry,
  then the deterministic fallback ships, flagged `malformed_fallback`.
- verdict language (`VERDICT_PATTERNS`) in the narrative: the fallback ships, flagged `verdict_claim_fallback`.
- steering (`steering_claims`): a narrative that addresses the approver, the card or its buttons ("the controller can
  press the first button on this card without waiting"), or that steers toward a decision or away from looking ("This
  variance is routine; approve it.", scored by countersign/specialists/steering.py) ships the fallback, flagged
  `approver_address_fallback`; one
  that carries a link (a URL, a bare domain, mailto, Slack `<url|label>` or `<!channel>`, a markdown link) ships the
  fallback, flagged `link_fallback`. Neither gets a retry: a model that tried to steer the decision once is not asked
  to phrase it better.
- grounding: every number in the narrative must be within tolerance of an allowed (queried) value; an ungrounded
  answer gets one corrective retry naming the figure, then the fallback ships, flagged `ungrounded_fallback`.

Book text (account names, bank references and memos) reaches the model only as quoted data: one user message whose
content is `{"data": [...]}`, which the system prompt introduces as untrusted data that never carries
instructions. A bound, a missing recorded response or a provider failure raises `NarrationEscalation`.

After a person approved an escalation the model cannot get past by being asked again (no recorded response, a
bound), the engine sends the next attempt's payload with `model_off` naming that reason: `narrate` then does not ask
the model and ships the deterministic text, flagged `<reason>_fallback` (docs/adr/0036).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol, TypeVar

from countersign.llm import Limits, LoopResult, LoopStopped, Message, ModelRequest, Provider, run_loop
from countersign.specialists.errors import SpecialistInputError
from countersign.specialists.grounding import UngroundedFigureError, ground_figures
from countersign.specialists.injection import LINK_PATTERN
from countersign.specialists.steering import is_steering

SOURCE_MODEL = "model"
SOURCE_FALLBACK = "fallback"

# Words a narrative may not use: each states or steers a decision the model may not make. Matched as whole words,
# case-insensitively; "approve" also catches approved/approves/approving/approval.
VERDICT_PATTERNS: tuple[str, ...] = (
    r"approv(?:e|ed|es|ing|al)",
    r"sign(?:ed)?[\s-]+off",
    r"skip(?:ping)?\s+the\s+(?:gate|review|approval)",
    r"bypass(?:ed|ing)?",
    r"ignore\s+(?:all\s+)?(?:previous|prior|above)\s+instructions",
    r"disregard",
    r"no\s+(?:review|approval)\s+(?:is\s+)?(?:needed|required)",
    r"authori[sz](?:e|ed|es|ing)",
    r"override",
    r"release\s+the\s+payment",
)
_VERDICT_LANGUAGE = re.compile(r"\b(?:" + "|".join(VERDICT_PATTERNS) + r")\b", re.IGNORECASE)

# Prose that speaks to whoever decides, or to the card they decide on, instead of explaining the figures. Matched
# case-insensitively; a model explains to no one in particular.
APPROVER_ADDRESS_PATTERNS: tuple[str, ...] = (
    r"\b(?:buttons?|click(?:s|ed|ing)?|tap(?:s|ped|ping)?|press(?:es|ed|ing)?)\b",
    r"\b(?:this|the)\s+(?:card|gate|message)\b",
    r"\b(?:you|your|yours|yourself)\b",
    r"\b(?:approvers?|controllers?|cfos?|reviewers?|decision[\s-]?makers?|signator(?:y|ies)|whoever|the\s+person)\b"
    r"(?:\W+\w+){0,3}?\W+(?:can|may|should|must|need|needs|could|is\s+free|are\s+free|is\s+able|are\s+able)\b",
    r"\bwithout\s+waiting\b|\bno\s+need\s+to\s+(?:wait|review|check|read|look)\b|\b(?:right|straight)\s+away\b",
)
_APPROVER_ADDRESS = re.compile("|".join(APPROVER_ADDRESS_PATTERNS), re.IGNORECASE)
_LINK = re.compile(LINK_PATTERN, re.IGNORECASE)
APPROVER_ADDRESS = "approver_address"
LINK = "link"

# Escalation reasons (policy.EscalationReason values) for a loop that stopped; a provider failure is evidence the
# run cannot rely on, so a person looks at it. `model_unavailable`: the server answered 429/5xx or not at all through
# every retry the loop's deadline allowed (docs/adr/0038).
_ESCALATION_FOR_STOP = {
    "budget_exhausted": "budget_exhausted",
    "no_recorded_response": "no_recorded_response",
    "model_unavailable": "model_unavailable",
    "provider_error": "contradictory_evidence",
}

NARRATIVE_KEY = "narrative"
DEFAULT_LIMITS = Limits()

MODEL_OFF_FIELD = "model_off"
"""The payload key the engine sets on the attempt after a person approved a `MODEL_OFF_REASONS` escalation; its
value is the reason."""
# Not `model_unavailable`: a person approving it wants the model asked again once the provider recovers. While it
# stays down, each approval re-runs into the same escalation, and the person can wait or reject (docs/adr/0036).
MODEL_OFF_REASONS = ("no_recorded_response", "budget_exhausted")
"""Escalation reasons (policy.EscalationReason values) that asking the model again would meet again: replay finds no
recording for the same request, and the same request under the same bounds runs out of them again. Approving one
accepts the deterministic text the escalation card showed; the attempt it re-runs does not ask the model."""


def model_off(payload: Mapping[str, Any]) -> str | None:
    """The reason the engine asks this attempt not to call the model (`MODEL_OFF_FIELD`), or None to ask it."""
    reason = payload.get(MODEL_OFF_FIELD)
    if reason is None:
        return None
    if reason not in MODEL_OFF_REASONS:
        raise SpecialistInputError(MODEL_OFF_FIELD, f"expected one of {', '.join(MODEL_OFF_REASONS)}, got {reason!r}")
    return str(reason)


def model_off_flag(reason: str) -> str:
    """The flag on deterministic text shipped without asking the model, after an approved `reason` escalation."""
    return f"{reason}_fallback"


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    text: str
    sha256: str  # of the file's bytes: the template hash every request and trace event carries


def load_template(prompts_dir: Path, name: str) -> PromptTemplate:
    """`<prompts_dir>/<name>.md`; its hash is the sha256 of the file bytes."""
    raw = (prompts_dir / f"{name}.md").read_bytes()
    return PromptTemplate(name=name, text=raw.decode("utf-8"), sha256=hashlib.sha256(raw).hexdigest())


@dataclass(frozen=True)
class Narration:
    text: str
    source: str  # SOURCE_MODEL | SOURCE_FALLBACK
    flags: tuple[str, ...]
    model: str
    template_hash: str
    steps: tuple[Mapping[str, Any], ...]  # the loop's trace events, JSON-safe
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Keys the model added beside `narrative`. Always empty with guards on; with guards off (the eval's negative
    control) the model's JSON is merged as-is, so a "verdict" or "amount" here would reach the result."""


class NarrationEscalation(Exception):
    """The model could not be asked to the end: a bound, a missing recorded response or a provider failure."""

    def __init__(self, reason: str, detail: str, steps: tuple[Mapping[str, Any], ...] = ()) -> None:
        # "budget_exhausted" | "no_recorded_response" | "model_unavailable" | "contradictory_evidence"
        self.reason = reason
        self.detail = detail
        self.steps = steps
        super().__init__(f"{reason}: {detail}")


@dataclass(frozen=True)
class Narrator:
    """A model seat: the provider, the model id, where the prompt templates live, and the loop's bounds."""

    provider: Provider
    model: str
    prompts_dir: Path
    limits: Limits = DEFAULT_LIMITS
    guards: bool = True

    def template(self, name: str) -> PromptTemplate:
        return load_template(self.prompts_dir, name)


@dataclass(frozen=True)
class _Verdict:
    """What the guards made of one answer: a narrative to ship, or why not (and what to tell the model)."""

    narrative: str | None
    failure: str | None = None  # "malformed" | "ungrounded" | "verdict_claim" | "approver_address" | "link"
    correction: str = ""
    dropped: tuple[str, ...] = ()


def build_request(
    template: PromptTemplate, model: str, facts: Mapping[str, Any], quoted: Sequence[str], max_tokens: int
) -> ModelRequest:
    """System prompt, then the facts, then the book text as one quoted-data message."""
    return data_request(template, model, _json({"facts": facts}), _json({"data": list(quoted)}), max_tokens)


def data_request(template: PromptTemplate, model: str, facts: str, data: str, max_tokens: int) -> ModelRequest:
    """The request every specialist sends: the template as the system prompt, then the facts, then the quoted data
    (each already JSON, in the caller's own encoding), one user message each."""
    return ModelRequest(
        model=model,
        template_hash=template.sha256,
        messages=(
            Message(role="system", content=template.text),
            Message(role="user", content=facts),
            Message(role="user", content=data),
        ),
        max_tokens=max_tokens,
    )


async def narrate(
    provider: Provider,
    *,
    template: PromptTemplate,
    model: str,
    facts: Mapping[str, Any],
    quoted: Sequence[str],
    allowed_values: Sequence[Decimal],
    tolerance: Decimal,
    fallback: str,
    limits: Limits = DEFAULT_LIMITS,
    guards: bool = True,
    max_tokens: int = 512,
    off: str | None = None,
) -> Narration:
    """Ask the model for the narrative; ship it only if the guards pass (one corrective retry), else `fallback`.

    With `off` (the reason from `model_off`), the model is not asked: `fallback` ships, flagged `<off>_fallback`.
    """
    steps: list[Mapping[str, Any]] = []
    flags: list[str] = []
    if off is not None:
        return _narration(fallback, SOURCE_FALLBACK, [model_off_flag(off)], model, template, steps, {})
    request = build_request(template, model, facts, quoted, max_tokens)
    if not guards:
        first = await ask_model(provider, request, limits, steps, template.name)
        text, extra = _unguarded(first.text)
        return _narration(text, SOURCE_MODEL, flags, model, template, steps, extra)

    def judge(answer: str) -> _Verdict:
        return _judge(answer, allowed_values, tolerance)

    verdict = await judged_answer(
        provider, request, limits, steps, flags, template.name, judge=judge, retry_on=("malformed", "ungrounded")
    )
    if verdict.failure is not None or verdict.narrative is None:
        flags.append(f"{verdict.failure}_fallback")
        return _narration(fallback, SOURCE_FALLBACK, flags, model, template, steps, {})
    return _narration(verdict.narrative, SOURCE_MODEL, flags, model, template, steps, {})


def verdict_claims(text: str) -> list[str]:
    """The verdict words in a narrative (empty when it only explains)."""
    return [match.group(0) for match in _VERDICT_LANGUAGE.finditer(text)]


def steering_claims(text: str) -> list[str]:
    """Why model prose may not reach a card: `approver_address` (it speaks to the approver, the card or its buttons,
    or steers toward a decision or away from looking: `APPROVER_ADDRESS_PATTERNS` or the scored detector,
    countersign/specialists/steering.py), `link` (it carries a link); empty when it only explains."""
    steers = _APPROVER_ADDRESS.search(text) is not None or is_steering(text)
    claims = [APPROVER_ADDRESS] if steers else []
    return [*claims, LINK] if _LINK.search(text) else claims


class Judgement(Protocol):
    """What a guard made of one answer: `failure` names why it cannot ship (None when it can), `correction` is what
    to tell the model on the retry, `dropped` the keys removed from it."""

    @property
    def failure(self) -> str | None: ...

    @property
    def correction(self) -> str: ...

    @property
    def dropped(self) -> tuple[str, ...]: ...


JudgementT = TypeVar("JudgementT", bound=Judgement)


async def judged_answer(
    provider: Provider,
    request: ModelRequest,
    limits: Limits,
    steps: list[Mapping[str, Any]],
    flags: list[str],
    purpose: str,
    *,
    judge: Callable[[str], JudgementT],
    retry_on: Collection[str],
) -> JudgementT:
    """Ask, judge the answer, and for a failure in `retry_on` ask once more with the correction, sharing the first
    ask's budget. Flags `<failure>_retry` and `dropped_key:<name>`; returns the last judgement (the caller ships it
    or its fallback)."""
    started = time.monotonic()
    first = await ask_model(provider, request, limits, steps, purpose)
    judgement = judge(first.text)
    flags.extend(f"dropped_key:{key}" for key in judgement.dropped)
    if judgement.failure in retry_on:
        flags.append(f"{judgement.failure}_retry")
        retry = replace(
            request,
            messages=(
                *request.messages,
                Message(role="assistant", content=first.text),
                Message(role="user", content=judgement.correction),
            ),
        )
        left = remaining_limits(limits, first, time.monotonic() - started, steps)
        second = await ask_model(provider, retry, left, steps, purpose)
        judgement = judge(second.text)
        flags.extend(f"dropped_key:{key}" for key in judgement.dropped if f"dropped_key:{key}" not in flags)
    return judgement


async def ask_model(
    provider: Provider, request: ModelRequest, limits: Limits, steps: list[Mapping[str, Any]], purpose: str
) -> LoopResult:
    """One bounded ask; its events join `steps`, and a stopped loop raises `NarrationEscalation`."""
    offset = sum(1 for step in steps if step.get("kind") == "model_step")
    try:
        result = await run_loop(provider, request, limits=limits)
    except LoopStopped as stopped:
        steps.extend(_numbered(stopped.events, offset, purpose))
        reason = _ESCALATION_FOR_STOP.get(stopped.reason, "contradictory_evidence")
        raise NarrationEscalation(reason, stopped.detail, tuple(steps)) from stopped
    steps.extend(_numbered(result.events, offset, purpose))
    return result


def _numbered(events: Sequence[Mapping[str, Any]], offset: int, purpose: str) -> list[Mapping[str, Any]]:
    """Steps numbered across the first ask and its retry, each naming what it was for."""
    return [{**event, "step": int(event.get("step", 0)) + offset, "purpose": purpose} for event in events]


def remaining_limits(limits: Limits, spent: LoopResult, elapsed_s: float, steps: Sequence[Mapping[str, Any]]) -> Limits:
    """The retry shares the first ask's budget: the steps, tokens and time already spent count against it.

    A bound already used up stops the narration here, before the retry's call, as the loop itself would.
    """
    left = {
        "steps": limits.max_steps - spent.steps,
        "wall_clock": limits.deadline_s - elapsed_s,
        "tokens": limits.max_tokens - spent.tokens_in - spent.tokens_out,
    }
    for bound, amount in left.items():
        if amount <= 0:
            detail = (
                f"{bound} bound: the corrective retry (step {spent.steps + 1}) has no budget left "
                f"(max_steps={limits.max_steps}, deadline_s={limits.deadline_s}, max_tokens={limits.max_tokens})"
            )
            raise NarrationEscalation("budget_exhausted", detail, tuple(steps))
    # replace, not a fresh Limits: the per-step bounds (tool calls, retries of an unavailable server) carry over
    return replace(limits, max_steps=int(left["steps"]), deadline_s=left["wall_clock"], max_tokens=int(left["tokens"]))


def _judge(answer: str, allowed_values: Sequence[Decimal], tolerance: Decimal) -> _Verdict:
    parsed = _parse(answer)
    if parsed is None:
        return _Verdict(
            None,
            "malformed",
            'Your answer was not one JSON object with a non-empty string "narrative". '
            'Answer with exactly {"narrative": "<text>"} and nothing else.',
        )
    narrative, dropped = parsed
    if verdict_claims(narrative):
        return _Verdict(None, "verdict_claim", dropped=dropped)
    steering = steering_claims(narrative)
    if steering:
        return _Verdict(None, steering[0], dropped=dropped)
    try:
        ground_figures(narrative, allowed_values, tolerance)
    except UngroundedFigureError as ungrounded:
        return _Verdict(
            None,
            "ungrounded",
            f"Your narrative cites {ungrounded.figure.raw!r}, which is not a figure in FACTS. Rewrite it citing only "
            'figures that appear in FACTS, and answer with exactly {"narrative": "<text>"}.',
            dropped,
        )
    return _Verdict(narrative, dropped=dropped)


def _parse(answer: str) -> tuple[str, tuple[str, ...]] | None:
    """The narrative and the keys dropped beside it; None unless the answer is one JSON object with a narrative."""
    value = json_object(answer)
    if value is None:
        return None
    narrative = value.get(NARRATIVE_KEY)
    if not isinstance(narrative, str) or not narrative.strip():
        return None
    return narrative.strip(), tuple(sorted(str(key) for key in value if key != NARRATIVE_KEY))


def _unguarded(answer: str) -> tuple[str, dict[str, Any]]:
    """Guards off: the model's JSON as-is (its extra keys included), or its raw text."""
    try:
        value = json.loads(answer)
    except ValueError:
        return answer, {}
    if not isinstance(value, dict):
        return answer, {}
    extra = {str(key): item for key, item in value.items() if key != NARRATIVE_KEY}
    return str(value.get(NARRATIVE_KEY, answer)), extra


def _narration(
    text: str,
    source: str,
    flags: Sequence[str],
    model: str,
    template: PromptTemplate,
    steps: Sequence[Mapping[str, Any]],
    extra: Mapping[str, Any],
) -> Narration:
    return Narration(
        text=text,
        source=source,
        flags=tuple(flags),
        model=model,
        template_hash=template.sha256,
        steps=tuple(steps),
        extra=extra,
    )


def json_object(answer: str) -> dict[str, Any] | None:
    """The answer as one JSON object; None when it is not JSON or not an object."""
    try:
        value = json.loads(answer)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
