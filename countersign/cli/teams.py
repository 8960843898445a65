"""`countersign teams package`: the Teams app package (manifest and icons) to upload for this deployment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from countersign.cli.common import console, fail, settings_or_exit

teams_app = typer.Typer(help="Microsoft Teams: the app package to upload.", no_args_is_help=True)


@teams_app.command("package")
def teams_package(
    out: Annotated[Path, typer.Option(help="Where to write the zip.")] = Path("countersign-teams.zip"),
    privacy_url: Annotated[
        str | None, typer.Option(help="Your privacy statement (https; default the board URL).")
    ] = None,
    terms_url: Annotated[str | None, typer.Option(help="Your terms of use (https; default the board URL).")] = None,
) -> None:
    """Write the zip Teams installs: manifest.json (bot id from TEAMS_APP_ID, domain from COUNTERSIGN_BOARD_URL) and
    the two icons. Upload it in Teams (Apps, Manage your apps, Upload an app) or in the Teams admin center."""
    from countersign import installed_version
    from countersign.bootstrap.teams_package import TeamsPackageError, build_package, teams_app_id_for

    settings = settings_or_exit()
    try:
        package = build_package(
            settings.config_dir / "teams",
            bot_app_id=settings.teams_app_id,
            board_url=settings.board_url,
            version=installed_version(),
            privacy_url=privacy_url,
            terms_url=terms_url,
        )
    except TeamsPackageError as exc:
        fail(str(exc))
        return
    try:
        out.write_bytes(package)
    except OSError as exc:
        fail(f"--out {out}: {exc.strerror}")
    assert settings.teams_app_id is not None  # build_package refused a missing one
    console.print(
        f"wrote {out} ({len(package):,} bytes): Teams app id {teams_app_id_for(settings.teams_app_id)},"
        f" bot {settings.teams_app_id.lower()}"
    )
