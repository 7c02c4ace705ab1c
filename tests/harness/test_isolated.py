"""No folder but ol's own on its import path (issue 36, item 1): `./ol check`, `./ol grade .` and `./ol similar .` run
in a folder (a student's repository, a class folder) holding `fcntl.py`, `json.py`, `jinja2.py`, an entry folder
`fcntl/` and a `harness/` package, each of which leaves a marker file when imported; with a caller's PYTHONPATH
naming the current folder too. None is imported, and the verdicts are the honest ones (the s07 sample: 15 of 16)."""

import csv
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.registry import load_chapter

REPO = Path(__file__).resolve().parents[2]
S07 = REPO / "examples/submissions/s07-draws-u-resample-only-on-rejection"
N = len(load_chapter("L10.8").tests)
PLANTS = ("fcntl.py", "json.py", "jinja2.py", "fcntl/__init__.py", "harness/__init__.py", "harness/cli/__init__.py")


def plant(folder: Path, marks: Path) -> None:
    """Each module of PLANTS in `folder`, writing `marks/<its path>` when imported (then failing, as a hijack that
    breaks ol would: either way the mark is there)."""
    for rel in PLANTS:
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        mark = marks / rel.replace("/", "_")
        path.write_text(f"open({str(mark)!r}, 'w').write('imported')\n")


def ol(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """`./ol ARGS` as a TA types it in `cwd`, a caller's PYTHONPATH naming the current folder (an empty entry and .)."""
    env = {**os.environ, "PYTHONPATH": ":."}
    return subprocess.run([str(REPO / "ol"), *args], cwd=cwd, capture_output=True, text=True, timeout=900, env=env)


@pytest.fixture
def class_folder(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    here = tmp_path / "class"
    shutil.copytree(S07, here / "s07")
    plant(here, marks)
    plant(here / "s07", marks)  # the student's repository itself holds them too
    return here, marks


@pytest.mark.slow(s=90)
def test_no_module_of_the_folder_ol_runs_in_is_imported(class_folder, tmp_path):
    here, marks = class_folder
    report, page = tmp_path / "check.json", tmp_path / "check.html"
    r = ol(["check", "L10.8", "--submission", ".", "--ref-deps", "--json", str(report), "--html", str(page)], here / "s07")
    assert sorted(p.name for p in marks.iterdir()) == [], f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    assert r.returncode == 1, r.stderr[-2000:]
    data = json.loads(report.read_text())
    assert (data["summary"]["passed"], data["summary"]["total"]) == (N - 1, N), data["summary"]
    assert page.read_text().count("verify_matches_python_l8_6") >= 1  # --html: jinja2 imported, the real one

    out = tmp_path / "out" / "grades.csv"
    r = ol(["grade", "L10.8", ".", "--ref-deps", "--jobs", "1", "--seed", "7", "--out", str(out)], here)
    assert sorted(p.name for p in marks.iterdir()) == [], f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    assert r.returncode == 0, f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    rows = {row["submission"]: row for row in csv.DictReader(out.open())}
    assert (rows["s07"]["status"], rows["s07"]["passed"]) == ("graded", str(N - 1)), rows["s07"]
    assert rows["fcntl"]["status"] == "rejected" and rows["harness"]["status"] == "rejected", rows

    r = ol(["similar", "L10.8", ".", "--json", str(tmp_path / "similar.json")], here)
    assert sorted(p.name for p in marks.iterdir()) == [], f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    assert r.returncode in (0, 1), f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    assert (tmp_path / "similar.json").is_file()
