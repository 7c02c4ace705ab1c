"""The class report and the feedback pages as data, read from the results directory alone (`ol report`).

Everything comes from the ledger (harness.grading.ledger): each entry's JSON report, summary.json (the run's
settings, its roster match) and `.similarity.json` (harness.staff.similar; entries never begin with a dot), so
`ol report` rebuilds what `ol grade` wrote. `write_report` writes the class page (beside the results directory)
and one feedback page per entry beside its JSON report. Nothing here prints.

What `.pages.json` (PAGES) saves (issue 40: a record stays only with a measured saving of a second or more, in the
user's layout): a page whose inputs did not change is not rendered again. `bench/report_build.py --records`
(`ol report CHAPTER grades-results` over a ledger of 600 entries as `ol grade` writes it, run again, as after `ol
similar --results-dir` or a resumed `ol grade`): 3.9 s with it, 11.7 s without it, fastest of 3 (2026-12-07, this
project's 2-core machine, shared and loaded): 7.8 s.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .ledger import SUMMARY, Entries, entry_file
from ..kernel.paths import read_json, write_atomic
from ..subjects.version import package_version, version_of
from ..render import html
from ..kernel.report import Report

SIMILARITY = ".similarity.json"  # harness.staff.similar's result, when it ran on the class
MESSAGE_GROUPS = 5  # failure messages shown per test, the most frequent first
SLOWEST = 10  # submissions named under the time-to-verdict plot
FIRST_LINE = 200  # characters of a message's first line that group it


def report_path(results_dir: Path) -> Path:
    """Where the class page goes by default: beside the results directory, named as `ol grade` names it beside its
    CSV (grades-results/ -> grades.html)."""
    name = results_dir.resolve().name
    return results_dir.resolve().with_name(f"{name.removesuffix('-results') or name}.html")


def feedback_file(results_dir: Path, name: str) -> Path:
    return entry_file(results_dir, name).with_suffix(".html")


def load(results_dir: Path) -> dict:
    """The results directory: {"settings", "entries": [(report, wall_s)], "unreadable": [file names], "similarity",
    "note": why the record of validated entries was not trusted, or None}."""
    settings = read_json(results_dir / SUMMARY) or {}
    entries, unreadable = [], []
    reader = Entries(results_dir)  # each entry validated against the report's schema once, ever (ledger.VALIDATED)
    for path in sorted(results_dir.glob("*.json")):
        if path.name == SUMMARY or path.name.startswith("."):
            continue
        data = read_json(path)
        name = data.get("submission") if isinstance(data, dict) else None
        entry = reader.read(name) if isinstance(name, str) and entry_file(results_dir, name) == path else None
        if entry is None:
            unreadable.append(path.name)
            continue
        entries.append((entry[0], entry[1]))
    reader.save()
    return {"settings": settings, "entries": sorted(entries, key=lambda e: e[0].submission), "unreadable": unreadable,
            "similarity": read_json(results_dir / SIMILARITY), "note": reader.note}


def status_of(r: Report) -> str:
    return "ungraded" if r.ungraded is not None else "rejected" if r.rejected is not None else "graded"


def message_key(message: str) -> str:
    """What groups failure messages: the first line, its numbers as N (a case id, a token, a count differ per case)."""
    first = message.strip().split("\n", 1)[0][:FIRST_LINE]
    return re.sub(r"\d+(\.\d+)?", "N", first)


def class_data(chapter, loaded: dict, link) -> dict:
    """The class page's numbers, tables and links; `link(name)` is the href of a submission's feedback page."""
    entries = loaded["entries"]
    reports = [r for r, _ in entries]
    graded = [r for r in reports if status_of(r) == "graded"]
    scores = [r.score for r in graded]
    max_score = chapter.max_points
    roster = (loaded["settings"] or {}).get("roster")
    students = (roster or {}).get("students", {})
    return {
        "chapter": chapter.chapter, "title": chapter.title, "settings": loaded["settings"], "max_score": max_score,
        "counts": {"submissions": len(reports), "passed": sum(r.ok for r in graded),
                   "failed": sum(not r.ok for r in graded),
                   "rejected": sum(status_of(r) == "rejected" for r in reports),
                   "ungraded": sum(status_of(r) == "ungraded" for r in reports)},
        "scores": scores,
        "mean": statistics.fmean(scores) if scores else None, "median": statistics.median(scores) if scores else None,
        "tests": _tests(chapter, graded, link), "pitfalls": _pitfalls(chapter, graded, link),
        "times": [w for _, w in entries], "slowest": [{"name": r.submission, "href": link(r.submission), "wall_s": w}
                                                      for r, w in sorted(entries, key=lambda e: -e[1])[:SLOWEST]],
        "sandboxes": dict(Counter(r.sandbox or "unknown" for r in reports)),
        "languages": dict(Counter(r.language or "unknown" for r in reports)),
        "rows": [_row(r, w, students.get(r.submission), link) for r, w in entries],
        "roster": roster, "unreadable": loaded["unreadable"], "similarity": loaded["similarity"],
    }


def _tests(chapter, graded: list[Report], link) -> list[dict]:
    rows = []
    for spec in chapter.tests:
        outcomes: Counter = Counter()
        messages: dict[str, list] = {}
        for r in graded:
            t = next((t for t in r.tests if t.name == spec.name), None)
            if t is None:
                continue
            outcomes[t.outcome.value] += 1
            if not t.outcome.passed:
                messages.setdefault(message_key(t.message), []).append((r.submission, t.message))
        groups = sorted(messages.values(), key=lambda g: (-len(g), g[0][0]))[:MESSAGE_GROUPS]
        rows.append({"name": spec.name, "kind": spec.kind, "checks": spec.checks, "outcomes": dict(outcomes),
                     "rate": outcomes["pass"] / len(graded) if graded else None,
                     "groups": [{"count": len(g), "example": g[0][1].strip().split("\n", 1)[0][:FIRST_LINE],
                                 "who": [{"name": n, "href": link(n)} for n, _ in g]} for g in groups]})
    return rows


def _pitfalls(chapter, graded: list[Report], link) -> list[dict]:
    rows = []
    for m in chapter.mutants:
        who = [r.submission for r in graded if any(p["id"] == m.id for p in r.pitfall_matches)]
        rows.append({"id": m.id, "pitfall": m.pitfall, "count": len(who), "who": [{"name": n, "href": link(n)} for n in who]})
    return rows


def _row(r: Report, wall: float, student: dict | None, link) -> dict:
    return {"name": r.submission, "href": link(r.submission), "status": status_of(r), "score": r.score,
            "max_score": r.max_score, "passed": r.passed, "tests": len(r.tests), "language": r.language or "",
            "sandbox": r.sandbox or "", "wall_s": wall, "id": (student or {}).get("id", ""),
            "email": (student or {}).get("email", ""), "reason": r.rejected or r.ungraded or "",
            "pitfall": r.pitfall_matches[0]["id"] if r.pitfall_matches else ""}


def feedback_data(chapter, r: Report, wall: float | None = None, back: str | None = None) -> dict:
    """One submission's page: each test's outcome, message, what it checks, its known pitfalls; the hints."""
    specs = {t.name: t for t in chapter.tests}
    return {"chapter": chapter.chapter, "title": chapter.title, "name": r.submission, "status": status_of(r),
            "score": r.score, "max_score": r.max_score, "passed": r.passed, "total": len(r.tests), "wall_s": wall,
            "duration_s": r.duration_s, "language": r.language or "", "sandbox": r.sandbox or "", "fresh": r.fresh_seed is not None,
            "load_error": r.load_error, "rejected": r.rejected, "ungraded": r.ungraded, "back": back,
            "hints": list(r.pitfall_matches),
            "tests": [{"name": t.name, "kind": t.kind, "outcome": t.outcome.value, "passed": t.outcome.passed,
                       "description": t.outcome.description, "message": t.message, "points": t.points,
                       "max_points": t.max_points, "checks": specs[t.name].checks if t.name in specs else "",
                       "pitfalls": list(t.pitfalls)} for t in r.tests]}


def write_report(chapter, results_dir: Path, out: Path | None = None) -> dict:
    """The class page at `out` (default: report_path) and every entry's feedback page; returns what it wrote. A page
    whose inputs (what its template is given, and the renderer's version) and bytes are as PAGES records is not
    rendered again: the same inputs render the same bytes."""
    out = out or report_path(results_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    loaded = load(results_dir)
    base = os.path.relpath(results_dir.resolve(), out.resolve().parent)

    def link(name: str) -> str:  # a path's bytes that are not UTF-8 percent-encoded as they are
        page = feedback_file(results_dir, name).name
        return quote(f"{base}/{page}" if base != "." else page, errors="surrogateescape")

    back = quote(os.path.relpath(out.resolve(), results_dir.resolve()), errors="surrogateescape")
    kept, note = _read_pages(results_dir)
    note = "; ".join(n for n in (loaded["note"], note) if n) or None
    renderer = _renderer(chapter)
    pages, rendered, edited = {}, 0, []
    for r, wall in loaded["entries"]:
        data = feedback_data(chapter, r, wall, back)
        path = feedback_file(results_dir, r.submission)
        pages[path.name], how = _page(path, _key(renderer, "feedback", data), kept["pages"].get(path.name),
                                      lambda: html.feedback_page(data))
        rendered += how != "kept"
        edited += [path.name] if how == "edited" else []
    data = class_data(chapter, loaded, link)
    where = os.path.relpath(out.resolve(), results_dir.resolve())  # the class page, as the results directory sees it
    record, class_how = _page(out, _key(renderer, "class", data), kept["class"].get(where), lambda: html.class_report(data))
    edited += [out.name] if class_how == "edited" else []
    manifest = json.dumps({"format": PAGES_FORMAT, "pages": pages, "class": {where: record}}) + "\n"
    if kept["raw"] != manifest:
        write_atomic(results_dir / PAGES, manifest)
    if edited:
        note = ((note + "; ") if note else "") + (f"{len(edited)} pages were not as ol wrote them ({', '.join(edited[:5])}"
                                                  f"{', ...' if len(edited) > 5 else ''}): written again")
    return {"report": out, "pages": len(loaded["entries"]), "rendered": rendered, "class_rendered": class_how != "kept",
            "unreadable": loaded["unreadable"], "data": data, "note": note}


PAGES = ".pages.json"  # per page: the sha256 of what it was rendered from, and of its bytes
PAGES_FORMAT = 1


def _renderer(chapter) -> dict:
    """What renders a page beside its data: ol's code and templates (the harness version), and the libraries."""
    return {"format": PAGES_FORMAT, "harness": version_of(chapter)["digest"],
            **{name: package_version(name) for name in ("jinja2", "markupsafe", "matplotlib")}}


def _key(renderer: dict, kind: str, data: dict) -> str | None:
    """The sha256 of a page's inputs; None when they are not plain data (the page is then rendered every time)."""
    try:
        text = json.dumps([renderer, kind, data], sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def _sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _page(path: Path, key: str | None, record, render) -> tuple[list, str]:
    """([key, sha256 of the bytes], "kept" | "new" | "edited"): `path` rendered and written unless `record` says it was
    rendered from `key` and its bytes are still those; "edited" when the inputs matched but the bytes did not."""
    sha = _sha(path) if key is not None and isinstance(record, list) and record[:1] == [key] else None
    if sha is not None and record == [key, sha]:
        return record, "kept"
    text = render()
    write_atomic(path, text)
    return [key, hashlib.sha256(text.encode("utf-8")).hexdigest()], "edited" if sha else "new"


def _read_pages(results_dir: Path) -> tuple[dict, str | None]:
    """PAGES as {"pages": {file name: record}, "class": {its path from the results directory: record}}, and a note
    when it was there but corrupt."""
    empty: dict[str, Any] = {"pages": {}, "class": {}, "raw": None}
    try:
        raw = (results_dir / PAGES).read_text(encoding="utf-8")
        data = json.loads(raw)
    except FileNotFoundError:
        return empty, None
    except (OSError, ValueError) as e:
        return empty, f"{PAGES} is corrupt ({type(e).__name__}): every page rendered again"  # UnicodeDecodeError too
    if (not isinstance(data, dict) or data.get("format") != PAGES_FORMAT or not isinstance(data.get("pages"), dict)
            or not isinstance(data.get("class"), dict)):
        return empty, f"{PAGES} is not this version's record of the pages: every page rendered again"
    return {"pages": data["pages"], "class": data["class"], "raw": raw}, None

