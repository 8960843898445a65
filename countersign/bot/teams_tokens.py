"""Outbound Bot Framework tokens from msal, for each bot type Azure registers (TEAMS_APP_TYPE).

- MultiTenant: client credentials (app id + password) at the `botframework.com` authority.
- SingleTenant: client credentials at the bot's own tenant authority (TEAMS_APP_TENANT_ID).
- UserAssignedMSI: no secret; the user-assigned managed identity whose client id is the app id, from the Azure
  Instance Metadata Service (IMDS) of the machine the bot runs on.

msal caches tokens and refreshes them before they expire. It is synchronous (its HTTP client is requests-like), so
calls run in a worker thread; the HTTP client is an `httpx.Client`, which tests fake with respx.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

import httpx
import msal

BOT_FRAMEWORK_SCOPE = "https://api.botframework.com/.default"
BOT_FRAMEWORK_RESOURCE = "https://api.botframework.com"
LOGIN_HOST = "https://login.microsoftonline.com"
MULTI_TENANT_AUTHORITY = f"{LOGIN_HOST}/botframework.com"
TIMEOUT_S = 10.0


class TokenUnavailable(RuntimeError):
    """msal returned no token: the error and its description, never the secret."""


def authority_for(app_type: str, tenant_id: str | None) -> str:
    if app_type == "SingleTenant":
        if not tenant_id:
            raise TokenUnavailable("TEAMS_APP_TENANT_ID is required for a SingleTenant bot")
        return f"{LOGIN_HOST}/{tenant_id}"
    return MULTI_TENANT_AUTHORITY


@dataclass
class BotFrameworkTokens:
    app_id: str
    app_password: str | None
    app_type: str = "MultiTenant"
    tenant_id: str | None = None
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=TIMEOUT_S))
    _client: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def token(self) -> str:
        return await asyncio.to_thread(self._token)

    def _token(self) -> str:
        with self._lock:  # one msal client per process, built on first use (it fetches the authority's metadata)
            if self._client is None:
                self._client = self._build()
            client = self._client
        if self.app_type == "UserAssignedMSI":
            result = client.acquire_token_for_client(resource=BOT_FRAMEWORK_RESOURCE)
        else:
            result = client.acquire_token_for_client(scopes=[BOT_FRAMEWORK_SCOPE])
        if "access_token" not in result:
            raise TokenUnavailable(
                f"no Bot Framework token ({self.app_type}): {result.get('error')}: "
                f"{str(result.get('error_description', ''))[:200]}"
            )
        return str(result["access_token"])

    def _build(self) -> Any:
        if self.app_type == "UserAssignedMSI":
            return msal.ManagedIdentityClient(
                msal.UserAssignedManagedIdentity(client_id=self.app_id), http_client=self.http
            )
        if not self.app_password:
            raise TokenUnavailable(f"TEAMS_APP_PASSWORD is required for a {self.app_type} bot")
        return msal.ConfidentialClientApplication(
            self.app_id,
            client_credential=self.app_password,
            authority=authority_for(self.app_type, self.tenant_id),
            http_client=self.http,
            instance_discovery=False,  # a known public-cloud authority: no discovery round trip, also not on errors
        )
