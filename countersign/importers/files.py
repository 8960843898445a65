"""Reading an input file whole, within a size bound: the one way every statement reader takes its bytes."""

from __future__ import annotations

from pathlib import Path

from countersign.importers.errors import ImportFileError


def read_bounded(path: Path, file: str, max_bytes: int) -> bytes:
    """The bytes of `path` (shown as `file`), refused past `max_bytes` before more than that is read."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ImportFileError(file, "", "(size)", f"expected at most {max_bytes:,} bytes, found {size:,}")
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise ImportFileError(file, "", "(file)", f"cannot be read: {error.strerror or error}") from None
    if len(data) > max_bytes:  # the file grew between stat and read
        raise ImportFileError(file, "", "(size)", f"expected at most {max_bytes:,} bytes, found more")
    return data
