"""The class report and a submission's feedback page as HTML, from jinja2 templates (harness/render/templates/).

Each page is one self-contained file: its style inline, its plots inline SVG (harness.render.plots), nothing
fetched when viewed, and a Content-Security-Policy (`default-src 'none'`) that loads and runs nothing. Every value
is escaped (autoescape) after `visible` spelled out its controls and lone surrogates: a student's text is shown as
written, never read as markup. Only the plots' SVG, drawn by ol from numbers, is inserted as is. Returns text.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from .literal import visible

TEMPLATES = Path(__file__).resolve().parent / "templates"
SCORE_BINS = 20  # bars of the score histogram when the maximum is over 2 * SCORE_BINS points


def _finalize(value):
    """What a template prints: our own markup (Markup) as is; text as `visible` spells it, escaped after."""
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    return visible(value)


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(default=True, default_for_string=True),
                      undefined=StrictUndefined, finalize=_finalize, trim_blocks=True, lstrip_blocks=True)
    env.filters["pct"] = lambda x: "-" if x is None else f"{100 * x:.0f} %"
    env.filters["num"] = lambda x: "-" if x is None else f"{x:g}" if float(x).is_integer() else f"{x:.2f}"
    env.filters["lit"] = visible
    return env


def class_report(data: dict) -> str:
    """The class page of harness.grading.class_report.class_data's `data`."""
    return environment().get_template("class_report.html.j2").render(**data, plots=_plots(data),
                                                                      pairs=_pairs(data.get("similarity"), REPORT_VIEWS))


def feedback_page(data: dict) -> str:
    """A submission's page of harness.grading.class_report.feedback_data's `data`."""
    return environment().get_template("feedback.html.j2").render(**data)


def similarity_page(chapter: str, similarity: dict) -> str:
    """`ol similar --html`: the pairs alone."""
    return environment().get_template("similar.html.j2").render(chapter=chapter, similarity=similarity,
                                                                pairs=_pairs(similarity))


def _plots(data: dict) -> dict:
    from . import plots  # here: matplotlib costs 0.5 s to import, which a class page kept as it was never needs

    top = max(data["max_score"], 1)
    # one bar a point (centred on it) for a small whole maximum, else SCORE_BINS bars
    bins = ([i - 0.5 for i in range(int(top) + 2)] if float(top).is_integer() and top <= 2 * SCORE_BINS
            else [i * top / SCORE_BINS for i in range(SCORE_BINS + 1)])
    shown = dict.fromkeys(("scores", "times", "tests", "pitfalls"))  # None: no such plot (no graded score, no pitfall hit)
    if data["scores"]:
        shown["scores"] = Markup(plots.histogram(data["scores"], bins, f"score (of {top:g})"))
    if data["times"]:
        shown["times"] = Markup(plots.histogram(data["times"], 20, "time to verdict (s)", colour="#00838f"))
    if data["counts"]["passed"] + data["counts"]["failed"]:
        shown["tests"] = Markup(plots.outcome_bars([t["name"] for t in data["tests"]], [t["outcomes"] for t in data["tests"]]))
    hit = [p for p in data["pitfalls"] if p["count"]]
    if hit:
        shown["pitfalls"] = Markup(plots.count_bars([p["id"] for p in hit], [p["count"] for p in hit], "submissions matching"))
    return shown


def _pairs(similarity: dict | None, views: int | None = None) -> list[dict]:
    """Each flagged pair; the first `views` (every one: None) with their two sides cut into (text, matched) runs,
    long unmatched stretches folded, each side cut at SIDE_LINES lines."""
    if not similarity:
        return []
    return [{**p, "sides": [cut_lines(segments(side["code"], side["slices"])) for side in p["sides"]]
             if views is None or i < views else []} for i, p in enumerate(similarity["pairs"])]


CONTEXT = 3  # unmatched lines kept around a matched region; longer stretches are folded
REPORT_VIEWS = 10  # pairs shown side by side in the class report (all of them: `ol similar --html`)
SIDE_LINES = 400  # lines of one side shown; the rest is counted


def cut_lines(runs: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    out, left = [], SIDE_LINES
    for i, (text, matched) in enumerate(runs):
        lines = text.split("\n")
        if len(lines) - 1 < left:
            out.append((text, matched))
            left -= len(lines) - 1
            continue
        rest = sum(t.count("\n") for t, _ in runs[i:]) - left
        return [*out, ("\n".join(lines[:left]), matched), (f"\n    ... {rest} more lines", False)]
    return out


def segments(code: str, slices: list[list[int]]) -> list[tuple[str, bool]]:
    """`code` cut at the matched character ranges `slices` ([start, end), sorted): (text, matched) runs, each
    unmatched run longer than 2 * CONTEXT + 1 lines folded to its first and last CONTEXT lines."""
    runs, at = [], 0
    for start, end in sorted(slices):
        start, end = max(start, at), max(end, at)
        if start > at:
            runs.append((code[at:start], False))
        if end > start:
            runs.append((code[start:end], True))
        at = end
    if at < len(code):
        runs.append((code[at:], False))
    return [(_fold(text, i == 0, i == len(runs) - 1) if not matched else text, matched) for i, (text, matched) in enumerate(runs)]


def _fold(text: str, first: bool, last: bool) -> str:
    lines = text.split("\n")
    head = 0 if first else CONTEXT + 1  # a run's first line ends the matched line before it
    tail = 0 if last else CONTEXT + 1
    if len(lines) <= head + tail + 1:
        return text
    return "\n".join([*lines[:head], f"    ... {len(lines) - head - tail} lines ...", *lines[len(lines) - tail:]])
