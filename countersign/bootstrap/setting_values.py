"""Checks of single setting values, no Settings needed: URLs, DSNs, paths, and how a secret is shown.

Pure except for looking at the file system (`writable_directory_problem`, `is_dir`, `is_file`); settings.py calls
them from its field validators and from `load_settings()`.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

from pydantic import AnyHttpUrl, PostgresDsn, TypeAdapter, ValidationError


def writable_directory_problem(path: Path) -> str | None:
    """Why this process could not write files into `path` (creating it and its parents first), or None."""
    try:
        if path.exists():
            if not path.is_dir():
                return f"{path} is not a directory"
            if not os.access(path, os.W_OK | os.X_OK):
                return f"{path} is not writable by this user"
            return None
        ancestor = path.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            return f"{path} cannot be created: {ancestor} is a file, not a directory"
        if not os.access(ancestor, os.W_OK | os.X_OK):
            return f"{path} cannot be created: {ancestor} is not writable by this user"
    except OSError as exc:
        return f"{path} cannot be used: {exc.strerror or exc}"
    return None


def is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


def is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


@cache
def _postgres_dsn() -> TypeAdapter[PostgresDsn]:
    return TypeAdapter(PostgresDsn)


@cache
def _http_url() -> TypeAdapter[AnyHttpUrl]:
    return TypeAdapter(AnyHttpUrl)


def postgres_url_problem(value: str) -> None:
    """Raise ValueError saying what is wrong with a PostgreSQL URL, never echoing it (it may hold a password).

    Checked by pydantic's PostgresDsn, with our own words first for the usual mistakes. libpq's Unix-socket form
    (an empty host with `?host=/socket/dir`, as the embedded PostgreSQL gives) is accepted.
    """
    scheme, sep, _ = value.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a postgresql:// URL ({scheme_of(value)})")
    try:
        parts = urlsplit(value)
        socket = bool(parse_qs(parts.query).get("host"))
    except ValueError:
        raise ValueError("not a valid URL (want postgresql://user:password@host:port/database)") from None
    userinfo, at, hosts = parts.netloc.rpartition("@")
    for entry in hosts.split(","):
        host, port = _host_and_port(entry)
        if port is not None and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            raise ValueError("the port after the host must be a number from 1 to 65535")
        if not host and not socket:
            raise ValueError("no host (want postgresql://user:password@host:port/database, or ?host=/socket/dir)")
    if socket and not hosts.replace(",", "").strip(":0123456789"):
        # pydantic requires a host; the socket form has none, so check the rest of the URL with a stand-in.
        value = urlunsplit(parts._replace(netloc=f"{userinfo}{at}localhost"))
    try:
        _postgres_dsn().validate_python(value)
    except ValidationError as exc:
        raise ValueError(f"not a valid PostgreSQL URL: {_url_reason(exc)}") from None


def http_url_problem(value: str) -> None:
    """Raise ValueError saying what pydantic's AnyHttpUrl finds wrong with an http(s) URL (a port, the host)."""
    try:
        _http_url().validate_python(value)
    except ValidationError as exc:
        raise ValueError(f"not a valid http(s) URL: {_url_reason(exc)}") from None
    try:
        port = urlsplit(value).port
    except ValueError:
        port = None
    if port == 0:
        raise ValueError("not a valid http(s) URL: port 0")


def _host_and_port(entry: str) -> tuple[str, str | None]:
    """`host:port`, `[v6]:port`, `host` or `:port` split; the port None when absent."""
    if entry.startswith("["):
        host, _, rest = entry.partition("]")
        return host + "]", rest.removeprefix(":") if rest else None
    host, colon, port = entry.partition(":")
    return host, port if colon else None


def _url_reason(exc: ValidationError) -> str:
    """pydantic's reason without its preamble or the input (which may hold a password)."""
    error = exc.errors()[0]
    return str(error.get("msg", "invalid")).removeprefix("Input should be a valid URL, ")


def scheme_of(value: str) -> str:
    head, sep, _ = value.partition("://")
    return f"scheme {head!r}" if sep else "no scheme"


def redact(value: str) -> str:
    """A secret shown as `***` plus at most its last 4 characters (none of a short one)."""
    return "***" + (value[-4:] if len(value) >= 16 else "")


def dsn_without_password(url: str) -> str:
    """A database URL with its password replaced by `***` (host, port, role and database stay readable).

    A URL that does not parse, or whose "port" is not a number (`user:password/db`, the `@host` forgotten), is shown
    with `***` for whatever could be a password.
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # a stray bracket
        return url.partition("://")[0] + "://*** (not a valid URL)"
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if not at:
        shown = ",".join(_host_and_port_hidden(entry) for entry in hosts.split(","))
        return urlunsplit(parts._replace(netloc=shown))
    if ":" not in userinfo:
        return url
    return urlunsplit(parts._replace(netloc=f"{userinfo.partition(':')[0]}:***@{hosts}"))


def _host_and_port_hidden(entry: str) -> str:
    host, port = _host_and_port(entry)
    return entry if port is None or port.isdigit() else f"{host}:***"
