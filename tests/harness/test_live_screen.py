"""The live views leave the screen right (issue 38, item 3): `ol check`'s bar and test lines, `ol grade`'s bar and
submission lines, run at a real pty of 80 and 120 columns, their raw bytes replayed through a terminal emulator
(pyte), the final screen read: no bar left over, no line glued to another, every line once.

A pipe cannot show this: the bar is drawn only at a terminal, and what corrupts it (a second console writing under
the bar's feet, a line wider than the terminal counted as one) exists only in cursor motions."""

import re
import shutil
import sys
from pathlib import Path

import pyte
import pytest

from tests.harness.tty_kit import at_a_pty

REPO = Path(__file__).resolve().parents[2]
OL = [sys.executable, "-m", "harness.cli"]
ROWS = 300  # tall enough that nothing scrolls away: every line the command wrote is on the final screen
BOX = set("┏┓┃┡┩│└┘┗┛┳╇┻╋┠┨━")  # a table's rules (the summary tables are drawn with box characters)


def bars(screen: list[str]) -> list[str]:
    """The lines of a progress bar (rich's ━ run beside its count, in no table): none may stay once the command is done."""
    return [line for line in screen if "━" in line and not set(line) & (BOX - {"━"})]
LINE = re.compile(r"test (\w+) \.\.\. (pass|fail|error|timeout|crashed) \(")


def final_screen(raw: bytes, columns: int) -> list[str]:
    screen = pyte.Screen(columns, ROWS)
    pyte.ByteStream(screen).feed(raw)
    return [line.rstrip() for line in screen.display]


def run(argv: list[str], cwd: Path, columns: int) -> tuple[int, list[str]]:
    code, raw, _ = at_a_pty(argv, cwd, env={"PYTHONPATH": str(REPO)}, columns=columns, rows=ROWS)
    return code, final_screen(raw, columns)


@pytest.mark.slow(s=30)
@pytest.mark.parametrize("columns", [80, 120])
def test_ol_check_leaves_one_line_per_test_and_no_bar(columns):
    sample = REPO / "examples" / "submissions" / "s01-first-occurrence"
    code, screen = run([*OL, "check", "L10.8", "--submission", str(sample), "--ref-deps"], REPO, columns)
    assert code == 1, "\n".join(screen)
    text = "\n".join(screen)
    assert not bars(screen), f"a stale bar on the final screen:\n{text}"
    tested = [m.group(1) for line in screen if (m := LINE.search(line))]
    assert sorted(tested) == sorted(set(tested)) and len(tested) == 16, text  # each test's line once
    glued = [line for line in screen if LINE.search(line) and not line.startswith("test ")]
    assert not glued, f"a test's line glued to other output: {glued}"


@pytest.mark.slow(s=90)
@pytest.mark.parametrize("columns", [80, 120])
def test_ol_grade_leaves_one_line_per_submission_and_no_bar(tmp_path, columns):
    """Four submissions graded two at a time: lines printed above the live view while it shows two running names
    (wider than the terminal), refreshed twice a second. A line printed past the live view's console, or a refresh
    that moves up too few lines, leaves a bar and a running line behind and glues a submission's line to them (seen:
    with the lines through a second console, 4 stale bars at 80 columns and a line after "running longest: ... 30 s")."""
    klass = tmp_path / "class"
    names = [f"{i}-{n}" for i, n in enumerate(["correct", "s13-releases-partial-block", "s01-first-occurrence", "correct"])]
    for n in names:  # long names: the live view's lines would be wider than 80 columns
        shutil.copytree(REPO / "examples" / "submissions" / n.split("-", 1)[1], klass / f"{n}-with-a-long-student-name-{n}")
    code, screen = run([*OL, "grade", "L10.8", str(klass), "--ref-deps", "--jobs", "2", "--no-sandbox", "--no-similar",
                        "--shipped-cases", "--out", str(tmp_path / "grades.csv")], REPO, columns)
    text = "\n".join(screen)
    assert code == 0, text
    assert not bars(screen), f"a stale bar on the final screen:\n{text}"
    assert "running longest" not in text, text
    for n in names:
        graded = [line for line in screen if re.match(rf"\d+/16 {re.escape(n)}-with", line)]
        assert len(graded) == 1, f"{n}'s line is not on the screen once, starting its own line:\n{text}"
        assert not [line for line in screen if f"/16 {n}-with" in line and not line.startswith(f"{line.split()[0]} {n}")], \
            f"{n}'s line glued to other output:\n{text}"
