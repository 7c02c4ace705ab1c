"""`ol grade`'s live progress, drawn with rich on the Console it is given (the CLI's stderr): a line per submission
as it finishes (its score, or ungraded and why), and a bar with the counts so far, the rate, an ETA and the
slowest submissions still running. The counts are data (`counts`); names and reasons are drawn literally.
"""

from __future__ import annotations

import threading
import time

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from ..grading.grade import Events
from ..render.console import lit
from ..render.literal import visible

SLOWEST = 3  # running submissions named under the bar


class GradeProgress(Events):
    def __init__(self, console) -> None:
        # one Console for the live view and the lines, wrapping as the terminal does (a soft-wrapped line longer than
        # the terminal is counted as one line but drawn on two: each refresh then moved up one line too few)
        self.console = Console(file=console.file, highlight=False, width=console.width, force_terminal=console.is_terminal,
                               no_color=console.no_color) if console.is_terminal else console
        self.lock = threading.Lock()
        self.running: dict[str, tuple[float, str]] = {}  # name -> (start, where)
        self.counts = {"passed": 0, "failed": 0, "rejected": 0, "ungraded": 0}
        self.todo, self.start = 0, time.monotonic()
        self.bar = Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[line]}"),
                            TimeElapsedColumn(), console=self.console, transient=True)
        self.task = self.bar.add_task("grading", total=None, line="")
        self.live = Live(console=self.console, transient=True, refresh_per_second=2, get_renderable=self._render)

    def __enter__(self) -> GradeProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.live.__exit__(*exc)

    def begin(self, total: int, skipped: list[str], todo: int) -> None:
        self.todo, self.start = todo, time.monotonic()
        self.bar.update(self.task, total=todo)
        if skipped:
            self.console.print(f"ol: {len(skipped)} of {total} submissions already graded with this run's key "
                               f"(the ledger): skipped; {todo} to grade (--regrade grades them all)")

    def started(self, name: str, where: str) -> None:  # from a grading thread, or Dask's event loop
        with self.lock:
            self.running[name] = (time.monotonic(), where)

    def finished(self, report, wall: float, where: str) -> None:
        with self.lock:
            self.running.pop(report.submission, None)
            kind = ("ungraded" if report.ungraded is not None else "rejected" if report.rejected is not None
                    else "passed" if report.ok else "failed")
            self.counts[kind] += 1
        self.bar.advance(self.task)
        on = "" if where == "local" else f" on {where}"
        if kind in ("ungraded", "rejected"):
            style = "bold red" if kind == "ungraded" else "bold yellow"
            self.console.print(Text.assemble((kind, style), " ", lit(report.submission), lit(on), ": ",
                                             lit(getattr(report, kind))), soft_wrap=True)
        else:
            colour = "green" if report.ok else "yellow"
            self.console.print(Text.assemble((f"{report.passed}/{len(report.tests)}", colour), " ", lit(report.submission),
                                             f" score {report.score:g}/{report.max_score:g} in {wall:.1f} s", lit(on)),
                               soft_wrap=True)  # a line above the live view: the terminal wraps it, a name stays whole

    def rate_per_minute(self) -> float | None:
        done = sum(self.counts.values())
        elapsed = time.monotonic() - self.start
        return done / elapsed * 60 if done and elapsed > 0 else None

    def _render(self):
        with self.lock:
            done = sum(self.counts.values())
            running = sorted(self.running.items(), key=lambda kv: kv[1][0])[:SLOWEST]
        rate = self.rate_per_minute()
        left = self.todo - done
        eta = f", ETA {_clock(left / rate * 60)}" if rate and left > 0 else ""
        line = (f"[green]{self.counts['passed']} passed[/] [yellow]{self.counts['failed']} failed[/] "
                f"[yellow]{self.counts['rejected']} rejected[/] [red]{self.counts['ungraded']} ungraded[/]" + (f", {rate:.1f}/min{eta}" if rate else ""))
        self.bar.update(self.task, line=line)
        now = time.monotonic()
        slow = Text("running longest: " + ", ".join(
            f"{visible(name)} {now - t0:.0f} s" + ("" if where == "local" else f" ({visible(where)})")
            for name, (t0, where) in running), style="dim", no_wrap=True, overflow="ellipsis") if running else Text("")
        return Group(self.bar.get_renderable(), slow)


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds + 0.5), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"
