"""The overdue reminder's words come from countersign/cards/notices.py alone; this pins them."""

import datetime as dt

from countersign.cards.notices import overdue_reminder, passkey_enrolled_notice

DUE = dt.datetime(2025, 7, 3, 9, 30, tzinfo=dt.UTC)


def test_overdue_reminder_wording_is_pinned() -> None:
    text = overdue_reminder(
        task_title="accruals",
        entity="UK01",
        period="2025-06",
        role="controller",
        missing=2,
        due_at=DUE,
        expires_at=DUE + dt.timedelta(hours=24),
    )
    assert text == (
        "Reminder for role controller: the accruals gate of UK01 2025-06 was due 2025-07-03 09:30 UTC and still"
        " needs 2 approval(s). Waiting never approves it. If nobody decides by 2025-07-04 09:30 UTC, it expires and"
        " the task runs again."
    )


def test_overdue_reminder_without_expiry_and_times_in_utc() -> None:
    paris = dt.timezone(dt.timedelta(hours=2))
    text = overdue_reminder(
        task_title="accruals",
        entity="UK01",
        period="2025-06",
        role="controller",
        missing=1,
        due_at=DUE.astimezone(paris),
        expires_at=None,
    )
    assert text.endswith("was due 2025-07-03 09:30 UTC and still needs 1 approval(s). Waiting never approves it.")


def test_overdue_reminder_never_asks_for_a_negative_number_of_approvals() -> None:
    text = overdue_reminder(task_title="t", entity="E", period="P", role="r", missing=-1, due_at=DUE, expires_at=None)
    assert "needs 0 approval(s)" in text


def test_passkey_enrolled_notice_wording_is_pinned_and_the_label_is_inert_slack_data() -> None:
    paris = dt.timezone(dt.timedelta(hours=2))
    text = passkey_enrolled_notice(
        label="my_key\n<@U0BOSS> ~x~", created_at=DUE.astimezone(paris), board_url="https://close.example.com/"
    )
    assert text == (
        "A passkey named “my\u02cdkey &lt;@U0BOSS&gt; \u223cx\u223c” was enrolled for you on the Close Board at"
        " 2025-07-03 09:30 UTC. If this was not you, revoke it at https://close.example.com/board/passkeys and tell"
        " your Countersign owner."
    )


def test_payee_default_notice_wording_is_pinned_with_its_currency_and_the_claim_beside_a_smaller_sum() -> None:
    from decimal import Decimal

    from countersign.cards.notices import payee_default_notice_post

    text = payee_default_notice_post(
        certificate_id="IPC-1\nfake line",
        currency="GBP",
        stated_sum=Decimal("1000"),
        claimed_sum=Decimal("90106.64"),
        basis="work valued to 31 January\nless retention",
        given_on=dt.date(2025, 3, 1),
        payment_notice_deadline=dt.date(2025, 2, 13),
        payment_notice_given_late=False,
        days_late=16,
        final_date=dt.date(2025, 3, 2),
        postponed_final_date=dt.date(2025, 3, 18),
    )
    assert text == (
        "Payee's default notice for certificate IPC-1 fake line, given 2025-03-01: the payment notice due by"
        " 2025-02-13 was not given, so the payee states GBP 1,000.00 is due (the application claimed GBP 90,106.64)."
        " Basis: work valued to 31 January less retention. The final date for payment moves from 2025-03-02 to"
        " 2025-03-18 (16 days later)."
    )


def test_payee_default_notice_after_a_late_payment_notice_says_so_and_one_day_is_one_day() -> None:
    from decimal import Decimal

    from countersign.cards.notices import payee_default_notice_post

    text = payee_default_notice_post(
        certificate_id="IPC-1",
        currency="EUR",
        stated_sum=Decimal("5"),
        claimed_sum=Decimal("5"),
        basis="as applied for",
        given_on=dt.date(2025, 2, 14),
        payment_notice_deadline=dt.date(2025, 2, 13),
        payment_notice_given_late=True,
        days_late=1,
        final_date=dt.date(2025, 3, 2),
        postponed_final_date=dt.date(2025, 3, 3),
    )
    assert "was given late, so the payee states EUR 5.00 is due. Basis: as applied for." in text
    assert text.endswith("(1 day later).")
