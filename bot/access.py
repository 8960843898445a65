"""Chat commands answer only the entitled: the workspace or tenant is allow-listed, the caller is a known active
human, and one of its roles may run the command (policy/command_roles.py). A refusal is traced as `command_refused`
through the callbacks role; the adapter tells only the caller."""

from __future__ import annotations

from dataclasses import dataclass

from bot.services import ChatServices
from callbacks.callers import Caller, access_for, record_command_refused, resolve_chat_caller
from callbacks.principals import normalise_identity
from callbacks.storable import storable_text
from policy.command_roles import AccessDecision

MAX_ID_CHARS = 255


def allowed_tenant(allowed: frozenset[str], tenant: str) -> bool:
    """Is this Slack team / Teams tenant on the configured allow-list? An empty list allows nobody."""
    if not tenant or len(tenant) > MAX_ID_CHARS or not storable_text(tenant):
        return False
    return normalise_identity(tenant) in {normalise_identity(t) for t in allowed}


def _printable(value: str) -> str:
    return (value if storable_text(value) else repr(value))[:MAX_ID_CHARS]


@dataclass(frozen=True)
class Authorized:
    caller: Caller | None
    access: AccessDecision

    @property
    def allowed(self) -> bool:
        return self.access.allowed and self.caller is not None

    def refusal_text(self, command: str) -> str:
        reasons = {
            "unknown_principal": "you are not a known Countersign principal",
            "machine_principal": "bots and apps cannot run commands",
            "inactive_principal": "your Countersign principal is deactivated",
            "missing_role": "you do not hold a role for it",
        }
        why = reasons.get(self.access.reason, self.access.reason)
        needs = f" (needs one of: {', '.join(self.access.needed)})" if self.access.needed else ""
        return f"Refused: `{command}` is not available to you: {why}{needs}."


async def authorize_command(
    services: ChatServices, *, platform: str, tenant: str, user: str, command: str
) -> Authorized:
    """Resolve the caller and check the command; a refusal is appended to the trace before this returns."""
    caller = None
    if user and tenant and len(user) <= MAX_ID_CHARS and storable_text(user + tenant):
        async with services.connect_callbacks() as conn:
            caller = await resolve_chat_caller(conn, platform, user, tenant)
    result = Authorized(caller, access_for(command, services.policy, caller))
    if not result.allowed:
        async with services.connect_callbacks() as conn:
            await record_command_refused(
                conn,
                platform=platform,
                tenant=_printable(tenant),
                user=_printable(user),
                command=command,
                reason=result.access.reason,
                seal=services.seal,
            )
    return result
