"""Teams bot types Azure registers (TEAMS_APP_TYPE): outbound tokens from msal per type, inbound tenant issuers."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
import respx
from botbuilder.schema import Activity

from countersign.bot.teams import build_authentication, tenant_issuers
from countersign.delivery.worker import DeliveryError, TeamsSender
from tests.bot.conftest import SERVICE_URL, TEAMS_APP_ID
from tests.fakes.teams_auth import FakeBotFrameworkAuth

BOARD_URL = "https://close.example.com"

TENANT_ID = "0b5f7d2e-1111-4c1a-9e1e-0123456789ab"
LOGIN = "https://login.microsoftonline.com"
IMDS = "http://169.254.169.254/metadata/identity/oauth2/token"
CONVERSATION = "19:close@thread.tacv2"


def _authority_routes(router: respx.MockRouter, tenant: str, token: httpx.Response | None = None) -> respx.Route:
    """A tenant's OpenID configuration (msal reads it first) and its token endpoint; returns the token route."""
    router.get(f"{LOGIN}/{tenant}/v2.0/.well-known/openid-configuration").mock(
        return_value=httpx.Response(
            200,
            json={
                "token_endpoint": f"{LOGIN}/{tenant}/oauth2/v2.0/token",
                "authorization_endpoint": f"{LOGIN}/{tenant}/oauth2/v2.0/authorize",
                "issuer": f"{LOGIN}/{tenant}/v2.0",
            },
        )
    )
    return router.post(f"{LOGIN}/{tenant}/oauth2/v2.0/token").mock(
        return_value=token
        or httpx.Response(
            200, json={"access_token": f"token-from-{tenant}", "token_type": "Bearer", "expires_in": 3600}
        )
    )


def _activities(router: respx.MockRouter) -> respx.Route:
    return router.post(url__startswith=SERVICE_URL.rstrip("/") + "/v3/conversations/").mock(
        return_value=httpx.Response(200, json={"id": "activity-1"})
    )


@pytest.mark.parametrize(("app_type", "authority"), [("SingleTenant", TENANT_ID), ("MultiTenant", "botframework.com")])
async def test_a_password_bot_gets_its_token_from_its_authority(app_type: str, authority: str) -> None:
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        token = _authority_routes(router, authority)
        activities = _activities(router)
        sender = TeamsSender(
            TEAMS_APP_ID,
            "app-password",
            SERVICE_URL,
            board_url=BOARD_URL,
            locale=None,
            app_type=app_type,
            tenant_id=TENANT_ID,
        )
        for _ in range(2):  # msal caches the token: one token request for two sends
            await sender.send_activity(SERVICE_URL, CONVERSATION, {"type": "message", "text": "hi"})
    assert token.call_count == 1
    form = parse_qs(token.calls[0].request.content.decode())
    assert form["client_id"] == [TEAMS_APP_ID] and form["grant_type"] == ["client_credentials"]
    assert form["scope"] == ["https://api.botframework.com/.default"]
    assert activities.call_count == 2
    assert activities.calls[0].request.headers["authorization"] == f"Bearer token-from-{authority}"


async def test_a_user_assigned_managed_identity_gets_its_token_from_imds_without_a_secret() -> None:
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        imds = router.get(url__startswith=IMDS).mock(
            return_value=httpx.Response(
                200,
                json={
                    "access_token": "msi-token",
                    "expires_in": "3600",
                    "token_type": "Bearer",
                    "resource": "https://api.botframework.com",
                },
            )
        )
        activities = _activities(router)
        sender = TeamsSender(
            TEAMS_APP_ID,
            None,
            SERVICE_URL,
            board_url=BOARD_URL,
            locale=None,
            app_type="UserAssignedMSI",
            tenant_id=TENANT_ID,
        )
        await sender.send_activity(SERVICE_URL, CONVERSATION, {"type": "message", "text": "hi"})
    request = imds.calls[0].request
    assert request.url.params["client_id"] == TEAMS_APP_ID
    assert request.url.params["resource"] == "https://api.botframework.com"
    assert request.headers["metadata"] == "true"
    assert activities.calls[0].request.headers["authorization"] == "Bearer msi-token"


async def test_no_token_is_a_retryable_delivery_error_without_the_secret() -> None:
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        refused = httpx.Response(401, json={"error": "invalid_client", "error_description": "bad secret"})
        _authority_routes(router, TENANT_ID, refused)
        sender = TeamsSender(
            TEAMS_APP_ID,
            "wrong-password",
            SERVICE_URL,
            board_url=BOARD_URL,
            locale=None,
            app_type="SingleTenant",
            tenant_id=TENANT_ID,
        )
        with pytest.raises(DeliveryError) as raised:
            await sender.send_activity(SERVICE_URL, CONVERSATION, {"type": "message", "text": "hi"})
    assert "invalid_client" in str(raised.value) and "wrong-password" not in str(raised.value)
    assert raised.value.permanent is False


# --- inbound -------------------------------------------------------------------------------------------------------


def _activity() -> Activity:
    return Activity(type="message", channel_id="msteams", service_url=SERVICE_URL, text="close status")


def _auth(fake: FakeBotFrameworkAuth, app_type: str) -> Any:
    return build_authentication(
        TEAMS_APP_ID,
        "app-password" if app_type != "UserAssignedMSI" else None,
        fake.metadata_url,
        app_type=app_type,
        tenant_id=TENANT_ID if app_type != "MultiTenant" else None,
        tenant_openid_metadata_url=fake.metadata_url,  # the fake serves one key set for both issuers
    )


@pytest.mark.parametrize("issuer", tenant_issuers(TENANT_ID))
@pytest.mark.parametrize("app_type", ["SingleTenant", "UserAssignedMSI"])
async def test_a_single_tenant_bot_accepts_its_tenants_tokens_and_the_channels(
    fake_teams_auth: FakeBotFrameworkAuth, app_type: str, issuer: str
) -> None:
    auth = _auth(fake_teams_auth, app_type)
    tenant_token = fake_teams_auth.token(app_id=TEAMS_APP_ID, service_url=SERVICE_URL, issuer=issuer)
    identity = await auth.authenticate_request(_activity(), f"Bearer {tenant_token}")
    assert identity.get_claim_value("iss") == issuer
    channel_token = fake_teams_auth.token(app_id=TEAMS_APP_ID, service_url=SERVICE_URL)
    assert (await auth.authenticate_request(_activity(), f"Bearer {channel_token}")).is_authenticated


@pytest.mark.parametrize(
    ("app_type", "claims"),
    [
        ("MultiTenant", {"issuer": f"{LOGIN}/{TENANT_ID}/v2.0"}),  # a multi-tenant bot takes no tenant's tokens
        ("SingleTenant", {"issuer": f"{LOGIN}/another-tenant/v2.0"}),
        ("SingleTenant", {"issuer": f"{LOGIN}/{TENANT_ID}/v2.0", "audience": "another-app"}),
        ("SingleTenant", {"issuer": f"{LOGIN}/{TENANT_ID}/v2.0", "service_url": "https://evil.example/"}),
        ("SingleTenant", {"issuer": f"{LOGIN}/{TENANT_ID}/v2.0", "expires_in_s": -600}),
    ],
)
async def test_tokens_from_elsewhere_are_refused(
    fake_teams_auth: FakeBotFrameworkAuth, app_type: str, claims: dict[str, Any]
) -> None:
    auth = _auth(fake_teams_auth, app_type)
    token = fake_teams_auth.token(app_id=TEAMS_APP_ID, **{"service_url": SERVICE_URL, **claims})
    with pytest.raises(Exception):  # noqa: B017 - the SDK raises many types; the adapter maps each to 401
        await auth.authenticate_request(_activity(), f"Bearer {token}")
