"""The browser machinery end to end, without the board's pages: Debian's chromium reaches a real `countersign serve`
at http://localhost:PORT, and a passkey made there by Chromium's virtual authenticator verifies with the `webauthn`
library the board uses, for that origin and rp id only.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
from pathlib import Path
from typing import Any

import psycopg
import pytest
from playwright.sync_api import Browser, Page
from playwright.sync_api import Error as PlaywrightError
from psycopg.conninfo import conninfo_to_dict
from webauthn import verify_authentication_response, verify_registration_response
from webauthn.helpers.exceptions import InvalidAuthenticationResponse, InvalidRegistrationResponse

from tests.board.browser_support import (
    SCREENSHOTS_DIR,
    BoardServer,
    add_virtual_authenticator,
    remove_virtual_authenticator,
    run_coroutine,
    screenshot_path,
    virtual_credentials,
)

RP_ID = "localhost"
ES256 = -7

CREATE = """async ({challenge, userId}) => {
  const credential = await navigator.credentials.create({publicKey: {
    challenge: new Uint8Array(challenge),
    rp: {id: "localhost", name: "Countersign"},
    user: {id: new Uint8Array(userId), name: "alice.chen", displayName: "Alice Chen"},
    pubKeyCredParams: [{type: "public-key", alg: -7}],
    authenticatorSelection: {residentKey: "required", userVerification: "required"},
    attestation: "none",
    timeout: 10000,
  }});
  return credential.toJSON();
}"""

GET = """async ({challenge, credentialId, rpId}) => {
  const assertion = await navigator.credentials.get({publicKey: {
    challenge: new Uint8Array(challenge),
    rpId,
    allowCredentials: [{type: "public-key", id: new Uint8Array(credentialId)}],
    userVerification: "required",
    timeout: 10000,
  }});
  return assertion.toJSON();
}"""


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_chromium_reaches_the_real_server_on_localhost(board_server: BoardServer, board_page: Page) -> None:
    response = board_page.goto("/healthz")
    assert response is not None and response.status == 200
    assert board_page.url == f"http://localhost:{board_server.port}/healthz"
    assert '"status":"ok"' in board_page.locator("body").inner_text()
    assert board_page.evaluate("window.isSecureContext") is True  # WebAuthn needs it; localhost over http is one
    # No COUNTERSIGN_BOARD_URL: `serve --port` put the board at this origin itself (the passkey tests sign on it).
    assert "COUNTERSIGN_BOARD_URL" not in board_server.env
    assert board_server.base_url == f"http://localhost:{board_server.port}"


def test_a_browser_test_runs_async_code_on_the_servers_database(board_server: BoardServer, board_page: Page) -> None:
    board_page.goto("/healthz")

    async def database_name() -> str:
        async with await psycopg.AsyncConnection.connect(str(board_server.database.url)) as connection:
            row = await (await connection.execute("SELECT current_database()")).fetchone()
        assert row is not None
        return str(row[0])

    assert run_coroutine(database_name()) == conninfo_to_dict(board_server.env["DATABASE_URL"])["dbname"]
    assert board_page.evaluate("1 + 1") == 2  # Playwright works again afterwards


def test_a_virtual_passkey_registers_and_signs_in_for_this_origin_only(
    board_server: BoardServer, board_page: Page
) -> None:
    origin = board_server.base_url
    board_page.goto("/healthz")
    authenticator = add_virtual_authenticator(board_page)
    assert virtual_credentials(board_page, authenticator) == []

    challenge = secrets.token_bytes(32)
    created: dict[str, Any] = board_page.evaluate(
        CREATE, {"challenge": list(challenge), "userId": list(secrets.token_bytes(16))}
    )
    registration = verify_registration_response(
        credential=created,
        expected_challenge=challenge,
        expected_rp_id=RP_ID,
        expected_origin=origin,
        require_user_verification=True,
        supported_pub_key_algs=[ES256],  # type: ignore[list-item]
    )
    assert registration.credential_id == _b64url_decode(created["rawId"])
    assert registration.user_verified
    # Negative controls: the same attestation for another challenge or another origin is refused.
    with pytest.raises(InvalidRegistrationResponse, match="challenge"):
        verify_registration_response(
            credential=created, expected_challenge=secrets.token_bytes(32), expected_rp_id=RP_ID, expected_origin=origin
        )
    with pytest.raises(InvalidRegistrationResponse, match="origin"):
        verify_registration_response(
            credential=created,
            expected_challenge=challenge,
            expected_rp_id=RP_ID,
            expected_origin="http://localhost:1",
        )

    (stored,) = virtual_credentials(board_page, authenticator)
    assert base64.b64decode(stored["credentialId"]) == registration.credential_id
    assert stored["rpId"] == RP_ID
    assert stored["isResidentCredential"] is True
    count_after_create = int(stored["signCount"])

    challenge = secrets.token_bytes(32)
    asserted: dict[str, Any] = board_page.evaluate(
        GET, {"challenge": list(challenge), "credentialId": list(registration.credential_id), "rpId": RP_ID}
    )

    def verify_assertion(expected_challenge: bytes, expected_origin: str) -> Any:
        return verify_authentication_response(
            credential=asserted,
            expected_challenge=expected_challenge,
            expected_rp_id=RP_ID,
            expected_origin=expected_origin,
            credential_public_key=registration.credential_public_key,
            credential_current_sign_count=registration.sign_count,
            require_user_verification=True,
        )

    authentication = verify_assertion(challenge, origin)
    assert authentication.new_sign_count > registration.sign_count
    (stored,) = virtual_credentials(board_page, authenticator)
    assert int(stored["signCount"]) > count_after_create
    assert int(stored["signCount"]) == authentication.new_sign_count
    with pytest.raises(InvalidAuthenticationResponse, match="challenge"):
        verify_assertion(secrets.token_bytes(32), origin)
    with pytest.raises(InvalidAuthenticationResponse, match="origin"):
        verify_assertion(challenge, f"http://127.0.0.1:{board_server.port}")

    # The browser binds passkeys to the page's origin too: another rp id is refused before any authenticator.
    elsewhere = board_page.evaluate(
        "(args) => (" + GET + ")(args).then(() => 'signed', (error) => error.name)",
        {"challenge": list(challenge), "credentialId": list(registration.credential_id), "rpId": "example.com"},
    )
    assert elsewhere == "SecurityError"

    remove_virtual_authenticator(board_page, authenticator)
    with pytest.raises(PlaywrightError, match="Virtual Authenticator"):
        virtual_credentials(board_page, authenticator)


def test_screenshots_stay_out_of_the_repository_unless_asked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, browser: Browser, screenshot: Any
) -> None:
    monkeypatch.delenv("COUNTERSIGN_UPDATE_SCREENSHOTS", raising=False)
    page = browser.new_page()
    page.set_content("<h1>Close Board</h1>")
    path = screenshot(page, "smoke-page")
    page.close()
    assert path.is_relative_to(tmp_path) and path.read_bytes().startswith(b"\x89PNG")
    monkeypatch.setenv("COUNTERSIGN_UPDATE_SCREENSHOTS", "1")
    assert screenshot_path("smoke-page", tmp_path) == SCREENSHOTS_DIR / "smoke-page.png"
    assert Path(__file__).parents[2] / "docs" / "screenshots" == SCREENSHOTS_DIR
    with pytest.raises(ValueError):
        screenshot_path("../escape", tmp_path)


async def test_asyncio_tests_still_run_after_a_browser_test() -> None:
    """Playwright's sync API marks its loop running between calls; the `browser` fixture must clear that mark."""
    await asyncio.sleep(0)
