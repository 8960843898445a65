"""A local fake of the Bot Framework connector: token endpoint and conversation activities, over real HTTP.

For tests that run Countersign in another process, where respx cannot reach.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeTeamsConnector:
    activities: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (method, path, body)
    server: ThreadingHTTPServer | None = None
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeTeamsConnector:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                if self.path.startswith("/token"):
                    self._answer({"access_token": "fake-token", "expires_in": 3600, "token_type": "Bearer"})
                    return
                body = json.loads(raw) if raw else {}
                with fake._lock:
                    fake.activities.append((method, self.path, body))
                self._answer({"id": f"activity-{next(fake._ids)}"})

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PUT(self) -> None:
                self._handle("PUT")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
