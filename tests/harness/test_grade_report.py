"""A real `ol grade --roster` on a small class (honest submissions written apart, a planted renamed copy, two
samples of examples/submissions): grades.csv with ids, the class report with its plots, pitfall counts and the
planted pair, a feedback page per submission; `ol check --html` writes the same page for a student; and both
pages opened in headless Chromium, their plots drawn, a screenshot kept.

Chromium comes from the Debian archive: the test setup installs the package `chromium` where it is absent and
apt-get can (root); elsewhere the browser test is skipped, saying so."""

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.kernel.paths import REPO
from tests.harness.similar_kit import write_class
from tests.harness.test_class_report import Page, assert_inert, links_resolve

EXAMPLES = REPO / "examples" / "submissions"
SAMPLES = ("s07-draws-u-resample-only-on-rejection", "no-import")
ROSTER = ("submission,id,email\npy-a,s001,a@uni.edu\npy-b,s002,b@uni.edu\npy-c,s003,c@uni.edu\n"
          "s07-draws-u-resample-only-on-rejection,s004,d@uni.edu\nno-import,s005,e@uni.edu\nghost,s006,ghost@uni.edu\n")


def ol(*args, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("grade-report")
    klass = write_class(root)
    for name in list(klass.iterdir()):
        if name.name.startswith("rs-"):  # the Rust ones need cargo: similarity's Rust side is test_similar's
            shutil.rmtree(name)
    for name in SAMPLES:
        shutil.copytree(EXAMPLES / name, klass / name)
    (root / "roster.csv").write_text(ROSTER)
    out = root / "out"
    r = ol("grade", "L10.8", klass, "--ref-deps", "--jobs", "2", "--seed", "5", "--roster", root / "roster.csv",
           "--out", out / "grades.csv")
    return root, out, r


@pytest.mark.slow(s=40)
@pytest.mark.xdist_group("graded_report_class")  # the class graded once, not once per xdist worker
def test_ol_grade_with_a_roster_writes_ids_the_report_and_every_feedback_page(graded):
    root, out, r = graded
    assert r.returncode == 0, r.stdout + r.stderr
    assert "on no roster row: py-copy" in r.stderr and "students with no submission: s006 (ghost)" in r.stderr, r.stderr
    rows = {row["submission"]: row for row in csv.DictReader(open(out / "grades.csv"))}
    assert rows["py-a"]["student_id"] == "s001" and rows["py-a"]["email"] == "a@uni.edu" and rows["py-copy"]["student_id"] == ""
    assert rows["s07-draws-u-resample-only-on-rejection"]["verify_matches_python_l8_6"] == "fail"
    summary = json.loads((out / "grades-results" / "summary.json").read_text())
    assert summary["roster"]["unmatched"] == ["py-copy"] and summary["roster"]["without_submission"][0]["id"] == "s006"
    report = out / "grades.html"
    raw = report.read_text()
    page = Page(raw)
    for fig in ("score-histogram", "test-outcomes", "pitfall-bars", "time-histogram"):
        assert fig in page.ids, fig
    pit = raw[raw.index('id="pitfall-table"'):]
    assert '<td>s07</td>' in pit and "s07-draws-u-resample-only-on-rejection.html" in pit
    pairs = raw[raw.index('id="pairs"'):raw.index("</table>", raw.index('id="pairs"'))]
    assert "py-a" in pairs and "py-copy" in pairs, pairs
    similarity = json.loads((out / "grades-results" / ".similarity.json").read_text())
    assert {frozenset(p["names"]) for p in similarity["pairs"]} == {frozenset({"py-a", "py-copy"}), frozenset(SAMPLES)}
    assert len(set(links_resolve(page, report))) == 6 == len(list((out / "grades-results").glob("*.html")))
    assert_inert(page, raw)
    again = ol("report", "L10.8", out / "grades-results", timeout=300)  # rebuilt from the results alone: the same bytes
    assert again.returncode == 0 and report.read_text() == raw, again.stderr


@pytest.mark.slow(s=6)
@pytest.mark.xdist_group("graded_report_class")  # the class graded once, not once per xdist worker
def test_a_rerun_with_no_similar_drops_the_previous_run_s_pairs(graded):
    root, out, r = graded
    assert r.returncode == 0, r.stderr
    shutil.copytree(out / "grades-results", root / "copy", dirs_exist_ok=False)
    rerun = ol("grade", "L10.8", root / "class", "--ref-deps", "--jobs", "2", "--no-similar", "--out", root / "copy.csv",
               "--results-dir", root / "copy")  # every entry graded with this key: skipped, the report written again
    assert rerun.returncode == 0 and "already graded with this key" in rerun.stdout, rerun.stdout + rerun.stderr
    assert not (root / "copy" / ".similarity.json").exists() and 'id="similarity"' not in (root / "copy.html").read_text()


@pytest.mark.slow(s=5)
def test_ol_check_html_writes_the_student_s_feedback_page(tmp_path):
    r = ol("check", "L10.8", "--submission", EXAMPLES / SAMPLES[0], "--ref-deps", "--html", tmp_path / "feedback.html",
           timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    page = Page((tmp_path / "feedback.html").read_text())
    text = " ".join(page.all_text.split())
    assert "15 of 16 tests passed" in text and "FAIL verify_matches_python_l8_6" in text and "pitfall s07" in text
    assert not page.hrefs or all(h.startswith("#") for h in page.hrefs)  # a student's page links nowhere else


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    if os.geteuid() == 0 and shutil.which("apt-get"):  # the test setup: Debian's package
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], capture_output=True, env=env, timeout=900).returncode:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600)
            subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], capture_output=True, env=env, timeout=900)
        if found := shutil.which("chromium"):
            return found
    pytest.skip("no Chromium here and apt-get cannot install it (not root, or no apt-get): install the Debian package "
                "chromium to run the browser test")


def shoot(browser: str, page: Path, png: Path, height: int) -> np.ndarray:
    r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--screenshot={png}",
                        f"--window-size=1200,{height}", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert png.is_file(), r.stderr[-2000:]
    import matplotlib.image

    return (matplotlib.image.imread(png)[:, :, :3] * 255).round().astype(int)


def has_colour(pixels: np.ndarray, hex_colour: str) -> int:
    rgb = [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]
    return int((np.abs(pixels - rgb).max(axis=2) <= 8).sum())


@pytest.mark.slow(s=68)
@pytest.mark.xdist_group("graded_report_class")  # the class graded once, not once per xdist worker
def test_the_report_and_a_feedback_page_render_in_headless_chromium(graded):
    browser = chromium()
    root, out, r = graded
    assert r.returncode == 0, r.stderr
    shots = Path(os.environ.get("OL_SCREENSHOTS", root))
    shots.mkdir(parents=True, exist_ok=True)
    pixels = shoot(browser, out / "grades.html", shots / "class-report.png", 2400)
    # the plots are drawn: the score histogram's blue and the per-test bars' pass green and fail red, in area
    assert has_colour(pixels, "#1565c0") > 500 and has_colour(pixels, "#2e7d32") > 500 and has_colour(pixels, "#c62828") > 50
    dom = dump(browser, out / "grades.html")
    assert dom.count("<svg") >= 4 and "<script" not in dom
    for target in set(links_resolve(Page(dom), out / "grades.html")):  # every linked page opens, and links back
        opened = Page(dump(browser, target))
        assert "tests" in opened.ids and links_resolve(opened, target) == [(out / "grades.html").resolve()], target
    feedback = out / "grades-results" / "s07-draws-u-resample-only-on-rejection.html"
    fb = shoot(browser, feedback, shots / "feedback-s07.png", 1400)
    assert has_colour(fb, "#f3e5f5") > 1000  # the pitfall hint's box


def dump(browser: str, page: Path) -> str:
    """The DOM Chromium built from the page."""
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120).stdout


def derived(out: Path) -> dict:
    """(inode, mtime) of what a run derives from the ledger: the similarity kept, its key, every page, the class page."""
    results = out / "grades-results"
    files = [results / ".similarity.json", results / ".similarity.key", *results.glob("*.html"), out / "grades.html"]
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in files}


def resume(root: Path, out: Path, klass: Path) -> subprocess.CompletedProcess:
    """The graded class's command again, on a copy of its outputs (the class's own folder `klass`)."""
    return ol("grade", "L10.8", klass, "--ref-deps", "--jobs", "2", "--roster", root / "roster.csv", "--out", out / "grades.csv")


@pytest.mark.slow(s=6)
@pytest.mark.xdist_group("graded_report_class")  # the class graded once, not once per xdist worker
def test_a_resumed_run_reuses_the_similarity_and_every_page_when_nothing_changed(graded, tmp_path):
    root, out, r = graded
    assert r.returncode == 0, r.stderr
    copy = shutil.copytree(out, tmp_path / "out")
    before = derived(copy)
    again = resume(root, copy, root / "class")
    assert again.returncode == 0 and "6 of 6 submissions already graded" in again.stderr, again.stdout + again.stderr
    assert "the similarity kept is reused" in again.stderr and "comparing" not in again.stderr, again.stderr
    assert "(6 of them, and the class report, as they were: unchanged)" in again.stdout, again.stdout
    assert derived(copy) == before  # nothing compared, rendered or written again
    assert (copy / "grades.html").read_bytes() == (out / "grades.html").read_bytes()


@pytest.mark.slow(s=20)
@pytest.mark.xdist_group("graded_report_class")  # the class graded once, not once per xdist worker
def test_a_resumed_run_with_one_submission_changed_compares_again_and_renders_its_page_alone(graded, tmp_path):
    root, out, r = graded
    assert r.returncode == 0, r.stderr
    klass = shutil.copytree(root / "class", tmp_path / "class")
    copy = shutil.copytree(out, tmp_path / "out")
    (klass / "py-b" / "spec.py").write_text((klass / "py-a" / "spec.py").read_text() + "\n# py-b's own line\n")
    before = derived(copy)
    again = resume(root, copy, klass)  # py-b graded again (its content changed), the rest skipped
    assert again.returncode == 0 and "5 of 6 submissions already graded" in again.stderr, again.stdout + again.stderr
    assert "comparing the 6 submissions' code" in again.stderr and "kept is reused" not in again.stderr, again.stderr
    after = derived(copy)
    assert {n for n in before if after[n] != before[n]} == {".similarity.json", ".similarity.key", "py-b.html", "grades.html"}
    kept = json.loads((copy / "grades-results" / ".similarity.json").read_text())
    fresh = tmp_path / "fresh.json"
    ol("similar", "L10.8", klass, "--json", fresh, timeout=300)  # a fresh comparison of the changed class
    kept_pairs = {frozenset(p["names"]): p["scores"] for p in kept["pairs"]}
    assert kept_pairs == {frozenset(p["names"]): p["scores"] for p in json.loads(fresh.read_text())["pairs"]}
    assert frozenset({"py-a", "py-b"}) in kept_pairs  # the changed code is what was compared
