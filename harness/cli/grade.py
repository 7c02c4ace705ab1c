"""`ol grade`, `ol report` and `ol similar`: the command line of class grading; the work is harness.grading.grade's,
harness.grading.class_report's and harness.staff.similar's, the last two imported where used (matplotlib, jinja2
and copydetect, which no other command needs).
"""

import json
import os
from pathlib import Path

import click
from rich.text import Text

from ..kernel.errors import SandboxError, UsageError
from ..kernel import cache
from ..grading.grade import GradeOptions, check_outputs, grade as run_grade
from ..subjects.upload import submissions_in
from ..grading.ledger import SUMMARY, default_results_dir, recorded_seed
from ..grading.roster import match, read_roster
from ..kernel.paths import write_atomic
from ..registry import load_chapter
from ..kernel.roles import require
from ..render import console as show
from ..render.console import lit
from ..sandbox.confine import choose, grading_refusal
from .common import Exit, err, out, seed as _seed
from .outputs import check_writable
from .progress import GradeProgress

SIMILAR_THRESHOLD = 0.5  # harness.staff.similar.THRESHOLD (imported there only when used: copydetect costs ~1 s)


@click.command()
@click.argument("chapter")
@click.argument("submissions_dir", type=click.Path(path_type=Path))
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="submissions graded at once on this machine (default: the core count; not with --scheduler)")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="grade on the workers of this running Dask scheduler (e.g. tcp://10.0.0.5:8786; docs/grading.md)")
@click.option("--scheduler-file", default=None, type=click.Path(path_type=Path),
              help="grade on the Dask scheduler named in this file (`dask scheduler --scheduler-file F` writes it)")
@click.option("--out", "out_csv", default="grades.csv", type=click.Path(path_type=Path), help="the CSV of grades")
@click.option("--results-dir", default=None, type=click.Path(path_type=Path),
              help="the ledger: one JSON report per submission, and summary.json (default: beside --out, grades-results/)")
@click.option("--seed", default=None,
              help="the fresh cases' seed (default: the ledger's last run's, else a random one; recorded in the outputs; "
                   "@FILE: read from FILE, so that no command line shows it)")
@click.option("--regrade", is_flag=True, help="grade every submission again, even those the ledger holds graded with this run's key")
@click.option("--shipped-cases", is_flag=True, help="grade on the shipped golden cases instead of fresh ones")
@click.option("--ref-deps", is_flag=True, help="every submission holds only its chapter file; the rest comes from the reference")
@click.option("--no-sandbox", is_flag=True, help="grade even where workers cannot be confined (they run as you: trusted code only)")
@click.option("--roster", default=None, type=click.Path(path_type=Path),
              help="a CSV with columns submission,id[,email]: the CSV and the report gain each student's id and email")
@click.option("--no-similar", is_flag=True, help="leave the similarity between submissions out of the report (ol similar)")
def grade(chapter, submissions_dir, jobs, scheduler, scheduler_file, out_csv, results_dir, seed, regrade, shipped_cases,
          ref_deps, no_sandbox, roster, no_similar) -> None:
    """Grade every entry of SUBMISSIONS_DIR (each through its own judge and worker), in parallel, here or on a
    Dask cluster; a rerun resumes: what the ledger holds graded with the same key is skipped."""
    require("staff", "grade")  # Dask, the report's plots, the similarity: asked for before anything is graded
    ch = load_chapter(chapter)
    check_writable(out=out_csv, results_dir=results_dir or default_results_dir(out_csv))  # before any work, nothing made
    given_seed = None if seed is None else _seed(seed, "--seed")  # one that is no integer: refused before anything
    cluster, mode_name = None, None
    if scheduler is not None or scheduler_file is not None:
        from ..grading.cluster import Cluster  # here: it imports Dask, 1.2 s measured, which only --scheduler needs

        if jobs is not None:
            raise UsageError("--jobs sizes this machine's pool; with --scheduler each Dask worker's --nthreads decides")
        cluster = Cluster(scheduler, scheduler_file)
        err.print(f"ol: grading on the Dask cluster {cluster.name}: each worker confines submissions in the best sandbox "
                  "mode it has" + (" (or none: --no-sandbox)" if no_sandbox else ", or refuses"))
    else:
        mode = choose()
        if refusal := grading_refusal(ch, mode, no_sandbox, "ol grade", class_dir=submissions_dir):
            raise SandboxError(refusal)
        mode_name = mode.name
        err.print(f"ol: grading in sandbox mode {mode.name}" + (f" ({mode.why})" if mode.why else ""))
    results_dir = results_dir or default_results_dir(out_csv)
    entries = submissions_in(ch, submissions_dir)
    n = len(entries)
    matched = None if roster is None else match(read_roster(roster), [e.name for e in entries])  # refused before grading
    cache.ready()  # a link or another user's folder in ol's cache: refused before anyone is graded (harness.kernel.cache)
    check_outputs(out_csv, results_dir)
    if shipped_cases:
        seed_value = None
    elif given_seed is not None:
        seed_value = given_seed
    elif (seed_value := recorded_seed(results_dir)) is not None:
        err.print(f"ol: the ledger {results_dir} was graded on fresh cases from seed {seed_value}: resuming on them "
                  "(--seed S grades on others)")
    else:
        seed_value = _seed("random", "--seed")
    progress = GradeProgress(err)
    try:
        with progress:
            options = GradeOptions(out_csv, results_dir, seed=seed_value, ref_deps=ref_deps, jobs=jobs or os.cpu_count() or 1,
                                   cluster=cluster, unconfined_ok=no_sandbox, regrade=regrade, sandbox=mode_name, roster=matched)
            result = run_grade(ch, submissions_dir, options, progress)
    except KeyboardInterrupt:
        done = sum(progress.counts.values())
        err.print(f"ol: interrupted after grading {done} submissions; every grade is kept in {results_dir}/ and {out_csv}: "
                  f"run the same command again to resume (`ol report {ch.chapter} {results_dir}` writes the report of what is graded)")
        raise Exit(130) from None
    show.grades(out, ch.chapter, result)
    rate = progress.rate_per_minute()
    out.print(f"wrote {out_csv} and {results_dir}/" + (f"; replay with --seed {seed_value}" if seed_value is not None else "") +
              (f"; {len(result['skipped'])} already graded with this key, skipped (--regrade grades them again)"
               if result["skipped"] else "") + (f"; {rate:.1f} graded a minute" if rate else ""))
    for note in result.get("notes", []):  # a record kept beside the ledger was corrupt: not trusted, made again
        err.print(Text.assemble(("ol: not trusted: ", "bold yellow"), lit(note)))
    if matched is not None and matched["unmatched"]:  # the roster's mismatches, both ways
        err.print(Text.assemble(("ol: on no roster row: ", "bold yellow"), lit(", ".join(matched["unmatched"]))))
    if matched is not None and matched["without_submission"]:
        missing = ", ".join(f"{s['id']} ({s['submission']})" for s in matched["without_submission"])
        err.print(Text.assemble(("ol: students with no submission: ", "bold yellow"), lit(missing)))
    kept = {r.submission for r in result["reports"] if r.rejected is None}  # a rejected entry is no submission
    _similarity(ch, submissions_dir, results_dir, kept, skip=no_similar)
    from ..grading.class_report import write_report  # here: jinja2 and matplotlib, which only the report needs

    _wrote_report(write_report(ch, results_dir, out_csv.with_suffix(".html")), results_dir)
    rejected = result["summary"].rejected
    if rejected:  # a verdict (0, with the reason), as the Gradescope bundle gives it: not a failure of the run
        err.print(f"ol: {rejected} of {n} entries are no submission (their rows say rejected, score 0, with the reason)")
    ungraded = result["summary"].ungraded
    if ungraded:
        err.print(f"[bold red]ol: {ungraded} of {n} submissions could not be graded[/] (their rows say ungraded, "
                  "with the reason); fix the cause and grade them again.", markup=True)
        raise Exit(3)


def _wrote_report(written: dict, results_dir: Path) -> None:
    if written["note"]:
        err.print(Text.assemble(("ol: not trusted: ", "bold yellow"), lit(written["note"])))
    kept = written["pages"] - written["rendered"]
    out.print(f"wrote the class report {written['report']} and {written['pages']} feedback pages in {results_dir}/" +
              (f" ({kept} of them, and the class report, as they were: unchanged)" if kept and not written["class_rendered"]
               else f" ({kept} of them as they were: unchanged)" if kept else ""))

def _similarity(ch, submissions_dir: Path, results_dir: Path, kept: set[str], skip: bool) -> None:
    """The class's similar pairs into the results directory, for the report: the kept result when the class's code,
    the given code and the detector are as they were (harness.staff.similar_cache), else compared again; none
    there when skipped or failed (a previous run's would describe other code)."""
    from ..staff import similar_cache  # here: as the report's, where used

    if skip:
        similar_cache.drop(results_dir)
        return
    try:
        look = similar_cache.lookup(ch, submissions_dir, results_dir, SIMILAR_THRESHOLD, only=kept)
        if look.note:
            err.print(Text.assemble(("ol: the kept similarity is not trusted: ", "bold yellow"), lit(look.note),
                                    "; comparing again"))
        found = look.found
        if found is not None:
            err.print(f"ol: the {len(kept)} submissions' code, the given code and the detector are as when they were last "
                      "compared: the similarity kept is reused (ol similar; --no-similar skips it)")
        else:
            err.print(f"ol: comparing the {len(kept)} submissions' code (ol similar; --no-similar skips it)")
            found = similar_cache.compute(ch, submissions_dir, results_dir, SIMILAR_THRESHOLD, only=kept, key=look.key)
    except Exception as e:  # noqa: BLE001 -- the grades are written: the report goes without this section
        similar_cache.drop(results_dir)
        err.print(Text.assemble(("ol: the similarity could not be computed", "bold red"), " (the report has no such section): ",
                                lit(f"{type(e).__name__}: {e}")))
        return
    if found["pairs"]:
        err.print(f"ol: {len(found['pairs']) + found['more']} pairs of submissions are unusually alike (ol similar): "
                  "see the report's similarity section")

@click.command()
@click.argument("chapter")
@click.argument("results_dir", type=click.Path(path_type=Path))
@click.option("--out", "out_html", default=None, type=click.Path(path_type=Path),
              help="the class report to write (default: beside RESULTS_DIR, grades-results/ -> grades.html)")
def report(chapter, results_dir, out_html) -> None:
    """Write the class report (HTML, self-contained) and every submission's feedback page from RESULTS_DIR,
    the ledger `ol grade` wrote; the same every time it is run on the same directory."""
    require("staff", "report")
    from ..grading.class_report import write_report  # here: jinja2 and matplotlib, which only the report needs

    ch = load_chapter(chapter)
    check_writable(out=out_html)  # a folder too
    if not (results_dir / SUMMARY).is_file():
        raise UsageError(f"{results_dir} is not the results directory of `ol grade` (no {SUMMARY} in it); "
                         "name the folder given as --results-dir (default: grades-results/ beside grades.csv)")
    written = write_report(ch, results_dir, out_html)
    _wrote_report(written, results_dir)
    if written["unreadable"]:
        err.print(f"ol: {len(written['unreadable'])} entries of {results_dir} could not be read: "
                  f"{', '.join(written['unreadable'])} (the report lists them)")

@click.command("similar")
@click.argument("chapter")
@click.argument("submissions_dir", type=click.Path(path_type=Path))
@click.option("--threshold", type=click.FloatRange(0.0, 1.0), default=SIMILAR_THRESHOLD, show_default=True,
              help="flag a pair when either side has at least this share of its code in the other")
@click.option("--results-dir", default=None, type=click.Path(path_type=Path),
              help="also write the result into this `ol grade` results directory, for `ol report` to show")
@click.option("--html", "html_path", default=None, type=click.Path(path_type=Path), help="write the pairs, side by side, as HTML")
@click.option("--json", "json_path", default=None, type=click.Path(path_type=Path), help="write the result as JSON")
def similar_cmd(chapter, submissions_dir, threshold, results_dir, html_path, json_path) -> None:
    """Pairs of submissions in SUBMISSIONS_DIR whose code is unusually alike (copydetect), the stub and the given
    files left out; exit 1 when a pair is flagged."""
    require("staff", "similar")
    from ..render.html import similarity_page  # here: jinja2, which only the pages need
    from ..staff import similar_cache  # here: as the report's, where used
    from ..staff.similar import similar  # here: as the report's, where used

    ch = load_chapter(chapter)
    check_writable(json_path=json_path, html_path=html_path, results_dir=results_dir)
    if results_dir is not None:  # kept with its key: `ol grade` reuses it when its class and threshold are these
        found = similar_cache.compute(ch, submissions_dir, results_dir, threshold)
    else:
        found = similar(ch, submissions_dir, threshold)
    for path, text in ((json_path, lambda: json.dumps(found, indent=1) + "\n"),
                       (html_path, lambda: similarity_page(ch.chapter, found))):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text())
    show.similar_pairs(out, found)
    raise Exit(1 if found["pairs"] else 0)
