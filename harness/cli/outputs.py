"""The files a command writes when it is done (`--json`, `--junit`, `--gradescope`, `--html`, `--out`): each one
checked writable before any work starts, so a verdict is never lost to a path that fails at the end."""

import json
import sys
import tempfile
from pathlib import Path

from ..kernel.errors import UsageError, raise_if_interrupted
from ..render.gradescope import results_json
from .common import write_json


def check_writable(**paths) -> None:
    """Refuse (exit 2, naming the option and the path) any output that could not be written (`json_path="x.json"` as
    `--json x.json`, a `_dir` name as a folder; None and "-" skipped). Nothing is created: an existing file is opened
    for appending, else a probe is made and removed in the nearest existing folder."""
    for name, path in paths.items():
        if path is None or str(path) == "-":
            continue
        option = "--" + name.removesuffix("_path").replace("_", "-")
        why = _unwritable(Path(path), folder=name.endswith("_dir"))
        if why:
            raise UsageError(f"{option} {path}: {why}; name a file in a folder you can write (checked before anything runs)")


def _unwritable(path: Path, folder: bool = False) -> str | None:
    if folder:
        if path.exists() and not path.is_dir():
            return "is a file, not a folder"
        return _unwritable(path / ".ol-probe") if path.is_dir() else _unwritable(path.parent / ".ol-probe")
    if path.is_dir():
        return "is a folder, not a file"
    nearest = path.parent
    while not nearest.exists():  # the folders to make: the nearest one that exists must take them
        nearest = nearest.parent
    if not nearest.is_dir():
        return f"{nearest} is a file, not a folder"
    try:
        if path.exists():
            open(path, "ab").close()
        else:
            tempfile.TemporaryFile(dir=nearest, prefix=".ol-probe-").close()
    except OSError as e:
        return f"cannot be written ({e.strerror or e})"
    return None


def write_feedback_page(ch, rep, html_path: str) -> None:
    from ..grading.class_report import feedback_data  # here: jinja2's import, which only --html needs
    from ..render.html import feedback_page  # here: jinja2, which only --html needs

    Path(html_path).parent.mkdir(parents=True, exist_ok=True)
    Path(html_path).write_text(feedback_page(feedback_data(ch, rep)), encoding="utf-8")


def json_line(data) -> None:
    """`--json -`: `data` as the one line on stdout (ol grade's judge reads it): the report, or the refusal of a
    submission as malformed (exit 2)."""
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def write_outputs(rep, json_path, junit, gradescope) -> None:
    raise_if_interrupted()  # no report after a Ctrl-C, even one something swallowed
    if json_path == "-":
        json_line(rep.to_json())
    elif json_path:
        write_json(json_path, rep.to_json())
    if junit:
        from ..render.junit import junit_xml  # here: 45 ms measured, only --junit needs it

        Path(junit).parent.mkdir(parents=True, exist_ok=True)
        Path(junit).write_text(junit_xml(rep), encoding="utf-8")  # as its XML declaration says
    if gradescope:
        write_json(gradescope, results_json(rep))
