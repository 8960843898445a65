"""The payee's default notice (HGCRA 1996 s. 110B): when the payer's payment notice was not given in time, the payee
may give one stating the sum it considers due and its basis, and the final date for payment is postponed.

The CLI records it for the payee (`payments default-notice`), as the engine role. The database decides whether it may
be recorded and computes the dates (`record_payee_default_notice`, the payee default notice migration); what it
refuses comes back as `DefaultNoticeRefused` with the database's words. Each notice is traced and sealed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import AsyncConnection

from countersign.audit.trace import append_event, seal_pending
from countersign.cards.notices import payee_default_notice_post
from countersign.engine.outbox import ChannelTarget, enqueue_notices
from countersign.services.errors import ServiceError
from countersign.states import TraceKind
from countersign.store import payment_notices as store
from countersign.store.payment_notices import PayeeDefaultNoticeRecord

__all__ = ["DefaultNoticeRefused", "RecordedDefaultNotice", "record_default_notice", "words_of"]

TEMPLATE = "payee_default_notice"


class DefaultNoticeRefused(ServiceError):
    """A default notice that was not recorded; `reason` says why in words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class RecordedDefaultNotice:
    notice: PayeeDefaultNoticeRecord
    words: str


def words_of(notice: PayeeDefaultNoticeRecord, locale: str | None = None, platform: str | None = None) -> str:
    """The notice's words, as the CLI prints them (no platform) and the deliverer posts them."""
    return payee_default_notice_post(
        certificate_id=notice.certificate_id,
        currency=notice.currency,
        stated_sum=notice.stated_sum,
        claimed_sum=notice.claimed_sum,
        basis=notice.basis,
        given_on=notice.given_on,
        payment_notice_deadline=notice.payment_notice_deadline,
        payment_notice_given_late=notice.payment_notice_id is not None,
        days_late=notice.days_late,
        final_date=notice.final_date,
        postponed_final_date=notice.postponed_final_date,
        locale=locale,
        platform=platform,
    )


async def record_default_notice(
    conn: AsyncConnection[Any],
    *,
    certificate_id: str,
    stated_sum: Decimal,
    basis: str,
    given_on: dt.date,
    given_by: str,
    channels: tuple[ChannelTarget, ...] = (),
    locale: str | None = None,
) -> RecordedDefaultNotice:
    """Record, trace, post in `channels` and seal the payee's default notice on `certificate_id`;
    `DefaultNoticeRefused` naming what was wrong."""
    if not basis.strip():
        raise DefaultNoticeRefused("--basis is empty: say how the sum is calculated (s. 110B(4))")
    if not stated_sum.is_finite() or stated_sum < 0 or stated_sum != stated_sum.quantize(Decimal("0.01")):
        raise DefaultNoticeRefused(f"--sum {stated_sum} is not an amount of nothing or more, in hundredths")
    try:
        async with conn.transaction():
            notice_id = await store.record_payee_default_notice(
                conn,
                certificate_id=certificate_id,
                stated_sum=stated_sum,
                basis=basis.strip(),
                given_on=given_on,
                given_by=given_by,
            )
            notice = await store.read_payee_default_notice(conn, notice_id)
            if notice is None:
                raise LookupError(f"default notice {notice_id} vanished")
            close_id = await store.certificate_close_id(conn, certificate_id)
            await append_event(
                conn,
                actor=given_by,
                close_id=close_id,
                kind=TraceKind.PAYEE_DEFAULT_NOTICE_RECORDED,
                payload={
                    "certificate_id": certificate_id,
                    "notice_id": notice.notice_id,
                    "payment_notice_id": notice.payment_notice_id,
                    "currency": notice.currency,
                    "stated_sum": f"{notice.stated_sum:.2f}",
                    "claimed_sum": None if notice.claimed_sum is None else f"{notice.claimed_sum:.2f}",
                    "given_on": notice.given_on.isoformat(),
                    "payment_notice_deadline": notice.payment_notice_deadline.isoformat(),
                    "days_late": notice.days_late,
                    "postponed_final_date": notice.postponed_final_date.isoformat(),
                    "channels": [f"{t.platform}:{t.channel}" for t in channels],
                },
            )
            await enqueue_notices(
                conn,
                key=f"{TEMPLATE}:{notice.notice_id}",
                template=TEMPLATE,
                close_id=close_id,
                channels=channels,
                args={"notice_id": notice.notice_id},
            )
    except (
        psycopg.errors.InsufficientPrivilege,
        psycopg.errors.CheckViolation,
        psycopg.errors.NoDataFound,
        psycopg.errors.UniqueViolation,
    ) as exc:
        primary = exc.diag.message_primary if exc.diag is not None else None
        raise DefaultNoticeRefused(primary or str(exc).splitlines()[0]) from exc
    await seal_pending(conn)
    return RecordedDefaultNotice(notice=notice, words=words_of(notice, locale))
