import json
from pathlib import Path
from typing import Any

GROUND_TRUTH_FILE = "ground_truth.json"


def read_ground_truth(books_dir: Path) -> dict[str, Any]:
    path = books_dir / GROUND_TRUTH_FILE
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: <root>: expected a JSON object")
    return data
