"""The chat fixtures of tests/bot, shared with the fuzz tests (conftest fixtures are visible per directory)."""

from tests.bot.conftest import chat_api, chat_runtime, fake_teams_auth, teams_connector

__all__ = ["chat_api", "chat_runtime", "fake_teams_auth", "teams_connector"]
