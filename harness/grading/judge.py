"""One submission's judge: `ol check --json -` in a process of its own, and the report it gives back.

The command (JUDGE_MAIN with `check CHAPTER --submission S --golden G --json -`), what its zygote imports before
forking it (JUDGE_PRELOAD), the environment every judge shares (`judge_env`), and how its exit becomes a report:
trusted only from a judge that exited 0 or 1; a refusal (exit 2 with one JSON line) a rejected report; anything
else an ungraded one, with the reason.
"""

from dataclasses import dataclass, field
import json
import os
from pathlib import Path
import subprocess
import time

from ..kernel.errors import BadSubmission, OlError, verdict_of
from ..languages import LANGUAGES
from ..kernel.paths import REPO
from ..registry import Chapter
from ..kernel.report import Report
from ..sandbox.uids import UidPool
from ..subjects.layout import detect
from . import zygote

JUDGE_MAIN = "harness.cli:main"  # what a judge runs: `ol`, given the judge's argv
JUDGE_PRELOAD = ("harness.check.runner", "harness.cli", "harness.check.pytest_plugin")  # what every judge imports: the zygote's, once
# one submission's whole check, stopped past it (ungraded): above the check's own limit (harness.transport.impl.CHECK_LIMIT_S,
# 600 s after a build of at most 240 s), which makes a submission slow on every call a verdict (timeouts) first
WHOLE_CHECK_S = 900
# Not passed on to a judge: a Dask nanny sets MALLOC_TRIM_THRESHOLD_=65536 for its worker's memory, and a
# judge under it (millions of small allocations) takes 0.5 s more CPU a check, 25 % (2.1-2.5 s -> 2.7-2.9 s)
JUDGE_ENV_DROP = ("MALLOC_TRIM_THRESHOLD_",)


def too_slow(chapter: Chapter, name: str, ref_deps: bool, e) -> Report:
    """The row of an entry whose work before the judge passed its deadline (harness.subjects.upload.TooSlow): rejected
    when the upload is more than source, ungraded when the machine was slow on a source-sized one."""
    return (Report.for_rejected if e.upload_fault else Report.for_ungraded)(chapter, name, ref_deps, str(e))


def layout_of(chapter: Chapter, sub: Path) -> tuple[str | None, str | None]:
    """(language, None) of a submission the one layout function accepts; (None, its reason) when it refuses it."""
    try:
        found = detect(chapter, sub)
    except BadSubmission as e:
        return None, str(e)
    found.close()
    return found.language, None


def language_of(chapter: Chapter, sub: Path) -> str | None:
    """The language of a submission, for its report when its judge gave none; None if none fits or the look fails."""
    try:
        return layout_of(chapter, sub)[0]
    except Exception:  # noqa: BLE001 -- only a label: the report's verdict stands without it
        return None


def _judge_failure(code: int, stderr: str) -> str:
    last = stderr.strip().splitlines()[-1][:300] if stderr.strip() else ""
    verdict, sig = verdict_of(code)
    if verdict == "killed":
        return f"its judge was killed by signal {sig} before it reported (the submission may have killed it)"
    if verdict == "refused":
        return f"the judge refused it as input: {last}"
    return f"the judge failed (exit {code}) without a report{': ' + last if last else ''}"


def refusal_in(text: str) -> str | None:
    """The reason in `{"refused": reason}`, what `ol check` writes (on stdout for `--json -`, in place of the results
    for `--gradescope`) when it refuses its submission as malformed; None for anything else."""
    try:
        said = json.loads(text)
    except ValueError:
        return None
    reason = said.get("refused") if isinstance(said, dict) else None
    return reason if isinstance(reason, str) and reason.strip() else None


def _ungraded_report(code: int, stdout: str) -> Report | None:
    """The report of a judge that found a fault of its own while judging (exit 3, its report ungraded with the fault
    named: harness.check.runner); None for any other exit or output."""
    if verdict_of(code)[0] != "fault":
        return None
    try:
        report = Report.from_json(json.loads(stdout))
    except (ValueError, TypeError, KeyError, OlError):
        return None
    return report if report.ungraded else None


@dataclass(frozen=True)
class JudgeOptions:
    """What the judges of one grading run share, for a submission's language."""

    chapter: Chapter
    golden: Path  # the cases graded on (the run's fresh ones, or the shipped file)
    ref_deps: bool
    sandbox: str  # the run's sandbox mode (harness.sandbox.confine: its name)
    forks: zygote.Zygote  # the run's zygote (start_zygote), whose fork each judge is
    # mode uid: the run's pool; a judge's worker takes a uid no process owns, and every process of it is killed before
    # the uid goes back (a daemon it left cannot reach the next student's worker)
    uids: UidPool | None = None
    run_env: dict[str, str] = field(default_factory=dict)  # what the run made for the language (Language.run_env)


def judge(sub: Path, scratch: Path, shown: str | None, options: JudgeOptions) -> tuple[Report, float]:
    """One submission's judge: `ol check --json -`, forked in a session of its own; its report comes back over its
    stdout pipe (no file a submission could reach), trusted only from a judge that exited 0 or 1. `scratch`: the
    folder for the judge's temporary files. `shown`: the path a failed judge's reason names instead of `sub`."""
    uids = options.uids
    uid = uids.take() if uids is not None else None
    try:
        return _run_judge(sub, scratch, uid, shown, options)
    finally:
        if uids is not None and uid is not None:
            uids.give(uid)


def start_zygote(chapter: str, sandbox: str, home: Path, warm: tuple[Path, int | None] | None = None) -> zygote.Zygote:
    """The zygote a run's judges fork from: JUDGE_PRELOAD imported under the judges' environment, the reference
    checked on the run's cases (`warm`: golden file, seed; zygote.warm); a fork runs JUDGE_MAIN."""
    return zygote.Zygote(chapter, judge_env(sandbox), home, preload=JUDGE_PRELOAD, main=JUDGE_MAIN, warm=warm)


def judge_env(sandbox: str) -> dict:
    """The environment every judge of a grading run shares (each adds its own TMPDIR, its uid where it has one, and
    what the run made for its language), with each language's own (harness.languages: Language.judge_env)."""
    env = {k: v for k, v in os.environ.items() if k not in JUDGE_ENV_DROP}
    for lang in LANGUAGES.values():
        env |= lang.judge_env
    return env | {"PYTHONPATH": str(REPO), "OL_SANDBOX": sandbox,
                  "OL_SPIN_S": "0"}  # judges share the cores: none polls (harness.protocol.wire.SPIN_S)


def _run_judge(sub: Path, scratch: Path, uid: int | None, shown: str | None, options: JudgeOptions) -> tuple[Report, float]:
    chapter, ref_deps, sandbox = options.chapter, options.ref_deps, options.sandbox
    argv = ["check", chapter.chapter, "--submission", str(sub), "--golden", str(options.golden), "--json", "-"]
    if ref_deps:
        argv.append("--ref-deps")
    tmp = scratch / "judge.tmp"  # the judge's temporary files (a bounded name, whatever the entry's): removed with the scratch, even if it is killed
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o711)  # mode uid: the worker's own folder in it is reached by name; nothing in it can be listed
    env = judge_env(sandbox) | options.run_env | {"TMPDIR": str(tmp)}
    if uid is not None:
        env["OL_SANDBOX_UID"] = str(uid)
    start = time.perf_counter()
    refused = faulted = None
    try:
        r = options.forks.run(argv, env, tmp, WHOLE_CHECK_S)  # a fork of the run's zygote, in a session of its own
        problem = None if verdict_of(r.returncode)[0] == "graded" else _judge_failure(r.returncode, r.stderr.replace(str(sub), shown or str(sub)))
        # the reason a judge that exited 2 gives for refusing its submission; None for any other exit, or another
        # refusal (a usage error, a machine without a language's toolchain: the grader's failure, ungraded)
        refused = refusal_in(r.stdout) if verdict_of(r.returncode)[0] == "refused" else None
        faulted = _ungraded_report(r.returncode, r.stdout)  # the judge's own fault, named in its report
    except subprocess.TimeoutExpired:
        problem = f"the whole check took longer than {WHOLE_CHECK_S} s and was stopped"
    elapsed = time.perf_counter() - start
    if refused is not None:  # the judge found the submission malformed (the layout check had passed): its verdict
        reason = " ".join(refused.replace(str(sub), shown or str(sub)).split())  # one line of at most 300 characters
        reason = reason if len(reason) <= 300 else reason[:297] + "..."
        rejected = Report.for_rejected(chapter, sub.name, ref_deps, reason)
        return rejected.but(sandbox=sandbox, language=language_of(chapter, sub)), elapsed
    report: Report | None = None
    if problem is None:
        try:
            report = Report.from_json(json.loads(r.stdout))
        except (ValueError, OlError) as e:
            problem = f"the judge's report was unreadable ({e})"
    elif faulted is not None:
        report = faulted.but(sandbox=sandbox)
    if report is None:
        report = Report.for_ungraded(chapter, sub.name, ref_deps, problem or "the judge gave no report").but(sandbox=sandbox, language=language_of(chapter, sub))
    return report.but(submission=sub.name), elapsed
