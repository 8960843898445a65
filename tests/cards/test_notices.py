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
