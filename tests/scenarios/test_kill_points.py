"""The kill points are one Enum (`countersign.drill_hooks.kill_points.KillPoint`): `POINTS`, what `drill restart
--point` accepts, is its members, and each member is named by exactly one `kill_point` call in the package."""

from __future__ import annotations

import re
from pathlib import Path

from countersign.drill_hooks.kill_points import POINTS, KillPoint

PACKAGE = Path(__file__).resolve().parents[2] / "countersign"


def test_every_kill_point_is_reached_from_one_place_in_the_package() -> None:
    assert tuple(KillPoint) == POINTS
    named = [
        name
        for path in PACKAGE.rglob("*.py")
        if "drill_hooks" not in path.parts
        for name in re.findall(r"kill_point\(KillPoint\.([A-Z_]+)\)", path.read_text())
    ]
    assert sorted(named) == sorted(point.name for point in KillPoint)


def test_a_kill_point_is_the_word_the_drill_sets_in_the_environment() -> None:
    assert [point.value for point in KillPoint] == [
        "dispatch.after_call",
        "task.after_result",
        "posting.mid",
        "gates.before_apply",
        "card.before_post",
        "trace.mid_seal",
        "job.after_advance",
    ]
    assert f"{KillPoint.POSTING_MID}" == "posting.mid" and KillPoint("posting.mid") is KillPoint.POSTING_MID
