"""Benchmark: the CPU time of `countersign --help` and of a few commands' start, against `python -c pass`.

Run: .venv/bin/python bench/bench_cli_start.py [--runs 15] [--tree DIR] [--smoke]
Each command runs in a fresh process, --runs times, interleaved (one of each in turn, so a change in the machine's
load touches every command alike); its CPU time (user + system) is read from the kernel for that child alone
(os.wait4). Prints, per command, the median and the spread of the CPU seconds and the ratio of the median to
`python -c pass` measured in the same run. Exits 1 when the median of `countersign --help` or of any command's
`--help` is 0.5 s of CPU or more (issue 24), except with --smoke.

--tree DIR runs the CLI from another checkout instead (for example an older commit: `git archive COMMIT | tar -x -C
DIR`) with the same interpreter, for a before/after comparison. --smoke: one run of two commands, no verdict (the
test suite runs it so the script cannot rot).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
LIMIT_CPU_S = 0.5
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--help",),
    ("close", "advance", "--help"),
    ("books", "import", "--help"),
    ("eval", "retrieval", "--help"),
    ("trace", "verify", "--help"),
    ("serve", "--help"),
    ("demo", "--help"),
)
SMOKE_COMMANDS = COMMANDS[:2]
BASELINE = "python -c pass"


def cpu_seconds(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """The child's own user + system CPU seconds; it must exit 0."""
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    stderr = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {child.returncode}: {stderr.strip()[-500:]}")
    return usage.ru_utime + usage.ru_stime


def cli_argv(tree: Path, args: tuple[str, ...]) -> list[str]:
    """`countersign ARGS` as the console script runs it (`countersign.cli.main:main`), from `tree`."""
    start = (
        f"import sys; sys.path.insert(0, {str(tree)!r}); "
        "from countersign.cli.main import main; sys.argv[0] = 'countersign'; main()"
    )
    return [sys.executable, "-c", start, *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="Runs of each command (default 15).")
    parser.add_argument("--tree", type=Path, default=REPO_ROOT, help="Checkout whose CLI to run (default: this one).")
    parser.add_argument("--smoke", action="store_true", help="One run of two commands, no verdict.")
    options = parser.parse_args()
    runs = 1 if options.smoke else options.runs
    commands = SMOKE_COMMANDS if options.smoke else COMMANDS
    tree = options.tree.resolve()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # compiled files are written once, before the first run
    env.setdefault("COUNTERSIGN_STATE_DIR", str(tree / ".countersign"))

    argvs = {BASELINE: [sys.executable, "-c", "pass"]}
    argvs |= {"countersign " + " ".join(args): cli_argv(tree, args) for args in commands}
    for argv in argvs.values():  # warm: byte-code compiled, files in the page cache
        cpu_seconds(argv, tree, {**env, "PYTHONDONTWRITEBYTECODE": ""})
    samples: dict[str, list[float]] = {name: [] for name in argvs}
    for _ in range(runs):
        for name, argv in argvs.items():
            samples[name].append(cpu_seconds(argv, tree, env))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"CLI start, CPU seconds (user + system) per process, median of {runs} run(s); tree {tree.name}; "
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, load average {load:.1f}"
    )
    baseline = statistics.median(samples[BASELINE])
    print(f"| command | median CPU s | min | max | ratio to `{BASELINE}` |")
    print("|---|---:|---:|---:|---:|")
    over: list[str] = []
    for name, values in samples.items():
        median = statistics.median(values)
        ratio = median / baseline if baseline > 0 else float("inf")
        print(f"| `{name}` | {median:.3f} | {min(values):.3f} | {max(values):.3f} | {ratio:.1f}× |")
        if name != BASELINE and median >= LIMIT_CPU_S:
            over.append(f"{name} ({median:.3f} s)")
    if options.smoke:
        return
    if over:
        print(f"over {LIMIT_CPU_S} s of CPU: {', '.join(over)}")
        raise SystemExit(1)
    print(f"every command's start is under {LIMIT_CPU_S} s of CPU")


if __name__ == "__main__":
    main()
