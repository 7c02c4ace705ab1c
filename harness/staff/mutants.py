"""`ol mutants`: the kill matrix (the reference and every mutant against all tests), each mutant's verdict (caught,
missed, unviable, timeout), and whether `ol check`'s pitfall hint names the mutant graded as a submission.

`--set NAME` runs a further set (chapter.toml's `mutant_sets`): a mutant is killed when any test fails, the set
passes at SET_KILL_THRESHOLD, and one killed only outside its `expected_by` is a finding (caught elsewhere).
`--fast` runs such a mutant on its expected_by tests first, on every test only when they pass: the verdicts, kill
figure, findings and survivors are the whole matrix's (a failing expected_by test decides a verdict).
"""

from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
import os
import signal
from typing import Any

from ..check.runner import CheckOptions, run_check
from ..kernel.errors import OlError, raise_if_interrupted
from ..languages import in_process
from ..kernel.outcomes import MutantVerdict, Outcome
from ..registry import DEFAULT_SET, Chapter, load_chapter
from ..kernel.report import Report

# A further mutant set passes when at least this share of its mutants is killed (some test fails):
# issue 17's bar for the rule-by-rule set, which is written apart from the tests and so may keep a few
# survivors; the default set's named pitfalls must all be caught, each by its own test.
SET_KILL_THRESHOLD = 0.95


_interrupted = False  # in a pool's process: Ctrl-C came; the checks still queued there end at once


def _on_interrupt(signum, frame) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _check_one(chapter_name: str, subject: str, language: str, only: tuple[str, ...]) -> Report:
    if _interrupted:
        raise KeyboardInterrupt
    return run_check(load_chapter(chapter_name), subject, CheckOptions(language=language, only=only))


def verdict(report: Report | None, must_fail: str) -> MutantVerdict:
    if report is None:
        return MutantVerdict.UNVIABLE
    named = next(t for t in report.tests if t.name == must_fail)
    if named.outcome is Outcome.TIMEOUT:
        return MutantVerdict.TIMEOUT
    return MutantVerdict.MISSED if named.outcome.passed else MutantVerdict.CAUGHT


def set_verdict(report: Report | None, expected_by: tuple[str, ...]) -> MutantVerdict:
    """A further set's mutant: caught when a test of expected_by fails, caught elsewhere when only others do."""
    if report is None:
        return MutantVerdict.UNVIABLE
    failed = [t for t in report.tests if not t.outcome.passed]
    if any(t.name in expected_by and t.outcome is not Outcome.TIMEOUT for t in failed):
        return MutantVerdict.CAUGHT
    if any(t.name in expected_by for t in failed):
        return MutantVerdict.TIMEOUT
    return MutantVerdict.CAUGHT_ELSEWHERE if failed else MutantVerdict.MISSED


def ported(chapter: Chapter, language: str, mutant_set: str = DEFAULT_SET) -> list:
    """The set's mutants that have a port in `language` (in the mutant language: every one with a plain patch), but
    for those its `<language>_none` leaves out (a slip the language cannot make)."""
    return [m for m in chapter.mutant_set(mutant_set) if language not in getattr(m, "not_applicable", {})  # (s01..: none)
            and chapter.patch_of(m, language) is not None]


@dataclass(frozen=True)
class MutantRow:
    """One mutant's line of a kill matrix: a named pitfall's `pitfall` and `must_fail`, or a further set's mutant's
    `rule`, `misconception`, `expected_by` and `differs_on`."""

    id: str
    verdict: MutantVerdict
    failed_tests: tuple[str, ...]
    problem: str = ""  # why it is unviable (its patch does not apply, it does not build)
    pitfall: str = ""
    must_fail: str = ""
    hints: tuple[str, ...] = ()  # the pitfall hints `ol check` gives it graded as a submission
    rule: str = ""
    misconception: str = ""
    expected_by: tuple[str, ...] = ()
    differs_on: str = ""
    ran: tuple[str, ...] = ()  # the tests it ran, when not every one (named_first: its expected_by caught it)

    @property
    def expected(self) -> tuple[str, ...]:
        """The tests meant to catch it: its named test, or those it is expected_by."""
        return (self.must_fail,) if self.must_fail else self.expected_by

    @property
    def killed(self) -> bool:
        return bool(self.failed_tests)

    @property
    def killed_by_named(self) -> bool:
        return self.verdict is MutantVerdict.CAUGHT

    @property
    def hint_names_it(self) -> bool:
        return bool(self.hints) and self.hints[0] == self.id

    def to_json(self) -> dict:
        if self.must_fail:
            return {"id": self.id, "pitfall": self.pitfall, "must_fail": self.must_fail, "verdict": self.verdict.value,
                    "failed_tests": list(self.failed_tests), "killed_by_named": self.killed_by_named, "problem": self.problem,
                    "hints": list(self.hints), "hint_names_it": self.hint_names_it}
        return {"id": self.id, "rule": self.rule, "misconception": self.misconception, "expected_by": list(self.expected_by),
                "differs_on": self.differs_on, "verdict": self.verdict.value, "failed_tests": list(self.failed_tests),
                "killed": self.killed, "killed_by_expected": [t for t in self.failed_tests if t in self.expected_by],
                "problem": self.problem} | ({"tests_run": list(self.ran)} if self.ran else {})


@dataclass(frozen=True)
class KillMatrix:
    """A mutant set against the chapter's tests in one language: the reference's line and each mutant's. `set`: None
    for the named pitfalls, else a further set's name."""

    chapter: str
    language: str
    tests: tuple[str, ...]
    reference_passes: bool
    reference_failed_tests: tuple[str, ...]
    reference_hints: tuple[str, ...]
    mutants: tuple[MutantRow, ...]
    not_ported: tuple[str, ...]  # mutants with no port in this language (and no reason why not): never caught
    set: str | None = None
    set_size: int = 0  # the further set's mutants, in every language
    not_applicable: tuple[tuple[str, str], ...] = ()  # (id, why the language cannot make it)
    duration_s: float = 0.0
    own_language: bool = False  # ol's own language (harness.languages.in_process): the title does not name it

    @property
    def killed(self) -> int:
        return sum(m.killed for m in self.mutants)

    @property
    def threshold(self) -> float:
        return SET_KILL_THRESHOLD

    @property
    def total(self) -> int:
        """A further set's mutants that count here: a mutant with no port (and no reason it cannot have one) is not killed."""
        return self.set_size - len(self.not_applicable)

    @property
    def kill_rate(self) -> float:
        return self.killed / self.total if self.total else 0.0

    @property
    def survivors(self) -> list[str]:
        return [m.id for m in self.mutants if not m.killed and not m.problem]

    @property
    def unviable(self) -> list[str]:
        return [m.id for m in self.mutants if m.problem]

    @property
    def findings(self) -> list[str]:
        return [m.id for m in self.mutants if m.verdict is MutantVerdict.CAUGHT_ELSEWHERE]

    @property
    def ok(self) -> bool:
        if self.set is None:
            return self.reference_passes and all(m.killed_by_named for m in self.mutants) and not self.not_ported
        return (self.reference_passes and not self.not_ported and not self.unviable
                and self.kill_rate >= SET_KILL_THRESHOLD)

    def timed(self, seconds: float) -> "KillMatrix":
        return replace(self, duration_s=round(seconds, 2))

    def to_json(self) -> dict:
        data: dict[str, Any] = {"chapter": self.chapter, "language": self.language}
        if self.set is not None:
            data["set"] = self.set
        data["reference_passes"] = self.reference_passes
        if self.set is None:
            data["reference_hints"] = list(self.reference_hints)
        data["reference_failed_tests"] = list(self.reference_failed_tests)
        data |= {"tests": list(self.tests), "mutants": [m.to_json() for m in self.mutants], "not_ported": list(self.not_ported)}
        if self.set is not None:
            data |= {"not_applicable": dict(self.not_applicable), "killed": self.killed, "total": self.total,
                     "kill_rate": self.kill_rate, "threshold": self.threshold, "survivors": self.survivors,
                     "unviable": self.unviable, "findings": self.findings}
        return data | {"ok": self.ok, "duration_s": self.duration_s}


def _run(chapter: Chapter, subjects: dict[str, tuple[str, ...]], jobs: int | None, on_done, language: str) -> tuple[dict, dict]:
    """Each subject checked on its tests (() = every test), in parallel processes: its report, or why it is unviable."""
    reports: dict[str, Report | None] = {}
    problems: dict[str, str] = {}
    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1, initializer=signal.signal,
                             initargs=(signal.SIGINT, _on_interrupt)) as pool:
        futures = {pool.submit(_check_one, chapter.chapter, s, language, only): s for s, only in subjects.items()}
        try:
            for f in as_completed(futures):
                raise_if_interrupted()  # a Ctrl-C dropped as the pool forked its processes (kernel.errors)
                try:
                    reports[futures[f]] = f.result()
                except OlError as e:  # a patch that does not apply: the mutant is unviable, said so
                    reports[futures[f]], problems[futures[f]] = None, str(e)
                if on_done:
                    on_done(futures[f])
        except KeyboardInterrupt:  # no matrix: what is queued is dropped, what runs ends (its process got Ctrl-C too)
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return reports, problems


def _failed(rep: Report | None) -> tuple[str, ...]:
    return () if rep is None else tuple(t.name for t in rep.tests if not t.outcome.passed)


def kill_matrix(chapter: Chapter, jobs: int | None = None, on_done=None, language: str | None = None,
                mutant_set: str = DEFAULT_SET, named_first: bool = False) -> KillMatrix:
    """Run the reference and every mutant of the set in `language` (in parallel processes; a compiled
    language's reference and mutants each build first, confined; default: ol's own); `on_done(label)` after each.
    `named_first`: a further set's mutant runs its expected_by tests first, the rest only if none fails."""
    language = language or in_process().name
    chapter.language(language)
    further = mutant_set != DEFAULT_SET
    every = chapter.mutant_set(mutant_set) if further else chapter.mutants
    mutants = ported(chapter, language, mutant_set)
    first = further and named_first
    every_test: tuple[str, ...] = ()
    subjects = {"reference": every_test} | {f"mutant:{m.id}": tuple(m.expected_by) if first else every_test for m in mutants}
    reports, problems = _run(chapter, subjects, jobs, on_done, language)
    if first:  # not caught by its expected_by: every test, as without named_first
        again = {s: every_test for s, only in subjects.items() if only and reports[s] is not None and not _failed(reports[s])}
        more, more_problems = _run(chapter, again, jobs, on_done, language) if again else ({}, {})
        reports, problems = reports | more, problems | more_problems
    ref = reports["reference"]  # no verdict stands unless the reference was checked and the judge's code never failed
    if ref is None:
        raise OlError(f"the reference could not be checked: {problems['reference']}")
    faulted = [f"{s}: {r.ungraded}" for s, r in reports.items() if r is not None and r.ungraded]
    if faulted:  # a fault of the judge's own code: no verdict stands, caught or missed (exit 3)
        raise OlError("the grader failed, so no mutant's verdict stands: " + " | ".join(faulted[:3]))
    rows = []
    for m in mutants:
        rep, problem = reports[f"mutant:{m.id}"], problems.get(f"mutant:{m.id}", "")
        if further:
            ran = tuple(t.name for t in rep.tests) if rep is not None and len(rep.tests) < len(chapter.tests) else ()
            rows.append(MutantRow(m.id, set_verdict(rep, m.expected_by), _failed(rep), problem, rule=m.rule,
                                  misconception=m.misconception, expected_by=tuple(m.expected_by), differs_on=m.differs_on,
                                  ran=ran))
        else:
            hints = () if rep is None else tuple(h["id"] for h in rep.pitfall_matches)
            rows.append(MutantRow(m.id, verdict(rep, m.must_fail), _failed(rep), problem, pitfall=m.pitfall,
                                  must_fail=m.must_fail, hints=hints))
    na = tuple((m.id, why) for m in every  # a further set's row that leaves this language out, and why
               if (why := getattr(m, "not_applicable", {}).get(language)) is not None and m not in mutants)
    missing = tuple(m.id for m in every if m not in mutants and m.id not in dict(na))
    return KillMatrix(chapter.chapter, language, tuple(t.name for t in chapter.tests), ref.ok, _failed(ref),
                      tuple(h["id"] for h in ref.pitfall_matches), tuple(rows), missing,
                      mutant_set if further else None, len(every), na if further else (),
                      own_language=language == in_process().name)
