"""The errors the use cases raise, each carrying what a door needs to answer (the command, the access decision, the
close id). Each door maps them to its answer in one table: `countersign/web/errors.py` (status code, error code,
detail) and
`countersign/bot/answers.py` (words for people)."""

from __future__ import annotations

from countersign.policy.command_roles import AccessDecision


class ServiceError(Exception):
    """A use case refused or found nothing; the message is safe to show the caller."""


class Unauthenticated(ServiceError):
    """The reader's credentials are missing, malformed, unknown, revoked or stale; `reason` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Forbidden(ServiceError):
    """The caller may not run `command` (countersign/policy/command_roles.py); `access` says why and which roles
    would."""

    def __init__(self, command: str, access: AccessDecision) -> None:
        super().__init__(f"{access.reason}: `{command}` needs one of the roles {', '.join(access.needed)}")
        self.command = command
        self.access = access


class CloseNotFound(ServiceError, LookupError):
    """No close has this id (`close_id` as the caller gave it)."""

    def __init__(self, close_id: str) -> None:
        super().__init__(f"no close with id {close_id!r}")
        self.close_id = close_id


class NoCloseStarted(ServiceError, LookupError):
    """No close was named and none has been started (of `entity`, when one was named)."""

    def __init__(self, entity: str | None = None) -> None:
        super().__init__(f"no close has been started{' for ' + entity if entity else ''}")
        self.entity = entity


class NoBooksLoaded(ServiceError, RuntimeError):
    """`close start` for an entity and period with no books: a typo must not become a close on invented books."""

    def __init__(self, entity: str, period: str) -> None:
        super().__init__(
            f"{entity} {period} has no loaded books: pass --books DIR (from `countersign synth`), "
            "or --synthetic to start on synthetic books seeded from the entity's name"
        )
        self.entity = entity
        self.period = period


class GateNotFound(ServiceError, LookupError):
    """No gate has this id (`gate_id` as the caller gave it)."""

    def __init__(self, gate_id: str) -> None:
        super().__init__(f"no gate with id {gate_id!r}")
        self.gate_id = gate_id


class NoSuchConstructionSet(ServiceError, LookupError):
    """`payments start --set N` for a construction set nobody loaded."""

    def __init__(self, set_id: int) -> None:
        super().__init__(f"no construction set {set_id}: `countersign payments load PATH` loads one")
        self.set_id = set_id


class NoCertificatesForPeriod(ServiceError, LookupError):
    """`payments start` for a month no loaded construction set (or not the one named) has a certificate in."""

    def __init__(self, period: str, set_id: int | None = None) -> None:
        where = f"construction set {set_id}" if set_id is not None else "any loaded construction set"
        super().__init__(
            f"no certificate submitted in {period} in {where}: load the month's pay applications first"
            " (`countersign payments load PATH`)"
        )
        self.period = period
        self.set_id = set_id


class PaymentRunsAlreadyStarted(ServiceError):
    """A certificate of the month already has its payment run: a month's runs are started once."""

    def __init__(self, period: str, certificate_id: str, close_id: str) -> None:
        super().__init__(f"the payment runs of {period} are already started ({certificate_id} runs as {close_id})")
        self.period = period
        self.certificate_id = certificate_id
        self.close_id = close_id


def shown_refusals() -> tuple[type[BaseException], ...]:
    """The engine's and the callbacks' refusals whose message is safe to show a caller as it is (a books file's row,
    an unknown principal, a close already started); imported when asked, so a door's start-up stays light."""
    from countersign.callbacks.callers import UnknownPrincipal
    from countersign.callbacks.principals import PrincipalFileError
    from countersign.engine.books import BooksError
    from countersign.engine.runs import CloseAlreadyExists, CloseNotFound, InvalidCloseKey, PeriodClosed

    return (
        InvalidCloseKey,
        BooksError,
        CloseAlreadyExists,
        CloseNotFound,
        PeriodClosed,
        PrincipalFileError,
        UnknownPrincipal,
        ServiceError,
    )
