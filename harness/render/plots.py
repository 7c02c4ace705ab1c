"""The class report's plots, drawn by matplotlib as SVG text to put inline in the HTML page (no file, no network).

Each function takes numbers and the chapter's labels and returns one `<svg>` element as text (no student text is
drawn). Figures are made without pyplot (no global state: thread-safe), text drawn as paths (no font needed), ids
seeded and the date left out: the same numbers draw the same bytes.
"""

from __future__ import annotations

import io
from typing import Any, cast

import matplotlib
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from matplotlib.typing import RcKeyType

OUTCOME_COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "error": "#8e24aa", "timeout": "#f9a825", "crashed": "#4e342e"}
STYLE: dict[RcKeyType, Any] = {"svg.fonttype": "path", "svg.hashsalt": "ol-class-report", "font.size": 9}


def _svg(fig: Figure) -> str:
    """The figure as SVG text (under STYLE: each caller draws inside its rc_context)."""
    buf = io.StringIO()
    FigureCanvasSVG(fig)
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buf.getvalue()
    return text[text.index("<svg"):]  # the element alone: no XML declaration or DOCTYPE inside an HTML page


def histogram(values: list[float], bins, xlabel: str, ylabel: str = "submissions", colour: str = "#1565c0") -> str:
    """A histogram of `values` over `bins` (a count or the edges)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(6.0, 2.6), layout="constrained")
        ax = fig.add_subplot()
        ax.hist(values, bins=bins, color=colour, edgecolor="white")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        cast(MaxNLocator, ax.yaxis.get_major_locator()).set_params(integer=True)  # an AutoLocator
        ax.spines[["top", "right"]].set_visible(False)
        return _svg(fig)


def outcome_bars(tests: list[str], counts: list[dict[str, int]]) -> str:
    """One horizontal bar per test, stacked by outcome (pass, fail, error, timeout, crashed)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(7.0, 0.28 * len(tests) + 1.0), layout="constrained")
        ax = fig.add_subplot()
        rows = range(len(tests))
        left = [0] * len(tests)
        for outcome, colour in OUTCOME_COLOURS.items():
            widths = [c.get(outcome, 0) for c in counts]
            if any(widths):
                ax.barh(rows, widths, left=left, color=colour, label=outcome, height=0.7)
                left = [a + b for a, b in zip(left, widths)]
        ax.set_yticks(list(rows), tests)
        ax.invert_yaxis()
        ax.set_xlabel("graded submissions")
        cast(MaxNLocator, ax.xaxis.get_major_locator()).set_params(integer=True)  # an AutoLocator
        ax.legend(loc="lower right", fontsize=7, ncols=5, bbox_to_anchor=(1.0, 1.0), frameon=False)
        ax.spines[["top", "right"]].set_visible(False)
        return _svg(fig)


def count_bars(labels: list[str], counts: list[int], xlabel: str, colour: str = "#6a1b9a") -> str:
    """One horizontal bar per label (a pitfall, a language)."""
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(6.0, 0.3 * max(len(labels), 1) + 0.9), layout="constrained")
        ax = fig.add_subplot()
        ax.barh(range(len(labels)), counts, color=colour, height=0.7)
        ax.set_yticks(list(range(len(labels))), labels)
        ax.invert_yaxis()
        ax.set_xlabel(xlabel)
        cast(MaxNLocator, ax.xaxis.get_major_locator()).set_params(integer=True)  # an AutoLocator
        ax.spines[["top", "right"]].set_visible(False)
        return _svg(fig)
