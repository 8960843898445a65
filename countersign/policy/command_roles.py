"""Who may run which chat command and who may read a close: the rule as data, and one pure function.

A caller is entitled only as a known, active human principal; the adapters resolve that and pass the roles here.
Pure: no I/O, imports nothing else of Countersign but the policy model and its states (`AccessReason`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from countersign.policy.model import Policy
from countersign.states import AccessReason

AUDITOR = "auditor"
CONTROLLER = "controller"
# Stands for "every approver_role a gated tier names in risk.yaml" (today controller and cfo).
APPROVER_ROLES = "approver roles in risk.yaml"

STATUS = "status"
PAYMENTS = "payments"  # payment-run status: the same readers as a close's status
START = "start"
PAYMENTS_START = "payments start"  # a month's payment runs: started by those who start a close
TRACE_EXPORT = "trace export"
READ_CLOSE = "read close"  # GET /closes/{id}
HELP = "help"  # usage text: any known, active human

# command -> the roles that may run it; APPROVER_ROLES expands to the policy's approver roles.
COMMAND_ROLES: dict[str, frozenset[str]] = {
    STATUS: frozenset({CONTROLLER, AUDITOR, APPROVER_ROLES}),
    PAYMENTS: frozenset({CONTROLLER, AUDITOR, APPROVER_ROLES}),
    START: frozenset({CONTROLLER}),
    PAYMENTS_START: frozenset({CONTROLLER}),
    TRACE_EXPORT: frozenset({AUDITOR, CONTROLLER}),
    READ_CLOSE: frozenset({CONTROLLER, AUDITOR, APPROVER_ROLES}),
    HELP: frozenset(),  # no role needed, but still a known, active human
}
COMMANDS = tuple(COMMAND_ROLES)


@dataclass(frozen=True)
class AccessDecision:
    allowed: bool
    reason: AccessReason
    needed: tuple[str, ...]  # the roles that would have allowed it, sorted


def approver_roles(policy: Policy) -> frozenset[str]:
    return frozenset(t.approver_role for t in policy.tiers if t.gate and t.approver_role)


def allowed_roles(command: str, policy: Policy) -> frozenset[str]:
    """The concrete roles that may run `command`; KeyError for a command this table does not know."""
    roles = COMMAND_ROLES[command]
    expanded = set(roles - {APPROVER_ROLES})
    if APPROVER_ROLES in roles:
        expanded |= approver_roles(policy)
    return frozenset(expanded)


def check_access(
    command: str,
    policy: Policy,
    *,
    known: bool,
    human: bool,
    active: bool,
    roles: Iterable[str],
) -> AccessDecision:
    """May a caller with these facts run `command`? Unknown, machine and inactive callers never may."""
    needed = tuple(sorted(allowed_roles(command, policy)))
    if not known:
        return AccessDecision(False, AccessReason.UNKNOWN_PRINCIPAL, needed)
    if not human:
        return AccessDecision(False, AccessReason.MACHINE_PRINCIPAL, needed)
    if not active:
        return AccessDecision(False, AccessReason.INACTIVE_PRINCIPAL, needed)
    if needed and not set(roles) & set(needed):
        return AccessDecision(False, AccessReason.MISSING_ROLE, needed)
    return AccessDecision(True, AccessReason.ALLOWED, needed)
