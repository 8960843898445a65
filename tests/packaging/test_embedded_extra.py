"""Without the `embedded` extra (production images) and without DATABASE_URL, the CLI says what to do in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# The CLI in a fresh process where `import pgserver` fails, as it does where the extra is not installed.
WITHOUT_PGSERVER = "import sys; sys.modules['pgserver'] = None; from countersign.cli.main import main; main()"


def test_no_database_url_and_no_embedded_extra_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.endswith("_DATABASE_URL")}
    env |= {"COUNTERSIGN_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "300"}
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_PGSERVER, "close", "status"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "DATABASE_URL" in lines[0] and "countersign-close[embedded]" in lines[0]
    assert not (tmp_path / "state" / "pgdata").exists()
