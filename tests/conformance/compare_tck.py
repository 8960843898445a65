"""Compare TCK runs (the `--verbose` logs tests/conformance/run_tck.sh keeps) against the bare-SDK baseline.

    python tests/conformance/compare_tck.py RUN_DIR BASELINE_NAME

RUN_DIR holds one directory per system under test, each with mandatory.log, capabilities.log and quality.log.
Prints passed / failed / skipped (+ errors) per category and system, then every test the baseline passes that
another system does not; exits 1 when there is one.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

CATEGORIES = ("mandatory", "capabilities", "quality")
OUTCOME = re.compile(r"^(tests/\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b")


def outcomes(log: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for line in log.read_text(errors="replace").splitlines():
        match = OUTCOME.match(line)
        if match:
            test, outcome = match.groups()
            if found.get(test) != "ERROR":  # a teardown error after a pass counts as the error
                found[test] = outcome
    return found


def main() -> int:
    run_dir, baseline = Path(sys.argv[1]), sys.argv[2]
    systems = sorted(path.name for path in run_dir.iterdir() if path.is_dir())
    systems.remove(baseline)
    systems.insert(0, baseline)
    results = {
        (system, category): outcomes(run_dir / system / f"{category}.log")
        for system in systems
        for category in CATEGORIES
    }
    print("| system | " + " | ".join(CATEGORIES) + " |")
    print("|---|" + "---|" * len(CATEGORIES))
    for system in systems:
        cells = []
        for category in CATEGORIES:
            counts = Counter(results[(system, category)].values())
            cell = f"{counts['PASSED'] + counts['XPASS']} / {counts['FAILED']} / {counts['SKIPPED'] + counts['XFAIL']}"
            if counts["ERROR"]:
                cell += f" (+{counts['ERROR']} errors)"
            cells.append(cell)
        print(f"| {system} | " + " | ".join(cells) + " |")
    regressions = []
    for category in CATEGORIES:
        passed = {test for test, outcome in results[(baseline, category)].items() if outcome == "PASSED"}
        for system in systems[1:]:
            for test in sorted(passed):
                outcome = results[(system, category)].get(test, "not run")
                if outcome not in ("PASSED", "XPASS"):
                    regressions.append(f"{category}: {system}: {test}: {outcome}")
    print()
    print(f"tests the baseline passes that another system does not: {len(regressions)}")
    for line in regressions:
        print(f"- {line}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
