"""Wiring the chat platforms: which channels gate cards go to, and the senders that deliver them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from countersign.bootstrap.settings import Settings
from countersign.cards.targets import ChannelTarget
from countersign.states import ChatPlatform

if TYPE_CHECKING:
    from countersign.delivery.worker import TeamsSender


class ChatConfigError(RuntimeError):
    pass


def check_chat_settings(settings: Settings) -> None:
    """Refuse to start with a channel half-configured: a missing secret would mean unauthenticated requests."""
    if settings.slack_enabled and not (settings.slack_bot_token and settings.slack_signing_secret):
        raise ChatConfigError("Slack is enabled but SLACK_BOT_TOKEN or SLACK_SIGNING_SECRET is missing")
    if settings.teams_enabled:
        if not settings.teams_app_id:
            raise ChatConfigError("TEAMS_APP_ID is empty: the Bot Framework SDK would skip authentication")
        if not settings.teams_app_password and settings.teams_app_type != "UserAssignedMSI":
            raise ChatConfigError("Teams is enabled but TEAMS_APP_PASSWORD is missing")
        if settings.teams_app_type != "MultiTenant" and not settings.teams_app_tenant_id:
            raise ChatConfigError(f"TEAMS_APP_TENANT_ID is required for TEAMS_APP_TYPE={settings.teams_app_type}")


def check_allow_lists(settings: Settings) -> None:
    """The server answers only listed Slack teams and Teams tenants: refuse to serve a platform with no list."""
    # Without an allow-list any workspace or tenant that installs the app could talk to this server.
    if settings.slack_enabled and not settings.slack_team_ids:
        raise ChatConfigError("Slack is enabled but COUNTERSIGN_SLACK_TEAM_IDS (the allowed team ids) is empty")
    if settings.teams_enabled and not settings.teams_tenant_ids:
        raise ChatConfigError("Teams is enabled but COUNTERSIGN_TEAMS_TENANT_IDS (the allowed tenant ids) is empty")


def channel_targets(settings: Settings) -> tuple[ChannelTarget, ...]:
    targets = []
    if settings.slack_enabled and settings.slack_channel:
        targets.append(ChannelTarget(ChatPlatform.SLACK, settings.slack_channel))
    if settings.teams_enabled and settings.teams_conversation:
        targets.append(ChannelTarget(ChatPlatform.TEAMS, settings.teams_conversation))
    return tuple(targets)


def build_senders(settings: Settings) -> dict[str, object]:
    from slack_sdk.web.async_client import AsyncWebClient

    from countersign.delivery.worker import SlackSender

    senders: dict[str, object] = {}
    if settings.slack_bot_token:
        client = (
            AsyncWebClient(token=settings.slack_bot_token, base_url=settings.slack_api_url)
            if settings.slack_api_url
            else AsyncWebClient(token=settings.slack_bot_token)
        )
        senders["slack"] = SlackSender(client, board_url=settings.board_url, locale=settings.locale)
    teams_ready = settings.teams_app_password or settings.teams_app_type == "UserAssignedMSI"
    if settings.teams_app_id and teams_ready and settings.teams_service_url:
        senders["teams"] = teams_sender(settings)
    return senders


def teams_sender(settings: Settings) -> TeamsSender:
    """The Bot Framework connector client; its tokens come from msal per TEAMS_APP_TYPE
    (countersign/bot/teams_tokens.py)."""
    from countersign.delivery.worker import TeamsSender

    assert settings.teams_app_id
    return TeamsSender(
        settings.teams_app_id,
        settings.teams_app_password,
        settings.teams_service_url or "",
        board_url=settings.board_url,
        locale=settings.locale,
        token_url=settings.teams_token_url,
        app_type=settings.teams_app_type,
        tenant_id=settings.teams_app_tenant_id,
    )
