"""The machinery of the board's browser tests: Debian's chromium under Playwright, a real `countersign serve`,
Chromium's virtual authenticator over CDP (passkeys), screenshots, and the fixtures over them, which conftest.py
imports: `board_server`, `chromium_session`, `browser`, `board_page`, `screenshot`.

Playwright's sync API marks its own event loop as the thread's running loop after every call, and leaves it marked
between calls. Left so, every pytest-asyncio test after the first browser test would fail ("Runner.run() cannot be
called from a running event loop"). `ChromiumSession` therefore marks the loop only while a browser test holds the
browser (`holding()`), and the fixtures in conftest.py take care of that. Browser tests are plain sync functions:
they reach the database with sync psycopg, or run async code (the services, `start_default_close`) through
`run_coroutine`, never through the async `conn` fixture.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import time
import weakref
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from playwright.sync_api import Browser, CDPSession, Page, Playwright, ViewportSize, sync_playwright

from countersign.bootstrap.database import Database
from countersign.bootstrap.settings import PROJECT_ROOT

CHROMIUM_MISSING = (
    "Debian's chromium is not installed (the board's browser tests drive it): run `apt-get install -y chromium` "
    "as root, or `make test`, which installs it"
)
CALLBACK_SECRET = "test-callback-secret"
SERVER_START_TIMEOUT_S = 60.0  # bound on `countersign serve` answering /healthz
SERVER_STOP_TIMEOUT_S = 30.0  # bound on `countersign serve` exiting after SIGTERM
LOG_TAIL_CHARS = 4000  # how much of the server's output a failure message carries
SCREENSHOTS_DIR = PROJECT_ROOT / "docs" / "screenshots"
UPDATE_SCREENSHOTS = "COUNTERSIGN_UPDATE_SCREENSHOTS"
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
SCREENSHOT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
INHERITED_ENV_DROPPED = ("COUNTERSIGN_", "DATABASE_URL", "SLACK_", "TEAMS_", "OTEL_")
"""The caller's own settings never leak into the server under test; PATH, HOME and the like do."""

AUTHENTICATOR_OPTIONS: dict[str, Any] = {
    "protocol": "ctap2",
    "transport": "internal",
    "hasResidentKey": True,
    "hasUserVerification": True,
    "isUserVerified": True,
    "automaticPresenceSimulation": True,
}
"""A platform passkey authenticator that verifies its user and answers without a touch."""

T = TypeVar("T")


# Chromium --------------------------------------------------------------------------------------------------------


def chromium_executable() -> str:
    """Debian's chromium on PATH; a browser test fails (never skips) without it."""
    path = shutil.which("chromium")
    if path is None:
        pytest.fail(CHROMIUM_MISSING, pytrace=False)
    return path


def chromium_args() -> list[str]:
    """Chromium's sandbox refuses to run as root; everywhere else it stays on."""
    return ["--no-sandbox"] if os.geteuid() == 0 else []


@dataclass
class ChromiumSession:
    """One Playwright driver and one headless chromium for the whole test session."""

    playwright: Playwright
    browser: Browser
    loop: asyncio.AbstractEventLoop | None

    @classmethod
    def start(cls) -> ChromiumSession:
        executable = chromium_executable()
        playwright = sync_playwright().start()
        try:
            browser = playwright.chromium.launch(executable_path=executable, headless=True, args=chromium_args())
        except BaseException:
            playwright.stop()
            raise
        session = cls(playwright, browser, asyncio._get_running_loop())
        asyncio._set_running_loop(None)  # released until a test holds the browser
        return session

    @contextmanager
    def holding(self) -> Iterator[Browser]:
        """The browser, with Playwright's loop marked running for as long as a sync test drives it."""
        if asyncio._get_running_loop() is not None:
            raise RuntimeError("a browser test must be a sync function; an asyncio loop is running in this thread")
        asyncio._set_running_loop(self.loop)
        try:
            yield self.browser
        finally:
            asyncio._set_running_loop(None)

    def stop(self) -> None:
        asyncio._set_running_loop(self.loop)
        try:
            self.browser.close()
        finally:
            self.playwright.stop()  # clears the mark once its loop has stopped
            asyncio._set_running_loop(None)


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` inside a browser test: Playwright's loop is unmarked while the coroutine runs on its own loop."""
    marked = asyncio._get_running_loop()
    asyncio._set_running_loop(None)
    try:
        return asyncio.run(coroutine)
    finally:
        asyncio._set_running_loop(marked)


# The real server --------------------------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def countersign_command() -> list[str]:
    """The `countersign` console script installed beside this interpreter (the venv's)."""
    script = Path(sys.executable).with_name("countersign")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "countersign.cli.main"]


@dataclass(frozen=True)
class BoardServer:
    """A running `countersign serve` on the test database, reached as http://localhost:PORT (a secure context)."""

    base_url: str
    port: int
    database: Database
    env: Mapping[str, str]
    process: subprocess.Popen[bytes] = field(repr=False)
    log_path: Path

    def url(self, path: str) -> str:
        return self.base_url + path

    def log(self) -> str:
        """What the server printed so far (uvicorn's access log included)."""
        return self.log_path.read_text(errors="replace")


def board_server_env(
    database: Database, state_dir: Path, port: int, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The server's environment: the test database as owner, its own state dir. COUNTERSIGN_BOARD_URL is left unset:
    `serve --port PORT` puts the board at http://localhost:PORT itself, so every browser test's passkeys (bound to
    that origin) show the board following the port."""
    if database.url is None:
        raise ValueError("the board server needs the test database's owner URL (it runs as the test's owner)")
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(INHERITED_ENV_DROPPED)}
    return {
        **inherited,
        "DATABASE_URL": database.url,
        "COUNTERSIGN_STATE_DIR": str(state_dir),
        "COUNTERSIGN_CALLBACK_SECRET": CALLBACK_SECRET,
        **(extra or {}),
    }


@contextmanager
def run_board_server(
    database: Database, work_dir: Path, extra_env: Mapping[str, str] | None = None
) -> Iterator[BoardServer]:
    """Start `countersign serve` on a free port, wait for /healthz, and stop it (SIGTERM, then SIGKILL) at the end."""
    work_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = board_server_env(database, work_dir / "state", port, extra_env)
    log_path = work_dir / "countersign-serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*countersign_command(), "serve", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = BoardServer(f"http://localhost:{port}", port, database, env, process, log_path)
    try:
        _wait_healthy(server)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=SERVER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_healthy(server: BoardServer) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    health = f"http://127.0.0.1:{server.port}/healthz"
    while True:
        if server.process.poll() is not None:
            raise AssertionError(
                f"`countersign serve` exited with {server.process.returncode}:\n{server.log()[-LOG_TAIL_CHARS:]}"
            )
        try:
            if httpx.get(health, timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(
                f"`countersign serve` did not answer /healthz within {SERVER_START_TIMEOUT_S:.0f} s:\n"
                f"{server.log()[-LOG_TAIL_CHARS:]}"
            )
        time.sleep(0.1)


# The virtual authenticator ----------------------------------------------------------------------------------------

_CDP_SESSIONS: weakref.WeakKeyDictionary[Page, CDPSession] = weakref.WeakKeyDictionary()


def _cdp(page: Page) -> CDPSession:
    """One CDP session per page: the WebAuthn domain's authenticators belong to the session that added them."""
    session = _CDP_SESSIONS.get(page)
    if session is None:
        session = page.context.new_cdp_session(page)
        session.send("WebAuthn.enable")
        _CDP_SESSIONS[page] = session
    return session


def add_virtual_authenticator(page: Page, **options: Any) -> str:
    """A passkey authenticator for this page (AUTHENTICATOR_OPTIONS, overridden by `options`); returns its id."""
    answer = _cdp(page).send("WebAuthn.addVirtualAuthenticator", {"options": {**AUTHENTICATOR_OPTIONS, **options}})
    return str(answer["authenticatorId"])


def virtual_credentials(page: Page, authenticator_id: str) -> list[dict[str, Any]]:
    """The authenticator's credentials as CDP reports them: credentialId (base64), rpId, userHandle, signCount..."""
    answer = _cdp(page).send("WebAuthn.getCredentials", {"authenticatorId": authenticator_id})
    return list(answer["credentials"])


def set_user_verified(page: Page, authenticator_id: str, verified: bool) -> None:
    """Whether the authenticator's next ceremonies report the user as verified (a failed fingerprint, say)."""
    _cdp(page).send("WebAuthn.setUserVerified", {"authenticatorId": authenticator_id, "isUserVerified": verified})


def remove_virtual_authenticator(page: Page, authenticator_id: str) -> None:
    """The authenticator and its credentials go; the page's next ceremony finds no passkey."""
    _cdp(page).send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": authenticator_id})


# Screenshots ------------------------------------------------------------------------------------------------------


def screenshot_path(name: str, scratch_dir: Path) -> Path:
    """docs/screenshots/NAME.png when COUNTERSIGN_UPDATE_SCREENSHOTS=1, else NAME.png in the test's own tmp dir."""
    if not SCREENSHOT_NAME.fullmatch(name):
        raise ValueError(f"screenshot name {name!r}: lower-case letters, digits, '-' and '_' only")
    directory = SCREENSHOTS_DIR if os.environ.get(UPDATE_SCREENSHOTS) == "1" else scratch_dir
    return directory / f"{name}.png"


def save_screenshot(page: Page, name: str, scratch_dir: Path) -> Path:
    """The whole page as a PNG at `screenshot_path(name, scratch_dir)`; returns where it went."""
    path = screenshot_path(name, scratch_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path


# Fixtures ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def board_server(database: Database, tmp_path: Path) -> Iterator[BoardServer]:
    """`countersign serve` against this test's fresh database, at http://localhost:PORT; stopped when the test ends."""
    with run_board_server(database, tmp_path / "board-server") as server:
        yield server


@pytest.fixture(scope="session")
def chromium_session() -> Iterator[ChromiumSession]:
    """One Playwright driver and chromium for the session; tests reach it through `browser`."""
    session = ChromiumSession.start()
    yield session
    session.stop()


@pytest.fixture
def browser(chromium_session: ChromiumSession) -> Iterator[Browser]:
    """The session's chromium, held for this sync test only (so asyncio tests after it still run)."""
    with chromium_session.holding() as held:
        yield held


@pytest.fixture
def board_page(board_server: BoardServer, browser: Browser) -> Iterator[Page]:
    """A page in a fresh context (no cookies, no authenticators) whose relative URLs go to `board_server`."""
    context = browser.new_context(base_url=board_server.base_url, viewport=VIEWPORT, locale="en-GB")
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def screenshot(tmp_path: Path) -> Callable[[Page, str], Path]:
    """`screenshot(page, name)`: the whole page as a PNG in tmp_path (docs/screenshots/ when asked); its path."""

    def take(page: Page, name: str) -> Path:
        return save_screenshot(page, name, tmp_path / "screenshots")

    return take
