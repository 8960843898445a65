"""The production Dockerfile, read as text (Docker does not run here): what a platform engineer checks first.

Multi-stage; the final stage installs the built wheel and the hash-locked production requirements, runs as a fixed
non-root uid, declares EXPOSE and a curl-less HEALTHCHECK, and never installs the embedded PostgreSQL. Whether the
image's wheel builds from what the Dockerfile copies is shown by building it: test_image_context.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from countersign.bootstrap.settings import PROJECT_ROOT


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def parse(text: str) -> list[list[Instruction]]:
    """The Dockerfile's stages, each a list of instructions; comments dropped, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    stages: list[list[Instruction]] = []
    for line in joined.splitlines():
        if not line.strip():
            continue
        keyword, _, args = line.strip().partition(" ")
        if keyword.upper() == "FROM":
            stages.append([])
        if stages:
            stages[-1].append(Instruction(keyword.upper(), " ".join(args.split())))
    return stages


def problems(text: str) -> list[str]:
    stages = parse(text)
    found: list[str] = []
    if len(stages) < 2:
        found.append("not multi-stage: the wheel is built in one stage and installed in another")
    final = stages[-1] if stages else []
    runs = [i.args for i in final if i.keyword == "RUN"]
    users = [i.args for i in final if i.keyword == "USER"]
    user = users[-1].split(":")[0] if users else "root"
    if user in ("root", "0") or not user.isdigit():
        found.append(f"final stage runs as {user!r}: want a fixed non-root uid")
    if not any(i.keyword == "EXPOSE" and "8000" in i.args.split() for i in final):
        found.append("no EXPOSE 8000")
    checks = [i.args for i in final if i.keyword == "HEALTHCHECK"]
    if not checks or checks[-1].upper().startswith("NONE") or "/healthz" not in checks[-1]:
        found.append("no HEALTHCHECK on /healthz")
    elif "curl" in checks[-1] or "wget" in checks[-1]:
        found.append("HEALTHCHECK needs curl or wget, which the slim image lacks")
    if not any(i.keyword == "COPY" and i.args.startswith("--from=") for i in final):
        found.append("final stage copies nothing from the build stage")
    if not any(re.search(r"pip install .*\.whl", run) for run in runs):
        found.append("final stage does not install the wheel")
    if not any(re.search(r"pip install .*--require-hashes -r \S*requirements\.lock\b", run) for run in runs):
        found.append("final stage does not install requirements.lock with --require-hashes")
    if any(re.search(r"pip install .*(\s-e\s|--editable)", run) for run in runs):
        found.append("final stage installs the sources editable")
    if any(re.search(r"apt-get install|\b(gcc|g\+\+|build-essential|clang)\b", run) for run in runs):
        found.append("final stage installs system packages or a compiler")
    lowered = " ".join(i.args for stage in stages for i in stage).lower()  # instructions, not comments
    if "pgserver" in lowered or "[embedded]" in lowered or "requirements-dev.lock" in lowered:
        found.append("the image installs the embedded PostgreSQL or the dev lock")
    return found


def test_dockerfile_builds_a_wheel_and_runs_it_unprivileged_without_the_embedded_database() -> None:
    assert problems((PROJECT_ROOT / "Dockerfile").read_text(encoding="utf-8")) == []


def test_problems_names_what_an_unsafe_dockerfile_does() -> None:
    # Negative controls: the single-stage, root, editable image this replaced, and the real one broken one way each.
    old = (
        "FROM python:3.11-slim\nWORKDIR /app\nCOPY . .\nRUN pip install --no-cache-dir -e .[embedded]\n"
        'ENTRYPOINT ["countersign"]\n'
    )
    assert set(problems(old)) >= {
        "not multi-stage: the wheel is built in one stage and installed in another",
        "final stage runs as 'root': want a fixed non-root uid",
        "no EXPOSE 8000",
        "no HEALTHCHECK on /healthz",
        "final stage does not install the wheel",
        "final stage installs the sources editable",
        "the image installs the embedded PostgreSQL or the dev lock",
    }
    real = (PROJECT_ROOT / "Dockerfile").read_text(encoding="utf-8")
    broken = {
        "final stage runs as 'root': want a fixed non-root uid": re.sub(r"(?m)^USER .*$", "USER root", real),
        "no EXPOSE 8000": re.sub(r"(?m)^EXPOSE .*$", "", real),
        "HEALTHCHECK needs curl or wget, which the slim image lacks": real.replace(
            'CMD ["python", "-c",', 'CMD ["curl", "-f", "http://127.0.0.1:8000/healthz", "-c",'
        ),
        "the image installs the embedded PostgreSQL or the dev lock": real.replace(
            "requirements.lock /tmp", "requirements-dev.lock /tmp"
        ),
        "final stage does not install requirements.lock with --require-hashes": real.replace("--require-hashes ", ""),
        "final stage installs system packages or a compiler": real.replace(
            "RUN python -m venv", "RUN apt-get install -y gcc && python -m venv"
        ),
    }
    for expected, text in broken.items():
        assert text != real, expected
        assert expected in problems(text), expected
