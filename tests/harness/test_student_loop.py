"""The student's loop (issue 29): `ol check -k` runs only the selected tests, judged as in a whole check; each
test's line is printed as it finishes, the summary last; a selection is pytest's -k over the chapter's names."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.check.runner import CheckOptions, run_check, select
from harness.kernel.errors import UsageError
from harness.kernel.outcomes import Outcome
from harness.languages import rust
from harness.registry import load_chapter

REPO = Path(__file__).resolve().parents[2]
CH = load_chapter("L10.8")
NAMES = [t.name for t in CH.tests]


def ol(*args, cwd: Path, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.parametrize("expr, want", [
    ("hand_example", ["hand_example_prompt_lookup", "ngram_draft_hand_example", "hand_example_greedy_verify",
                      "hand_example_sampled_step", "rollback_hand_example"]),
    ("rollback and not hand", ["rollback_drops_one_reference_only", "blocks_conserved_across_rollbacks"]),
    ("HAND_EXAMPLE_PROMPT", ["hand_example_prompt_lookup"]),  # pytest's -k: case-insensitive
    ("(greedy or sampled) and spec", ["greedy_spec_equals_greedy_without_spec", "sampled_spec_keeps_the_target_distribution"]),
])
def test_k_selects_as_pytest_does_over_the_chapters_names(expr, want):
    assert select(CH, expr) == want


@pytest.mark.parametrize("expr, why", [("zzz", "no test of L10.8 matches"), ("hand and (", "is not a test expression"),
                                       ("hand(x=1)", "takes no arguments")])
def test_a_k_that_selects_nothing_or_does_not_parse_is_a_usage_error_naming_the_tests(expr, why):
    with pytest.raises(UsageError) as e:
        select(CH, expr)
    assert why in str(e.value)


def test_only_the_selected_tests_run_and_each_is_told_as_it_finishes():
    """`only` names exact tests (none whose name contains another's runs too); on_result hears each once, with the
    outcome the report keeps, before run_check returns."""
    heard = []
    rep = run_check(CH, "reference", CheckOptions(only=["rollback_hand_example", "hand_example_greedy_verify"]),
                    on_result=lambda name, outcome, seconds, message: heard.append((name, outcome)))
    assert [t.name for t in rep.tests] == ["hand_example_greedy_verify", "rollback_hand_example"]
    assert sorted(heard) == sorted((t.name, t.outcome) for t in rep.tests) and all(o is Outcome.PASS for _, o in heard)


@pytest.mark.slow(s=7)
def test_a_failing_selection_is_judged_as_in_the_whole_check():
    """The mutant s08 (the bonus token from the last draft's row) fails hand_example_greedy_verify alone as in a whole
    check: the same outcome and message."""
    whole = {t.name: t for t in run_check(CH, "mutant:s08").tests}
    alone = run_check(CH, "mutant:s08", CheckOptions(only=["hand_example_greedy_verify"])).tests
    assert [t.name for t in alone] == ["hand_example_greedy_verify"]
    assert alone[0].outcome is Outcome.FAIL and (alone[0].outcome, alone[0].message) == (
        whole["hand_example_greedy_verify"].outcome, whole["hand_example_greedy_verify"].message)


@pytest.mark.slow(s=4)
def test_ol_check_k_from_another_folder_prints_the_lines_then_the_summary(tmp_path):
    r = ol("check", "L10.8", "--submission", "reference", "-k", "rollback and not hand", "--json", "r.json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    tests = [line for line in lines if line.startswith("test ")]
    assert sorted(line.split()[1] for line in tests) == ["blocks_conserved_across_rollbacks", "rollback_drops_one_reference_only"]
    assert all(" ... pass (" in line for line in tests) and "\x1b[" not in r.stdout  # a pipe: plain lines
    summary = next(i for i, line in enumerate(lines) if "2 of 2 passed" in line)
    assert summary > max(lines.index(t) for t in tests)
    assert "ran 2 of the 16 tests" in r.stdout
    report = json.loads((tmp_path / "r.json").read_text())  # the JSON stays the whole (selected) report
    assert [t["name"] for t in report["tests"]] == ["rollback_drops_one_reference_only", "blocks_conserved_across_rollbacks"]


@pytest.mark.slow(s=6)
def test_ol_check_test_names_exact_tests_and_refuses_when_none_is_one(tmp_path):
    r = ol("check", "L10.8", "--submission", "reference", "--test", "rollback_hand_example", "--test", "mine", cwd=tmp_path)
    assert r.returncode == 0 and [line.split()[1] for line in r.stdout.splitlines() if line.startswith("test ")] == ["rollback_hand_example"]
    r = ol("check", "L10.8", "--submission", "reference", "--test", "mine", cwd=tmp_path)
    assert r.returncode == 2 and "no test of L10.8 matches --test mine" in r.stderr and "rollback_hand_example" in r.stderr
    assert "Traceback" not in r.stderr and "passed" not in r.stdout


class FakeTransport:
    """Answers every call with `answer` (a value, or a failure as the worker transport reports one)."""

    def __init__(self, answer, language="python") -> None:
        self.answer, self.language, self.restarted = answer, language, 0

    def run(self, op, args, callbacks, deadline_s):
        from harness.transport.impl import CallInfo

        answer = self.answer(op, args, deadline_s) if callable(self.answer) else self.answer
        return CallInfo(op, error=answer) if isinstance(answer, Exception) else CallInfo(op, value=answer)

    def restart(self) -> None:
        self.restarted += 1


def fake_impl(answer, language="python"):
    impl = getattr(CH.module("client"), CH.client_class)(None, "fake")
    impl.transport = FakeTransport(answer, language)
    return impl


@pytest.mark.parametrize("language, name", [("python", "SpecConfig.parse"), ("rust", "SpecConfig::parse")])  # no bound given: the Rust worker calls parse
def test_a_wrong_type_returned_is_a_fail_in_the_contracts_words(language, name):
    from harness.kernel.errors import SubmissionFailure

    impl = fake_impl({"draft": "prompt_lookup", "k": 4.0, "max_ngram": 3, "min_ngram": 1}, language)
    with pytest.raises(SubmissionFailure) as e:
        impl.parse_config("prompt_lookup", 4)
    assert e.value.outcome is Outcome.FAIL and impl.transport.restarted == 1
    text = str(e.value)
    assert text.startswith(f"{name}(") and "returned the wrong type: result.k is 4.0" in text and "expected an integer" in text, text
    assert "spec_config_parse" not in text and "protocol" not in text


@pytest.mark.parametrize("language, name", [("python", "RunnerTarget.extend"), ("rust", "RunnerTarget::extend")])
def test_a_timeout_or_a_crash_names_the_contracts_function_not_the_op(language, name):
    from harness.kernel.errors import Crashed, SubmissionFailure, Timeout
    from harness.transport.impl import describe_call

    target = getattr(CH.module("client"), "RunnerProxy", None)
    crash = fake_impl(Crashed("runner_target_call: the worker process exited with code 3 before answering"), language)
    hang = fake_impl(lambda op, args, deadline_s: Timeout(f"{describe_call(op, args, deadline_s)}: no answer within the deadline"),
                     language)
    for impl, outcome, rest in ((crash, Outcome.CRASHED, ": the worker process exited with code 3"),
                                (hang, Outcome.TIMEOUT, "with a deadline of 30 s: no answer within the deadline")):
        proxy = target(impl, 7) if target is not None else None
        with pytest.raises(SubmissionFailure) as e:
            proxy.extend([1, 2]) if proxy is not None else impl.call("runner_target_call", {"target": 7, "method": "extend", "ids": [1, 2]})
        text = str(e.value)
        assert e.value.outcome is outcome and text.startswith(name) and rest in text, text
        assert "runner_target_call" not in text and "target=7" not in text, text


def test_every_option_of_diff_check_and_start_has_help_text():
    import click

    from harness.cli import main

    for name in ("diff", "check", "start"):
        missing = [p.opts[0] for p in main.commands[name].params if isinstance(p, click.Option) and not p.help]
        assert not missing, f"ol {name}: options without help text: {missing}"


@pytest.mark.slow(s=11)
def test_diff_sections_come_in_the_chapters_order_and_only_narrows_them(tmp_path):
    r = ol("diff", "L10.8", "--submission", "mutant:s03", "--json", "all.json", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert list(json.loads((tmp_path / "all.json").read_text())["sections"]) == ["prompt_lookup", "ngram", "verify", "generate", "rollback"]
    r = ol("diff", "L10.8", "--submission", "mutant:s03", "--only", "ngram_draft", "--json", "ng.json", cwd=tmp_path)
    got = json.loads((tmp_path / "ng.json").read_text())
    assert r.returncode == 1 and list(got["sections"]) == ["ngram"] and got["divergent"] > 0  # s03: n-gram ties to the highest id
    assert "verify:" not in r.stdout and "ngram:" in r.stdout
    r = ol("diff", "L10.8", "--submission", "mutant:s03", "--only", "verify", cwd=tmp_path)
    assert "0 divergent cases" in r.stdout  # s03's slip shows in no verification case, nor in verify's property checks:
    assert r.returncode == 1 and "the check fails elsewhere: ngram_draft_hand_example" in " ".join(r.stdout.split()), r.stdout
    r = ol("diff", "L10.8", "--only", "nope", cwd=tmp_path)
    assert r.returncode == 2 and "verify_draft" in r.stderr and r.stdout == ""


@pytest.mark.slow(s=3)
def test_diff_of_a_submission_that_does_not_load_is_one_message(tmp_path):
    assert ol("start", "L10.8", "--lang", "python", cwd=tmp_path).returncode == 0
    r = ol("diff", "L10.8", "--lang", "python", cwd=tmp_path)  # the stub without L10.1's modules: no --ref-deps
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("Your submission could not be loaded") and "No module named 'tinyllm.kv'" in r.stdout
    assert len(r.stdout.splitlines()) < 10 and "divergent" not in r.stdout, r.stdout


@pytest.mark.slow(s=4)
@pytest.mark.parametrize("case", ["v050", "v000", "pl000", "ng010", "r000"])
def test_a_case_for_a_python_student_is_a_pytest_function_that_holds_on_the_reference(tmp_path, case):
    import shutil

    r = ol("diff", "L10.8", "--case", case, cwd=tmp_path)  # no workspace here: Python's form
    assert r.returncode == 0 and f"def test_golden_{case}():" in r.stdout, r.stdout[:500]
    shutil.copytree(REPO / "reference/tinyllm", tmp_path / "tinyllm")
    (tmp_path / f"test_golden_{case}.py").write_text(r.stdout)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"test_golden_{case}.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-2000:]


@pytest.mark.slow(s=4)
def test_a_pasted_python_case_catches_its_pitfall(tmp_path):
    """v050 shows s07 (u_resample drawn only on rejection): the sample with that bug fails the pasted test."""
    import shutil

    shutil.copytree(REPO / "reference/tinyllm", tmp_path / "tinyllm")
    shutil.copyfile(REPO / "examples/submissions/s07-draws-u-resample-only-on-rejection/tinyllm/infer/spec.py",
                    tmp_path / "tinyllm/infer/spec.py")
    (tmp_path / "test_golden_v050.py").write_text(ol("diff", "L10.8", "--case", "v050", cwd=tmp_path).stdout)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_golden_v050.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert run.returncode == 1 and "the generator's next u32" in run.stdout, run.stdout[-2000:]


FAKE_PYTHON = """#!/bin/sh
# A stand-in interpreter for ./ol's first setup: `-m venv DIR` makes DIR/bin/python (this script again), `-m pip`
# prints what pip prints while it collects and installs the lock, anything else is the real interpreter.
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0; fi
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  case "$*" in *"--require-hashes"*) ;; *) exit 0 ;; esac
  for p in numpy scipy pytest rich click; do echo "Collecting $p==1.0 (from -r locks/student.txt (line 1))"; echo "  Downloading $p-1.0.whl (1.0 MB)"; done
  echo "Installing collected packages: numpy, scipy, pytest, rich, click"
  echo "Successfully installed click-1.0 numpy-1.0 pytest-1.0 rich-1.0 scipy-1.0"
  exit 0
fi
exec REAL "$@"
"""


@pytest.mark.slow(s=2)
def test_the_first_setup_says_what_it_installs_how_far_and_the_next_step(tmp_path):
    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON.replace("REAL", sys.executable))
    fake.chmod(0o755)
    env = {**os.environ, "OL_VENV": str(tmp_path / "venv"), "OL_PYTHON": str(fake)}
    r = subprocess.run([str(REPO / "ol"), "tests", "L10.8"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("ol: first run: setting up") and "numpy" in lines[0]
    steps = [line for line in lines if line.startswith("ol: [")]
    assert list(dict.fromkeys(s[:9] for s in steps)) == ["ol: [1/3]", "ol: [2/3]", "ol: [3/3]"], lines
    packages = [line for line in lines if "package " in line]
    assert [p.split()[-1] for p in packages] == ["numpy==1.0", "scipy==1.0", "pytest==1.0", "rich==1.0", "click==1.0"], lines
    assert packages[-1].startswith("ol: [2/3]   package 5:")
    assert any(s.startswith("ol: [2/3] installing the lock, locks/student.txt: ") for s in steps), lines  # from the lock
    assert any("installing the 5 packages collected" in line for line in lines)
    assert lines[-1].startswith("ol: ready in ") and lines[-1].endswith("now running: ol tests L10.8"), lines
    assert "hand_example_prompt_lookup" in r.stdout  # then the command itself ran
    r = subprocess.run([str(REPO / "ol"), "tests", "L10.8"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr  # set up once: a second run says nothing of it


def _checkout_with_its_lock(tmp_path: Path) -> Path:
    """The bootstrap's own files in a folder of their own (./ol, pyproject.toml, locks/), the harness linked in."""
    co = tmp_path / "checkout"
    (co / "locks").mkdir(parents=True)
    for f in ("ol", "pyproject.toml", *(f"locks/{r}.txt" for r in ("student", "staff", "dev"))):
        shutil.copy2(REPO / f, co / f)
    (co / "harness").symlink_to(REPO / "harness")
    return co


@pytest.mark.slow(s=3)
def test_the_stamp_follows_the_lock_and_the_role(tmp_path):
    """An edited lock installs again; OL_EXTRAS=staff installs the staff lock, and the role stays; `ol selftest` asks
    for the dev set by itself; an unknown role is refused."""
    co = _checkout_with_its_lock(tmp_path)
    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON.replace("REAL", sys.executable))
    fake.chmod(0o755)
    venv = tmp_path / "venv"
    env = {**os.environ, "OL_VENV": str(venv), "OL_PYTHON": str(fake)}

    def ol(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(co / "ol"), *args], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                              env={**env, **extra})

    assert ol("--help").returncode == 0
    first = (venv / ".ol-installed").read_text()
    assert first.startswith("student ")
    with open(co / "locks" / "student.txt", "a") as f:
        f.write("# an edit of the lock\n")
    r = ol("--help")
    assert r.returncode == 0 and "installing the student set into" in r.stderr and "locks/student.txt" in r.stderr, r.stderr
    assert (venv / ".ol-installed").read_text() not in ("", first), "the stamp changes with the lock"
    r = ol("--help", OL_EXTRAS="staff")
    assert "ol: [2/3] installing the lock, locks/staff.txt: " in r.stderr, r.stderr
    assert (venv / ".ol-installed").read_text().startswith("staff ")
    assert ol("--help").stderr == "", "a staff environment stays one: no install for a student's command"
    r = ol("selftest", "--co", "-q", "-p", "no:xdist", str(REPO / "tests" / "harness" / "test_lock.py"))
    assert "needs the dev set" in r.stderr and "locks/dev.txt" in r.stderr, r.stderr
    assert (venv / ".ol-installed").read_text().startswith("dev ")
    r = ol("--help", OL_EXTRAS="teacher")
    assert r.returncode == 2 and r.stderr == "ol: OL_EXTRAS=teacher is no role: use student (the default), staff or dev\n"


@pytest.mark.slow(s=3)
def test_a_failing_check_ends_with_the_next_step_in_its_language(tmp_path):
    r = ol("check", "L10.8", "--submission", "mutant:s08", "-k", "greedy_verify", cwd=tmp_path)
    last = r.stdout.strip().splitlines()[-1]
    assert r.returncode == 1 and last.startswith(
        "next (Python): `ol check L10.8 --submission mutant:s08 -k hand_example_greedy_verify` reruns"), r.stdout[-1500:]
    assert "a pytest function" in last and "cargo" not in last
    assert "`ol diff L10.8 --case ID` prints one as" in last, last


@pytest.mark.slow(s=30)
@pytest.mark.skipif(rust.missing() is not None, reason="needs cargo and rustc")
def test_a_failing_rust_check_names_the_rust_case_command(tmp_path):
    """`ol diff --case ID` prints a #[test] for spec.rs only with --lang rust: the next step says so."""
    r = ol("check", "L10.8", "--submission", "mutant:s08", "--lang", "rust", "-k", "greedy_verify", cwd=tmp_path)
    last = r.stdout.strip().splitlines()[-1]
    assert r.returncode == 1 and last.startswith("next (Rust): "), r.stdout[-1500:]
    assert "`ol diff L10.8 --case ID --lang rust` prints one as a #[test]" in last, last


@pytest.mark.slow(s=4)
def test_at_a_terminal_the_lines_come_above_a_live_bar_then_the_summary(tmp_path):
    from tests.harness.tty_kit import at_a_terminal

    code, text = at_a_terminal([sys.executable, "-m", "harness.cli", "check", "L10.8", "--submission", "reference",
                                "-k", "rollback_hand_example or greedy_verify"], cwd=tmp_path,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    assert code == 0, text
    import re

    tests = [m.start() for m in re.finditer(r"test (hand_example_greedy_verify|rollback_hand_example) \.\.\. pass \(", text)]
    assert len(tests) == 2 and "2/2" in text and max(tests) < text.index("2 of 2 passed"), text  # the bar counted both
