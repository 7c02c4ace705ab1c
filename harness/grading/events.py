"""What a grading run tells as it goes: the events harness.grading.grade calls and a live view (the CLI's progress,
harness.cli.progress) overrides. Nothing here prints."""

from __future__ import annotations

from ..kernel.report import Report


class Events:
    """What a grading run tells as it goes (the CLI's live progress overrides these); nothing here prints.
    `started` may be called from another thread; `begin` and `finished` from the caller's."""

    def begin(self, total: int, skipped: list[str], todo: int) -> None: ...

    def started(self, name: str, where: str) -> None: ...

    def finished(self, report: Report, wall: float, where: str) -> None: ...
