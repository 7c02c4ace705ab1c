"""The `ol` command line. Library modules return data; only this module prints.

Exit codes: 0 success, 1 the thing checked is wrong, 2 bad input (usage, unknown chapter, missing
path, malformed submission), 3 a harness error (see harness.errors).
"""

import atexit
import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from .errors import OlError, UsageError
from .paths import REPO
from .registry import load_chapter

out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)  # wide tables in logs and CI
err = Console(stderr=True, highlight=False, soft_wrap=True)  # messages are not reflowed
STYLE = {"pass": "green", "fail": "red", "error": "magenta", "timeout": "yellow"}


def _chapter(name: str):
    return load_chapter(name)


class OlGroup(click.Group):
    """Turns every OlError into its message and exit code: no bare tracebacks for bad input."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except OlError as e:
            err.print(f"[bold red]ol:[/] {e}", markup=True)
            sys.exit(e.exit_code)
        except OSError as e:  # a path the user gave cannot be read or written
            err.print(f"[bold red]ol:[/] {e.strerror or e}: {e.filename or ''}. Check the path and its permissions.", markup=True)
            sys.exit(2)


@click.group(cls=OlGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """ol: grade and differential-test tinyllm chapters (L10.8: speculative decoding)."""


@main.command()
@click.argument("chapter")
def tests(chapter: str) -> None:
    """List the chapter's tests: kind, what each checks, why it matters."""
    ch = _chapter(chapter)
    t = Table(title=f"{ch.chapter} {ch.title}: {len(ch.tests)} tests")
    for col in ("test", "kind", "checks", "why it matters downstream", "pts"):
        t.add_column(col, overflow="fold")
    for s in ch.tests:
        t.add_row(s.name, s.kind, s.checks, s.why, f"{s.points:g}")
    out.print(t)


@main.command()
@click.argument("chapter")
@click.argument("workspace", required=False, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="overwrite an existing file")
def start(chapter: str, workspace: Path | None, force: bool) -> None:
    """Write the stub of the chapter's file into WORKSPACE (default ./py)."""
    from .stub import write_stub

    ch = _chapter(chapter)
    ws = workspace or Path(ch.default_submission)
    path, missing = write_stub(ch, ws, force)
    out.print(f"wrote {path}: every function raises NotImplementedError; its docstring is the rule.")
    if missing:
        out.print(f"your workspace has no {', '.join(missing)} yet (earlier chapters): check with "
                  f"`ol check {ch.chapter} --submission {ws} --ref-deps` until they exist.")
    out.print(f"next: `ol check {ch.chapter} --submission {ws}`")


def _print_report(rep, verbose_pass: bool = False) -> None:
    t = Table(title=f"{rep.chapter} on {rep.submission}{' (--ref-deps)' if rep.ref_deps else ''}")
    for col in ("test", "kind", "outcome", "time"):
        t.add_column(col)
    for r in rep.tests:
        t.add_row(r.name, r.kind, f"[{STYLE[r.outcome]}]{r.outcome}[/]", f"{r.duration_s:.2f}s")
    out.print(t)
    for r in rep.tests:
        if r.outcome == "pass":
            continue
        out.print(f"\n[bold {STYLE[r.outcome]}]{r.outcome.upper()}[/] [bold]{r.name}[/]")
        out.print(r.message, markup=False)
        if r.pitfalls:
            out.print("  known pitfalls that fail this test:")
            for p in r.pitfalls:
                out.print(f"    - {p}", markup=False)
    colour = "green" if rep.ok else "red"
    out.print(f"\n[bold {colour}]{rep.passed} of {len(rep.tests)} passed[/], score {rep.score:g}/{rep.max_score:g}, "
              f"{rep.duration_s:.1f}s")


def _write_json(path: str, data) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=2) + "\n")


@main.command()
@click.argument("chapter")
@click.option("--submission", default=None, help="reference | mutant:sNN | a folder holding tinyllm/ (default ./py)")
@click.option("--ref-deps", is_flag=True, help="keep your chapter file, take earlier chapters' modules from the reference")
@click.option("--transport", type=click.Choice(["auto", "worker"]), default="auto", help="run trusted code through the worker too")
@click.option("--json", "json_path", default=None, help="write the report as JSON")
@click.option("--junit", default=None, help="write JUnit XML")
@click.option("--gradescope", default=None, help="write a Gradescope results.json")
@click.option("--fresh", is_flag=False, flag_value="random", default=None, metavar="[SEED]",
              help="grade on new cases from SEED (a random one when omitted; printed so it can be replayed)")
@click.option("--golden", default=None, type=click.Path(exists=True, dir_okay=False), help="grade on this golden file")
def check(chapter, submission, ref_deps, transport, json_path, junit, gradescope, fresh, golden) -> None:
    """Run the chapter's tests on a submission; the exit code is the verdict."""
    from .check import run_check

    ch = _chapter(chapter)
    if submission is None:
        submission = ch.default_submission
        if not Path(submission).exists():
            return _demo(ch)
    seed = None
    if fresh is not None:
        import shutil
        import tempfile

        from .fixtures import fresh_golden

        seed = _seed(fresh)
        fresh_dir = Path(tempfile.mkdtemp(prefix="ol-fresh-"))
        atexit.register(shutil.rmtree, fresh_dir, True)  # the cases live as long as this check
        golden = str(fresh_golden(ch, seed, fresh_dir))
        out.print(f"fresh cases from seed {seed} (replay with --fresh {seed})")
    rep = run_check(ch, submission, ref_deps, transport, golden=golden, junit=junit)
    _print_report(rep)
    data = rep.to_json()
    data["fresh_seed"] = seed
    if not rep.ok and submission != "reference" and ch.mutants:
        data["pitfall_matches"] = _pitfall_feedback(ch, submission, ref_deps, transport, golden)
    if gradescope:
        from .gradescope import results_json

        _write_json(gradescope, results_json(rep, data.get("pitfall_matches", []), seed))
    if json_path:
        _write_json(json_path, data)
    sys.exit(0 if rep.ok else 1)


def _seed(text: str) -> int:
    import secrets

    if text == "random":
        return secrets.randbits(63)
    try:
        seed = int(text, 0)
    except ValueError:
        raise UsageError(f"--fresh takes an integer seed, got {text!r}") from None
    if not 0 <= seed < 2**64:
        raise UsageError(f"--fresh seed must be a 64-bit unsigned integer, got {seed}")
    return seed


def _pitfall_feedback(ch, submission: str, ref_deps: bool, transport: str, golden: str | None = None) -> list[dict]:
    """Compare the submission's golden answers with each mutant's, where the mutant shows."""
    from .impls import open_impl
    from .mutants import golden_of, match_pitfalls

    impl = open_impl(ch, submission, ref_deps, transport)
    try:
        matches = match_pitfalls(ch, impl, golden_of(ch, golden))
    finally:
        impl.close()
    for m in matches[:3]:
        out.print(f"[bold]hint:[/] your answers match pitfall {m['id']}, {m['pitfall']}, on {m['matched']} of "
                  f"{m['shows']} golden cases where it shows")
    return matches


def _demo(ch) -> None:
    """No ./py here: show what a check looks like, on the reference and on a sample with a known bug."""
    from .check import run_check

    sample = REPO / "examples" / "submissions" / "s07-draws-u-resample-only-on-rejection"
    out.print(f"[bold]No submission at ./{ch.default_submission}[/] (run `ol start {ch.chapter}` to make one). "
              "Showing the demo: the reference, then a sample submission with a known bug.\n")
    ref = run_check(ch, "reference")
    _print_report(ref)
    ok = ref.ok
    if sample.is_dir():
        out.print(f"\n[bold]The sample submission[/] {sample.relative_to(REPO)} --ref-deps (its bug: {sample.name}):\n")
        bad = run_check(ch, str(sample), ref_deps=True)  # the sample holds only its spec.py
        _print_report(bad)
        if ch.mutants and not bad.ok:
            _pitfall_feedback(ch, str(sample), True, "auto")
        ok = ok and not bad.ok
    out.print("\n[bold]demo:[/] the reference passes and the sample's bug is caught." if ok else "\n[bold red]demo: unexpected outcome[/]")
    sys.exit(0 if ok else 1)


@main.command()
@click.argument("chapter")
@click.option("--submission", default=None, help="reference | mutant:sNN | a folder holding tinyllm/ (default ./py)")
@click.option("--ref-deps", is_flag=True)
@click.option("--json", "json_path", default=None, help="write the divergences as JSON")
@click.option("--all", "show_all", is_flag=True, help="show every divergent case, not the first 10 of each section")
def diff(chapter, submission, ref_deps, json_path, show_all) -> None:
    """The differential view: the submission against every golden case."""
    from .diff import run_diff

    ch = _chapter(chapter)
    result = run_diff(ch, submission or ch.default_submission, ref_deps)
    from .diff import render

    render(out, result, show_all)
    if json_path:
        _write_json(json_path, result)
    sys.exit(0 if result["divergent"] == 0 else 1)


@main.command()
@click.argument("chapter")
@click.option("--check", "only_check", is_flag=True, help="regenerate in memory and fail if the file differs")
def fixtures(chapter, only_check) -> None:
    """Regenerate the chapter's golden fixtures from the reference (byte for byte reproducible)."""
    from .fixtures import check_fixtures, write_fixtures

    ch = _chapter(chapter)
    if only_check:
        problem = check_fixtures(ch)
        if problem:
            err.print(f"[bold red]fixtures differ:[/] {problem}\nregenerate with `ol fixtures {ch.chapter}` and review the diff.")
            sys.exit(1)
        out.print(f"{ch.golden.relative_to(REPO)} is up to date (regenerated byte for byte)")
        return
    path, size = write_fixtures(ch)
    out.print(f"wrote {path.relative_to(REPO)} ({size} bytes)")


@main.command()
@click.argument("chapter")
@click.option("--json", "json_path", default=None, help="write the kill matrix as JSON")
@click.option("--jobs", type=int, default=None, help="parallel processes (default: the core count)")
def mutants(chapter, json_path, jobs) -> None:
    """Prove the tests catch the pitfalls: the reference passes all, every mutant fails its named test."""
    import time
    from rich.progress import Progress

    from .mutants import kill_matrix

    ch = _chapter(chapter)
    if not ch.mutants:
        raise UsageError(f"chapter {ch.chapter} has no mutants ({ch.mutants_manifest} is missing)")
    start = time.perf_counter()
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("reference and mutants", total=len(ch.mutants) + 1)
        result = kill_matrix(ch, jobs, on_done=lambda label: progress.advance(task))
    t = Table(title=f"{ch.chapter}: kill matrix (x = test fails; [bold]X[/] = the named test)")
    t.add_column("subject")
    short = {name: str(i + 1) for i, name in enumerate(result["tests"])}
    for name in result["tests"]:
        t.add_column(short[name], justify="center")
    t.add_column("verdict")
    t.add_row("reference", *["x" if n in result["reference_failed_tests"] else "." for n in result["tests"]],
              "[green]passes all[/]" if result["reference_passes"] else "[red]FAILS[/]")
    for m in result["mutants"]:
        cells = [("[bold]X[/]" if n == m["must_fail"] else "x") if n in m["failed_tests"] else
                 ("[red]![/]" if n == m["must_fail"] else ".") for n in result["tests"]]
        t.add_row(m["id"], *cells, "[green]killed[/]" if m["killed_by_named"] else f"[red]SURVIVES {m['must_fail']}[/]")
    out.print(t)
    out.print("tests: " + "; ".join(f"{short[n]} {n}" for n in result["tests"]))
    result["duration_s"] = round(time.perf_counter() - start, 2)
    out.print(f"{sum(m['killed_by_named'] for m in result['mutants'])} of {len(result['mutants'])} mutants killed by their named test; "
              f"reference {'passes all' if result['reference_passes'] else 'FAILS'}; {result['duration_s']}s")
    if json_path:
        _write_json(json_path, result)
    sys.exit(0 if result["ok"] else 1)


@main.command()
@click.argument("chapter")
@click.argument("submissions_dir", type=click.Path(path_type=Path))
@click.option("--jobs", type=int, default=None, help="submissions graded at once (default: the core count)")
@click.option("--out", "out_csv", default="grades.csv", type=click.Path(path_type=Path), help="the CSV of grades")
@click.option("--results-dir", default=None, type=click.Path(path_type=Path), help="one JSON report per submission, and summary.json")
@click.option("--seed", default=None, help="the fresh cases' seed (default: a random one, recorded in the outputs)")
@click.option("--shipped-cases", is_flag=True, help="grade on the shipped golden cases instead of fresh ones")
@click.option("--ref-deps", is_flag=True, help="every submission holds only its chapter file; the rest comes from the reference")
def grade(chapter, submissions_dir, jobs, out_csv, results_dir, seed, shipped_cases, ref_deps) -> None:
    """Grade every subfolder of SUBMISSIONS_DIR (each through its own worker), in parallel."""
    import os
    from rich.progress import Progress

    from .grade import grade as run_grade, write_outputs

    ch = _chapter(chapter)
    seed_value = None if shipped_cases else _seed(seed or "random")
    n = sum(1 for p in submissions_dir.iterdir() if p.is_dir()) if submissions_dir.is_dir() else 0
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("grading", total=n)
        result = run_grade(ch, submissions_dir, jobs or os.cpu_count() or 1, seed_value, ref_deps,
                           on_done=lambda r: progress.advance(task))
    write_outputs(result, out_csv, results_dir)
    t = Table(title=f"{ch.chapter}: {len(result['reports'])} submissions" + (f", fresh cases from seed {seed_value}" if seed_value is not None else ""))
    for col in ("submission", "passed", "score", "time"):
        t.add_column(col)
    for r in result["reports"]:
        s = r["summary"]
        t.add_row(r["submission"], f"{s['passed']}/{s['total']}", f"{s['score']:g}/{s['max_score']:g}", f"{s['wall_s']:.1f}s")
    out.print(t)
    summ = result["summary"]
    out.print("passed per test: " + ", ".join(f"{k} {v}" for k, v in summ["passed_by_test"].items()))
    if summ["pitfalls_most_matched"]:
        out.print("pitfalls most often matched: " + "; ".join(f"{k} ({v})" for k, v in summ["pitfalls_most_matched"].items()))
    out.print(f"wrote {out_csv}" + (f" and {results_dir}/" if results_dir else "") + (f"; replay with --seed {seed_value}" if seed_value is not None else ""))


@main.command()
@click.argument("chapter")
@click.option("--out", "out_zip", default="autograder.zip", type=click.Path(path_type=Path))
def gradescope(chapter, out_zip) -> None:
    """Build a Gradescope autograder bundle (setup.sh, run_autograder, the harness)."""
    from .gradescope import build_bundle

    ch = _chapter(chapter)
    n = build_bundle(ch.chapter, out_zip)
    out.print(f"wrote {out_zip} ({n} files of the harness under source/)")


@main.command()
@click.argument("chapter")
@click.option("--json", "json_path", default=None, help="write the result as JSON")
@click.option("--jobs", type=int, default=2, help="mutmut's parallel children")
def mutmut(chapter, json_path, jobs) -> None:
    """mutmut over the reference's chapter files against the chapter's tests, in a scratch copy."""
    import time
    from rich.progress import Progress

    from .mutmut_run import run_mutmut

    ch = _chapter(chapter)
    start = time.perf_counter()
    with Progress(console=err, transient=True) as progress:
        task = progress.add_task("mutmut", total=None)
        result = run_mutmut(ch.chapter, on_progress=lambda line: progress.update(task, description=line[:80]), max_children=jobs)
    new = [s for s in result["survived"] if s["disposition"] == "new"]
    out.print(f"mutmut on {ch.chapter}: {result['total']} mutants, {result['killed']} killed, {result['timed_out']} timed out, "
              f"{result['equivalent']} judged equivalent, {len(new)} new survivors; "
              f"score {result['score']:.3f} of non-equivalent mutants killed; {time.perf_counter() - start:.0f}s")
    for d in result.get("deselected", []):
        out.print(f"[yellow]deselected (fails on the reference):[/] {d['nodeid']}", markup=True)
    for s in new:
        out.print(f"\n[bold red]survivor[/] {s['name']} ({s['status']})", markup=True)
        out.print(s["diff"], markup=False)
    if json_path:
        _write_json(json_path, result)
    sys.exit(1 if new else 0)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def selftest(ctx) -> None:
    """Run ol's own test suite (pytest over tests/; extra arguments go to pytest)."""
    import pytest

    code = pytest.main([str(REPO / "tests"), *ctx.args])
    if code == 5:
        err.print("ol selftest: pytest collected no tests: that is a failure, not a pass")
    sys.exit(int(code))


if __name__ == "__main__":
    main()
