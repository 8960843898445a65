"""`countersign principals`: import and list people and machines, make a person's key pair, issue API tokens."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from countersign.cli.common import console, fail, run, runtime, write_json

principals_app = typer.Typer(help="People and machines that act on closes.", no_args_is_help=True)


@principals_app.command("import")
def principals_import(
    file: Annotated[Path, typer.Argument(help="YAML file with a `principals` list, or a CSV file.")],
) -> None:
    """Load or refresh principals (humans and machines), their roles and public keys (`public_key`, base64)."""
    from countersign.bootstrap.runtime import connection
    from countersign.services.administering import import_principals

    rt = runtime()

    async def go() -> int:
        async with connection(rt, "owner") as conn:
            return await import_principals(conn, file)

    console.print(f"imported {run(go)} principals")


@principals_app.command("list")
def principals_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Every principal: kind, roles, whether active, the channels it is mapped on, its signing key and passkeys."""
    from rich.table import Table

    from countersign.bootstrap.runtime import connection
    from countersign.services.administering import PrincipalListing, list_principals

    rt = runtime()

    async def go() -> list[PrincipalListing]:
        async with connection(rt) as conn:
            return await list_principals(conn)

    listed = run(go)
    if as_json:
        write_json(
            [
                {
                    "principal_id": p.principal_id,
                    "kind": p.kind.value,
                    "display_name": p.display_name,
                    "roles": list(p.roles),
                    "active": p.active,
                    "channels": list(p.channels),
                    "has_signing_key": p.has_signing_key,
                    "live_passkeys": p.live_passkeys,
                }
                for p in listed
            ]
        )
        return
    if not listed:
        console.print("no principals yet; run `countersign principals import FILE`")
        return
    table = Table("principal", "name", "kind", "roles", "active", "reached on", "signing key", "passkeys")
    for p in listed:
        table.add_row(
            escape(p.principal_id),
            escape(p.display_name),
            p.kind.value,
            escape(", ".join(p.roles)) or "none",
            "yes" if p.active else "no (deactivated)",
            ", ".join(p.channels) or "nowhere",
            "yes" if p.has_signing_key else "no",
            str(p.live_passkeys),
        )
    console.print(table)


KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")


@principals_app.command("keygen")
def principals_keygen(
    name: Annotated[str, typer.Argument(help="The principal the key belongs to (becomes NAME.key and NAME.pub).")],
    out: Annotated[Path, typer.Option("--out", help="Folder for the key files.")] = Path("."),
) -> None:
    """Write a person's Ed25519 key pair: NAME.key (private, PKCS8 PEM, mode 0600) and NAME.pub (base64)."""
    from countersign.audit.person_proof import generate_key_pair, public_key_text

    if not KEY_NAME.fullmatch(name):
        fail(f"NAME {name!r} must be 1-128 letters, digits, '.', '_', '@' or '-', starting with a letter or digit")
        return
    private_path, public_path = out / f"{name}.key", out / f"{name}.pub"
    for path in (private_path, public_path):
        if path.exists():
            fail(f"{path} already exists; refusing to overwrite a key")
            return
    private_pem, public_raw = generate_key_pair()
    public_text = public_key_text(public_raw)
    try:
        out.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(private_pem)
        public_path.write_text(public_text + "\n")
    except OSError as exc:
        fail(f"cannot write the key files in {out}: {exc.strerror or exc}")
        return
    console.print(f"private key: {escape(str(private_path))} (keep it with {escape(name)}; never share it)")
    console.print(f"public key:  {public_text}")
    console.print(
        "Register it: add `public_key: "
        + public_text
        + f"` to {escape(name)}'s entry in your principals YAML (or the public_key column of the CSV),"
        " then run `countersign principals import FILE`. Signed-callback decisions by this person must then carry"
        " a signature by this key."
    )


@principals_app.command("enroll")
def principals_enroll(
    name: Annotated[str, typer.Argument(help="The person who will enrol a passkey (an active human principal).")],
    hours: Annotated[int, typer.Option("--hours", min=1, max=168, help="How long the link works.")] = 24,
) -> None:
    """Print a one-time link with which NAME enrols a passkey on the Close Board (as the owner; traced)."""
    from countersign.bootstrap.runtime import connection
    from countersign.services.administering import PasskeyRefused, enrolment_token

    rt = runtime()

    async def go() -> tuple[str, str]:
        async with connection(rt, "owner") as conn:
            return await enrolment_token(conn, name, issued_by="countersign-cli", hours=hours)

    try:
        principal, token = run(go)
    except PasskeyRefused as exc:
        fail(str(exc))
        return
    link = f"{rt.settings.board_url.rstrip('/')}/board/enrol#token={token}"
    console.print(f"enrolment link for {escape(principal)} (works once, for {hours} h):")
    print(link)  # plain, so it can be copied or piped; the token is after '#', so no server ever logs it
    console.print(
        "Give it to the person over a channel you trust. Whoever opens it first enrols a key for them: the"
        " enrolment is traced and shown on their passkey page, where they can revoke a key they do not know."
    )


@principals_app.command("token")
def principals_token(
    name: Annotated[str, typer.Argument(help="The principal the token reads as.")],
    revoke: Annotated[bool, typer.Option("--revoke", help="Revoke every live token of NAME instead.")] = False,
) -> None:
    """Print a new API token for `GET /closes/{id}` (shown once; only its SHA-256 is stored), or revoke them."""
    from countersign.bootstrap.runtime import connection
    from countersign.services.administering import issue_api_token, revoke_api_tokens

    rt = runtime()

    async def go() -> str | int:
        async with connection(rt, "owner") as conn:
            return await (revoke_api_tokens(conn, name) if revoke else issue_api_token(conn, name))

    result = run(go)
    if revoke:
        console.print(f"revoked {result} token(s) of {name}")
    else:
        sys.stdout.write(f"{result}\n")
