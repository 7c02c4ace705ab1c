"""Bad input is stopped at the door: each gets one line naming the problem and what to do, its own
exit code, no traceback, and no test runs (never a grade that looks like one)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.tty_kit import at_a_terminal

REPO = Path(__file__).resolve().parents[2]


def ol(*args, cwd=REPO, root=REPO, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(root), **(env or {})})


def first_line(r) -> str:
    return (r.stderr.strip().splitlines() or [""])[0]


def no_test_ran(r) -> bool:
    return "passed" not in r.stdout and "Traceback" not in r.stderr + r.stdout


def test_a_package_without_the_chapter_file_is_a_usage_error(tmp_path):
    (tmp_path / "sub" / "tinyllm" / "infer").mkdir(parents=True)
    r = ol("check", "L10.8", "--submission", tmp_path / "sub")
    assert r.returncode == 2 and "holds tinyllm/ but not tinyllm/infer/spec.py" in first_line(r), r.stderr
    assert no_test_ran(r) and len(r.stderr.strip().splitlines()) == 1


def test_a_pack_whose_table_does_not_parse_is_a_harness_error_not_a_traceback_at_start(tmp_path):
    """ol's help texts read every pack's table when it starts: a broken one is named by the command that loads the
    chapters (exit 3, one message), and `ol --help` still works."""
    broken = tmp_path / "packs" / "Broken"
    broken.mkdir(parents=True)
    (broken / "chapter.toml").write_text('chapter = "B1.0"\ntests = [\n')
    env = {"OL_CHAPTERS_PATH": str(tmp_path / "packs")}
    assert ol("--help", env=env).returncode == 0
    r = ol("tests", "L10.8", env=env)
    assert r.returncode == 3 and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert f"{broken / 'chapter.toml'}: not valid TOML" in r.stderr, r.stderr


def test_an_unknown_mutant_is_a_usage_error_in_one_line():
    r = ol("check", "L10.8", "--submission", "mutant:s99")
    assert r.returncode == 2 and "has no mutant 's99'" in first_line(r) and "s01" in first_line(r), r.stderr
    assert no_test_ran(r) and len(r.stderr.strip().splitlines()) == 1


def _project_copy(tmp_path) -> Path:
    """The project's code and data (not .git or .venv), so a test can damage its golden file."""
    copy = tmp_path / "project"
    for part in ("harness", "chapters", "reference", "fixtures", "config", "spec", "otel", "examples"):
        shutil.copytree(REPO / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    for f in ("pyproject.toml", "conftest.py"):
        shutil.copy(REPO / f, copy / f)
    return copy


@pytest.mark.parametrize("damage", ["truncated", "emptied", "one byte edited"])
def test_a_damaged_golden_file_is_a_harness_error_not_a_failing_grade(tmp_path, damage):
    copy = _project_copy(tmp_path)
    golden = copy / "chapters" / "L10_8" / "fixtures" / "spec_golden.json"
    data = golden.read_bytes()
    golden.write_bytes({"truncated": data[: len(data) // 2], "emptied": b"",
                        "one byte edited": data.replace(b'"n_accepted":0', b'"n_accepted":1', 1)}[damage])
    for command in (("check", "L10.8", "--submission", "reference"), ("diff", "L10.8", "--submission", "reference")):
        r = ol(*command, root=copy, cwd=tmp_path)
        assert r.returncode == 3, (command, r.stdout[-500:], r.stderr)
        assert "golden file" in first_line(r) and "ol fixtures L10.8" in first_line(r) and "git" in first_line(r), r.stderr
        assert no_test_ran(r), r.stdout[-500:]


def test_a_submission_that_cannot_be_imported_is_one_message_with_file_and_line(tmp_path):
    spec = tmp_path / "sub" / "tinyllm" / "infer" / "spec.py"
    spec.parent.mkdir(parents=True)
    spec.write_text("import numpy as np\n\ndef prompt_lookup(ctx, k, max_ngram, min_ngram):\n    return [\n\nx = = 2\n")
    r = ol("check", "L10.8", "--submission", tmp_path / "sub", "--ref-deps")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.count("could not be imported") == 1 and "SyntaxError" in r.stdout, r.stdout
    assert "tinyllm/infer/spec.py, line 4" in r.stdout and "no test ran" in r.stdout, r.stdout
    assert "hand_example_prompt_lookup" not in r.stdout, "one message, not one per test"
    assert "Traceback" not in r.stdout + r.stderr and r.stdout.count("NotImplementedError") == 0


@pytest.mark.slow
def test_an_exception_shows_the_students_own_file_line_and_source(tmp_path):
    sub = tmp_path / "sub"
    shutil.copytree(REPO / "reference" / "tinyllm", sub / "tinyllm", ignore=shutil.ignore_patterns("__pycache__"))
    with open(sub / "tinyllm" / "infer" / "spec.py", "a") as f:
        f.write("\n\ndef prompt_lookup(ctx, k, max_ngram, min_ngram):\n    return [ctx[len(ctx) + 1]]\n")
    r = ol("check", "L10.8", "--submission", sub)
    assert r.returncode == 1
    assert ") raised IndexError: list index out of range\n  tinyllm/infer/spec.py, line" in r.stdout, r.stdout
    assert "    return [ctx[len(ctx) + 1]]" in r.stdout and "harness/" not in r.stdout, r.stdout


@pytest.mark.slow
def test_start_prints_one_next_step_that_works(tmp_path):
    r = ol("start", "L10.8", "ws", "--lang", "python", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    steps = [line for line in r.stdout.splitlines() if line.startswith("next")]
    assert steps == ["next (Python): `ol check L10.8 --submission ws --ref-deps`"], r.stdout
    r = ol("start", "L10.8", "--lang", "python", cwd=tmp_path)  # the default workspace, ./py: no --submission
    steps = [line for line in r.stdout.splitlines() if line.startswith("next")]
    assert steps == ["next (Python): `ol check L10.8 --ref-deps --lang python`"], r.stdout
    r = ol("check", "L10.8", "--ref-deps", "--lang", "python", cwd=tmp_path)  # the printed step, as printed, runs the stub's check
    assert r.returncode == 1 and "not implemented" in r.stdout, r.stdout[-2000:] + r.stderr


def test_start_writes_the_chapters_own_language_and_says_so(tmp_path):
    """L10.8 is a Rust chapter (its pack's default_language): `ol start L10.8` writes the cargo workspace, and its
    hints name Rust and Rust's commands, never --ref-deps (the workspace holds L10.1's files already)."""
    r = ol("start", "L10.8", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "rust/crates/tl-engine/src/spec.rs").is_file() and not (tmp_path / "py").exists()
    steps = [line for line in r.stdout.splitlines() if line.startswith("next")]
    assert len(steps) == 1 and steps[0].startswith("next (Rust): `ol check L10.8` here, or `cargo test` in rust"), r.stdout
    assert "cargo test -- hand_example_prompt_lookup" in steps[0] and "--ref-deps" not in steps[0]
    assert "docs/student.md" in r.stdout
    r = ol("start", "L10.8", "--lang", "cobol", cwd=tmp_path)
    assert r.returncode == 2 and "not graded in 'cobol'" in r.stderr


def test_check_with_no_submission_here_is_refused_when_no_person_watches(tmp_path):
    """A script run in the wrong folder (stdout no terminal) gets exit 2 and where it looked, not the green demo."""
    r = ol("check", "L10.8", cwd=tmp_path)
    line = first_line(r)
    assert r.returncode == 2 and line.startswith(f"ol: no submission at ./rust or ./py (looked in {tmp_path})"), r.stderr
    assert "pass --submission PATH" in line and "`ol start L10.8`" in line and "only at a terminal" in line, line
    assert no_test_ran(r) and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stdout[-500:]
    r = ol("check", "L10.8", "--lang", "python", cwd=tmp_path)
    assert r.returncode == 2 and "no submission at ./py (" in first_line(r) and "`ol start L10.8 --lang python`" in first_line(r)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow(s=12)
def test_check_with_no_submission_and_an_option_is_refused_even_at_a_terminal(tmp_path):
    """The demo ignores every option: asked for a report (or fresh cases, or --ref-deps), `ol check` says there is
    nothing to grade, at a terminal too, and writes no report."""
    for flags in (["--json", "r.json"], ["--junit", "r.xml"], ["--gradescope", "g.json"], ["--fresh", "5"], ["--ref-deps"]):
        code, text = at_a_terminal([sys.executable, "-m", "harness.cli", "check", "L10.8", *flags], tmp_path,
                                   {"PYTHONPATH": str(REPO)}, timeout=300)
        assert code == 2 and "no submission at ./rust or ./py" in text and f"the demo takes no {flags[0]}" in text, (flags, text)
        assert "demo:" not in text and "passed" not in text, (flags, text[-500:])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow(s=5)
def test_a_seed_that_is_no_integer_is_a_usage_error_wherever_it_is_given(tmp_path):
    for argv in (["check", "L10.8", "--fresh", "abc"], ["check", "L10.8", "--fresh", "abc", "--json", "r.json"],
                 ["grade", "L10.8", REPO / "examples" / "submissions", "--seed", "abc", "--ref-deps"]):
        r = ol(*argv, cwd=tmp_path)
        option = "--fresh" if "--fresh" in argv else "--seed"
        assert r.returncode == 2 and f"ol: {option} takes an integer seed, got 'abc'" == first_line(r), (argv, r.stderr)
    code, text = at_a_terminal([sys.executable, "-m", "harness.cli", "check", "L10.8", "--fresh", "abc"], tmp_path,
                               {"PYTHONPATH": str(REPO)}, timeout=300)
    assert code == 2 and text.strip() == "ol: --fresh takes an integer seed, got 'abc'", text[-1000:]
    assert list(tmp_path.iterdir()) == []


def test_selftest_maps_pytests_usage_error_to_2_and_help_says_ol():
    r = ol("selftest", "--no-such-pytest-option")
    assert r.returncode == 2, r.returncode
    r = ol("check", "--help")
    assert r.stdout.startswith("Usage: ol check"), r.stdout[:200]


def test_selftest_given_a_test_file_runs_that_file_alone_from_any_folder():
    r = ol("selftest", "-p", "no:xdist", "-q", "--collect-only", "harness/test_rules.py", cwd=REPO / "tests")
    ids = [line for line in r.stdout.splitlines() if "::" in line]
    assert r.returncode == 0 and ids, r.stdout[-2000:] + r.stderr[-2000:]
    assert all(line.split("::")[0].endswith("harness/test_rules.py") for line in ids), [i for i in ids if "test_rules" not in i][:5]
    r = ol("selftest", "-p", "no:xdist", "-q", "--collect-only", "-m", "not slow", "-k", "test_rules or test_golden", cwd=REPO / "tests")
    files = {line.split("::")[0] for line in r.stdout.splitlines() if "::" in line}
    assert r.returncode == 0 and "tests/harness/test_rules.py" in files, files  # no path named: the whole suite,
    assert any(f.startswith("chapters/") for f in files), files  # filtered by -k, the packs' tests included


def test_config_check_validates_a_runtime_file_with_the_engines_messages(tmp_path):
    r = ol("config", "check", REPO / "config" / "runtime.example.toml")
    assert r.returncode == 0 and "is valid" in r.stdout, r.stdout + r.stderr
    bad = tmp_path / "runtime.toml"
    bad.write_text('[engine]\nspeculative = { draft = "prompt_lookp", k = 17 }\n')
    r = ol("config", "check", bad)
    assert r.returncode == 1 and "engine.speculative.k = 17 is out of range" in r.stderr, r.stderr
    assert "'prompt_lookp' is not allowed" in r.stderr and "Traceback" not in r.stderr
    r = ol("config", "check", tmp_path / "missing.toml")
    assert r.returncode == 2 and "no runtime file at" in first_line(r), r.stderr


@pytest.mark.slow(s=23)
def test_a_first_setup_without_network_says_what_is_missing_in_one_line(tmp_path):
    env = {"OL_VENV": str(tmp_path / "venv"), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "no-wheels"),
           "PIP_CONFIG_FILE": os.devnull, "OL_PYTHON": sys.executable}
    r = subprocess.run([str(REPO / "ol"), "--help"], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, **env})
    assert r.returncode == 3, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("ol: could not install ol's dependencies") and "Full log:" in lines[-1], r.stderr
    log = Path(lines[-1].rsplit("Full log: ", 1)[1].strip())
    assert log.is_file(), f"the log it names must exist: {log}"
    log.unlink()
    told = [line for line in lines[:-1] if not line.startswith(("ol: first run: setting up", "ol: ["))]  # its progress aside
    assert told == [] and "Traceback" not in r.stderr, r.stderr
