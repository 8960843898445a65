"""The Teams app package uploads as built: a manifest valid under Microsoft's schema, the bot's own ids, every command
the Teams door understands, and two icons of the sizes and kinds Teams asks for."""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from countersign.bootstrap.settings import PROJECT_ROOT
from countersign.bootstrap.teams_package import (
    TeamsPackageError,
    build_manifest,
    build_package,
    teams_app_id_for,
)
from countersign.cli.main import app
from countersign.policy.command_roles import HELP, PAYMENTS, PAYMENTS_START, STATUS, TRACE_EXPORT

SCHEMA = json.loads((PROJECT_ROOT / "tests/schemas/teams/MicrosoftTeams.v1.22.schema.json").read_text())
TEMPLATE_DIR = PROJECT_ROOT / "config" / "teams"
BOT = "8F2C5E1A-3B4D-4C6E-9A8B-7D6C5B4A3F21"
BOARD = "https://close.acme.example"


def _package(**overrides: Any) -> dict[str, bytes]:
    options = {"bot_app_id": BOT, "board_url": BOARD, "version": "0.1.0", **overrides}
    with zipfile.ZipFile(io.BytesIO(build_package(TEMPLATE_DIR, **options))) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _schema_errors(manifest: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    return sorted(f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(manifest))


def _pixels(png: bytes) -> tuple[int, int, list[tuple[int, int, int, int]]]:
    """Width, height and RGBA pixels of a filter-0, 8-bit RGBA PNG (what the package draws)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at, chunks = 8, {}
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        kind = png[at + 4 : at + 8]
        chunks[kind] = chunks.get(kind, b"") + png[at + 8 : at + 8 + length]
        at += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour) == (8, 6)  # 8-bit RGBA
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = 1 + 4 * width
    pixels = []
    for row in range(height):
        line = raw[row * stride : (row + 1) * stride]
        assert line[0] == 0
        pixels += [tuple(line[1 + 4 * i : 5 + 4 * i]) for i in range(width)]
    return width, height, pixels  # type: ignore[return-value]


def test_the_package_holds_a_manifest_valid_under_the_v1_22_schema_and_two_icons() -> None:
    files = _package()
    assert sorted(files) == ["color.png", "manifest.json", "outline.png"]  # at the zip's root, nothing else
    manifest = json.loads(files["manifest.json"])
    assert _schema_errors(manifest) == []
    assert manifest["manifestVersion"] == SCHEMA["properties"]["manifestVersion"]["const"] == "1.22"
    assert manifest["$schema"].endswith("/v1.22/MicrosoftTeams.schema.json")
    assert manifest["bots"][0]["botId"] == BOT.lower()
    assert manifest["id"] == teams_app_id_for(BOT) != BOT.lower()
    assert manifest["validDomains"] == ["close.acme.example"]
    assert manifest["developer"]["websiteUrl"] == BOARD and manifest["version"] == "0.1.0"
    assert manifest["icons"] == {"color": "color.png", "outline": "outline.png"}
    assert "set by" not in json.dumps(manifest)  # no template placeholder left


def test_the_manifest_lists_every_command_the_teams_door_understands() -> None:
    manifest = json.loads(_package()["manifest.json"])
    titles = [c["title"] for lst in manifest["bots"][0]["commandLists"] for c in lst["commands"]]
    assert titles == [f"close {word}" for word in (STATUS, PAYMENTS, PAYMENTS_START, TRACE_EXPORT, HELP)]


def test_the_icons_are_192_colour_and_32_white_on_transparent() -> None:
    files = _package()
    width, height, colour = _pixels(files["color.png"])
    assert (width, height) == (192, 192)
    assert all(alpha == 255 for *_rgb, alpha in colour)  # full colour: opaque
    assert {p for p in colour} == {(0x1D, 0x35, 0x57, 255), (255, 255, 255, 255)}  # the accent colour and the mark
    width, height, outline = _pixels(files["outline.png"])
    assert (width, height) == (32, 32)
    assert {p for p in outline} == {(0, 0, 0, 0), (255, 255, 255, 255)}  # white or transparent, nothing else
    assert sum(1 for p in outline if p[3]) > 32  # the mark is there


def test_a_rebuild_is_the_same_package_and_another_bot_is_another_app() -> None:
    assert _package() == _package()
    other = json.loads(_package(bot_app_id="0b9d3f7e-1c2a-4e5f-8a6b-2c3d4e5f6a7b")["manifest.json"])
    assert other["id"] != json.loads(_package()["manifest.json"])["id"]


def test_negative_control_the_manifest_shipped_before_fails_the_schema() -> None:
    """The schema check can fail: the stored template (its placeholders) with the bot id placeholder shipped before."""
    old = json.loads((PROJECT_ROOT / "config/teams/manifest.json").read_text())
    old["manifestVersion"], old["id"], old["version"] = "1.22", "00000000-0000-0000-0000-000000000000", "0.1.0"
    old["bots"][0]["botId"] = "REPLACE-WITH-TEAMS_APP_ID"
    errors = _schema_errors(old)
    assert any(e.startswith("bots/0/botId") for e in errors), errors
    assert any(e.startswith("developer/websiteUrl") for e in errors), errors  # the template's placeholder text


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"bot_app_id": None}, "TEAMS_APP_ID: missing"),
        ({"bot_app_id": "REPLACE-WITH-TEAMS_APP_ID"}, "TEAMS_APP_ID: not a GUID"),
        ({"board_url": "http://close.acme.example"}, "COUNTERSIGN_BOARD_URL: Teams needs an https URL"),
        ({"privacy_url": "ftp://x"}, "--privacy-url: Teams needs an https URL"),
        ({"version": "dev"}, "version: the installed version 'dev'"),
    ],
)
def test_a_wrong_value_is_one_error_naming_it(options: dict[str, Any], named: str) -> None:
    template = json.loads((TEMPLATE_DIR / "manifest.json").read_text())
    arguments = {"bot_app_id": BOT, "board_url": BOARD, "version": "0.1.0", **options}
    with pytest.raises(TeamsPackageError, match="^" + named.replace("(", r"\(")):
        build_manifest(template, **arguments)


def test_the_command_writes_the_zip_or_names_the_missing_variable(tmp_path: Path) -> None:
    out = tmp_path / "teams.zip"
    env = {"TEAMS_APP_ID": BOT, "TEAMS_APP_PASSWORD": "secret", "COUNTERSIGN_BOARD_URL": BOARD, "COLUMNS": "200"}
    done = CliRunner().invoke(app, ["teams", "package", "--out", str(out)], env=env)
    assert done.exit_code == 0, done.output
    assert teams_app_id_for(BOT) in done.output
    with zipfile.ZipFile(out) as archive:
        assert _schema_errors(json.loads(archive.read("manifest.json"))) == []
    missing = CliRunner().invoke(
        app, ["teams", "package", "--out", str(tmp_path / "none.zip")], env={"COUNTERSIGN_BOARD_URL": BOARD}
    )
    assert missing.exit_code == 2 and "TEAMS_APP_ID: missing" in missing.output
    assert not (tmp_path / "none.zip").exists()
