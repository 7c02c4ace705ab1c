"""The `ol` command line: parse, call the library, render, exit. Only this package prints (the student's and the
class's commands here and in grade.py, the staff's in staff.py).

Every command ends through `OlGroup.invoke`: an OlError prints its one-line message and exits with its code
(harness.kernel.errors); any other exception is a harness error, exit 3, its traceback only under `ol --debug`.
"""

import os


# One BLAS thread: the judge's matrices are tiny, and more threads would only spin against its worker and the other
# judges for the cores (two checks of ol's own language at once: 5.2 s each with the default threads, 4.1 s with one).
# Set before numpy is first imported; a caller's own value wins.
for _threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

import atexit  # noqa: E402
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

import click
from rich.text import Text

from ..check.diff import case_literal, run_diff, sections_for
from ..check.golden import fresh_golden, verify as verify_golden
from ..kernel.errors import BadSubmission, OlError, UsageError, check_exit, hear_interrupts, raise_if_interrupted
from ..languages import LANGUAGES, in_process, language
from ..kernel import cache, clock
from ..kernel.paths import shown
from ..registry import courses, defaults, load_chapter
from ..render import console as show
from ..render.check_progress import CheckProgress
from ..render.console import lit
from ..sandbox.confine import answers_exposed, choose, exposure_advice
from ..subjects.layout import detect
from ..subjects.open import validate
from . import grade as grading, staff, start as starting
from .common import Exit, err, out, seed as _seed
from .outputs import check_writable, json_line, write_feedback_page, write_json, write_outputs


INTERRUPTED = ("ol: interrupted: no verdict (nothing was scored and no report written); "
               "run the same command again for one")


class OlGroup(click.Group):
    def _command(self, ctx) -> int:
        try:
            super().invoke(ctx)
            return 0
        except Exit as e:
            return e.code

    def invoke(self, ctx):
        hear_interrupts()
        clock.install()  # a Ctrl-C ends a run; a Ctrl-Z stops it, and its stopped time is no call's
        try:
            code = self._command(ctx)
            raise_if_interrupted()  # a Ctrl-C that something swallowed still ends the run as one
        except OlError as e:  # its message may quote a submission (a file name in a zip): drawn literally
            err.print(Text.assemble(("ol:", "bold red"), " ", lit(str(e))))
            code = e.exit_code
        except OSError as e:  # a path the user gave cannot be read or written
            err.print(Text.assemble(("ol:", "bold red"), " ", lit(f"{e.strerror or e}: {e.filename or ''}"),
                                    ". Check the path and its permissions."))
            code = 2
        except KeyboardInterrupt:  # Ctrl-C: no verdict, so no score and no report (ol grade says what it kept)
            err.print(INTERRUPTED)
            code = 130
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except Exception as e:  # noqa: BLE001 -- a bug of ol: one line, and the traceback on request
            if ctx.obj and ctx.obj.get("debug"):
                err.print(traceback.format_exc(), markup=False)
            err.print(Text.assemble(("ol: internal error:", "bold red"), " ", lit(f"{type(e).__name__}: {e}"),
                                    ". Please report it (rerun with `ol --debug ...` for the traceback)."))
            code = 3
        sys.exit(code)


LANGS = " or ".join(LANGUAGES)  # "a or b": the languages ol grades, as --help names them
OWN = in_process().name  # ol's own language: trusted subjects run in its process
DEFAULTS = defaults()  # chapter -> (its own language, {language: its default workspace}), from the packs' tables
WORKSPACES = " or ".join(dict.fromkeys(f"./{spaces[n]}" for own, spaces in DEFAULTS.values()
                                       for n in sorted(spaces, key=lambda n: n != own)))  # each chapter's own first


@click.group(cls=OlGroup, context_settings={"help_option_names": ["-h", "--help"]},
             help=f"ol: grade and differential-test {' and '.join(courses()) or 'course'} chapters.")
@click.option("--debug", is_flag=True, help="print the traceback of an internal error")
@click.pass_context
def main(ctx, debug: bool) -> None:
    ctx.obj = {"debug": debug}


@main.command()
@click.argument("chapter")
def tests(chapter: str) -> None:
    """List the chapter's tests: kind, what each checks, why it matters."""
    show.tests_table(out, load_chapter(chapter))


def _ref_deps(ch, submission: str, ref_deps: bool, if_missing: bool, lang: str | None = None) -> bool:
    if ref_deps or not if_missing or submission == "reference" or submission.startswith("mutant:"):
        return ref_deps
    sub = detect(ch, submission, lang)
    sub.close()
    return bool(sub.missing_deps)


@main.command()
@click.argument("chapter")
@click.option("--submission", default=None, help="reference | mutant:ID | a folder, file or zip (default ./py)")
@click.option("--ref-deps", is_flag=True, help="keep your chapter file, take earlier chapters' modules from the reference")
@click.option("--ref-deps-if-missing", is_flag=True, help="--ref-deps only when the submission lacks an earlier chapter's file")
@click.option("--transport", type=click.Choice(["auto", "worker"]), default="auto", help="run trusted code through the worker too")
@click.option("--json", "json_path", default=None, help="write the report as JSON (-: to stdout, the console to stderr)")
@click.option("--junit", default=None, help="write JUnit XML")
@click.option("--gradescope", default=None, help="write a Gradescope results.json")
@click.option("--html", "html_path", default=None, help="write the feedback page (HTML: each test's outcome, message, hint)")
@click.option("--fresh", is_flag=False, flag_value="random", default=None, metavar="[SEED]",
              help="grade on new cases from SEED (a random one when omitted; printed so it can be replayed; "
                   "@FILE: the seed in FILE, on no command line)")
@click.option("--golden", default=None, type=click.Path(exists=True, dir_okay=False), help="grade on this golden file")
@click.option("--lang", default=None, help=f"{LANGS}: the reference's or a mutant's language, or the only one to look for")
@click.option("-k", "keyword", default=None, metavar="EXPR",
              help="run only the tests whose name matches, as pytest's -k: a substring of the name, with and, or, not "
                   "(e.g. -k example, -k 'one and not two'; `ol tests CHAPTER` lists the names)")
@click.option("--test", "exact", multiple=True, metavar="NAME",
              help="run only this test, its exact name (repeatable; what a language's test front end passes for an exact filter)")
def check(chapter, submission, ref_deps, ref_deps_if_missing, transport, json_path, junit, gradescope, html_path, fresh, golden,
          lang, keyword, exact) -> None:
    """Run the chapter's tests on a submission; the exit code is the verdict.

    Each test's line is printed as it finishes, the failures' messages and the summary last."""
    from ..check.runner import CheckOptions, run_check  # here: it imports pytest, 0.36 s measured, which only a check needs

    ch = load_chapter(chapter)
    check_writable(json_path=json_path, junit=junit, gradescope=gradescope, html_path=html_path)
    if lang is not None:
        ch.language(lang)  # an unknown language is a usage error before anything runs
    cache.ready()  # a link or another user's folder in ol's cache: refused before any test (harness.kernel.cache)
    only = _selection(ch, keyword, exact)
    seed = None if fresh is None else _seed(fresh)  # so is a seed that is no integer, whatever else is given
    console = err if json_path == "-" else out  # `--json -`: the report is stdout's only content (ol grade reads it)
    if submission is None:
        submission = _default_submission(ch, lang, console)
        if submission is None:
            given = [p.opts[0] for p in _options_given(click.get_current_context())]
            if given or not sys.stdout.isatty():  # the demo is for a person at a terminal who typed `ol check CHAPTER`
                raise UsageError(_no_submission(ch, lang, given))
            return _demo(ch)
    try:
        validate(ch, submission, lang)
        ref_deps = _ref_deps(ch, submission, ref_deps, ref_deps_if_missing, lang)
        mode = _sandbox_mode(console, ch, submission, transport, lang)
        if seed is not None:
            fresh_dir = Path(tempfile.mkdtemp(prefix="ol-fresh-"))
            atexit.register(shutil.rmtree, fresh_dir, True)  # the cases live as long as this check
            golden = str(fresh_golden(ch, seed, fresh_dir))
            console.print(f"fresh cases from seed {seed} (replay with --fresh {seed})")
        console.print(Text.assemble((f"{ch.chapter} on ", "bold"), lit(submission), " (--ref-deps)" if ref_deps else ""))
        with CheckProgress(console, len(only or ch.tests)) as progress:
            options = CheckOptions(ref_deps=ref_deps, transport=transport, golden=golden, only=only or (), fresh_seed=seed,
                                   sandbox=mode, language=lang)
            rep = run_check(ch, submission, options, on_result=progress.finished, on_stage=progress.stage)
    except BadSubmission as e:
        if json_path == "-":  # ol grade's judge: the submission's own fault, told apart from any other exit 2 (a usage
            json_line({"refused": str(e)})  # error, a machine without cargo), so its row is rejected, not ungraded
        if gradescope:  # the bundle's judge: the same refusal, read by harness.staff.gradescope (a rejected upload)
            write_json(gradescope, {"refused": str(e)})
        raise
    show.report(console, rep, table=False)
    if only:
        console.print(f"ran {len(only)} of the {len(ch.tests)} tests ({'-k ' + repr(keyword) if keyword else 'by name'}); "
                      f"without -k, `ol check {ch.chapter}` runs them all", markup=False)
    show.hints(console, rep)
    if not rep.ok and not rep.load_error and not rep.ungraded:
        console.print(_next_step(ch, rep, click.get_current_context()), markup=False)
    write_outputs(rep, json_path, junit, gradescope)
    if html_path:
        write_feedback_page(ch, rep, html_path)
    raise Exit(check_exit(rep.ok, bool(rep.ungraded)))  # ungraded: the grader failed (harness.check.runner), exit 3


def _next_step(ch, rep, ctx) -> str:
    """After a failing check: how to rerun the first failing test alone, and see the cases, in the language graded."""
    failed = next(t.name for t in rep.tests if not t.outcome.passed)
    flags = "".join(f" {p.opts[0]} {ctx.params[p.name]}" if not p.is_flag else f" {p.opts[0]}"
                    for p in _options_given(ctx) if p.name in ("submission", "ref_deps", "lang"))
    lang = rep.language or OWN
    words = language(lang).words
    again = f"`ol check {ch.chapter}{flags} -k {failed}`" + words.rerun.format(failed=failed)
    case = words.case.format(file=Path(ch.language(lang).student_file).name)
    return (f"next ({lang.capitalize()}): {again} reruns {failed} alone; `ol diff {ch.chapter}{flags}` shows the golden cases "
            f"you get wrong, `ol diff {ch.chapter} --case ID{'' if lang == OWN else ' --lang ' + lang}` prints one as {case}")


def _selection(ch, keyword: str | None, exact: tuple[str, ...]) -> list[str] | None:
    """The tests -k or --test choose, in the chapter's order; None: all. A --test name that is no test is left out (a
    language's test front end passes the student's own tests' names too); none chosen is a usage error."""
    from ..check.runner import select  # here: it imports pytest, 0.36 s measured, which only a check needs

    if keyword is None and not exact:
        return None
    names = [t.name for t in ch.tests]
    chosen = {n for n in exact if n in names}
    if keyword is not None:
        chosen |= set(select(ch, keyword))
    if not chosen:
        raise UsageError(f"no test of {ch.chapter} matches --test {' --test '.join(exact)}; its tests: {', '.join(names)}")
    return [n for n in names if n in chosen]


def _default_submission(ch, lang: str | None, console) -> str | None:
    """With no --submission: this folder when it is a workspace, else the chapter's workspace folder of a language
    that exists here, the chapter's own language first; None: nothing to grade."""
    langs = [lang] if lang else list(ch.languages)
    if (root := _enclosing_workspace(ch, langs)) is not None:
        return root
    # a workspace folder counts when it holds the language's package (ol's own crates are in course/crates, never
    # in ./rust, where `ol start` writes; a checkout without a workspace shows the demo)
    found = [n for n in langs if (Path(ch.language(n).default_workspace) / ch.language(n).package).is_dir()]
    if not found:
        return None
    if len(found) > 1:
        first = ch.default_language if ch.default_language in found else found[0]
        others = ", ".join(f"./{ch.language(n).default_workspace} (--lang {n})" for n in found if n != first)
        console.print(f"grading ./{ch.language(first).default_workspace} ({first}); also here: {others}")
        found = [first]
    return ch.language(found[0]).default_workspace


def _enclosing_workspace(ch, langs: list[str]) -> str | None:
    """This folder, or the nearest folder above it, holding a language's chapter file (as a build tool finds its
    workspace from any folder inside it): "." here, else that folder's path."""
    here = Path.cwd()
    for folder in (here, *here.parents):
        if any((folder / ch.language(n).student_file).is_file() for n in langs):
            return "." if folder == here else str(folder)
    return None


def _options_given(ctx) -> list[click.Option]:
    """The options the command line gave, defaults aside."""
    return [p for p in ctx.command.params if isinstance(p, click.Option)
            and ctx.get_parameter_source(p.name) is not click.core.ParameterSource.DEFAULT]


def _no_submission(ch, lang: str | None, given: list[str]) -> str:
    """Why `ol check` with no --submission, and no workspace here, is refused rather than shown the demo:
    a script run in the wrong folder, or a person who asked for a report, gets no green demo."""
    langs = [lang] if lang else sorted(ch.languages, key=lambda n: n != ch.default_language)  # as _default_submission picks
    folders = " or ".join(f"./{ch.language(n).default_workspace}" for n in langs)
    why = (f"the demo takes no {', '.join(given)}: it runs for `ol check {ch.chapter}` alone, at a terminal" if given
           else f"the demo runs only at a terminal, for `ol check {ch.chapter}` alone")
    start = f"ol start {ch.chapter}" + (f" --lang {lang}" if lang and lang != ch.default_language else "")  # start's default
    return f"no submission at {folders} (looked in {Path.cwd()}): pass --submission PATH, or make one with `{start}` ({why})"


def _sandbox_mode(console, ch, submission: str, transport: str, lang: str | None = None):
    """How this check confines the code it runs (harness.sandbox.confine); said once when it cannot, or when the
    uid fallback leaves the answers readable."""
    if transport != "worker" and (submission == "reference" or submission.startswith("mutant:")) and lang in (None, OWN):
        return None  # trusted code, in-process
    mode = choose()
    if not mode.confined:
        console.print(f"[bold yellow]ol: not sandboxed[/]: your code runs as you, unconfined ({mode.why}).", markup=True)
    elif exposed := answers_exposed(ch, mode):
        console.print(f"[bold yellow]ol: sandbox mode uid[/] ({mode.why}): {exposure_advice(exposed)}", markup=True)
    return mode


def _demo(ch) -> None:
    """No workspace here: show what a check looks like, on the reference and on a sample with a known bug."""
    from ..check.runner import CheckOptions, run_check  # here: it imports pytest, 0.36 s measured, which only a check needs

    ws = " or ./".join(ch.language(n).default_workspace for n in sorted(ch.languages, key=lambda n: n != ch.default_language))
    others = "; ".join(f"`--lang {n}` for {language(n).words.label}" for n in ch.languages if n != ch.default_language)
    out.print(f"[bold]No submission at ./{ws}[/] (run `ol start {ch.chapter}` to make one, in {ch.default_language}; "
              f"{others}). "
              "Showing the demo: the reference, then a sample submission with a known bug.\n")
    ref = run_check(ch, "reference")
    show.report(out, ref)
    ok = ref.ok
    if ch.demo is not None and ch.demo.exists():
        out.print(f"\n[bold]The sample submission[/] {shown(ch.demo)} "
                  f"(its bug: {ch.demo.name}):\n")
        bad = run_check(ch, str(ch.demo), CheckOptions(ref_deps=True))  # the sample holds only its chapter file
        show.report(out, bad)
        show.hints(out, bad)
        ok = ok and not bad.ok
    out.print("\n[bold]demo:[/] the reference passes and the sample's bug is caught." if ok else "\n[bold red]demo: unexpected outcome[/]")
    raise Exit(0 if ok else 1)


@main.command()
@click.argument("chapter")
@click.option("--submission", default=None,
              help=f"reference | mutant:ID | a folder, file or zip (default: this folder's workspace, {WORKSPACES}, as ol check)")
@click.option("--ref-deps", is_flag=True, help="keep your chapter file, take earlier chapters' modules from the reference")
@click.option("--json", "json_path", default=None, help="write the divergences as JSON")
@click.option("--all", "show_all", is_flag=True, help="show every divergent case, not the first 10 of each section")
@click.option("--lang", default=None, help=f"{LANGS} (the reference's or a mutant's; a submission's comes from its layout)")
@click.option("--only", default=None, metavar="NAME",
              help="one section of the golden file or the function whose cases it holds (a name that is neither lists "
                   "them)")
@click.option("--case", "case_id", default=None, metavar="ID",
              help="print this golden case as a test to paste: " + ", ".join(
                  f"{w.case_short} ({w.label})" if n == OWN else f"{w.case_short} (with --lang {n}, or from a {w.label} workspace)"
                  for n, w in ((n, lang.words) for n, lang in LANGUAGES.items())))
def diff(chapter, submission, ref_deps, json_path, show_all, lang, only, case_id) -> None:
    """The differential view: the submission against every golden case, sections in the chapter's order."""
    ch = load_chapter(chapter)
    check_writable(json_path=json_path)
    if lang is not None:
        ch.language(lang)
    if only is not None:
        sections_for(ch.module("cases"), only)  # an unknown --only is a usage error before anything runs
    if case_id is not None:
        verify_golden(ch)
        sys.stdout.write(case_literal(ch, case_id, lang or _workspace_language(ch)) + "\n")  # verbatim: no wrapping, no markup
        raise Exit(0)
    submission = submission or _default_submission(ch, lang, out) or ch.language(OWN).default_workspace
    validate(ch, submission, lang)
    verify_golden(ch)
    result = run_diff(ch, submission, ref_deps, language=lang, only=only)
    show.diff(out, result, show_all)
    if json_path:
        write_json(json_path, result)
    failed = result["divergent"] or result.get("properties") or result.get("elsewhere") or result.get("load_error")
    raise Exit(1 if failed else 0)  # a property failing, here or elsewhere, is no pass


def _workspace_language(ch) -> str:
    """The language of the workspace here (this folder, or a language's workspace folder: the chapter's own first),
    else ol's own."""
    for name in sorted(ch.languages, key=lambda n: n != ch.default_language):
        spec = ch.language(name)
        if _enclosing_workspace(ch, [name]) or (Path(spec.default_workspace) / spec.student_file).is_file():
            return name
    return OWN


for _command in (starting.start, staff.fixtures, staff.mutants, staff.gradescope, staff.mutmut, staff.config,
                 staff.selftest, grading.grade, grading.report, grading.similar_cmd):  # the last: `ol similar`
    main.add_command(_command)
