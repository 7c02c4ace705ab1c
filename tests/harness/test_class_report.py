"""The class report and the feedback pages (harness.grading.class_report, harness.render.html), built from a ledger
written by harness.grading.ledger itself (no judge runs): the figures as computed by hand, every student-written text
escaped and shown as written (markup, quotes, control characters, a name that is not UTF-8), every link
resolving, nothing fetched at view time, and the same bytes on every build."""

import json
import re
import statistics
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from harness.grading.class_report import feedback_file, load, message_key, report_path, write_report
from harness.grading.ledger import Ledger
from harness.kernel.outcomes import Outcome
from harness.kernel.paths import REPO
from harness.registry import load_chapter
from harness.kernel import report as rp
from harness.kernel.report import Report

CH = load_chapter("L10.8")
NAMES = [t.name for t in CH.tests]
HOSTILE = '<script>alert(1)'  # a folder's name may hold markup (no slash: it is a file name)
QUOTES = 'o"brien\'s <b>'
NOT_UTF8 = "Jos\udce9"  # the byte 0xE9 of a Latin-1 name, as os.fsdecode gives it
URLISH = "a b#c?d%e"
MESSAGE = 'expected [1, 2], got [1, 3]\n</pre><script>alert(2)</script>\x1b[2J "quoted" & more'


def report(name: str, failing: dict[str, Outcome] = {}, pitfall: str | None = None, message: str = MESSAGE,
           **extra) -> Report:
    tests = [rp.TestResult(n, "unit", failing.get(n, Outcome.PASS), 0.1, "" if n not in failing else message,
                        0.0 if n in failing else 1.0, 1.0) for n in NAMES]
    matches = [{"id": pitfall, "pitfall": CH.mutant(pitfall).pitfall, "matched": 9, "shows": 10}] if pitfall else []
    return Report("L10.8", name, True, tests, 2.0, pitfall_matches=matches, sandbox="bwrap", language="python", **extra)


def ledger_of(tmp_path: Path, reports: list[tuple[Report, float]], roster: dict | None = None) -> Path:
    results = tmp_path / "grades-results"
    results.mkdir()
    ledger = Ledger(CH, [r.submission for r, _ in reports], tmp_path / "grades.csv", results, 7, True, {"digest": "d" * 16},
                    "bwrap", roster)
    ledger.write = lambda: None  # grades.csv and summary.json once, at the end (not after each of 600 entries)
    for r, wall in reports:
        ledger.record(r, wall, "digest-" + str(len(r.submission)), "local")
    Ledger.write(ledger)
    return results


CLASS = [
    (report("alice"), 3.0),  # 16/16
    (report(HOSTILE, {NAMES[1]: Outcome.FAIL}, pitfall="s01"), 4.0),  # 15
    (report(QUOTES, {NAMES[6]: Outcome.FAIL, NAMES[11]: Outcome.TIMEOUT, NAMES[13]: Outcome.ERROR}, pitfall="s07"), 9.5),  # 13
    (report(NOT_UTF8, {NAMES[6]: Outcome.FAIL}, pitfall="s07", message="62 of 128 verification cases differ\nFirst: v050"), 5.0),
    (report(URLISH, {NAMES[6]: Outcome.CRASHED}, message="the worker died (signal 9)"), 6.0),  # 15
    (Report.for_rejected(CH, "empty", True, "not a submission of L10.8: <nothing>"), 0.0),
    (Report.for_ungraded(CH, "lost", True, "the judge was killed"), 1.0),
]


class Page(HTMLParser):
    """What a browser would build: the tags, their attributes, the text, the ids."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags, self.text, self.ids, self.hrefs = [], [], set(), []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and "href" in a:
            self.hrefs.append(a["href"])

    def handle_data(self, data):
        self.text.append(data)

    @property
    def all_text(self) -> str:
        return "".join(self.text)


def assert_inert(page: Page, raw: str) -> None:
    """No script, no event handler, nothing fetched: markup in a student's text stayed text."""
    assert not [t for t, _ in page.tags if t in ("script", "iframe", "img", "link", "object", "embed", "b")], page.tags
    assert not [(t, k) for t, a in page.tags for k in a if k.startswith("on")]
    assert "default-src 'none'" in raw and not re.search(r"(src|href)=\"(https?:|//|javascript:)", raw)
    assert not re.search(r"url\((?!#)", raw) and "@import" not in raw  # url(#clip) in the SVG names its own element


def links_resolve(page: Page, where: Path) -> list[Path]:
    files = []
    for href in page.hrefs:
        parts = urlsplit(href)
        assert not parts.scheme and not parts.netloc, href
        if not parts.path:
            assert parts.fragment in page.ids, href
            continue
        target = where.parent / unquote(parts.path, errors="surrogateescape")
        assert target.is_file(), href
        files.append(target.resolve())
    return files


def test_the_class_page_gives_the_hand_computed_figures_and_links_every_submission_s_page(tmp_path):
    results = ledger_of(tmp_path, CLASS)
    written = write_report(CH, results)
    assert written["report"] == tmp_path / "grades.html" == report_path(results) and written["pages"] == len(CLASS)
    raw = written["report"].read_text(encoding="utf-8")
    page = Page(raw)
    text = " ".join(page.all_text.split())
    graded = [16, 15, 13, 15, 15]  # alice, the hostile name, the quotes, the non-UTF-8 name, the URL-ish name
    assert f"mean {statistics.fmean(graded):.2f}" in text and f"median {statistics.median(graded):g}" in text
    assert "1 passed every test" in text and "4 failed some" in text and "1 rejected" in text and "1 ungraded" in text
    table = raw[raw.index('id="test-table"'):raw.index("</table>", raw.index('id="test-table"'))]
    verify = re.search(rf"{NAMES[6]}</a></td><td>\w+</td><td class=\"n\">(\d+) %</td>(.*?)</tr>", table, re.S)
    assert verify.group(1) == str(round(100 * 2 / 5)), verify.group(0)  # 2 of the 5 graded pass it
    assert [int(c) for c in re.findall(r">(\d+)</td>", verify.group(2))] == [2, 2, 0, 0, 1]  # pass fail error timeout crashed
    pit = raw[raw.index('id="pitfall-table"'):]
    s07 = re.search(r"<td>s07</td><td>[^<]*</td><td class=\"n\">(\d+)</td>", pit)
    assert s07.group(1) == "2"
    for fig in ("score-histogram", "test-outcomes", "pitfall-bars", "time-histogram"):
        assert fig in page.ids and "<svg" in raw.split(f'id="{fig}"', 1)[1][:200], fig
    targets = links_resolve(page, written["report"])
    assert {t.name for t in targets} == {feedback_file(results, r.submission).name for r, _ in CLASS}
    assert HOSTILE in page.all_text and QUOTES in page.all_text and "Jos\\udce9" in page.all_text and URLISH in page.all_text
    assert_inert(page, raw)


def test_a_feedback_page_shows_each_test_its_message_and_hint_as_written_and_links_back(tmp_path):
    results = ledger_of(tmp_path, CLASS)
    write_report(CH, results)
    path = feedback_file(results, QUOTES)
    raw = path.read_text(encoding="utf-8")
    page = Page(raw)
    assert page.all_text.count("</pre><script>alert(2)</script>") == 3  # the message of each of its 3 failed tests
    assert "\\x1b[2J" in page.all_text and "\x1b" not in raw  # the escape is spelled out, not sent
    assert "pitfall s07" in " ".join(page.all_text.split()) and QUOTES in page.all_text
    assert f"13 of {len(NAMES)} tests passed" in page.all_text
    rows = raw[raw.index('id="tests"'):raw.index("</table>", raw.index('id="tests"'))]
    assert rows.count("<tr>") == len(NAMES) + 1 and 'class="timeout">timeout<' in rows
    assert links_resolve(page, path) == [(tmp_path / "grades.html").resolve()]
    assert_inert(page, raw)
    ungraded = Page(feedback_file(results, "lost").read_text())
    assert "not a verdict on the code" in ungraded.all_text and "the judge was killed" in ungraded.all_text


def test_the_report_is_a_function_of_the_results_directory_alone(tmp_path):
    results = ledger_of(tmp_path, CLASS)
    first = write_report(CH, results)["report"].read_bytes()
    pages = {p.name: p.read_bytes() for p in results.glob("*.html")}
    (tmp_path / "grades.csv").unlink()  # nothing but the results directory is read
    assert write_report(CH, results)["report"].read_bytes() == first
    assert {p.name: p.read_bytes() for p in results.glob("*.html")} == pages


def test_an_unreadable_entry_is_listed_not_dropped_silently(tmp_path):
    results = ledger_of(tmp_path, CLASS[:2])
    (results / "broken.json").write_text("{not json")
    written = write_report(CH, results)
    assert written["unreadable"] == ["broken.json"] and "broken.json" in Page(written["report"].read_text()).all_text


def test_failure_messages_group_by_their_first_line_with_numbers_aside():
    assert message_key("62 of 128 cases differ. First: v050\nmore") == message_key("3 of 128 cases differ. First: v101")
    assert message_key("expected 1, got 2") != message_key("the worker died (signal 9)")


def test_the_roster_s_mismatches_are_in_the_report(tmp_path):
    from harness.grading.roster import match, parse_roster

    roster = match(parse_roster("submission,id,email\nalice,s1,a@x.edu\nbob,s2,b@x.edu\n"), [r.submission for r, _ in CLASS])
    results = ledger_of(tmp_path, CLASS, roster)
    elsewhere = tmp_path / "out" / "class.html"  # another place than beside the results: the links follow
    written = write_report(CH, results, elsewhere)
    raw = elsewhere.read_text()
    page = Page(raw)
    assert len(set(links_resolve(page, elsewhere))) == len(CLASS)
    assert written["data"]["counts"] == {"submissions": 7, "passed": 1, "failed": 4, "rejected": 1, "ungraded": 1}
    unmatched = raw[raw.index('id="unmatched"'):raw.index("</ul>", raw.index('id="unmatched"'))]
    assert "<li>&lt;script&gt;alert(1)</li>" in unmatched and "alice" not in unmatched
    assert "s2" in raw[raw.index('id="without-submission"'):] and "b@x.edu" in page.all_text
    assert json.loads((results / "summary.json").read_text())["roster"]["without_submission"][0]["id"] == "s2"


@pytest.mark.slow(s=7)
def test_a_600_submission_class_s_report_stays_small(tmp_path):
    """The issue's figure: under 5 MB (its build time is bench/report_build.py's to print, not a test's)."""
    reports = []
    for i in range(600):
        fails = {NAMES[j]: Outcome.FAIL for j in range(16) if (i * 7 + j * 3) % 11 == 0}
        reports.append((report(f"student-{i:03d}", fails, pitfall="s07" if i % 5 == 0 else None), 3 + (i % 17) / 2))
    results = ledger_of(tmp_path, reports)
    written = write_report(CH, results)
    assert written["pages"] == 600 and written["report"].stat().st_size < 5 * 1024**2


def test_ol_report_refuses_a_folder_that_is_no_results_directory(tmp_path):
    r = subprocess.run([sys.executable, "-m", "harness.cli", "report", "L10.8", str(tmp_path)], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
    assert r.returncode == 2 and "not the results directory" in r.stderr, r.stderr
    assert load(tmp_path)["entries"] == []


def test_the_similar_pairs_are_listed_all_and_the_first_shown_side_by_side_with_their_code_escaped(tmp_path):
    from harness.grading.class_report import SIMILARITY
    from harness.render.html import REPORT_VIEWS, SIDE_LINES

    results = ledger_of(tmp_path, CLASS)
    code = "def f():\n    return '</pre><script>alert(3)</script>'\n" + "x = 1\n" * (SIDE_LINES + 50)
    side = {"code": code, "slices": [[0, len(code)]]}
    pairs = [{"names": [f"a{i}", HOSTILE], "language": "python", "files": ["spec.py", "spec.py"], "scores": [0.9, 0.8],
              "overlap": 100, "sides": [side, side]} for i in range(REPORT_VIEWS + 2)]
    (results / SIMILARITY).write_text(json.dumps({"detector": "copydetect 0.5.0", "noise": 25, "threshold": 0.5, "compared": 14,
                                                  "by_language": {"python": 14}, "given": True, "skipped": [], "pairs": pairs,
                                                  "more": 3}))
    raw = write_report(CH, results)["report"].read_text()
    page = Page(raw)
    table = raw[raw.index('id="pairs"'):raw.index("</table>", raw.index('id="pairs"'))]
    assert table.count("<tr>") == REPORT_VIEWS + 3 and raw.count("<details") == REPORT_VIEWS
    assert page.all_text.count("'</pre><script>alert(3)</script>'") == 2 * REPORT_VIEWS
    assert page.all_text.count(f"... {50 + 2} more lines") == 2 * REPORT_VIEWS  # each side cut at SIDE_LINES lines
    assert "and 3 more pairs" in page.all_text
    assert_inert(page, raw)


def test_a_class_with_no_graded_score_and_no_pitfall_still_gets_its_report(tmp_path):
    results = ledger_of(tmp_path, [CLASS[5], CLASS[6]])  # rejected and ungraded: no score, no hint
    page = Page(write_report(CH, results)["report"].read_text())
    assert "score-histogram" not in page.ids and "pitfall-bars" not in page.ids and "time-histogram" in page.ids
    assert "mean -" in page.all_text and "median -" in page.all_text


# A rebuilt report renders only what changed (issue 28): observed through the renderer's calls, counted, and each page's
# inode and mtime, never the clock; what it keeps is what a fresh build writes, byte for byte.

@pytest.fixture
def renders(monkeypatch):
    """{"feedback": [names rendered], "class": [count]}: harness.render.html's two page renderers, wrapped."""
    from harness.render import html

    seen = {"feedback": [], "class": []}
    real_page, real_class = html.feedback_page, html.class_report
    monkeypatch.setattr(html, "feedback_page", lambda data: seen["feedback"].append(data["name"]) or real_page(data))
    monkeypatch.setattr(html, "class_report", lambda data: seen["class"].append(1) or real_class(data))
    return seen


def stats(results: Path) -> dict:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in [*results.glob("*.html"), results.parent / "grades.html"]}


def fresh_build(tmp_path: Path, results: Path) -> dict:
    """Every page of a copy of `results` (its entries, summary and similarity alone) built with nothing kept."""
    copy = tmp_path / "fresh" / "grades-results"
    copy.mkdir(parents=True)
    for p in results.iterdir():
        if p.suffix == ".json" and p.name != ".pages.json":
            copy.joinpath(p.name).write_bytes(p.read_bytes())
    written = write_report(CH, copy)
    assert written["rendered"] == len(written["data"]["rows"]) and written["class_rendered"]
    return {p.name: p.read_bytes() for p in [*copy.glob("*.html"), written["report"]]}


def built(results: Path) -> dict:
    return {p.name: p.read_bytes() for p in [*results.glob("*.html"), results.parent / "grades.html"]}


@pytest.mark.slow(s=2)
def test_a_rebuilt_report_renders_no_page_whose_inputs_are_unchanged(tmp_path, renders):
    results = ledger_of(tmp_path, CLASS)
    first = write_report(CH, results)
    assert len(renders["feedback"]) == len(CLASS) and renders["class"] == [1] and first["rendered"] == len(CLASS)
    before = stats(results)
    again = write_report(CH, results)
    assert again["rendered"] == 0 and not again["class_rendered"] and again["note"] is None
    assert len(renders["feedback"]) == len(CLASS) and renders["class"] == [1]  # nothing rendered the second time
    assert stats(results) == before  # nor written
    assert built(results) == fresh_build(tmp_path, results)


@pytest.mark.slow(s=4)
def test_a_changed_entry_or_similarity_renders_what_shows_it_and_the_same_bytes_as_a_fresh_build(tmp_path, renders):
    from harness.grading.class_report import SIMILARITY

    results = ledger_of(tmp_path, CLASS)
    write_report(CH, results)
    before = stats(results)
    ledger = Ledger(CH, [r.submission for r, _ in CLASS], tmp_path / "grades.csv", results, 7, True, {"digest": "d" * 16}, "bwrap")
    ledger.record(report("alice", {NAMES[0]: Outcome.FAIL}, pitfall="s01"), 3.0, "digest-5", "local")  # alice regraded
    renders["feedback"].clear()
    written = write_report(CH, results)
    alice = feedback_file(results, "alice").name
    assert renders["feedback"] == ["alice"] and written["rendered"] == 1 and written["class_rendered"]
    after = stats(results)
    assert {n for n in before if after[n] != before[n]} == {alice, "grades.html"}
    assert "15 of 16 tests passed" in Page(feedback_file(results, "alice").read_text()).all_text
    assert built(results) == fresh_build(tmp_path, results)
    (results / SIMILARITY).write_text(json.dumps({"detector": "copydetect 0.5.0", "noise": 25, "threshold": 0.5, "compared": 5,
                                                  "by_language": {"python": 5}, "given": True, "skipped": [], "pairs": [],
                                                  "more": 0}))
    renders["feedback"].clear()
    written = write_report(CH, results)
    assert renders["feedback"] == [] and written["class_rendered"] and 'id="similarity"' in written["report"].read_text()


@pytest.mark.slow(s=2)
def test_a_new_renderer_renders_every_page_again(tmp_path, renders, monkeypatch):
    from harness.grading import class_report

    results = ledger_of(tmp_path, CLASS)
    write_report(CH, results)
    real = class_report._renderer
    monkeypatch.setattr(class_report, "_renderer", lambda chapter: {**real(chapter), "jinja2": "0.0-another"})
    written = write_report(CH, results)
    assert written["rendered"] == len(CLASS) and written["class_rendered"] and len(renders["feedback"]) == 2 * len(CLASS)


@pytest.mark.slow(s=2)
@pytest.mark.parametrize("damage", ["record-not-json", "record-not-a-record", "page-edited", "page-gone"])
def test_a_corrupt_record_or_an_edited_page_is_rendered_again_and_said(tmp_path, renders, damage):
    results = ledger_of(tmp_path, CLASS)
    write_report(CH, results)
    pages = built(results)
    alice = feedback_file(results, "alice")
    if damage == "record-not-json":
        (results / ".pages.json").write_text('{"format": 1, "pages": {')
    elif damage == "record-not-a-record":
        (results / ".pages.json").write_text('["format", 1]')
    elif damage == "page-edited":
        alice.write_text(alice.read_text().replace("16 of 16", "0 of 16"))
    else:
        alice.unlink()
    renders["feedback"].clear()
    written = write_report(CH, results)
    if damage.startswith("record"):
        assert ".pages.json" in written["note"] and written["rendered"] == len(CLASS) and written["class_rendered"]
    else:
        assert renders["feedback"] == ["alice"] and not written["class_rendered"]
        assert (alice.name in written["note"]) if damage == "page-edited" else written["note"] is None
    assert built(results) == pages  # what ol wrote, again
