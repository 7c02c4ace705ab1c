"""The `ol` command line: parse, call the library, render, exit. Only this module prints.

Exit codes (harness.errors): 0 success, 1 the thing checked is wrong, 2 bad input (usage, unknown
chapter, missing path, malformed submission), 3 a harness error. Every command ends through
`OlGroup.invoke`: an OlError prints its one-line message and exits with its code; any other
exception is a harness error, exit 3, with its traceback only under `ol --debug`.
"""

import os

# The judge's matrices are tiny: more BLAS threads would only spin against its worker and the other judges
# for the cores (two Python checks at once: 5.2 s each with the default threads, 4.1 s with one). Set
# before numpy is first imported; a caller's own value wins.
for _threads in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

import atexit  # noqa: E402
import importlib.util
import json
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.text import Text

from . import wire
from .confine import answers_exposed, choose, exposure_advice
from .diff import case_literal, run_diff
from .errors import BadSubmission, OlError, UsageError
from .golden import check_fixtures, fresh_golden, verify as verify_golden, write_fixtures
from .layout import detect
from .paths import REPO
from .reference import pristine
from .registry import DEFAULT_SET, load_chapter
from .render import console as show
from .render.console import lit
from .render.gradescope import results_json
from .stub import write_rust_workspace, write_stub
from .subjects import validate

# wide tables in logs and CI; sentences are not reflowed (a path or a command in one stays whole, to copy)
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)  # messages are not reflowed


class Exit(Exception):
    """A command's verdict: raised by commands, turned into the process's exit code in one place."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class OlGroup(click.Group):
    def invoke(self, ctx):
        try:
            super().invoke(ctx)
            code = 0
        except Exit as e:
            code = e.code
        except OlError as e:  # its message may quote a submission (a file name in a zip): drawn literally
            err.print(Text.assemble(("ol:", "bold red"), " ", lit(str(e))))
            code = e.exit_code
        except OSError as e:  # a path the user gave cannot be read or written
            err.print(Text.assemble(("ol:", "bold red"), " ", lit(f"{e.strerror or e}: {e.filename or ''}"),
                                    ". Check the path and its permissions."))
            code = 2
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except Exception as e:  # noqa: BLE001 -- a bug of ol: one line, and the traceback on request
            if ctx.obj and ctx.obj.get("debug"):
                err.print(traceback.format_exc(), markup=False)
            err.print(Text.assemble(("ol: internal error:", "bold red"), " ", lit(f"{type(e).__name__}: {e}"),
                                    ". Please report it (rerun with `ol --debug ...` for the traceback)."))
            code = 3
        sys.exit(code)


@click.group(cls=OlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="print the traceback of an internal error")
@click.pass_context
def main(ctx, debug: bool) -> None:
    """ol: grade and differential-test tinyllm chapters."""
    ctx.obj = {"debug": debug}


@main.command()
@click.argument("chapter")
def tests(chapter: str) -> None:
    """List the chapter's tests: kind, what each checks, why it matters."""
    show.tests_table(out, load_chapter(chapter))


@main.command()
@click.argument("chapter")
@click.argument("workspace", required=False, type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="overwrite an existing file")
@click.option("--lang", default="python", help="the language you write the chapter in: python (default) or rust")
def start(chapter: str, workspace: Path | None, force: bool, lang: str) -> None:
    """Write the stub of the chapter's file into WORKSPACE (default ./py, or ./rust with --lang rust)."""
    ch = load_chapter(chapter)
    ws = workspace or Path(ch.language(lang).default_workspace)
    if lang == "rust":
        path, standing_in = write_rust_workspace(ch, ws, force)
        out.print(f"wrote the cargo workspace {ws}: {path} has every item of the contract (spec/rust.md), "
                  "each body todo!(); its doc comment is the rule.")
        if standing_in:
            out.print(f"{', '.join(Path(p).name for p in standing_in)} came from the Rust reference (L10.1 is not yours yet; "
                      "each file says so at its top).")
        flags = "" if str(ws) == ch.language(lang).default_workspace else f" --submission {ws}"
        out.print(f"next: `ol check {ch.chapter}{flags}`, or `cargo test` in {ws}")
        return
    path, missing = write_stub(ch, ws, force, lang)
    out.print(f"wrote {path}: every function raises NotImplementedError; its docstring is the rule.")
    flags = "" if str(ws) == ch.language().default_workspace else f" --submission {ws}"
    if missing:
        out.print(f"your workspace has no {', '.join(missing)} yet (earlier chapters), so take them from the reference:")
        flags += " --ref-deps"
    out.print(f"next: `ol check {ch.chapter}{flags}`")


def _write_json(path: str, data) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=2) + "\n")


def _fresh_cases(ch, seed: int) -> str:
    fresh_dir = Path(tempfile.mkdtemp(prefix="ol-fresh-"))
    atexit.register(shutil.rmtree, fresh_dir, True)  # the cases live as long as this check
    return str(fresh_golden(ch, seed, fresh_dir))


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
@click.option("--lang", default=None, help="python or rust: the reference's or a mutant's language, or the only one to look for")
def check(chapter, submission, ref_deps, ref_deps_if_missing, transport, json_path, junit, gradescope, html_path, fresh, golden,
          lang) -> None:
    """Run the chapter's tests on a submission; the exit code is the verdict."""
    from .check import run_check  # here: it imports pytest, 0.36 s measured, which only a check needs

    ch = load_chapter(chapter)
    if lang is not None:
        ch.language(lang)  # an unknown language is a usage error before anything runs
    seed = None if fresh is None else _seed(fresh)  # so is a seed that is no integer, whatever else is given
    console = err if json_path == "-" else out  # `--json -`: the report is stdout's only content (ol grade reads it)
    if submission is None:
        submission = _default_submission(ch, lang, console)
        if submission is None:
            given = _options_given(click.get_current_context())
            if given or not sys.stdout.isatty():  # the demo is for a person at a terminal who typed `ol check CHAPTER`
                raise UsageError(_no_submission(ch, lang, given))
            return _demo(ch)
    try:
        validate(ch, submission, lang)
        ref_deps = _ref_deps(ch, submission, ref_deps, ref_deps_if_missing, lang)
        mode = _sandbox_mode(console, ch, submission, transport, lang)
        if seed is not None:
            golden = _fresh_cases(ch, seed)
            console.print(f"fresh cases from seed {seed} (replay with --fresh {seed})")
        rep = run_check(ch, submission, ref_deps, transport, golden=golden, fresh_seed=seed, sandbox=mode, language=lang)
    except BadSubmission as e:
        if json_path == "-":  # ol grade's judge: the submission's own fault, told apart from any other exit 2 (a usage
            _refusal_out(str(e))  # error, a machine without cargo), so its row is rejected, not ungraded
        if gradescope:  # the bundle's judge: the same refusal, read by harness.gradescope (a rejected upload)
            _write_json(gradescope, {"refused": str(e)})
        raise
    show.report(console, rep)
    show.hints(console, rep)
    _write_outputs(rep, json_path, junit, gradescope)
    if html_path:
        from .grading.class_report import feedback_data  # here: jinja2's import, which only --html needs
        from .render.html import feedback_page

        Path(html_path).parent.mkdir(parents=True, exist_ok=True)
        Path(html_path).write_text(feedback_page(feedback_data(ch, rep)), encoding="utf-8")
    raise Exit(0 if rep.ok else 1)


def _default_submission(ch, lang: str | None, console) -> str | None:
    """With no --submission: this folder when it is a workspace (e.g. ./rust, where `cargo test` runs the
    check), else the chapter's workspace folder of each language that exists here, the chapter's first
    language first (L10.8 is a Rust chapter; a student has ./py from L8.6 too); None: nothing to grade."""
    langs = [lang] if lang else list(ch.languages)
    if any(Path(ch.language(n).student_file).is_file() for n in langs):
        return "."
    # a workspace folder counts when it holds the language's package (this repository's own rust/ holds only
    # the course's crates, so `ol check L10.8` here shows the demo)
    found = [n for n in langs if (Path(ch.language(n).default_workspace) / ch.language(n).package).is_dir()]
    if not found:
        return None
    if len(found) > 1:
        first = ch.default_language if ch.default_language in found else found[0]
        others = ", ".join(f"./{ch.language(n).default_workspace} (--lang {n})" for n in found if n != first)
        console.print(f"grading ./{ch.language(first).default_workspace} ({first}); also here: {others}")
        found = [first]
    return ch.language(found[0]).default_workspace


def _options_given(ctx) -> list[str]:
    """The options the command line gave (each by its first name), defaults aside."""
    return [p.opts[0] for p in ctx.command.params
            if isinstance(p, click.Option) and ctx.get_parameter_source(p.name) is not click.core.ParameterSource.DEFAULT]


def _no_submission(ch, lang: str | None, given: list[str]) -> str:
    """Why `ol check` with no --submission, and no workspace here, is refused rather than shown the demo:
    a script run in the wrong folder, or a person who asked for a report, gets no green demo."""
    langs = [lang] if lang else sorted(ch.languages, key=lambda n: n != ch.default_language)  # as _default_submission picks
    folders = " or ".join(f"./{ch.language(n).default_workspace}" for n in langs)
    why = (f"the demo takes no {', '.join(given)}: it runs for `ol check {ch.chapter}` alone, at a terminal" if given
           else f"the demo runs only at a terminal, for `ol check {ch.chapter}` alone")
    start = f"ol start {ch.chapter}" + (f" --lang {lang}" if lang and lang != "python" else "")  # start's default: python
    return f"no submission at {folders} (looked in {Path.cwd()}): pass --submission PATH, or make one with `{start}` ({why})"


def _sandbox_mode(console, ch, submission: str, transport: str, lang: str | None = None):
    """How this check confines the code it runs (harness.confine); said once when it cannot, or when the
    uid fallback leaves the answers readable."""
    if transport != "worker" and (submission == "reference" or submission.startswith("mutant:")) and lang in (None, "python"):
        return None  # trusted code, in-process
    mode = choose()
    if not mode.confined:
        console.print(f"[bold yellow]ol: not sandboxed[/]: your code runs as you, unconfined ({mode.why}).", markup=True)
    elif exposed := answers_exposed(ch, mode):
        console.print(f"[bold yellow]ol: sandbox mode uid[/] ({mode.why}): {exposure_advice(exposed)}", markup=True)
    return mode


def _refusal_out(reason: str) -> None:
    """`--json -`: the one line on stdout of a judge that refused its submission as malformed (exit 2)."""
    sys.stdout.write(json.dumps({"refused": reason}) + "\n")
    sys.stdout.flush()


def _write_outputs(rep, json_path, junit, gradescope) -> None:
    if json_path == "-":
        sys.stdout.write(json.dumps(rep.to_json()) + "\n")
        sys.stdout.flush()
    elif json_path:
        _write_json(json_path, rep.to_json())
    if junit:
        from .render.junit import junit_xml  # here: 45 ms measured, only --junit needs it

        Path(junit).parent.mkdir(parents=True, exist_ok=True)
        Path(junit).write_text(junit_xml(rep), encoding="utf-8")  # as its XML declaration says
    if gradescope:
        _write_json(gradescope, results_json(rep))


def _seed(text: str, option: str = "--fresh") -> int:
    import secrets  # here: 18 ms measured, only --fresh without a seed needs it

    if text == "random":
        return secrets.randbits(63)
    if text.startswith("@"):  # @FILE: the seed read from a private file, so that no command line shows it
        try:
            text = Path(text[1:]).read_text().strip()
        except OSError as e:
            raise UsageError(f"{option} {text}: cannot read the seed from {text[1:]} ({e.strerror or e}); "
                             "name a readable file holding the seed") from None
    try:
        seed = int(text, 0)
    except ValueError:
        raise UsageError(f"{option} takes an integer seed, got {text!r}") from None
    if not 0 <= seed < 2**64:
        raise UsageError(f"{option} must be a 64-bit unsigned integer, got {seed}")
    return seed


def _demo(ch) -> None:
    """No workspace here: show what a check looks like, on the reference and on a sample with a known bug."""
    from .check import run_check  # here: it imports pytest, 0.36 s measured, which only a check needs

    ws = ch.language().default_workspace
    out.print(f"[bold]No submission at ./{ws}[/] (run `ol start {ch.chapter}` to make one). "
              "Showing the demo: the reference, then a sample submission with a known bug.\n")
    ref = run_check(ch, "reference")
    show.report(out, ref)
    ok = ref.ok
    if ch.demo is not None and ch.demo.exists():
        out.print(f"\n[bold]The sample submission[/] {ch.demo.relative_to(REPO) if ch.demo.is_relative_to(REPO) else ch.demo} "
                  f"(its bug: {ch.demo.name}):\n")
        bad = run_check(ch, str(ch.demo), ref_deps=True)  # the sample holds only its chapter file
        show.report(out, bad)
        show.hints(out, bad)
        ok = ok and not bad.ok
    out.print("\n[bold]demo:[/] the reference passes and the sample's bug is caught." if ok else "\n[bold red]demo: unexpected outcome[/]")
    raise Exit(0 if ok else 1)


@main.command()
@click.argument("chapter")
@click.option("--submission", default=None, help="reference | mutant:ID | a folder, file or zip (default ./py)")
@click.option("--ref-deps", is_flag=True)
@click.option("--json", "json_path", default=None, help="write the divergences as JSON")
@click.option("--all", "show_all", is_flag=True, help="show every divergent case, not the first 10 of each section")
@click.option("--lang", default=None, help="python or rust (the reference's or a mutant's; a submission's comes from its layout)")
@click.option("--case", "case_id", default=None, help="print this golden case as a test you can paste (with --lang rust: a #[test])")
def diff(chapter, submission, ref_deps, json_path, show_all, lang, case_id) -> None:
    """The differential view: the submission against every golden case."""
    ch = load_chapter(chapter)
    if lang is not None:
        ch.language(lang)
    if case_id is not None:
        verify_golden(ch)
        sys.stdout.write(case_literal(ch, case_id, lang or "python") + "\n")  # verbatim: no wrapping, no markup
        raise Exit(0)
    submission = submission or _default_submission(ch, lang, out) or ch.language().default_workspace
    validate(ch, submission, lang)
    verify_golden(ch)
    result = run_diff(ch, submission, ref_deps, language=lang)
    show.diff(out, result, show_all)
    if json_path:
        _write_json(json_path, result)
    raise Exit(0 if result["divergent"] == 0 else 1)


@main.command()
@click.argument("chapter")
@click.option("--check", "only_check", is_flag=True, help="regenerate in memory and fail if the file differs")
def fixtures(chapter, only_check) -> None:
    """Regenerate the chapter's golden fixtures from the reference (byte for byte reproducible)."""
    ch = load_chapter(chapter)
    if only_check:
        problem = check_fixtures(ch)
        if problem:
            err.print(f"[bold red]fixtures differ:[/] {escape(problem)}\nregenerate with `ol fixtures {ch.chapter}` and review the diff.")
            raise Exit(1)
        out.print(f"{_shown(ch.golden)} is up to date (regenerated byte for byte)")
        return
    path, size = write_fixtures(ch)
    out.print(f"wrote {_shown(path)} ({size} bytes)")


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


@main.command()
@click.argument("chapter")
@click.option("--json", "json_path", default=None, help="write the kill matrix as JSON")
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="parallel processes (default: the core count)")
@click.option("--lang", default="python", help="python (default), rust, or all: each language's reference and mutant ports")
@click.option("--set", "mutant_set", default=DEFAULT_SET, show_default=True,
              help="the mutant set: the named pitfalls (default), or a further set of chapter.toml's mutant_sets "
                   "(killed by any failing test; passes at 95 % killed)")
def mutants(chapter, json_path, jobs, lang, mutant_set) -> None:
    """Prove the tests catch the pitfalls: the reference passes all, every mutant fails its named test.

    With --set NAME, a further mutant set: the kill matrix of every test, the share killed (exit 1 below
    95 %), the survivors, and the findings (mutants no test of their expected_by catches)."""
    from .mutants import kill_matrix, ported  # here: 0.45 s measured (pytest and the mutant machinery), ol mutants only

    ch = load_chapter(chapter)
    if not ch.mutant_set(mutant_set):  # an unknown set is a usage error too
        if mutant_set == DEFAULT_SET:
            raise UsageError(f"chapter {ch.chapter} has no mutants ({ch.mutants_manifest} is missing)")
        raise UsageError(f"chapter {ch.chapter}'s mutant set {mutant_set} is empty ({ch.mutant_set_manifests[mutant_set]} "
                         "is missing or has no [[mutant]])")
    langs = list(ch.languages) if lang == "all" else [lang]
    for name in langs:
        ch.language(name)  # an unknown language is a usage error before anything runs
    if mutant_set != DEFAULT_SET:  # a further set runs in the languages its mutants are ported to
        have = [name for name in langs if ported(ch, name, mutant_set)]
        if not have:
            raise UsageError(f"the mutant set {mutant_set} of {ch.chapter} has no {' or '.join(langs)} port")
        langs = have
    results = []
    for name in langs:
        start = time.perf_counter()
        with Progress(console=err, transient=True) as progress:
            task = progress.add_task(f"{name}: reference and mutants", total=len(ported(ch, name, mutant_set)) + 1)
            result = kill_matrix(ch, jobs, on_done=lambda label: progress.advance(task), language=name, mutant_set=mutant_set)
        result["duration_s"] = round(time.perf_counter() - start, 2)
        results.append(result)
    show.kill_matrices(out, results)
    if json_path:
        _write_json(json_path, results[0] if len(results) == 1 else {"chapter": ch.chapter, "languages": results})
    raise Exit(0 if all(r["ok"] for r in results) else 1)


@main.command()
@click.argument("chapter")
@click.option("--out", "out_zip", default="autograder.zip", type=click.Path(path_type=Path), help="the bundle to write")
@click.option("--seed", default=None, help="the fresh cases' seed, fixed for the assignment (default: a random 63-bit one)")
def gradescope(chapter, out_zip, seed) -> None:
    """Build a Gradescope autograder bundle (setup.sh, run_autograder and the harness at its root).

    Every submission and regrade is graded on the same fresh cases, from a seed drawn now (or --seed)
    and kept in the bundle, never shown to students."""
    from .gradescope import build_bundle, summary  # here: 20 ms measured, ol gradescope only

    ch = load_chapter(chapter)
    try:
        seed_value = _seed("random" if seed is None else seed)
    except UsageError:
        raise UsageError(f"--seed takes an integer from 0 to 2**64-1, got {seed!r}: give one, or omit --seed for a random one") from None
    lines, warnings = summary(build_bundle(ch, out_zip, seed_value), ch.chapter, seed_value)
    out.print("\n".join(lines), markup=False)
    for w in warnings:
        err.print(f"[yellow]ol:[/] {escape(w)}", markup=True)


@main.command()
@click.argument("chapter")
@click.option("--json", "json_path", default=None, help="write the result as JSON")
@click.option("--jobs", type=click.IntRange(min=1), default=2, help="mutmut's parallel children")
def mutmut(chapter, json_path, jobs) -> None:
    """mutmut over the reference's chapter files against the chapter's tests, in a scratch copy."""
    from .mutmut_run import run_mutmut  # here: 49 ms measured, ol mutmut only

    ch = load_chapter(chapter)
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
    raise Exit(1 if new else 0)


@main.group()
def config() -> None:
    """The engine's runtime configuration (runtime.toml)."""


@config.command("check")
@click.argument("runtime_toml", type=click.Path(path_type=Path))
def config_check(runtime_toml: Path) -> None:
    """Validate RUNTIME_TOML against config/runtime.schema.json, as the engine does at startup."""
    config_module = pristine().module("config")
    if not runtime_toml.is_file():
        raise UsageError(f"no runtime file at {runtime_toml}: name an existing file (config/runtime.example.toml is a template)")
    try:
        cfg = config_module.load_runtime(runtime_toml)
    except config_module.ConfigError as e:
        err.print(f"[bold red]ol: {escape(str(runtime_toml))} is not a valid runtime file:[/] {escape(str(e))}", markup=True)
        raise Exit(1) from None
    spec = getattr(cfg, "speculative", None)
    out.print(f"{runtime_toml} is valid" + (f": [engine].speculative = {spec}" if spec is not None else ""), markup=False)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def selftest(ctx) -> None:
    """Run ol's own test suite (pytest over tests/ and chapters/; extra arguments go to pytest)."""
    import pytest  # here: pytest is most of a check's start-up, which only selftest and check need

    args = list(ctx.args)
    # The suite's tests run side by side, their judges sharing the cores: none polls (harness.wire.SPIN_S)
    os.environ.setdefault("OL_SPIN_S", "0")
    wire.reread_spin()
    # Two workers a core by default (pytest-xdist; worksteal: an idle worker takes queued tests from a busy one,
    # so the long tests balance): the suite mostly waits (deadlines it proves, sandboxes starting, hostile samples
    # sleeping; measured: 480 CPU-seconds in 2058 test-seconds), so a core runs one test while another waits.
    # A caller's own -n/--dist/-p no:xdist wins. (Not loadgroup: xdist 3.8
    # groups by rewriting item._nodeid, which pytest 9.2 no longer reads, so its groups are ignored.)
    def chooses_workers(i: int, a: str) -> bool:
        return (a in ("-n", "--numprocesses", "--dist", "-pno:xdist") or a.startswith(("--numprocesses=", "--dist="))
                or (a.startswith("-n") and not a.startswith("--")) or (a == "-p" and args[i + 1 : i + 2] == ["no:xdist"]))

    own = any(chooses_workers(i, a) for i, a in enumerate(args))
    if not own and importlib.util.find_spec("xdist") is not None:
        args = ["-n", str(2 * max(1, len(os.sched_getaffinity(0)))), "--dist", "worksteal", *args]
    # What to run: the caller's own test paths or node ids when it names any (`ol selftest tests/x.py::test_y`
    # runs that alone, as pytest would), else the whole suite from wherever ol is called.
    named = any(not a.startswith("-") and Path(a.split("::")[0]).exists() for a in args)
    where = [] if named else [str(REPO / "tests"), str(REPO / "chapters")]
    code = int(pytest.main([*where, *args]))
    if code == 5:
        err.print("ol selftest: pytest collected no tests: that is a failure, not a pass")
    if code == 4:  # pytest's usage error: ol's bad-input code
        err.print("ol selftest: pytest refused its arguments (see above); `ol selftest --help` lists ol's own, pytest's are pytest's")
        code = 2
    raise Exit(1 if code == 5 else min(code, 3))


from .cli_grade import add_to  # noqa: E402  (`ol grade`, in a module of its own)

add_to(main, out, err, Exit, _seed)

if __name__ == "__main__":
    main(prog_name="ol")  # `python -m harness.cli` is how ./ol runs it; help and errors say `ol`
