"""The chat doors' fixtures and the owner connection, shared with the attacks written against them."""

from tests.bot.conftest import chat_api, chat_runtime, fake_teams_auth, teams_connector  # noqa: F401
from tests.test_database_boundary import owner  # noqa: F401
