"""Ctrl-C is an interrupt, never a grade (issue 38, item 2): at a real terminal, mid-run, `ol check` (a Python and a
Rust submission), `cargo test` in an `ol start` workspace, `ol diff` and `ol mutants` exit 130, say "interrupted",
print no score, and write no report that could be read as a grade. Each command runs in its own session whose
controlling terminal is a pty; Ctrl-C is typed there (the terminal sends SIGINT to the foreground group, as a
person's Ctrl-C does)."""

import os
import signal
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.tty_kit import SIGNAL_STATE, at_a_pty, suspended_at_a_shell, text_of

REPO = Path(__file__).resolve().parents[2]
OL = [sys.executable, "-m", "harness.cli"]
ENV = {"PYTHONPATH": str(REPO)}
SCORE = re.compile(r"\d+ of \d+ passed|score \d|test result:")  # ol check's summary, cargo test's verdict line
FIRST_LINE = b"test hand_example_prompt_lookup ..."
FIRST_SECTION = b"cases diverge"  # ol diff's first section shown; the others and the property checks still to come
needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo")


def reports(tmp_path: Path) -> list[str]:
    return ["--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"),
            "--gradescope", str(tmp_path / "results.json"), "--html", str(tmp_path / "r.html")]


def assert_interrupted(code: int, raw: bytes, typed: bool, tmp_path: Path, word: str = "ol: interrupted") -> None:
    text = text_of(raw)
    assert typed, f"the run ended before Ctrl-C could be typed:\n{text[-3000:]}"
    assert code == 130, (f"exit {code}:\n{text[-3000:]}\nright after Ctrl-C:\n{text.split('^C', 1)[-1][:1500]}\n"
                         f"as Ctrl-C was typed:\n{SIGNAL_STATE.get('last')}")
    assert word in text, text[-3000:]
    assert not SCORE.search(text.split("^C", 1)[-1]), f"a score after Ctrl-C:\n{text[-3000:]}"
    assert "ERROR" not in text and "did not run" not in text, text[-3000:]
    assert not [p.name for p in tmp_path.iterdir() if p.suffix in (".json", ".xml", ".html")], "a report was written"


@pytest.mark.slow(s=20)
def test_ctrl_c_during_a_python_check_is_exit_130_and_no_report(tmp_path):
    sample = REPO / "examples" / "submissions" / "s01-first-occurrence"
    code, raw, typed = at_a_pty([*OL, "check", "L10.8", "--submission", str(sample), "--ref-deps", *reports(tmp_path)],
                                REPO, ENV, interrupt_on=FIRST_LINE, timeout=300)
    assert_interrupted(code, raw, typed, tmp_path)


@pytest.mark.slow(s=75)
def test_ctrl_z_then_fg_mid_check_costs_no_test(tmp_path):
    """Ctrl-Z typed at an interactive shell mid-check, `fg` after longer than the whole check's limit (lowered to
    40 s; a call's deadline is 5 to 60 s): the time stopped is no call's, and every test passes. Before the judge's
    clock (harness.kernel.clock), every test after the stop timed out: right code failed."""
    sample = REPO / "examples" / "submissions" / "correct"
    line = shlex.join([*OL, "check", "L10.8", "--submission", str(sample), "--ref-deps"])
    code, raw, typed = suspended_at_a_shell(line, REPO, {**ENV, "OL_CHECK_LIMIT_S": "40"}, FIRST_LINE, 42, timeout=300)
    text = text_of(raw)
    assert typed and "Stopped" in text, f"the check was not stopped:\n{text[-3000:]}"
    assert code == 0 and "16 of 16 passed" in text, f"exit {code}:\n{text[-3000:]}"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """An `ol start` workspace (the stub: every body todo!())."""
    home = tmp_path_factory.mktemp("student")
    r = at_a_pty([*OL, "start", "L10.8"], home, ENV, timeout=120)
    assert r[0] == 0, text_of(r[1])
    return home / "rust"


@needs_cargo
@pytest.mark.slow(s=90)
def test_ctrl_c_during_a_rust_check_is_exit_130_and_no_report(tmp_path, workspace):
    code, raw, typed = at_a_pty([*OL, "check", "L10.8", *reports(tmp_path)], workspace, ENV, interrupt_on=FIRST_LINE,
                                timeout=600)
    assert_interrupted(code, raw, typed, tmp_path)


@needs_cargo
@pytest.mark.slow(s=90)
def test_ctrl_c_during_cargo_test_says_interrupted_and_prints_no_verdict(tmp_path, workspace):
    """Run from an interactive shell, as a person does: the shell outlives cargo (a session leader's exit would
    hang up the terminal), and a command line is abandoned at Ctrl-C. cargo dies of the SIGINT (130 at the shell);
    the front end outlives it to say so."""
    env = {**ENV, "OL": " ".join(OL), "PS1": "$ "}
    code, raw, typed = at_a_pty(["bash", "--norc", "--noprofile", "-i", "-c", "cargo test --offline; echo after=$?"],
                                workspace, env, interrupt_on=b"test hand_example_prompt_lookup ...", timeout=600)
    text = text_of(raw)
    assert typed and "l10_8: interrupted: no verdict" in text, text[-3000:]
    assert not SCORE.search(text.split("^C", 1)[-1]) and "after=0" not in text, text[-3000:]
    code, raw, typed = at_a_pty(["cargo", "test", "--offline"], workspace, env, interrupt_on=b"test hand_example_prompt_lookup ...",
                                timeout=600)  # cargo alone: what a shell reports of it
    assert typed and code == -signal.SIGINT, f"cargo ended with {code}, not killed by SIGINT (130 at a shell):\n{text_of(raw)[-3000:]}"


@needs_cargo
@pytest.mark.slow(s=60)
def test_ctrl_c_during_ol_diff_of_a_rust_port_is_exit_130_and_no_json(tmp_path):
    """A Rust port through its worker, interrupted once its first section is shown (a time would race the run: a
    cold build once outlasted 4 s, a quiet machine's whole diff now does not)."""
    code, raw, typed = at_a_pty([*OL, "diff", "L10.8", "--submission", "mutant:s01", "--lang", "rust", "--json",
                                 str(tmp_path / "d.json")], REPO, ENV, interrupt_on=FIRST_SECTION, timeout=600)
    assert_interrupted(code, raw, typed, tmp_path)
    assert "property check" not in text_of(raw).split("^C", 1)[-1], text_of(raw)[-3000:]


@needs_cargo
@pytest.mark.slow(s=60)
def test_ctrl_c_during_ol_mutants_of_the_rust_ports_is_exit_130_and_no_matrix(tmp_path):
    code, raw, typed = at_a_pty([*OL, "mutants", "L10.8", "--lang", "rust", "--jobs", "2", "--json", str(tmp_path / "m.json")],
                                REPO, ENV, interrupt_after=8.0, timeout=600)
    assert_interrupted(code, raw, typed, tmp_path)
    assert "caught" not in text_of(raw), text_of(raw)[-3000:]


@pytest.mark.slow(s=15)
def test_ctrl_c_during_ol_diff_is_exit_130_and_no_json(tmp_path):
    sample = REPO / "examples" / "submissions" / "s01-first-occurrence"
    code, raw, typed = at_a_pty([*OL, "diff", "L10.8", "--submission", str(sample), "--ref-deps", "--json",
                                 str(tmp_path / "d.json")], REPO, ENV, interrupt_on=FIRST_SECTION, timeout=300)
    assert_interrupted(code, raw, typed, tmp_path)
    assert "property check" not in text_of(raw).split("^C", 1)[-1], text_of(raw)[-3000:]


@pytest.mark.slow(s=30)
def test_ctrl_c_during_ol_mutants_is_exit_130_and_no_matrix(tmp_path):
    code, raw, typed = at_a_pty([*OL, "mutants", "L10.8", "--jobs", "2", "--json", str(tmp_path / "m.json")], REPO, ENV,
                                interrupt_on=b"reference and mutants", timeout=300)
    assert_interrupted(code, raw, typed, tmp_path)
    assert "caught" not in text_of(raw), text_of(raw)[-3000:]


def test_a_ctrl_c_that_a_finalizer_swallows_is_still_raised_where_the_run_decides():
    """Python drops a KeyboardInterrupt raised inside a finalizer, an at-fork hook or a weakref callback ("Exception
    ignored"): the one typed as `ol mutants` forked its pool was lost in logging's at-fork hook and the run went on
    to exit 0. ol's handler (kernel.errors.hear_interrupts) notes it, and raise_if_interrupted raises it again."""
    program = """
import os, signal
from harness.kernel.errors import hear_interrupts, raise_if_interrupted
if os.environ.get("OL_HEAR") == "1":
    hear_interrupts()

class Swallows:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)  # heard at the next instruction: inside this finalizer, which drops it
        for _ in range(3):
            pass

Swallows()
try:
    raise_if_interrupted()
    print("went on")
except KeyboardInterrupt:
    print("interrupted")
"""
    said = {hear: subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=60,
                                 env={**os.environ, **ENV, "OL_HEAR": hear},
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as at a terminal
            for hear in ("0", "1")}
    assert said["0"].stdout.strip() == "went on" and "Exception ignored" in said["0"].stderr, said["0"]  # Python's own
    assert said["1"].stdout.strip() == "interrupted", said["1"]


def test_a_command_starts_with_no_interrupt_noted():
    """The latch belongs to one run: a process that runs several commands (a test's CliRunner) carries no Ctrl-C from
    one into the next."""
    program = """
import os, signal
from harness.kernel.errors import hear_interrupts, raise_if_interrupted
hear_interrupts()
try:
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(3):
        pass
except KeyboardInterrupt:
    pass
hear_interrupts()  # the next command
raise_if_interrupted()
print("next command runs")
"""
    r = subprocess.run([sys.executable, "-c", program], cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={**os.environ, **ENV}, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert r.stdout.strip() == "next command runs", r
