"""Results as rich console text: a check's report, the kill matrix, a diff, a class's grades.

Each function draws on the Console it is given (the CLI's); none decides an exit code. Text a
submission wrote (its name, its messages, its answers) is drawn as `lit` makes it: no rich markup or
emoji code in it is read, and its control characters are spelled out (harness.render.literal.visible),
so a message cannot clear the screen, recolour a line or print a "16 of 16 passed" of its own.
"""

from rich.columns import Columns
from rich.markup import escape
from rich.table import Column, Table
from rich.text import Text

from ..kernel.outcomes import Outcome
from ..kernel.report import Report
from .gradescope import hint_lines
from .literal import visible

STYLE = {Outcome.PASS: "green", Outcome.FAIL: "red", Outcome.ERROR: "magenta", Outcome.TIMEOUT: "yellow", Outcome.CRASHED: "red"}


def _folded(*headers: str) -> list[Column]:
    """Columns whose long cells wrap rather than cut."""
    return [Column(h, overflow="fold") for h in headers]


def lit(text: str, style: str = "") -> Text:
    """A submission's text, to draw literally: a rich Text (no markup, no emoji codes), controls spelled out."""
    return Text(visible(text), style=style)


PUBLIC_INPUTS = ("[dim]inputs: the shipped cases, and property inputs drawn from their public seed (anyone can know them); "
                 "a grade draws fresh ones (`ol grade`, `ol check --fresh`)[/]")


def report(out, rep: Report, table: bool = True) -> None:
    """The report: its table of tests (table=False: the lines were printed as the tests finished), each
    failure's message, then the summary."""
    if rep.load_error:
        out.print("[bold red]Your submission could not be loaded[/], so no test ran:")
        out.print(lit(rep.load_error))
        out.print(f"\n[bold red]0 of {len(rep.tests)} passed[/], score 0/{rep.max_score:g}, {rep.duration_s:.1f}s")
        return
    if table:
        t = Table("test", "kind", "outcome", "time",
                  title=lit(f"{rep.chapter} on {rep.submission}{' (--ref-deps)' if rep.ref_deps else ''}", "table.title"))
        for r in rep.tests:
            t.add_row(r.name, r.kind, f"[{STYLE[r.outcome]}]{r.outcome.value}[/]", f"{r.duration_s:.2f}s")
        out.print(t)
    for r in rep.tests:
        if r.outcome.passed:
            continue
        out.print(f"\n[bold {STYLE[r.outcome]}]{r.outcome.value.upper()}[/] [bold]{r.name}[/] ({r.outcome.description})")
        out.print(lit(r.message))
    if rep.ungraded:  # the grader's fault: no score is a verdict on the code
        out.print(Text.assemble("\n", ("ungraded", "bold red"), ": ", lit(rep.ungraded)))
        out.print("No grade: this is the grader's failure, not your code's. Tell your course staff, with this output.")
        return
    colour = "green" if rep.ok else "red"
    out.print(f"\n[bold {colour}]{rep.passed} of {len(rep.tests)} passed[/], score {rep.score:g}/{rep.max_score:g}, "
              f"{rep.duration_s:.1f}s")
    if rep.fresh_seed is None:
        out.print(PUBLIC_INPUTS)


def hints(out, rep: Report) -> None:
    for line in hint_lines(rep):
        out.print(f"[bold]hint:[/] {line}")


def kill_matrices(out, results: list) -> None:
    """One kill matrix (harness.staff.mutants.KillMatrix) per language; several side by side (a grid of tables) when
    the terminal is wide enough."""
    if len(results) == 1:
        out.print(_matrix_table(results[0]))
        return _matrix_summary(out, results[0])
    out.print(Columns([_matrix_table(r) for r in results], equal=False, expand=False))
    for r in results:
        out.print(f"[bold]{r.language}[/]")
        _matrix_summary(out, r)


VERDICT_STYLE = {"caught": "green", "caught elsewhere": "yellow", "timeout": "yellow"}


def _matrix_table(result) -> Table:
    """x = the test fails; X = a test meant to catch the mutant fails (its named test, or one it is expected_by);
    ! = a test meant to catch it passes; blank = not run (--fast: its expected_by caught it)."""
    lang = "" if result.own_language else f" ({result.language})"
    meant = "the named test" if result.set is None else "a test it is expected_by; ! = an expected test passes"
    where = "" if result.set is None else f", mutant set {result.set}"
    unrun = "; blank = not run" if any(m.ran for m in result.mutants) else ""
    t = Table("subject", *(Column(str(i + 1), justify="center") for i in range(len(result.tests))), "verdict",
              title=f"{result.chapter}{lang}{where}: kill matrix (x = test fails; [bold]X[/] = {meant}{unrun})")
    t.add_row("reference", *["x" if n in result.reference_failed_tests else "." for n in result.tests],
              "[green]passes all[/]" if result.reference_passes else "[red]FAILS[/]")
    for m in result.mutants:
        cells = [("[bold]X[/]" if n in m.expected else "x") if n in m.failed_tests else
                 " " if m.ran and n not in m.ran else ("[red]![/]" if n in m.expected else ".") for n in result.tests]
        if result.set is None:
            verdict = f"[{'green' if m.killed_by_named else 'red'}]{m.verdict.value}[/]" + ("" if m.killed_by_named else f" ({m.must_fail})")
        else:
            verdict = f"[{VERDICT_STYLE.get(m.verdict.value, 'red')}]{m.verdict.value}[/]"
        t.add_row(m.id, *cells, verdict)
    return t


def _matrix_summary(out, result) -> None:
    out.print("tests: " + "; ".join(f"{i + 1} {n}" for i, n in enumerate(result.tests)))
    if result.not_ported:
        out.print(f"[red]no {result.language} port of:[/] {', '.join(result.not_ported)}", markup=True)
    for mid, why in result.not_applicable:
        out.print(f"not counted in {result.language}: {mid} ({why})", markup=False)
    for m in result.mutants:
        if m.problem:
            out.print(f"[red]{m.id} unviable:[/] {escape(m.problem)}", markup=True)
    if result.set is None:
        killed = sum(m.killed_by_named for m in result.mutants)
        named = sum(m.hint_names_it for m in result.mutants)
        out.print(f"{killed} of {len(result.mutants)} mutants caught by their named test; "
                  f"reference {'passes all' if result.reference_passes else 'FAILS'}; {result.duration_s}s")
        out.print(f"pitfall hints: name the mutant for {named} of {len(result.mutants)} graded as submissions; "
                  f"{', '.join(result.reference_hints) or 'none'} for the reference")
        return
    by_id = {m.id: m for m in result.mutants}
    for mid in result.findings:
        m = by_id[mid]
        out.print(f"[yellow]finding {mid}[/]: killed only by {', '.join(m.failed_tests)}, not by a test it is expected_by "
                  f"({', '.join(m.expected_by)}); rule: {escape(m.rule)}", markup=True)
    for mid in result.survivors:
        m = by_id[mid]
        out.print(f"[red]survivor {mid}[/]: {escape(m.rule)}\n    expected_by {', '.join(m.expected_by)}; "
                  f"differs on: {escape(m.differs_on)}", markup=True)
    caught = sum(m.verdict.value == "caught" for m in result.mutants)
    colour = "green" if result.ok else "red"
    out.print(f"[bold {colour}]{result.killed} of {result.total} mutants killed ({100 * result.kill_rate:.1f} %; the set passes at "
              f"{100 * result.threshold:g} %)[/]: {caught} caught by a test of their expected_by, {len(result.findings)} "
              f"only by other tests (findings), {len(result.survivors)} survive; reference "
              f"{'passes all' if result.reference_passes else 'FAILS'}; {result.duration_s}s", markup=True)


def student_tags(tags) -> list[str]:
    """A case's tags a student reads: the oracle's own bookkeeping (`shows:s02`, `alone:temperature`) left out."""
    return [t for t in tags if ":" not in t]


def diff(out, result: dict, show_all: bool = False, limit: int = 10) -> None:
    if result.get("load_error"):  # as `ol check` tells it: one message, no case run
        out.print("[bold red]Your submission could not be loaded[/], so no golden case ran:")
        out.print(lit(result["load_error"]))
        return
    for name, sec in result["sections"].items():
        n = len(sec["divergent"])
        out.print(f"[bold]{name}[/]: {n} of {sec['total']} cases diverge")
        if not n:
            continue
        t = Table(*_folded("case", "tags", "inputs", "expected", "got", "first diff", "notes"), show_lines=True)
        for r in sec["divergent"][: None if show_all else limit]:
            first = r["first_differing_token"]
            t.add_row(r["id"], ", ".join(student_tags(r["tags"])), lit(r["inputs"]), lit(r["expected"]), lit(r["got"]),
                      "-" if first is None else str(first), lit(r["notes"]))
        out.print(t)
        if not show_all and n > limit:
            out.print(f"... and {n - limit} more (--all shows them)")
    tagged = {k: v for k, v in result["by_tag"].items() if student_tags([k])}
    if tagged:
        out.print("[bold]divergences by tag:[/] " + ", ".join(f"{k} {v}" for k, v in tagged.items()))
    out.print(Text.assemble((f"{result['divergent']} divergent cases", "bold"), " for ", lit(result["submission"])))
    _diff_properties(out, result)


def _diff_properties(out, result: dict) -> None:
    """The failing property checks of the functions shown (ol check's drawn inputs), or where the check fails
    elsewhere when they and the golden cases all agree."""
    chapter, failed, elsewhere = result["chapter"], result.get("properties", []), result.get("elsewhere", [])
    for p in failed:
        out.print(Text.assemble(("property check failed", "bold red"), f" ({p['function']}, test {p['test']}): ",
                                lit(p["message"])))
    if failed or result["divergent"]:
        return
    if elsewhere:
        tests = ", ".join(dict.fromkeys(f"{p['test']} ({p['function']})" for p in elsewhere))
        out.print(f"the golden cases and the property checks shown all agree; the check fails elsewhere: {tests} "
                  f"(`ol diff {chapter} --only {elsewhere[0]['section']}` shows its smallest input)", markup=False)
    else:
        out.print(f"no golden case diverges and every property check agrees; the chapter's other tests run only in "
                  f"`ol check {chapter}`, which names any that fails", markup=False)


def grades(out, chapter: str, result: dict) -> None:
    """The class's grades, best score first (the rejected, then the ungraded last), then each rejected or
    ungraded one with its reason."""
    seed = result["seed"]
    t = Table("submission", "passed", "score", "time",
              title=f"{chapter}: {len(result['reports'])} submissions" + (f", fresh cases from seed {seed}" if seed is not None else ""))
    rows = sorted(zip(result["reports"], result["wall_s"]),
                  key=lambda rw: (rw[0].ungraded is not None, rw[0].rejected is not None,
                                  -rw[0].score if rw[0].ungraded is None else 0, rw[0].submission))
    for r, wall in rows:
        passed, score = (("[bold red]ungraded[/]", "-") if r.ungraded is not None else
                         ("[bold yellow]rejected[/]", f"0/{r.max_score:g}") if r.rejected is not None else
                         (f"{r.passed}/{len(r.tests)}", f"{r.score:g}/{r.max_score:g}"))
        t.add_row(lit(r.submission), passed, score, f"{wall:.1f}s")
    out.print(t)
    for field, style in (("rejected", "bold yellow"), ("ungraded", "bold red")):
        for r, _ in rows:
            if getattr(r, field) is not None and (field == "ungraded" or r.ungraded is None):
                out.print(Text.assemble((field, style), " ", lit(r.submission), ": ", lit(getattr(r, field))))
    if result.get("missing"):
        out.print(Text.assemble(("not graded", "bold red"), " (the run stopped first): ", lit(", ".join(result["missing"]))))
    summ = result["summary"]
    out.print("passed per test: " + ", ".join(f"{k} {v}" for k, v in summ.passed_by_test.items()))
    if summ.pitfalls_most_matched:
        out.print("pitfalls most often matched: " + "; ".join(f"{k} ({v})" for k, v in summ.pitfalls_most_matched.items()))


def similar_pairs(out, found: dict) -> None:
    """`ol similar`'s pairs, the most alike first: each side's share of its code found in the other."""
    for s in found["skipped"]:
        out.print(Text.assemble(("not compared ", "yellow"), lit(s["name"]), ": ", lit(s["why"])))
    t = Table("first", "second", "language", "first in second", "second in first",
              title=f"{len(found['pairs'])} pairs flagged (either side >= {100 * found['threshold']:.0f} % alike; "
                    f"{found['compared']} submissions compared by {found['detector']})")
    for p in found["pairs"]:
        t.add_row(lit(p["names"][0]), lit(p["names"][1]), p["language"], f"{100 * p['scores'][0]:.0f} %", f"{100 * p['scores'][1]:.0f} %")
    out.print(t)
    if found["more"]:
        out.print(f"... and {found['more']} more pairs past the first {len(found['pairs'])}")


def tests_table(out, ch) -> None:
    t = Table(*_folded("test", "kind", "checks", "why it matters downstream", "pts"),
              title=f"{ch.chapter} {ch.title}: {len(ch.tests)} tests")
    for s in ch.tests:
        t.add_row(s.name, s.kind, s.checks, s.why, f"{s.points:g}")
    out.print(t)
    if ch.student_map:
        m = Table(*_folded("the chapter says", "in ol"), title=f"where the files {ch.chapter}'s text names are in ol (docs/student.md)")
        for said, where in ch.student_map.items():
            m.add_row(escape(said), escape(where))
        out.print(m)
