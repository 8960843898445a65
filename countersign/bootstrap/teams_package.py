"""The Microsoft Teams app package: the zip an admin uploads to Teams, built for this deployment.

Teams installs a bot from a package of three files at the zip's root: `manifest.json`, a 192x192 full-colour icon and
a 32x32 outline icon (white on transparent). The manifest's template is `config/teams/manifest.json` (schema v1.22,
its commands the words the Teams door understands, countersign/bot/teams.py); this module fills in what belongs to
the deployment and draws the two icons, so the package uploads as built:

- `bots[0].botId`: TEAMS_APP_ID, the Azure bot registration's application (client) id, a GUID;
- `id`, the Teams app's own id: a GUID derived from that bot id (UUID version 5), the same on every build, so a
  rebuilt package updates the installed app instead of adding a second one;
- `version`: the installed version's major.minor.patch (Teams takes semver only);
- `developer.websiteUrl`, `privacyUrl`, `termsOfUseUrl` and `validDomains`: from COUNTERSIGN_BOARD_URL (https), with
  the privacy and terms pages overridable.

A wrong value is one `TeamsPackageError` naming the variable or option; nothing is written then.
"""

from __future__ import annotations

import io
import json
import re
import struct
import uuid
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

MANIFEST = "manifest.json"
COLOR_ICON = "color.png"
OUTLINE_ICON = "outline.png"
COLOR_SIZE = 192
OUTLINE_SIZE = 32
GUID = re.compile(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
SEMVER = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
# The namespace of the Teams app ids this module derives (uuid5 of the bot id): any fixed UUID would do; it is fixed
# so that one bot id always gives one app id.
APP_ID_NAMESPACE = uuid.UUID("6f1d2c3e-8a4b-5c6d-9e0f-1a2b3c4d5e6f")
ZIP_TIME = (2024, 1, 1, 0, 0, 0)  # every entry's timestamp: the same inputs give the same bytes


class TeamsPackageError(ValueError):
    """A value the package cannot be built with, named by its variable or option."""


def teams_app_id_for(bot_app_id: str) -> str:
    """The Teams app's id for a bot id: stable across builds (UUID version 5)."""
    return str(uuid.uuid5(APP_ID_NAMESPACE, bot_app_id.lower()))


def build_manifest(
    template: dict[str, Any],
    *,
    bot_app_id: str | None,
    board_url: str,
    version: str,
    privacy_url: str | None = None,
    terms_url: str | None = None,
) -> dict[str, Any]:
    """The template with this deployment's values in place (see the module docstring)."""
    if not bot_app_id:
        raise TeamsPackageError("TEAMS_APP_ID: missing (the Azure bot registration's application id, a GUID)")
    if not GUID.match(bot_app_id):
        raise TeamsPackageError(f"TEAMS_APP_ID: not a GUID ({bot_app_id!r})")
    board = _https_url("COUNTERSIGN_BOARD_URL", board_url)
    semver = SEMVER.match(version)
    if semver is None:
        raise TeamsPackageError(f"version: the installed version {version!r} does not start with major.minor.patch")
    manifest: dict[str, Any] = json.loads(json.dumps(template))  # a deep copy of plain JSON
    manifest["id"] = teams_app_id_for(bot_app_id)
    manifest["version"] = semver.group(0)
    manifest["developer"]["websiteUrl"] = board
    manifest["developer"]["privacyUrl"] = _https_url("--privacy-url", privacy_url) if privacy_url else board
    manifest["developer"]["termsOfUseUrl"] = _https_url("--terms-url", terms_url) if terms_url else board
    manifest["validDomains"] = [urlsplit(board).netloc]
    for bot in manifest["bots"]:
        bot["botId"] = bot_app_id.lower()
    return manifest


def _https_url(name: str, value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname:
        raise TeamsPackageError(f"{name}: Teams needs an https URL with a host ({value!r})")
    return value


def build_package(
    template_dir: Path,
    *,
    bot_app_id: str | None,
    board_url: str,
    version: str,
    privacy_url: str | None = None,
    terms_url: str | None = None,
) -> bytes:
    """The zip: the filled-in manifest and the two icons at its root, byte for byte the same for the same inputs."""
    path = template_dir / MANIFEST
    try:
        template = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TeamsPackageError(f"{path.name}: cannot read the manifest template ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise TeamsPackageError(f"{path.name}: line {exc.lineno}: not JSON ({exc.msg})") from exc
    manifest = build_manifest(
        template,
        bot_app_id=bot_app_id,
        board_url=board_url,
        version=version,
        privacy_url=privacy_url,
        terms_url=terms_url,
    )
    files = {
        MANIFEST: (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode(),
        COLOR_ICON: color_icon(),
        OUTLINE_ICON: outline_icon(),
    }
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return out.getvalue()


# --- the icons: a white check mark, on the accent colour (color) or on nothing (outline) ---------------------------

ACCENT = (0x1D, 0x35, 0x57)  # the manifest's accentColor
WHITE = (0xFF, 0xFF, 0xFF)
# The check mark as two strokes, in units of the icon's side (0..1): down to the knee, then up to the right.
CHECK_STROKES = (((0.27, 0.52), (0.43, 0.68)), ((0.43, 0.68), (0.74, 0.34)))
Rgba = tuple[int, int, int, int]


def color_icon() -> bytes:
    """192x192: the check mark in white on the accent colour, opaque."""
    return _png(COLOR_SIZE, lambda x, y, inside: (*(WHITE if inside else ACCENT), 255), stroke=0.085)


def outline_icon() -> bytes:
    """32x32: the check mark in white on a transparent background (Teams tints it)."""
    return _png(OUTLINE_SIZE, lambda x, y, inside: (*WHITE, 255) if inside else (0, 0, 0, 0), stroke=0.11)


def _png(size: int, paint: Callable[[float, float, bool], Rgba], *, stroke: float) -> bytes:
    rows = bytearray()
    for py in range(size):
        rows.append(0)  # filter type 0 for the row
        for px in range(size):
            x, y = (px + 0.5) / size, (py + 0.5) / size
            inside = any(_distance((x, y), a, b) <= stroke / 2 for a, b in CHECK_STROKES)
            rows.extend(paint(x, y, inside))
    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + _chunk(b"IEND", b"")
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _distance(p: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
    """The distance from p to the segment a-b."""
    (px, py), (ax, ay), (bx, by) = p, a, b
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    return float(((px - ax - t * dx) ** 2 + (py - ay - t * dy) ** 2) ** 0.5)
