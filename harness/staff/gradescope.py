"""Gradescope: the autograder bundle, and the step that turns one `ol check` into results.json.

Gradescope extracts the bundle into /autograder/source and runs setup.sh there once (root, with the network) when
it builds the image; for each submission it runs run_autograder with the upload in /autograder/submission, reads
/autograder/results/results.json, and shows staff alone what run_autograder printed. So:

* setup.sh (scripts/setup.sh) picks an interpreter new enough for ol (Ubuntu 22.04's is too old: it installs a
  newer one from universe; 24.04's may lack venv), makes ol's .venv with the student lock (README, "Installs by
  role") and records the interpreter: run_autograder (scripts/run_autograder.sh) needs no network.
* One bundle takes an upload in any of the chapter's languages (the layout function tells which). Each language
  adds its steps to both scripts (Language.image: a compiled language builds its reference once, confined as an
  upload's build is, so a machine that cannot build fails the image, not every upload).
* The fresh cases' seed is drawn when the bundle is built and kept in it: every submission and regrade is graded on
  the same cases. Only run_autograder's hidden output names it; results.json never does.
* `-m harness.staff.gradescope` (run_autograder's last step) writes results.json from the check's exit code: the
  report for 0 or 1; for 2 with an upload the layout function rejects (harness.subjects.upload) or the judge
  refused as malformed (the reason it wrote in place of the results), a score of 0 and one sentence saying what
  to upload, as `ol grade` rejects it; for a killed check, that. Otherwise the grader failed (exit 3, no report,
  an exit it cannot explain): the submission is *ungraded* and results.json is not written at all. Gradescope has
  no ungraded result, and a 0 with an apology is still a 0 in the gradebook; without results.json it marks the run
  failed, with no score, which staff see and rerun once the cause is fixed. No grade of 0 looks like a verdict.
"""

from dataclasses import dataclass, field
import io
import json
import sys
import zipfile
from pathlib import Path

from ..kernel.errors import BadSubmission, OlError, verdict_of
from ..grading.judge import refusal_in
from ..languages import INTERPRETER_FILE, OL_RUNTIME, language
from ..kernel.paths import REPO, git_files, read_json
from ..registry import load_chapter
from ..render.gradescope import killed, redact, upload_rejected
from ..subjects.layout import detect

SEED_FILE = ".ol-assignment-seed"  # in source/: the fresh cases' seed, fixed for the assignment when the bundle is built
META_FILE = ".ol-gradescope.json"  # in source/: the chapter's tests and what to upload, for a results.json without a report
LISTED_NAMES = 5  # names of an upload's entries a rejection quotes back to the student: enough to recognise it

# Gradescope's two scripts, bash with {placeholders} (_script fills them): read from scripts/ beside this module
SCRIPTS = Path(__file__).parent / "scripts"
RUN_AUTOGRADER = (SCRIPTS / "run_autograder.sh").read_text()
SETUP_SH = (SCRIPTS / "setup.sh").read_text()


@dataclass
class Bundle:
    path: Path
    files: int  # the harness's files in it
    size: int  # bytes of the zip
    untracked: list[str] = field(default_factory=list)  # files git does not track, included (new modules beside tracked ones)
    skipped: list[str] = field(default_factory=list)  # files git does not track, left out
    languages: tuple[str, ...] = ()  # the chapter's: an upload in any of them is graded


def upload_hint(chapter) -> str:
    """What a student may upload, as the middle of a sentence: every way the layout function accepts."""
    ways = []
    for lang in chapter.languages.values():
        ways += [f"{name} (your {place} on its own)" for name, place in lang.uploads.items()]
        package = Path(lang.package)
        ways.append(f"your {package.name}/ folder")
        if len(package.parts) > 1:  # a crate inside its workspace (crates/tl-engine in rust/): either folder
            ways.append(f"your {lang.default_workspace}/ workspace")
    last = "a .zip of either" if len(ways) == 2 else "a .zip of one of these"
    return ", ".join(ways) + f", or {last}"


def _git_files(*args: str) -> list[str]:
    listed = git_files(*args)
    if listed is None:
        raise OlError(f"`git ls-files` failed in {REPO}: the bundle is built from a git checkout of ol")
    return listed


def _harness_files(out_zip: Path) -> tuple[list[str], list[str], list[str]]:
    """(files, untracked included, untracked skipped). Tracked files as they are in the working tree,
    and untracked ones only beside tracked files (a module not yet added), never at the top or a zip:
    grades, bundles and uploads lying around the checkout stay out."""
    tracked = _git_files()
    beside = {str(Path(f).parent) for f in tracked} - {"."}
    new: list[str] = []
    skipped: list[str] = []
    out = out_zip.resolve()
    for f in _git_files("--others", "--exclude-standard"):
        keep = str(Path(f).parent) in beside and not f.endswith(".zip") and (REPO / f).resolve() != out
        (new if keep else skipped).append(f)
    return sorted(tracked + new), new, skipped


def _script(text: str, chapter) -> str:
    """A script with its placeholders filled (not str.format: bash has braces of its own): each language of the
    chapter adds its own steps (harness.languages: Language.image)."""
    images = [language(name).image for name in chapter.languages]
    steps = {"language_setup": "".join(i.setup for i in images), "language_after_private": "".join(i.after_private for i in images),
             "language_run_env": "".join(i.run_env for i in images)}
    for key, value in steps.items():  # first: the steps hold placeholders of their own
        text = text.replace("{" + key + "}\n", value)
    names = {"chapter": chapter.chapter, "seed_file": SEED_FILE, "interpreter_file": INTERPRETER_FILE}
    for key, value in names.items():
        text = text.replace("{" + key + "}", value)
    return text


def build_bundle(chapter, out_zip: Path, seed: int) -> Bundle:
    """autograder.zip: setup.sh, run_autograder, the seed and the harness, all at the zip's root
    (Gradescope extracts it into /autograder/source)."""
    files, new, skipped = _harness_files(out_zip)
    meta = {"chapter": chapter.chapter, "upload": upload_hint(chapter),
            "tests": [{"name": t.name, "max_score": t.points} for t in chapter.tests]}
    own = {"setup.sh": (_script(SETUP_SH, chapter), 0o755),
           "run_autograder": (_script(RUN_AUTOGRADER, chapter), 0o755),
           SEED_FILE: (f"{seed}\n", 0o644), META_FILE: (json.dumps(meta, indent=1) + "\n", 0o644)}
    buf = io.BytesIO()
    n = 0
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, (text, mode) in own.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # any fixed date: zip needs one, none is true
            info.external_attr = (0o100000 | mode) << 16
            z.writestr(info, text, zipfile.ZIP_DEFLATED)
        for f in files:
            p = REPO / f
            if f in own or not p.is_file():  # a deleted but still tracked file; the bundle's own names win
                continue
            z.write(p, f)
            n += 1
    out_zip.write_bytes(buf.getvalue())
    return Bundle(out_zip, n, len(buf.getvalue()), new, skipped, tuple(chapter.languages))


def summary(b: Bundle, chapter: str, seed: int) -> tuple[list[str], list[str]]:
    """(what `ol gradescope` tells staff, its warnings)."""
    lines = [f"wrote {b.path} ({b.size / 2**20:.1f} MiB): setup.sh, run_autograder and {b.files} files of the harness "
             "at its root",
             f"fresh cases from seed {seed}, the same for every submission and regrade; keep the seed private",
             f"  same cases in a rebuild: ol gradescope {chapter} --seed {seed}",
             f"  replay one grade:        ol check {chapter} --submission UPLOAD --ref-deps-if-missing --fresh {seed}",
             "next: Gradescope > Configure Autograder > upload the zip, base image Ubuntu 22.04 or 24.04 (setup.sh installs",
             f"  {OL_RUNTIME} and ol's packages" + "".join(language(name).image.summary for name in b.languages)
             + " while the image builds; grading then needs no network)"]
    if len(b.languages) > 1:
        lines.append(f"one assignment takes uploads in {' or '.join(b.languages)}: each is graded in the language it is in")
    warnings = []
    if b.untracked:
        warnings.append(f"included {len(b.untracked)} files git does not track (new modules beside tracked ones): "
                        f"{', '.join(b.untracked)}; `git add` them (a clean checkout lacks them), or delete any that do not "
                        "belong and rebuild")
    if b.skipped:
        warnings.append(f"left out {len(b.skipped)} other files git does not track (e.g. {b.skipped[0]}): `git add` any "
                        "the grader needs and rebuild")
    return lines, warnings


# ---- run_autograder's last step: results.json from the check's exit code ----

def _listing(submission: Path) -> str:
    try:
        names = sorted(p.name + ("/" if p.is_dir() and not p.is_symlink() else "") for p in submission.iterdir())
    except OSError:
        names = []
    if not names:
        return ""
    more = f" and {len(names) - LISTED_NAMES} more" if len(names) > LISTED_NAMES else ""
    return ", ".join(names[:LISTED_NAMES]) + more


def _yours(text: str, submission: Path) -> str:
    return text.replace(str(submission.resolve()), "your upload").replace(str(submission), "your upload")


def _rejection(chapter: str, submission: Path) -> str | None:
    """The layout function's reason this upload is no submission, or None when it accepts it."""
    try:
        detect(load_chapter(chapter), submission).close()
    except BadSubmission as e:
        return _yours(str(e), submission)
    return None


def _refused(report: Path, submission: Path) -> str | None:
    """The judge's reason for refusing an upload the layout function accepted (a package missing a file):
    the one object `ol check --gradescope` writes on a BadSubmission, in the judge's private folder."""
    try:
        reason = refusal_in(report.read_text())
    except OSError:
        return None
    return None if reason is None else " ".join(_yours(reason, submission).split())


def _report(path: Path) -> dict | None:
    data = read_json(path)
    ok = isinstance(data, dict) and isinstance(data.get("tests"), list) and data["tests"] and "score" in data
    return data if ok else None


def results_for(source: Path, code: int, report: Path, submission: Path) -> tuple[dict | None, str]:
    """(results.json, what happened) for an `ol check` that ended with `code`; (None, why) when the submission is
    ungraded (the grader failed): no results.json is written for it."""
    meta = json.loads((source / META_FILE).read_text())
    verdict, sig = verdict_of(code)
    if verdict == "graded":
        data = _report(report)
        if data is not None and data.get("extra_data", {}).get("ol") != "ungraded":
            return data, "graded"
        why = f"ol check ended with code {code} but left no readable report"
    elif verdict == "refused":
        try:
            reason = _rejection(meta["chapter"], submission)
        except Exception as e:  # noqa: BLE001 -- the harness does not import: the grader is broken, not the upload
            reason, why = None, f"ol check refused its input (exit 2) and the layout check failed: {type(e).__name__}: {e}"
        else:
            reason = reason if reason is not None else _refused(report, submission)
            why = "ol check refused its own arguments (exit 2) though the upload is laid out right"
        if reason is not None:
            return upload_rejected(meta["tests"], meta["upload"], _listing(submission), reason), "rejected upload"
    elif verdict == "killed" and sig is not None:
        return killed(meta["tests"], sig), f"killed by signal {sig}"
    else:
        data = _report(report)
        fault = data.get("extra_data", {}).get("fault") if data is not None else None
        why = f"ol check failed (exit {code}): " + (fault if isinstance(fault, str) else "its output above says why")
    return None, f"ungraded: {why}"


def main(argv: list[str]) -> int:
    """`-m harness.staff.gradescope SOURCE CODE REPORT SUBMISSION RESULTS` (run_autograder's last step)."""
    source, code, report, submission, results = Path(argv[0]), int(argv[1]), Path(argv[2]), Path(argv[3]), Path(argv[4])
    data, what = results_for(source, code, report, submission)
    results.unlink(missing_ok=True)
    if data is None:  # the grader's failure: no score at all (Gradescope shows the autograder failed), never a 0
        print(f"run_autograder: {what}; the grader failed, not the submission: no results.json, so Gradescope marks this "
              "submission's autograder run as failed, with no score; fix the cause, then rerun the autograder on it")
        return 0
    seed = (source / SEED_FILE).read_text().strip() if (source / SEED_FILE).is_file() else ""
    text = redact(json.dumps(data, indent=2), seed)
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(text + "\n")
    print(f"run_autograder: wrote {results}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
