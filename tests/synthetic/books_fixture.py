import csv
from pathlib import Path

PROFILES_DIR = Path(__file__).resolve().parents[2] / "config" / "profiles"
DEFAULT_PROFILE = PROFILES_DIR / "default.yaml"
LARGE_PROFILE = PROFILES_DIR / "large.yaml"


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))
