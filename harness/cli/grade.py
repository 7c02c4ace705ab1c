"""`ol grade`: the command line of class grading (the CLI's, so it prints); the work is harness.grading.grade's.

`add_to(main, ...)` adds the command to harness.cli's group, with the CLI's consoles and exit: cli.py
runs as `python -m harness.cli` (its module is then __main__), so this module takes them as arguments.
"""

import os
from pathlib import Path

import click

from ..errors import SandboxError, UsageError
from ..grading.grade import check_outputs, grade as run_grade, submissions_in
from ..grading.ledger import default_results_dir, recorded_seed
from ..registry import load_chapter
from ..render import console as show
from ..sandbox.confine import choose, grading_refusal
from .progress import GradeProgress


def add_to(main: click.Group, out, err, Exit, _seed) -> None:
    """Add `ol grade` to `main`; `out`/`err` the CLI's consoles, `Exit` its verdict, `_seed` its seed parser."""

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
    def grade(chapter, submissions_dir, jobs, scheduler, scheduler_file, out_csv, results_dir, seed, regrade, shipped_cases,
              ref_deps, no_sandbox) -> None:
        """Grade every entry of SUBMISSIONS_DIR (each through its own judge and worker), in parallel, here or on a
        Dask cluster; a rerun resumes: what the ledger holds graded with the same key is skipped."""
        ch = load_chapter(chapter)
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
        n = len(submissions_in(ch, submissions_dir))
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
                result = run_grade(ch, submissions_dir, seed_value, ref_deps, out_csv, results_dir, jobs=jobs or os.cpu_count() or 1,
                                   cluster=cluster, unconfined_ok=no_sandbox, regrade=regrade, sandbox=mode_name, events=progress)
        except KeyboardInterrupt:
            done = sum(progress.counts.values())
            err.print(f"ol: interrupted after grading {done} submissions; every grade is kept in {results_dir}/ and {out_csv}: "
                      "run the same command again to resume")
            raise Exit(130) from None
        show.grades(out, ch.chapter, result)
        rate = progress.rate_per_minute()
        out.print(f"wrote {out_csv} and {results_dir}/" + (f"; replay with --seed {seed_value}" if seed_value is not None else "") +
                  (f"; {len(result['skipped'])} already graded with this key, skipped (--regrade grades them again)"
                   if result["skipped"] else "") + (f"; {rate:.1f} graded a minute" if rate else ""))
        rejected = result["summary"]["rejected"]
        if rejected:  # a verdict (0, with the reason), as the Gradescope bundle gives it: not a failure of the run
            err.print(f"ol: {rejected} of {n} entries are no submission (their rows say rejected, score 0, with the reason)")
        ungraded = result["summary"]["ungraded"]
        if ungraded:
            err.print(f"[bold red]ol: {ungraded} of {n} submissions could not be graded[/] (their rows say ungraded, "
                      "with the reason); fix the cause and grade them again.", markup=True)
            raise Exit(3)

    main.add_command(grade)
