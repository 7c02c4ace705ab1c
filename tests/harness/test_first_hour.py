"""Issue 38's first hour, items 4 to 7: no advice destroys work, commands work from where a student stands, feedback
is in the student's language, and an output path that cannot be written is refused before any work.
Each test runs `ol` as a user does (the bootstrap script, or `python -m harness.cli`), in a temporary folder."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OL = [sys.executable, "-m", "harness.cli"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def ol(*args, cwd: Path, argv0=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([*(argv0 or OL), *map(str, args)], cwd=cwd, env=env or ENV, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("command", [
    ["check", "L10.8", "--submission", "reference", "--json", "{bad}"],
    ["check", "L10.8", "--submission", "reference", "--junit", "{bad}"],
    ["check", "L10.8", "--submission", "reference", "--gradescope", "{bad}"],
    ["check", "L10.8", "--submission", "reference", "--html", "{bad}"],
    ["diff", "L10.8", "--submission", "reference", "--json", "{bad}"],
    ["mutants", "L10.8", "--json", "{bad}"],
    ["gradescope", "L10.8", "--out", "{bad}"],
    ["similar", "L10.8", "{tmp}", "--html", "{bad}"],
    ["report", "L10.8", "{tmp}", "--out", "{bad}"],
    ["grade", "L10.8", "{tmp}", "--out", "{bad}"],
])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path, command):
    (tmp_path / "a-file").write_text("not a folder\n")
    bad = tmp_path / "a-file" / "report.out"  # under a file: no such folder can be made
    option = command[command.index("{bad}") - 1]
    r = ol(*[c.format(bad=bad, tmp=tmp_path) for c in command], cwd=tmp_path, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stdout[-1500:], r.stderr[-1500:])
    assert f"{option} {bad}" in r.stderr, r.stderr
    assert "passed" not in r.stdout and "caught" not in r.stdout, r.stdout  # nothing ran


def test_force_keeps_a_dated_copy_of_the_work_it_replaces(tmp_path):
    assert ol("start", "L10.8", "--lang", "python", cwd=tmp_path).returncode == 0
    spec = tmp_path / "py" / "tinyllm" / "infer" / "spec.py"
    spec.write_text("# my work\n")
    again = ol("start", "L10.8", "--lang", "python", cwd=tmp_path)
    assert again.returncode == 2 and "does not overwrite your work" in again.stderr and spec.read_text() == "# my work\n"
    forced = ol("start", "L10.8", "--lang", "python", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    kept = list(spec.parent.glob("spec.py.*.bak"))
    assert len(kept) == 1 and kept[0].read_text() == "# my work\n", kept
    assert f"kept your previous spec.py as {kept[0].relative_to(tmp_path)}" in forced.stdout, forced.stdout
    assert "NotImplementedError" in spec.read_text()


def test_a_workspace_naming_a_moved_ol_is_given_the_one_line_fix(tmp_path):
    ws = tmp_path / "rust"
    assert ol("start", "L10.8", cwd=tmp_path).returncode == 0
    (ws / ".ol-command").write_text("/old/place/of/ol\n")  # the checkout moved since `ol start`
    r = ol("start", "L10.8", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"`echo {REPO / 'ol'} > {ws / '.ol-command'}`" in r.stderr and "your work stays" in r.stderr, r.stderr


def test_ol_works_through_a_symbolic_link_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ol").symlink_to(REPO / "ol")
    env = {**ENV, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "OL_VENV": sys.prefix}
    r = subprocess.run(["ol", "tests", "L10.8"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "hand_example_prompt_lookup" in r.stdout, r.stderr


@pytest.mark.slow(s=20)
def test_ol_check_from_a_folder_inside_a_workspace_grades_that_workspace(tmp_path):
    assert ol("start", "L10.8", "--lang", "python", cwd=tmp_path).returncode == 0
    inside = tmp_path / "py" / "tinyllm" / "infer"
    r = ol("check", "L10.8", "--ref-deps", "-k", "hand_example_prompt_lookup", "--json", tmp_path / "r.json", cwd=inside)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads((tmp_path / "r.json").read_text())
    assert Path(report["submission"]).resolve() == (tmp_path / "py").resolve(), report["submission"]


@pytest.mark.slow(s=20)
def test_a_stub_gets_no_pitfall_named_and_diff_shows_no_internal_tag(tmp_path):
    """A stub raises everywhere: its answers match no pitfall, so no test of it names one (ol check's JSON, which
    cargo test's front end prints from, and the console alike)."""
    assert ol("start", "L10.8", "--lang", "python", cwd=tmp_path).returncode == 0
    r = ol("check", "L10.8", "--ref-deps", "--json", tmp_path / "r.json", cwd=tmp_path)
    report = json.loads((tmp_path / "r.json").read_text())
    assert r.returncode == 1 and not report["pitfall_matches"], report["pitfall_matches"]
    assert not [t["name"] for t in report["tests"] if t["pitfalls"]], "a pitfall named with no answer matching it"
    assert "pitfall" not in r.stdout, r.stdout[-3000:]
    sample = REPO / "examples" / "submissions" / "s01-first-occurrence"
    d = ol("diff", "L10.8", "--submission", sample, "--ref-deps", cwd=tmp_path)
    assert d.returncode == 1 and "pl0" in d.stdout, d.stdout[-2000:]
    assert not re.search(r"\b(shows|alone):", d.stdout) and "None" not in d.stdout, d.stdout[-3000:]


def test_the_python_case_snippet_runs_where_ol_start_put_the_student(tmp_path):
    assert ol("start", "L10.8", "--lang", "python", cwd=tmp_path).returncode == 0
    snippet = ol("diff", "L10.8", "--case", "v050", "--lang", "python", cwd=tmp_path)
    assert snippet.returncode == 0, snippet.stderr
    (tmp_path / "py" / "test_golden_v050.py").write_text(snippet.stdout)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_golden_v050.py"],
                       cwd=tmp_path / "py", capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": ""})
    assert "NotImplementedError" in r.stdout and "ImportError" not in r.stdout and "ModuleNotFound" not in r.stdout, r.stdout[-3000:]


def test_every_python_case_snippet_passes_on_a_right_spec_where_ol_start_put_it_and_shows_no_internal_tag(tmp_path):
    """A case of each section with a literal form, each one a pitfall shows (its tags hold the oracle's `shows:sNN`):
    printed from inside the workspace (its language found there), saved in py/ as the header says, run with pytest
    there on a right spec.py (the reference's, copied in as a student's own): each passes; its header names no
    internal tag. The stub's run above fails with NotImplementedError: the snippet runs the student's code."""
    assert ol("start", "L10.8", "--lang", "python", cwd=tmp_path).returncode == 0
    py = tmp_path / "py"
    shutil.copyfile(REPO / "reference" / "tinyllm" / "infer" / "spec.py", py / "tinyllm" / "infer" / "spec.py")
    names = []
    for case in ("v001", "pl000", "ng002", "r000"):
        snippet = ol("diff", "L10.8", "--case", case, cwd=py)
        assert snippet.returncode == 0 and snippet.stdout.startswith(f"# Golden case {case} ("), snippet.stdout[:500] + snippet.stderr
        assert not re.search(r"\b(shows|alone):", snippet.stdout), snippet.stdout.splitlines()[0]
        (py / f"test_golden_{case}.py").write_text(snippet.stdout)
        names.append(f"test_golden_{case}.py")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *names], cwd=py, capture_output=True,
                       text=True, timeout=300, env={**os.environ, "PYTHONPATH": ""})
    assert r.returncode == 0 and "4 passed" in r.stdout, r.stdout[-3000:]
