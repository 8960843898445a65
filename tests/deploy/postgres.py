"""A PostgreSQL that behaves like the stock `postgres:16` image on its network: SCRAM over TCP, nothing else.

Started from the pgserver wheel's binaries in a temporary folder: `password_encryption = scram-sha-256`, a
`pg_hba.conf` whose only rule demands scram-sha-256 from 127.0.0.1, no Unix socket, and the owner created by initdb
with a password (as the image does with POSTGRES_USER and POSTGRES_PASSWORD).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg


@dataclass(frozen=True)
class ScramServer:
    host: str
    port: int
    owner: str
    password: str
    database: str

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def url(self, user: str | None = None, password: str | None = None, database: str | None = None) -> str:
        return (
            f"postgresql://{user or self.owner}:{self.password if password is None else password}"
            f"@{self.address}/{database or self.database}"
        )


def pg_bin_dir() -> Path:
    import pgserver

    found = Path(pgserver.__file__).resolve().parent / "pginstall" / "bin"
    assert (found / "initdb").is_file() and (found / "pg_ctl").is_file(), f"no PostgreSQL binaries in {found}"
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _system_user(folder: Path) -> str | None:
    """PostgreSQL refuses to run as root: as root, run it as pgserver's own system user (created when missing)."""
    if os.geteuid() != 0:
        return None
    import pwd

    from pgserver.utils import ensure_prefix_permissions, ensure_user_exists

    user = "pgserver"
    ensure_user_exists(user)
    ensure_prefix_permissions(folder)
    entry = pwd.getpwnam(user)
    for path in (folder, *folder.rglob("*")):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return user


@contextmanager
def scram_postgres(folder: Path, *, owner: str, password: str, database: str) -> Iterator[ScramServer]:
    folder.mkdir(parents=True, exist_ok=True)
    data, log, pwfile = folder / "data", folder / "postgres.log", folder / "owner.pw"
    pwfile.write_text(password + "\n")
    run_as = _system_user(folder)
    bin_dir = pg_bin_dir()

    def pg(*args: str) -> None:
        subprocess.run([str(bin_dir / args[0]), *args[1:]], check=True, capture_output=True, timeout=120, user=run_as)

    pg(
        "initdb",
        "-D",
        str(data),
        "-U",
        owner,
        f"--pwfile={pwfile}",
        "--auth-host=scram-sha-256",
        "--auth-local=scram-sha-256",
        "--encoding=UTF8",
    )
    pwfile.unlink()
    port = free_port()
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(
            "\nlisten_addresses = '127.0.0.1'\n"
            f"port = {port}\n"
            "unix_socket_directories = ''\n"
            "password_encryption = 'scram-sha-256'\n"
            "fsync = off\n"
        )
    (data / "pg_hba.conf").write_text("# TYPE DATABASE USER ADDRESS METHOD\nhost all all 127.0.0.1/32 scram-sha-256\n")
    pg("pg_ctl", "-D", str(data), "-l", str(log), "-w", "-t", "60", "start")
    server = ScramServer("127.0.0.1", port, owner, password, database)
    try:
        with psycopg.connect(server.url(database="postgres"), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')  # as the image does with POSTGRES_DB
        yield server
    finally:
        pg("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
