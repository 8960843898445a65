"""The one error every importer raises: which file, where in it, which field, and what was expected."""

from __future__ import annotations


class ImportFileError(ValueError):
    """A file that cannot be imported as given. Nothing is written or loaded when one is raised.

    `location` is where in the file: `line 12`, `row 7`, `statement STMT-2`, `entry 3 of statement STMT-2`
    (empty when the whole file is at fault). `field` is the column, tag or key; `reason` says what was expected
    and what was found.
    """

    def __init__(self, file: str, location: str, field: str, reason: str) -> None:
        where = f"{file} {location}".strip() if location else file
        super().__init__(f"{where}: {field}: {reason}")
        self.file = file
        self.location = location
        self.field = field
        self.reason = reason
