"""The one error a pay application that cannot be read raises: which file, where in it, which field, and why."""

from __future__ import annotations


class ApplicationError(ValueError):
    """A pay application is unreadable or holds a bad figure.

    `file` is the file's name (never its directory), `place` where in it ("row 12", "sheet Summary, row 12",
    "page 2, row 'Retention held'"; empty for the whole file), `field` the certificate field or column concerned.
    """

    def __init__(self, file: str, place: str, field: str, reason: str) -> None:
        where = f"{file}, {place}" if place else file
        super().__init__(f"{where}: {field}: {reason}")
        self.file = file
        self.place = place
        self.field = field
        self.reason = reason
