"""A local fake of the Slack Web API: a real HTTP server on loopback that answers GET and POST and records calls.

Modelled on slack-bolt's own `tests/mock_web_api_server`. Only the methods Countersign calls are implemented. It also
stands in for a slash command's `response_url` (`/respond/...`): each POST there is recorded as a `response_url` call
whose params are the JSON answer (`response_type`, `text`, `blocks`).
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse


@dataclass
class Call:
    method: str
    http_method: str
    params: dict[str, Any]
    body: bytes = b""


@dataclass
class FakeSlack:
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    uploads: dict[str, bytes] = field(default_factory=dict)
    views: list[dict[str, Any]] = field(default_factory=list)  # opened with views.open, each with its id
    fail_next: dict[str, list[tuple[int, dict[str, str], dict[str, Any]]]] = field(default_factory=dict)
    _ts: Any = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    hanging: dict[str, float] = field(default_factory=dict)  # method -> seconds it takes to answer
    _unhang: threading.Event = field(default_factory=threading.Event)
    running: ClassVar[FakeSlack | None] = None  # the one started last: slash commands built in tests answer to it

    @property
    def response_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        assert isinstance(host, str)
        return f"http://{host}:{port}/respond/commands"

    def opened_views(self) -> list[dict[str, Any]]:
        """The views opened with `views.open`, in order, as Slack would show them (each with its `id`)."""
        with self._lock:
            return list(self.views)

    def responses(self) -> list[dict[str, Any]]:
        """The answers posted to response_url, in order."""
        return [c.params for c in self.calls_to("response_url")]

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/api/"

    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def add_user(
        self, user_id: str, *, team: str, is_bot: bool = False, is_app_user: bool = False, deleted: bool = False
    ) -> None:
        self.users[user_id] = {
            "id": user_id,
            "team_id": team,
            "name": user_id.lower(),
            "is_bot": is_bot,
            "is_app_user": is_app_user,
            "deleted": deleted,
        }

    def fail(
        self,
        method: str,
        status: int,
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        times: int = 1,
    ) -> None:
        self.fail_next.setdefault(method, []).extend(
            [(status, headers or {}, body or {"ok": False, "error": "fake_failure"})] * times
        )

    def hang(self, *methods: str, seconds: float = 45.0) -> None:
        """Make these methods answer only after `seconds` (a Slack that hangs); `stop` releases them at once."""
        self._unhang.clear()
        self.hanging.update({method: seconds for method in methods})

    def hang_if_asked(self, method: str) -> None:
        seconds = self.hanging.get(method)
        if seconds:
            self._unhang.wait(seconds)

    def answer(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, str], dict[str, Any]]:
        with self._lock:
            queued = self.fail_next.get(method)
            if queued:
                return queued.pop(0)
        if method == "auth.test":
            return 200, {}, {"ok": True, "user_id": "UBOT", "bot_id": "BBOT", "team_id": "T01ACME", "team": "ACME"}
        if method == "users.info":
            user = self.users.get(str(params.get("user")))
            if user is None:
                return 200, {}, {"ok": False, "error": "user_not_found"}
            return 200, {}, {"ok": True, "user": user}
        if method in ("chat.postMessage", "chat.update"):
            ts = params.get("ts") or f"1700000000.{next(self._ts):06d}"
            return 200, {}, {"ok": True, "channel": params.get("channel"), "ts": ts}
        if method == "views.open":  # the decision form: answered with the view Slack would now show, given an id
            view = params.get("view")
            parsed = json.loads(view) if isinstance(view, str) else view
            if not params.get("trigger_id") or not isinstance(parsed, dict):
                return 200, {}, {"ok": False, "error": "invalid_arguments"}
            opened = {**parsed, "id": f"V{next(self._ts):08d}"}
            with self._lock:
                self.views.append(opened)
            return 200, {}, {"ok": True, "view": opened}
        if method == "conversations.open":  # a direct message with one user: its channel id is D + the user id
            user = self.users.get(str(params.get("users")))
            if user is None or user["deleted"]:
                return 200, {}, {"ok": False, "error": "user_not_found"}
            return 200, {}, {"ok": True, "channel": {"id": f"D{user['id']}", "is_im": True}}
        if method == "chat.postEphemeral":
            return 200, {}, {"ok": True, "message_ts": f"1700000001.{next(self._ts):06d}"}
        if method == "files.getUploadURLExternal":
            file_id = f"F{next(self._ts):08d}"
            return (
                200,
                {},
                {"ok": True, "file_id": file_id, "upload_url": self.url.replace("/api/", f"/upload/{file_id}")},
            )
        if method == "files.completeUploadExternal":
            files = params.get("files")
            parsed = json.loads(files) if isinstance(files, str) else files
            return 200, {}, {"ok": True, "files": [{"id": f["id"], "title": f.get("title")} for f in parsed or []]}
        if method == "files.info":
            return 200, {}, {"ok": True, "file": {"id": params.get("file")}}
        return 200, {}, {"ok": False, "error": "unknown_method"}

    def start(self) -> FakeSlack:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _params(self, body: bytes) -> dict[str, Any]:
                query = {k: v[0] for k, v in parse_qs(urlparse(self.path).query).items()}
                ctype = self.headers.get("content-type", "")
                if body and "json" in ctype:
                    query.update(json.loads(body))
                elif body and "x-www-form-urlencoded" in ctype:
                    query.update({k: v[0] for k, v in parse_qs(body.decode()).items()})
                return query

            def _handle(self, http_method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                path = urlparse(self.path).path
                if path.startswith("/upload/"):
                    file_id = path.rsplit("/", 1)[-1]
                    with fake._lock:
                        fake.uploads[file_id] = body
                        fake.calls.append(Call("upload", http_method, {"file_id": file_id}, body))
                    self.send_response(200)
                    self.end_headers()
                    self.wfile.write(b"OK")
                    return
                if path.startswith("/respond/"):
                    method = "response_url"
                    params = json.loads(body) if body else {}
                    with fake._lock:
                        fake.calls.append(Call(method, http_method, params, body))
                    self.send_response(200)
                    self.send_header("content-length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                    return
                method = path.removeprefix("/api/")
                params = self._params(body)
                with fake._lock:
                    fake.calls.append(Call(method, http_method, params, body))
                fake.hang_if_asked(method)
                status, headers, payload = fake.answer(method, params)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        FakeSlack.running = self
        return self

    def stop(self) -> None:
        if FakeSlack.running is self:
            FakeSlack.running = None
        self._unhang.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
