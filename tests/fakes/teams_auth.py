"""Locally signed Bot Framework tokens: an RSA key of our own, served as OpenID metadata + JWKS on loopback.

The SDK fetches metadata with `requests`, so this is a real HTTP server rather than a respx route.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = "https://api.botframework.com"


def _b64(n: int) -> str:
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass
class FakeBotFrameworkAuth:
    kid: str = "countersign-test-key"
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    server: ThreadingHTTPServer | None = None

    @property
    def metadata_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1/.well-known/openidconfiguration"

    def jwks(self) -> dict[str, Any]:
        numbers = self.key.public_key().public_numbers()
        return {
            "keys": [
                {
                    "kty": "RSA",
                    "use": "sig",
                    "kid": self.kid,
                    "n": _b64(numbers.n),
                    "e": _b64(numbers.e),
                    "endorsements": ["msteams"],
                }
            ]
        }

    def start(self) -> FakeBotFrameworkAuth:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                host, port = fake.server.server_address[:2]  # type: ignore[union-attr]
                if self.path.endswith("openidconfiguration"):
                    body = {
                        "issuer": ISSUER,
                        "jwks_uri": f"http://{host}:{port}/v1/keys",
                        "id_token_signing_alg_values_supported": ["RS256"],
                        "token_endpoint_auth_methods_supported": ["private_key_jwt"],
                    }
                else:
                    body = fake.jwks()
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def token(
        self,
        *,
        app_id: str,
        service_url: str,
        issuer: str = ISSUER,
        audience: str | None = None,
        expires_in_s: int = 600,
        kid: str | None = None,
        signing_key: rsa.RSAPrivateKey | None = None,
    ) -> str:
        now = int(time.time())
        claims = {
            "iss": issuer,
            "aud": audience or app_id,
            "iat": now - 10,
            "nbf": now - 10,
            "exp": now + expires_in_s,
            "serviceurl": service_url,
        }
        return jwt.encode(claims, signing_key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})
