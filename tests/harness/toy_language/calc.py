"""A toy second language, "calc", plugged into ol from outside the engine: this folder and one entry of
OL_LANGUAGES (`calc=<this file>`), nothing else (tests/harness/test_packs.py grades a toy pack in it).

A calc submission is `toycalc/core.calc`: one arithmetic expression in x (integers, x, + - *, parentheses).
Its build compiles the expression to postfix (`program.json` in the build's scratch folder), or fails with the
first error (its column), which `ol check` then reports on every test, as a Rust build's first error is. Its
worker, calc_worker.py, speaks spec/protocol.md over the two descriptors (framing by harness.protocol.wire) and
answers each op of the pack's calc op table (the pack's `course_sources`: `ops.json`, op -> the argument bound
to x) by running the program. The build only reads the student's text, never runs it, so it needs no sandbox;
the worker runs confined as every worker does, on copies in its own folder.
"""

import json
import re
import sys
from pathlib import Path

from harness.kernel.errors import SubmissionFailure
from harness.languages import PYTHON_WORKER_KIT, Language, WorkerLaunch
from harness.kernel.paths import REPO
from harness.sandbox.confine import readable_file

HERE = Path(__file__).resolve().parent
TOKEN = re.compile(r"\s*(?:(\d+)|(x)|([-+*()]))")
PRECEDENCE = {"+": 1, "-": 1, "*": 2}


class CalcDoesNotCompile(SubmissionFailure):
    """The submission's expression is not calc: every test fails with the reason."""


def tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, column) of each token; a character that starts none is a CalcDoesNotCompile."""
    out, at = [], 0
    while text[at:].strip():
        m = TOKEN.match(text, at)
        if m is None:
            col = at + len(text[at:]) - len(text[at:].lstrip()) + 1
            raise CalcDoesNotCompile(f"core.calc did not compile: column {col}: unexpected {text[col - 1]!r}")
        kind = "int" if m.group(1) else "x" if m.group(2) else "op"
        out.append((kind, m.group(m.lastindex), m.start(m.lastindex) + 1))
        at = m.end()
    return out


def compile_expression(text: str) -> list[list]:
    """The expression in postfix (shunting-yard): ["int", n], ["x"], ["op", "+"] items."""
    program, stack, want_value = [], [], True
    for kind, tok, col in tokens(text):
        if want_value and kind in ("int", "x"):
            program.append(["int", int(tok)] if kind == "int" else ["x"])
            want_value = False
        elif want_value and tok == "(":
            stack.append(tok)
        elif not want_value and tok in PRECEDENCE:
            while stack and stack[-1] != "(" and PRECEDENCE[stack[-1]] >= PRECEDENCE[tok]:
                program.append(["op", stack.pop()])
            stack.append(tok)
            want_value = True
        elif not want_value and tok == ")" and "(" in stack:
            while stack[-1] != "(":
                program.append(["op", stack.pop()])
            stack.pop()
        else:
            raise CalcDoesNotCompile(f"core.calc did not compile: column {col}: unexpected {tok!r}")
    if want_value or "(" in stack:
        raise CalcDoesNotCompile("core.calc did not compile: the expression ends too early")
    return program + [["op", op] for op in reversed(stack)]


def build(chapter, package_dir: Path, scratch: Path, mode) -> Path:
    source = Path(package_dir) / chapter.language("calc").student_file
    (scratch / "program.json").write_text(json.dumps(compile_expression(source.read_text())))
    return scratch


def worker(chapter, built: Path, home: Path) -> WorkerLaunch:
    kit = home / "kit"
    for rel in PYTHON_WORKER_KIT:  # harness/protocol/: the wire format the worker speaks
        readable_file(REPO / rel, kit / rel)
    readable_file(HERE / "calc_worker.py", kit / "calc_worker.py")
    for place, source in chapter.language("calc").course_sources.items():  # the pack's op table
        readable_file(source, kit / place)
    readable_file(Path(built) / "program.json", kit / "program.json")

    def argv(fd_in: int, fd_out: int) -> list[str]:
        return [sys.executable, str(kit / "calc_worker.py"), "--program", str(kit / "program.json"),
                "--ops", str(kit / "ops.json"), "--in", str(fd_in), "--out", str(fd_out)]
    return WorkerLaunch(argv, (kit,), {"PYTHONPATH": str(kit), "PYTHONDONTWRITEBYTECODE": "1"})


LANGUAGE = Language("calc", worker, build)
