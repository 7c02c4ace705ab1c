"""What the judge reads of a worker's error answer, whatever the worker sent: cut to a bounded size, and the
frames' source lines read from the judge's copy of the submission within the call's deadline."""

import os
import stat
from pathlib import Path

from ..kernel import clock

# What the judge reads of an error answer, whatever the worker sent (issue 36, item 4: 4,000 frames naming an 8 MiB
# file of the upload made the judge read 32 GB after the answer): at most FRAMES_CAP frames (the innermost, a
# traceback's last), each text cut to TEXT_CAP characters (the message to MESSAGE_TEXT_CAP), and for the frames'
# missing source lines at most SOURCE_FILES_CAP files, SOURCE_BYTES_CAP bytes of each, read once, before the call's
# deadline (past it, a frame is shown without its line).
FRAMES_CAP = 16
TEXT_CAP = 300
MESSAGE_TEXT_CAP = 4000
SOURCE_FILES_CAP = 4
SOURCE_BYTES_CAP = 1 << 20
SOURCE_LINE_CAP = 200  # characters of a source line shown under a frame


def _cut(value, cap: int):
    return value[:cap] + f"... [{len(value) - cap} more characters]" if isinstance(value, str) and len(value) > cap else value


def bounded(data: dict) -> dict:
    """A worker's error answer cut to what the judge reads: FRAMES_CAP frames, each text TEXT_CAP characters."""
    frames = data.get("frames")
    frames = [f for f in frames[-FRAMES_CAP:] if isinstance(f, dict)] if isinstance(frames, list) else []
    cut = {k: _cut(v, MESSAGE_TEXT_CAP if k in ("message", "traceback") else TEXT_CAP) for k, v in data.items() if k != "frames"}
    return {**cut, "frames": [{k: _cut(v, TEXT_CAP) for k, v in list(f.items())[:8]} for f in frames]}


def _source_lines(path: Path) -> list[str]:
    """The first SOURCE_BYTES_CAP bytes of a regular file (no link followed), as lines."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return []
        return f.read(SOURCE_BYTES_CAP).decode(errors="replace").splitlines()


def with_sources(data: dict, root: Path | None, deadline: float | None = None) -> dict:
    """The error with each frame's missing source line read from the judge's copy of the submission (a
    compiled worker knows the file and line of a panic, not the text). Only a file inside `root`; bounded as the
    caps above say, and nothing read past `deadline` (harness.kernel.clock.now)."""
    frames = data.get("frames")
    if root is None or not isinstance(frames, list):
        return data
    top = Path(root).resolve()
    read: dict[Path, list[str]] = {}
    out = []
    for f in frames:
        wanted = isinstance(f, dict) and not f.get("source") and isinstance(f.get("file"), str) and type(f.get("line")) is int
        if wanted and (deadline is None or clock.now() < deadline):
            path = (top / f["file"]).resolve()
            if path not in read and len(read) < SOURCE_FILES_CAP and path.is_relative_to(top):
                try:
                    read[path] = _source_lines(path)
                except OSError:
                    read[path] = []
            lines = read.get(path, [])
            if 1 <= f["line"] <= len(lines):
                f = {**f, "source": lines[f["line"] - 1].strip()[:SOURCE_LINE_CAP]}
        out.append(f)
    return {**data, "frames": out}
