"""The image's build, replayed without Docker: the build context as `.dockerignore` leaves it, and each stage's files as
its `COPY` lines place them.

Docker does not run where the tests run. What decides whether the image builds is which files reach the stage that
builds the wheel; that is computed here from the Dockerfile itself (its `COPY` lines parsed: several sources, `--chown`
and other flags, the JSON form, wildcards) so the test builds the wheel from exactly those files. A `COPY --from=`
reads another stage or an image, not the context, and is left out of the context.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath


class ContextError(ValueError):
    """The Dockerfile asks for something the build context does not hold (docker build would stop there)."""


@dataclass(frozen=True)
class Copy:
    sources: tuple[str, ...]
    dest: str
    from_stage: str | None  # `--from=`: another stage or an image, not the build context


@dataclass
class Stage:
    name: str | None
    workdir: str = "/"
    copies: list[tuple[Copy, str]] = field(default_factory=list)  # each COPY and the WORKDIR it ran in
    runs: list[str] = field(default_factory=list)


def logical_lines(text: str) -> list[str]:
    """Instructions one per line: comments dropped, backslash continuations joined."""
    kept = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return [line.strip() for line in re.sub(r"\\[ \t]*\n", " ", kept).splitlines() if line.strip()]


def parse_copy(args: str) -> Copy:
    """`COPY [--flag=value ...] src... dest` or `COPY [--flag ...] ["src", ..., "dest"]`."""
    words = args.split()
    from_stage = None
    while words and words[0].startswith("--"):
        flag = words.pop(0)
        if flag.startswith("--from="):
            from_stage = flag.removeprefix("--from=")
    rest = " ".join(words)
    paths = [str(p) for p in json.loads(rest)] if rest.startswith("[") else rest.split()
    if len(paths) < 2:
        raise ContextError(f"COPY {args}: wants at least one source and a destination")
    return Copy(tuple(paths[:-1]), paths[-1], from_stage)


def stages(text: str) -> list[Stage]:
    """Each stage's COPY lines (with the WORKDIR they ran in) and RUN lines."""
    found: list[Stage] = []
    for line in logical_lines(text):
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            parts = args.split()
            name = parts[-1] if len(parts) >= 3 and parts[-2].upper() == "AS" else None
            found.append(Stage(name))
        elif not found:
            continue
        elif keyword == "WORKDIR":
            found[-1].workdir = str(PurePosixPath(found[-1].workdir, args))
        elif keyword in ("COPY", "ADD"):
            found[-1].copies.append((parse_copy(args), found[-1].workdir))
        elif keyword == "RUN":
            found[-1].runs.append(args)
    return found


# --- .dockerignore ----------------------------------------------------------------------------------------------


def ignore_patterns(context: Path) -> list[tuple[bool, re.Pattern[str]]]:
    """`.dockerignore` as (exception?, regex) pairs, in order (the last pattern matching a path decides)."""
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    patterns = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        pattern = str(PurePosixPath(line.removeprefix("!").strip().strip("/")))
        patterns.append((exception, re.compile(_pattern_regex(pattern))))
    return patterns


def _pattern_regex(pattern: str) -> str:
    """Docker's matching (Go filepath.Match per path segment, plus `**` for any number of segments), from the root."""
    segments = pattern.split("/")
    out = ""
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        if segment == "**":
            out += ".*" if last else "(?:[^/]+/)*"
        else:
            out += _segment_regex(segment) + ("" if last else "/")
    return f"^{out}$"


def _segment_regex(segment: str) -> str:
    out, i = "", 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "[" and "]" in segment[i + 1 :]:
            close = segment.index("]", i + 1)
            out += "[" + segment[i + 1 : close].replace("!", "^", 1) + "]"
            i = close
        else:
            out += re.escape(char)
        i += 1
    return out


def ignored(relative: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether `.dockerignore` keeps the path (or a folder above it) out of the context."""
    parts = relative.split("/")
    verdict = False
    for exception, regex in patterns:
        if any(regex.match("/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            verdict = not exception
    return verdict


# --- assembling a stage ------------------------------------------------------------------------------------------


def context_sources(copy: Copy, context: Path, patterns: list[tuple[bool, re.Pattern[str]]]) -> list[Path]:
    """The context paths one COPY source list names (wildcards expanded); a source that matches nothing is an error."""
    found: list[Path] = []
    for source in copy.sources:
        relative = str(PurePosixPath(source.lstrip("/"))) if source not in (".", "./") else "."
        matches = sorted(context.glob(relative)) if any(c in relative for c in "*?[") else [context / relative]
        matches = [m for m in matches if m.exists() and not ignored(_rel(m, context), patterns)]
        if not matches:
            raise ContextError(f"COPY {source}: not in the build context")
        found += matches
    return found


def _rel(path: Path, context: Path) -> str:
    return path.relative_to(context).as_posix()


def assemble(dockerfile_text: str, context: Path, stage_root: Path, stage_index: int = 0) -> Path:
    """Lay out one stage's filesystem under `stage_root` from its context COPY lines; return its final WORKDIR.

    `COPY dir dest` copies the folder's contents into dest; several sources need a destination ending in `/`.
    Files `.dockerignore` excludes never arrive, as with docker build.
    """
    stage = stages(dockerfile_text)[stage_index]
    patterns = ignore_patterns(context)
    for copy, workdir in stage.copies:
        if copy.from_stage is not None:
            continue
        sources = context_sources(copy, context, patterns)
        dest = stage_root / str(PurePosixPath(workdir, copy.dest)).lstrip("/")
        into_folder = copy.dest.endswith("/") or copy.dest in (".", "./") or len(sources) > 1
        if len(sources) > 1 and not copy.dest.endswith("/"):
            raise ContextError(f"COPY {' '.join(copy.sources)} {copy.dest}: several sources need a folder ending in /")
        for source in sources:
            if source.is_dir():
                _copy_tree(source, dest, context, patterns)
            else:
                target = dest / source.name if into_folder else dest
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
    return stage_root / stage.workdir.lstrip("/")


def _copy_tree(source: Path, dest: Path, context: Path, patterns: list[tuple[bool, re.Pattern[str]]]) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.rglob("*")):
        if ignored(_rel(path, context), patterns):
            continue
        target = dest / path.relative_to(source)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def copied_top_level(dockerfile_text: str, stage_index: int = 0) -> set[str]:
    """The top-level context names a stage copies (its context COPY sources' first path component)."""
    names: set[str] = set()
    for copy, _ in stages(dockerfile_text)[stage_index].copies:
        if copy.from_stage is None:
            names |= {
                PurePosixPath(source.lstrip("/")).parts[0] for source in copy.sources if source not in (".", "./")
            }
    return names


def wheel_stage(dockerfile_text: str) -> int:
    """The index of the stage that builds the wheel (its RUN calls `python -m build`)."""
    for index, stage in enumerate(stages(dockerfile_text)):
        if any(re.search(r"python -m build\b", run) for run in stage.runs):
            return index
    raise ContextError("no stage runs `python -m build`")


@dataclass(frozen=True)
class Built:
    """One replayed build stage: where its WORKDIR was laid out, and the wheel (None, with the log, when it failed)."""

    workdir: Path
    wheel: Path | None
    log: str


def build_wheel_as_the_image_does(dockerfile_text: str, context: Path, out: Path, *, timeout_s: float = 300) -> Built:
    """Lay out the wheel stage from the context and run its `python -m build --wheel` there, as the image does.

    The build is isolated, as in the image: the build-system requirements go into a throwaway environment (with uv
    when it is at hand, which is faster), so the setuptools that builds is the one pyproject.toml asks for.
    """
    workdir = assemble(dockerfile_text, context, out / "stage", wheel_stage(dockerfile_text))
    dist = out / "dist"
    command = [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist)]
    env = dict(os.environ)
    uv = _uv()
    if uv is not None:
        command.append("--installer=uv")
        env["PATH"] = f"{Path(uv).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [*command, str(workdir)], capture_output=True, text=True, timeout=timeout_s, env=env, check=False
    )
    wheels = sorted(dist.glob("countersign_close-*.whl")) if done.returncode == 0 else []
    return Built(workdir, wheels[0] if len(wheels) == 1 else None, done.stdout + done.stderr)


def _uv() -> str | None:
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    return find_uv_bin()
