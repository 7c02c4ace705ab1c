"""`ol check`'s lines as the tests finish, drawn on the Console it is given (the CLI's).

Each test's line is printed as it ends: `test NAME ... OUTCOME (SECONDS s)`, the form a language's test front end
reads back. At a terminal a bar under the lines counts the tests done and names what runs; on a pipe, only the
lines, each flushed. A test's message is the report's, shown after the last line (console.report, table=False).
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from ..kernel.outcomes import Outcome
from .console import STYLE

LINE = "test {name} ... {outcome} ({seconds:.2f} s)"  # the plain line; a language's test front end parses it


class CheckProgress:
    def __init__(self, console, total: int) -> None:
        # one Console for the bar and the lines, on the stream the CLI's writes to now (the judge redirects sys.stdout
        # while the tests run: a console following sys.stdout would draw the bar into the judge's sink): a line
        # printed on the bar's own console goes above the bar, and the bar is redrawn below it
        self.live = console.is_terminal
        self.console = Console(file=console.file, highlight=False, soft_wrap=not self.live, width=console.width,
                               force_terminal=console.is_terminal, no_color=console.no_color)
        self.total = total
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            console=self.console, transient=True, redirect_stdout=False,
                            redirect_stderr=False) if self.live else None
        self.task = self.bar.add_task("starting", total=total) if self.bar else None

    def __enter__(self) -> CheckProgress:
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def stage(self, what: str) -> None:
        """What runs now (the build, its progress, the tests): the bar's label at a terminal, a line on a pipe."""
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, description=what)
        else:
            self.console.print(f"ol: {what}", markup=False, highlight=False)

    def finished(self, name: str, outcome: Outcome, seconds: float, message: str = "") -> None:
        line = LINE.format(name=name, outcome=outcome.value, seconds=seconds)
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task)
            self.bar.update(self.task, description="running the tests")
            head, _, tail = line.partition(outcome.value)
            self.console.print(Text.assemble(head, (outcome.value, STYLE[outcome]), tail), soft_wrap=True)  # as on a pipe
        else:
            self.console.print(line, markup=False, highlight=False)
            self.console.file.flush()
