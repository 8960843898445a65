"""The Close Board in a real browser: Debian's chromium (Playwright) on a real `countersign serve`, each person's
passkey held by Chromium's virtual authenticator (CDP), each close run to its gates by the real engine.

A person enrols from the owner's link, signs in, reads a gate's evidence and signs a decision with the passkey; a
rejection carries its reason, and one without a reason is refused before any signature; a stranger, a person without
a reading role, a request with another CSRF token and a replayed assertion are refused; a board decision updates the
gate's chat card (a local fake of Slack). The README's screenshots come from here (COUNTERSIGN_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from countersign.audit.trace import seal_pending
from countersign.bootstrap.chat import build_senders
from countersign.bootstrap.runtime import Runtime, engine_context
from countersign.callbacks.passkeys import issue_enrolment
from countersign.delivery.worker import deliver_due
from countersign.engine.books import load_bank_feed
from countersign.engine.orchestrator import advance
from countersign.engine.runs import close_status
from countersign.money.formatting import format_money
from countersign.policy.wording import in_words
from tests.board.browser_support import (
    VIEWPORT,
    BoardServer,
    add_virtual_authenticator,
    countersign_command,
    run_coroutine,
    virtual_credentials,
)
from tests.engine.workflow_support import approve_open_gates
from tests.fakes.slack_api import FakeSlack
from tests.support import start_default_close

SLACK_CHANNEL = "C0CLOSE"
CLI_TIMEOUT_S = 60.0  # bound on `countersign principals enroll`
FEED_ROUNDS = 4  # bound on the approve-and-advance rounds from the corrected feed to the variance gate
PROOF_IN_WORDS = f"{in_words('passkey')}, through {in_words('board')}"
DECISIONS = "SELECT principal_id, decision, reason, channel, proof->>'kind' FROM gate_decision WHERE gate_id = %s"

LIVE_PASSKEYS = "SELECT count(*) FROM principal_passkey WHERE principal_id = %s AND revoked_at IS NULL"

FETCH = """async ({url, body, csrf}) => {
  const response = await fetch(url, {
    method: "POST",
    headers: {"content-type": "application/json", "x-csrf-token": csrf},
    body,
    credentials: "same-origin",
  });
  return {status: response.status, body: await response.json()};
}"""
REVOKE = """async ({url, csrf}) => {
  const response = await fetch(url, {method: "POST", body: new URLSearchParams({csrf_token: csrf})});
  return {status: response.status, text: await response.text()};
}"""


# The close behind the pages ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Close:
    close_id: str
    gates: list[dict[str, Any]]

    def gate(self, task: str, kind: str = "approval") -> dict[str, Any]:
        found = [g for g in self.gates if g["task"] == task and g["kind"] == kind]
        assert found, (task, kind, [(g["task"], g["kind"]) for g in self.gates])
        return found[-1]


async def _gates(conn: psycopg.AsyncConnection[Any], close_id: str) -> list[dict[str, Any]]:
    gates: list[dict[str, Any]] = (await close_status(conn, close_id))["gates"]
    return gates


def _halted_close(runtime: Runtime, books: Path) -> Close:
    """The default books (seed 42) run by the real engine and specialists until the close halts at its gates."""

    async def run() -> Close:
        async with await psycopg.AsyncConnection.connect(str(runtime.database.url), autocommit=True) as conn:
            close_id = await start_default_close(conn, runtime, books)
            async with engine_context(runtime) as ctx:
                assert (await advance(conn, close_id, ctx)).status == "halted"
            return Close(close_id, await _gates(conn, close_id))

    return run_coroutine(run())


def _close_at_its_variance_gate(runtime: Runtime, books: Path, server: BoardServer) -> Close:
    """A halted close given the corrected bank feed, every gate approved through the server's signed callback and the
    close advanced, until the variance analysis's gate opens."""

    async def run() -> Close:
        async with await psycopg.AsyncConnection.connect(str(runtime.database.url), autocommit=True) as conn:
            close_id = await start_default_close(conn, runtime, books)
            async with engine_context(runtime) as ctx, httpx.AsyncClient(base_url=server.base_url) as door:
                assert (await advance(conn, close_id, ctx)).status == "halted"
                book_set = await conn.execute("SELECT book_set_id FROM close_run WHERE close_id = %s", (close_id,))
                (book_set_id,) = await book_set.fetchone() or (None,)
                corrected = books / "corrected" / "bank_lines.csv"
                await load_bank_feed(conn, book_set_id, corrected, loaded_by="alice.chen", close_id=close_id)
                for _ in range(FEED_ROUNDS):
                    if any(g["task"] == "variance_analysis" for g in await _gates(conn, close_id)):
                        break
                    await approve_open_gates(door, conn, close_id)
                    await advance(conn, close_id, ctx)
            return Close(close_id, await _gates(conn, close_id))

    return run_coroutine(run())


def _rows(server: BoardServer, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(str(server.database.url)) as owner:
        return owner.execute(sql, params).fetchall()


def _money(runtime: Runtime, amount: Any, currency: str = "GBP") -> str:
    return format_money(Decimal(str(amount)), currency, locale=runtime.settings.locale)


# People in the browser ---------------------------------------------------------------------------------------------


def _cli_enrolment_link(server: BoardServer, name: str) -> str:
    """What the owner's `countersign principals enroll NAME` prints: the board's one-time link. The owner's command
    runs apart from the server, so it is told where the board is (the server found it from its port)."""
    done = subprocess.run(
        [*countersign_command(), "principals", "enroll", name],
        env={**server.env, "COUNTERSIGN_BOARD_URL": server.base_url},
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (link,) = [line for line in done.stdout.splitlines() if "/board/enrol#token=" in line]
    return link.strip()


def _enrolment_link(server: BoardServer, name: str) -> str:
    """The owner's one-time link, issued in the database as the CLI issues it."""

    async def issue() -> str:
        async with await psycopg.AsyncConnection.connect(str(server.database.url), autocommit=True) as conn:
            async with conn.transaction():
                token = await issue_enrolment(conn, name, issued_by="test-owner")
            await seal_pending(conn)
        return token

    return server.url(f"/board/enrol#token={run_coroutine(issue())}")


def _enrol(page: Page, link: str, display_name: str) -> None:
    """Open the link, create the passkey (the virtual authenticator answers) and wait for the board to confirm."""
    page.goto(link)
    page.fill("#label", "work laptop")
    page.click("#enrol")
    expect(page.locator("#status")).to_have_text(
        f"Your passkey is enrolled, {display_name}. You can sign in with it now."
    )


def _sign_in(page: Page, server: BoardServer) -> None:
    page.click("#sign-in")
    expect(page).to_have_url(server.url("/board/inbox"))


@dataclass
class Person:
    name: str
    page: Page
    authenticator: str

    def sign_count(self) -> int:
        (credential,) = virtual_credentials(self.page, self.authenticator)
        return int(credential["signCount"])


@pytest.fixture
def new_person(browser: Browser, board_server: BoardServer) -> Iterator[Callable[[str, str], Person]]:
    """`new_person(name, display_name)`: a fresh context (its own cookies) with a virtual passkey authenticator; the
    person enrols from the owner's link and signs in. Every context is closed when the test ends."""
    contexts: list[BrowserContext] = []

    def person(name: str, display_name: str) -> Person:
        context = browser.new_context(base_url=board_server.base_url, viewport=VIEWPORT, locale="en-GB")
        contexts.append(context)
        page = context.new_page()
        authenticator = add_virtual_authenticator(page)
        _enrol(page, _enrolment_link(board_server, name), display_name)
        page.click("#go-sign-in")
        _sign_in(page, board_server)
        return Person(name, page, authenticator)

    yield person
    for context in contexts:
        context.close()


def _decisions_row(page: Page, principal: str) -> Any:
    return (
        page.locator("section", has=page.get_by_role("heading", name="Decisions"))
        .get_by_role("row")
        .filter(has_text=f"({principal})")
    )


def _b64url(standard_base64: str) -> str:
    return base64.urlsafe_b64encode(base64.b64decode(standard_base64)).rstrip(b"=").decode()


# The tests ---------------------------------------------------------------------------------------------------------


def test_a_person_enrols_signs_in_reads_the_evidence_and_approves_a_high_gate_with_a_passkey(
    board_server: BoardServer,
    board_page: Page,
    runtime: Runtime,
    default_books: Path,
    screenshot: Callable[[Page, str], Path],
) -> None:
    close = _halted_close(runtime, default_books)
    gate = close.gate("bank_reconciliation", "escalation")
    assert gate["tier"] == "high" and gate["accepted_proofs"] == ["ed25519", "passkey"]
    gate_url = board_server.url(f"/board/gates/{gate['gate_id']}")
    page = board_page

    link = _cli_enrolment_link(board_server, "alice.chen")
    assert link.startswith(board_server.url("/board/enrol#token="))
    authenticator = add_virtual_authenticator(page)
    _enrol(page, link, "Alice Chen (Financial Controller)")
    assert page.url == board_server.url("/board/enrol")  # the one-time token has left the address bar
    (credential,) = virtual_credentials(page, authenticator)
    assert credential["rpId"] == "localhost" and credential["isResidentCredential"] is True

    page.click("#go-sign-in")
    expect(page).to_have_url(board_server.url("/board/sign-in"))
    expect(page.get_by_role("heading", name="Sign in to the Close Board")).to_be_visible()
    screenshot(page, "board-sign-in")
    _sign_in(page, board_server)
    expect(page.locator("header .viewer")).to_contain_text("Alice Chen")
    waiting = page.locator(f'a[href="/board/gates/{gate["gate_id"]}"]')
    expect(waiting).to_be_visible()
    expect(waiting).to_have_text("Bank reconciliation")

    page.goto("/board/")
    expect(page.locator(f'a[href="/board/closes/{close.close_id}"]').first).to_be_visible()
    expect(page.locator("main")).to_contain_text("ACME-UK")
    screenshot(page, "board-overview")

    page.goto("/board/inbox")
    waiting.click()
    expect(page).to_have_url(gate_url)
    expect(page.get_by_text(in_words("anomaly_over_tolerance"), exact=True)).to_be_visible()
    expect(page.get_by_text("account 1000: 17 of 17 bank lines unmatched (tolerance 55%)", exact=True)).to_be_visible()
    line_id, amount = _rows(
        board_server,
        "SELECT l.bank_line_id, l.amount FROM book_bank_line l JOIN close_run r USING (book_set_id)"
        " WHERE r.close_id = %s AND l.feed_version = 1 AND l.account = '1000' ORDER BY l.bank_line_id LIMIT 1",
        close.close_id,
    )[0]
    written = _money(runtime, amount)
    assert "GBP" in written
    line = page.get_by_role("row").filter(has=page.get_by_role("cell", name=line_id, exact=True))
    expect(line.locator("td.amount")).to_have_text(written)
    expect(page.get_by_text("Nobody has decided yet.")).to_be_visible()
    expect(page.locator("section.decide")).to_have_count(1)  # one decision form, not a box within a box
    screenshot(page, "board-gate")

    signed_before = int(virtual_credentials(page, authenticator)[0]["signCount"])
    page.fill("#reason", "corrected feed reviewed with treasury")
    page.click("button[data-decision=approve]")
    decided = _decisions_row(page, "alice.chen")
    expect(decided).to_contain_text("Alice Chen")
    expect(decided).to_contain_text(in_words("approve"))
    expect(decided).to_contain_text(PROOF_IN_WORDS)
    expect(decided).to_contain_text("corrected feed reviewed with treasury")
    expect(page.locator("dl.facts span.status")).to_have_text(in_words("approved"))
    expect(page.locator("#decide")).to_contain_text("This gate is approved; there is nothing left to decide.")
    assert int(virtual_credentials(page, authenticator)[0]["signCount"]) == signed_before + 1  # it signed once

    assert _rows(board_server, DECISIONS, gate["gate_id"]) == [
        ("alice.chen", "approve", "corrected feed reviewed with treasury", "board", "passkey")
    ]
    (proved_by,) = _rows(
        board_server, "SELECT proof->>'credential_id' FROM gate_decision WHERE gate_id = %s", gate["gate_id"]
    )
    assert proved_by == (_b64url(credential["credentialId"]),)  # the virtual authenticator's own key


def test_a_rejection_shows_its_reason_and_one_without_a_reason_is_refused_before_any_signature(
    board_server: BoardServer,
    runtime: Runtime,
    default_books: Path,
    new_person: Callable[[str, str], Person],
    screenshot: Callable[[Page, str], Path],
) -> None:
    close = _close_at_its_variance_gate(runtime, default_books, board_server)
    gate = close.gate("variance_analysis")
    assert gate["status"] == "open" and "bob.osei" not in (gate["prepared_by"], *gate["requested_by"])
    bob = new_person("bob.osei", "Bob Osei (CFO)")
    page = bob.page

    page.goto(f"/board/closes/{close.close_id}")
    chart = page.locator(f'img[src="/board/charts/closes/{close.close_id}/variance.svg"]')
    expect(chart).to_be_visible()
    assert chart.evaluate("(img) => img.complete && img.naturalWidth > 0") is True  # the picture loaded and drew

    page.goto(f"/board/gates/{gate['gate_id']}")
    expect(page.get_by_role("heading", name="Variance against budget and prior period")).to_be_visible()
    chart = page.locator(f'img[src="/board/charts/closes/{close.close_id}/variance.svg"]')
    expect(chart).to_be_visible()
    assert chart.evaluate("(img) => img.complete && img.naturalWidth > 0") is True
    screenshot(page, "board-chart")  # the flagged accounts' table, their picture and the narrative
    signed_before = bob.sign_count()
    page.click("button[data-decision=reject]")  # no reason given
    expect(page.locator("#status")).to_have_text("Not recorded: a rejection needs your reason")
    assert bob.sign_count() == signed_before  # refused before the authenticator was asked
    assert _rows(board_server, DECISIONS, gate["gate_id"]) == []
    page.fill("#reason", "   ")
    page.click("button[data-decision=reject]")
    expect(page.locator("#status")).to_have_text("Not recorded: a rejection needs your reason")
    assert _rows(board_server, DECISIONS, gate["gate_id"]) == []

    reason = "Travel is 40% over budget with no accrual explained: send it back to the preparer"
    page.fill("#reason", reason)
    page.click("button[data-decision=reject]")
    decided = _decisions_row(page, "bob.osei")
    expect(decided).to_contain_text(in_words("reject"))
    expect(decided).to_contain_text(reason)
    expect(decided).to_contain_text(PROOF_IN_WORDS)
    expect(page.locator("dl.facts span.status")).to_have_text(in_words("rejected"))
    assert bob.sign_count() == signed_before + 1
    assert _rows(board_server, DECISIONS, gate["gate_id"]) == [("bob.osei", "reject", reason, "board", "passkey")]


def test_strangers_people_without_the_role_another_csrf_token_and_a_replayed_assertion_are_refused(
    board_server: BoardServer,
    board_page: Page,
    runtime: Runtime,
    default_books: Path,
    new_person: Callable[[str, str], Person],
) -> None:
    close = _halted_close(runtime, default_books)
    gate = close.gate("bank_reconciliation", "escalation")
    gate_path = f"/board/gates/{gate['gate_id']}"

    stranger = board_page  # no session, no passkey
    for path in ("/board/", "/board/inbox", gate_path, f"/board/closes/{close.close_id}"):
        stranger.goto(path)
        expect(stranger).to_have_url(board_server.url("/board/sign-in"))
        content = stranger.content()
        assert "ACME-UK" not in content and gate["gate_id"] not in content and close.close_id not in content, path

    dana = new_person(
        "dana.reyes", "Dana Reyes (Senior Accountant)"
    )  # an accountant: enrolled and signed in, but reads no close
    for path in ("/board/", gate_path):
        response = dana.page.goto(path)
        assert response is not None and response.status == 403, path
        expect(dana.page.get_by_role("heading", name="You may not read closes")).to_be_visible()
        content = dana.page.content()
        assert "ACME-UK" not in content and "Approve and sign" not in content, path

    alice = new_person("alice.chen", "Alice Chen (Financial Controller)")
    page = alice.page
    page.goto(gate_path)
    csrf = page.locator("#decide").get_attribute("data-csrf")
    assert csrf
    body = json.dumps({"decision": "approve", "reason": "looks fine"})
    forged = page.evaluate(FETCH, {"url": f"{gate_path}/decision/options", "body": body, "csrf": csrf[::-1]})
    assert forged["status"] == 403 and "CSRF" in forged["body"]["error"]
    options = page.evaluate(FETCH, {"url": f"{gate_path}/decision/options", "body": body, "csrf": csrf})
    assert options["status"] == 200  # the same request with the session's token is answered (the control)
    assert _rows(board_server, DECISIONS, gate["gate_id"]) == []
    (danas_key,) = virtual_credentials(dana.page, dana.authenticator)
    revoke = page.evaluate(
        REVOKE, {"url": f"/board/passkeys/{_b64url(danas_key['credentialId'])}/revoke", "csrf": csrf}
    )
    assert revoke["status"] == 404 and "You hold no live passkey with that id." in revoke["text"]  # not hers
    assert _rows(board_server, LIVE_PASSKEYS, "dana.reyes") == [(1,)]

    page.fill("#reason", "corrected feed reviewed")
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith(f"{gate_path}/decision")) as sent:
        page.click("button[data-decision=approve]")
    expect(_decisions_row(page, "alice.chen")).to_contain_text(in_words("approve"))
    assertion = sent.value.post_data
    assert assertion is not None and json.loads(assertion)["response"]["type"] == "public-key"
    csrf = page.locator("#decide").get_attribute("data-csrf") or ""
    replayed = page.evaluate(FETCH, {"url": f"{gate_path}/decision", "body": assertion, "csrf": csrf})
    assert replayed["status"] == 409 and "already used" in replayed["body"]["error"]
    assert _rows(board_server, DECISIONS, gate["gate_id"]) == [
        ("alice.chen", "approve", "corrected feed reviewed", "board", "passkey")
    ]


def test_a_board_decision_updates_the_gates_chat_card(
    board_server: BoardServer,
    runtime: Runtime,
    default_books: Path,
    fake_slack: FakeSlack,
    new_person: Callable[[str, str], Person],
) -> None:
    chat_settings = runtime.settings.model_copy(
        update={
            "slack_bot_token": "xoxb-test",
            "slack_signing_secret": "slack-signing-secret-for-tests",
            "slack_api_url": fake_slack.url,
            "slack_channel": SLACK_CHANNEL,
            "board_url": board_server.base_url,
        }
    )
    chat = replace(runtime, settings=chat_settings)
    close = _halted_close(chat, default_books)
    gate = close.gate("bank_reconciliation", "escalation")
    gate_url = board_server.url(f"/board/gates/{gate['gate_id']}")

    async def deliver() -> None:
        async with await psycopg.AsyncConnection.connect(str(chat.database.url), autocommit=True) as conn:
            await deliver_due(conn, build_senders(chat_settings))  # type: ignore[arg-type]

    run_coroutine(deliver())
    posted = [c for c in fake_slack.calls_to("chat.postMessage") if gate_url in json.dumps(c.params)]
    assert len(posted) == 1 and "Review and sign" in json.dumps(posted[0].params)  # the card sends people here
    ((card_ts,),) = _rows(
        board_server,
        "SELECT platform_message_id FROM outbox_message WHERE gate_id = %s AND kind = 'gate_card' AND status = 'sent'",
        gate["gate_id"],
    )

    alice = new_person("alice.chen", "Alice Chen (Financial Controller)")
    alice.page.goto(gate_url)
    alice.page.fill("#reason", "corrected feed reviewed")
    alice.page.click("button[data-decision=approve]")
    expect(_decisions_row(alice.page, "alice.chen")).to_contain_text(in_words("approve"))

    updates = _rows(
        board_server,
        "SELECT platform, channel, payload, status FROM outbox_message WHERE gate_id = %s AND kind = 'card_update'",
        gate["gate_id"],
    )
    assert updates == [("slack", SLACK_CHANNEL, {"state": "approved:1:0"}, "pending")]

    run_coroutine(deliver())
    (update,) = fake_slack.calls_to("chat.update")
    shown = json.dumps(update.params)
    assert update.params["channel"] == SLACK_CHANNEL and update.params["ts"] == card_ts
    assert "alice.chen" in shown and "Approved" in shown and "Review and sign" not in shown
