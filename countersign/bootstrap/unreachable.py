"""A database that cannot be reached, said in one line: which URL variable, which role, which host and port."""

from __future__ import annotations

from urllib.parse import urlsplit

# Which variable names the URL each role connects with (the engine and callbacks URLs default to DATABASE_URL's
# server with their own role: countersign/bootstrap/database.py with_user).
ROLE_VARIABLES = {
    "owner": "DATABASE_URL",
    "engine": "COUNTERSIGN_ENGINE_DATABASE_URL",
    "callbacks": "COUNTERSIGN_CALLBACKS_DATABASE_URL",
}


class DatabaseUnreachable(RuntimeError):
    """Connecting as `role` to `url` failed; the message names host, port, role and variable, never the password."""

    def __init__(self, role: str, url: str, cause: BaseException, *, variable: str | None = None) -> None:
        self.role = role
        self.variable = variable or ROLE_VARIABLES.get(role, "DATABASE_URL")
        parts = urlsplit(url)
        self.host = parts.hostname or "localhost (socket)"
        try:
            self.port = parts.port or 5432
        except ValueError:  # settings refuse such a URL; this message must still never become a traceback
            self.port = 5432
        self.user = parts.username or "(default user)"
        self.database = parts.path.lstrip("/") or "(default database)"
        super().__init__(
            f"cannot reach the database at {self.host}:{self.port} (database {self.database}, role {self.user}, "
            f"from {self.variable}): {reason(cause)}"
        )


def reason(exc: BaseException) -> str:
    """The driver's first meaningful line: `connection refused`, `password authentication failed ...`."""
    cause = getattr(exc, "orig", None) or exc  # SQLAlchemy wraps the driver's error
    text = " ".join(str(cause).split())
    for marker in ("failed: ", "error: "):
        if marker in text:
            text = text.rsplit(marker, 1)[-1]
    text = text.split(" Is the server running", 1)[0]
    return text.rstrip(".") or type(cause).__name__
