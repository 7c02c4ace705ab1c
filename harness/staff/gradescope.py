"""Gradescope: the autograder bundle, and the step that turns one `ol check` into results.json.

Gradescope (its autograder specification) extracts the bundle into /autograder/source, runs
setup.sh there once, as root and with the network, when it builds the assignment's image, copies
run_autograder to /autograder/run_autograder and runs it for each submission, with the upload in
/autograder/submission; it reads /autograder/results/results.json and shows staff, never students
unless results.json says so, what run_autograder printed. So:

* setup.sh picks a Python >= 3.11 (Ubuntu 22.04's python3 is 3.10: it installs python3.11 and
  python3.11-venv from universe; 24.04's is 3.12, which may lack venv), makes ol's .venv and installs
  everything into it (`./ol --help`), and records the interpreter: run_autograder needs no network.
* One bundle takes an upload in any of the chapter's languages: the layout function tells which, as
  `ol check` does. Each language adds its own steps to both scripts (harness.languages: Language.image;
  a compiled language installs its toolchain and builds its reference once, confined as an upload's build
  is, so that a machine that cannot build fails the image's build, not every upload).
* The fresh cases' seed is drawn when the bundle is built and kept in it, so every submission, and
  every regrade, is graded on the same cases. run_autograder prints ol's output (which names the
  seed) to its stdout, which stays hidden; results.json never holds the seed.
* `python -m harness.staff.gradescope` (run_autograder's last step) writes results.json from the check's
  exit code: the report for 0 or 1; for 2 with an upload the layout function rejects (no submission
  in it, a symbolic link anywhere in it, an unreadable archive, past a cap: harness.subjects.upload) or that the
  judge refused as malformed once the layout check passed (a crate without src/lib.rs: the reason it
  wrote in place of the results), a score of 0 and one sentence saying what to upload, as `ol grade`
  rejects it; for a killed check (the submission may have killed it), that; otherwise a
  report that the grader failed, not the student. None is a grade of 0 that looks like a verdict.
"""

from dataclasses import dataclass, field
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from ..errors import BadSubmission, OlError
from ..grading.judge import refusal_in
from ..languages import language
from ..paths import REPO
from ..registry import load_chapter
from ..render.gradescope import grader_failed, killed, redact, upload_rejected
from ..subjects.layout import detect

SEED_FILE = ".ol-assignment-seed"  # in source/: the fresh cases' seed, fixed for the assignment when the bundle is built
PYTHON_FILE = ".ol-python"  # in source/, written by setup.sh: the interpreter it chose, for run_autograder
META_FILE = ".ol-gradescope.json"  # in source/: the chapter's tests and what to upload, for a results.json without a report
FALLBACK_FILE = ".ol-grader-failed.json"  # in source/: the results.json for when no Python can write one, rendered at build time
SIGNALLED = 128  # bash's exit status for a process killed by signal N is 128 + N
LISTED_NAMES = 5  # names of an upload's entries a rejection quotes back to the student: enough to recognise it

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this for each submission, offline: setup.sh installed everything. AUTOGRADER_ROOT
# lets a test run it outside /autograder. What it prints is ol's full output, for staff only
# (results.json sets stdout_visibility hidden): it names the assignment's seed.
set -uo pipefail
root="${AUTOGRADER_ROOT:-/autograder}"
src="$root/source"; sub="$root/submission"; res="$root/results"
mkdir -p "$res"
py="$(cat "$src/{python_file}" 2>/dev/null || echo python3)"   # recorded by setup.sh
venv_py="${OL_VENV:-$src/.venv}/bin/python"                  # the environment ./ol uses
[ -x "$venv_py" ] || venv_py="$py"
# The seed stays in its file (root's alone, setup.sh): the judge reads it there, so no command line or
# environment a worker could read holds it.
[ -r "$src/{seed_file}" ] ||
  echo "run_autograder: $src/{seed_file} is missing: rebuild the bundle with ol gradescope (--seed keeps the cases)"
private="$(mktemp -d)"   # the judge writes here: a report the submission planted in results/ is never read
mkdir -p "$private/tmp"  # the judge's temporary files too: removed with $private even if the judge is killed
chmod 0711 "$private" "$private/tmp"  # the uid fallback's worker reaches its own folder in tmp/ by name, lists nothing
{language_run_env}
# OL_SERVER=0: one check, in its own process; no judge server left behind for a next check (harness.served)
TMPDIR="$private/tmp" OL_PYTHON="$py" OL_SERVER=0 \
  bash "$src/ol" check {chapter} --submission "$sub" --ref-deps-if-missing --fresh "@$src/{seed_file}" --gradescope "$private/results.json" 2>&1
code=$?
echo "run_autograder: ol check exited $code"
rm -f "$res/results.json"     # whatever the submission may have written there
for p in "$venv_py" "$py"; do  # the second only if the environment itself is broken
  PYTHONPATH="$src" "$p" -m harness.staff.gradescope "$src" "$code" "$private/results.json" "$sub" "$res/results.json" && break
done
if [ ! -s "$res/results.json" ]; then   # no Python could write it: still never a silent zero
  cp "$src/{fallback_file}" "$res/results.json" ||
    echo '{"score": 0, "output": "The grader failed before it could grade your upload; this is not a verdict on your code."}' \
      > "$res/results.json"
fi
rm -rf "$private"
exit 0
"""

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root and with the network, when it builds the autograder's image
# (Ubuntu 22.04 or 24.04). AUTOGRADER_ROOT lets a test run it outside /autograder; OL_VENV names an
# existing environment for ./ol to use instead of making source/.venv; OL_SETUP_RUST=0 sets up no Rust.
set -euo pipefail
root="${AUTOGRADER_ROOT:-/autograder}"
src="$root/source"
export DEBIAN_FRONTEND=noninteractive   # apt-get must never stop to ask
updated=""
apt_install() { [ -n "$updated" ] || { apt-get update; updated=1; }; apt-get install -y "$@"; }
new_enough() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }
pick() {  # the first interpreter >= 3.11, as an absolute path
  for c in python3 python3.13 python3.12 python3.11; do
    p="$(command -v "$c" 2>/dev/null)" && new_enough "$p" && { echo "$p"; return 0; }
  done
  return 1
}
venv_works() {  # Debian and Ubuntu ship venv's ensurepip in a package of its own
  d="$(mktemp -d)"; r=0
  "$1" -m venv "$d/v" >/dev/null 2>&1 && "$d/v/bin/python" -m pip --version >/dev/null 2>&1 || r=1
  rm -rf "$d"; return $r
}
if ! py="$(pick)"; then
  echo "setup.sh: no Python 3.11 or newer here (Ubuntu 22.04's python3 is 3.10): installing python3.11 from the distribution" >&2
  # 22.04 has python3.11 in universe; 24.04 has none, but its python3 is 3.12
  apt_install python3.11 python3.11-venv || apt_install python3 python3-venv
  py="$(pick)" || { echo "setup.sh: apt-get could not install Python 3.11 or newer (its output is above):" \
                         "choose Gradescope's Ubuntu 22.04 or 24.04 base image" >&2; exit 1; }
fi
if ! venv_works "$py"; then
  ver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  pkgs="python$ver-venv"; [ "$(basename "$py")" = python3 ] && pkgs="python3-venv $pkgs"
  echo "setup.sh: $py cannot make a virtual environment: installing $pkgs" >&2
  apt_install $pkgs
  venv_works "$py" || { echo "setup.sh: $py still cannot make a virtual environment after installing $pkgs:" \
                             "see apt-get's output above" >&2; exit 1; }
fi
chmod +x "$src/ol" "$src/run_autograder" 2>/dev/null || true   # unzip may drop the modes
cd "$src"
OL_PYTHON="$py" bash ./ol --help >/dev/null   # makes the environment and installs ol into it, now, while there is a network
echo "$py" > "$src/{python_file}"
echo "setup.sh: ol runs on $py ($("$py" --version 2>&1)) in ${OL_VENV:-$src/.venv}"
venv_py="${OL_VENV:-$src/.venv}/bin/python"
{language_setup}
# Where the container refuses user namespaces, workers run as uid 65534 with no namespace (harness/sandbox/confine.py):
# the answers (the reference, the packs' golden files, tests and mutants, the samples) and the seed are made
# the grader's (root's) alone, so that uid cannot read them. The judge copies what a worker needs.
for private in reference chapters examples tests {seed_file}; do
  [ ! -e "$src/$private" ] || chmod -R go-rwx "$src/$private"
done
{language_after_private}
"""

@dataclass
class Bundle:
    path: Path
    files: int  # the harness's files in it
    size: int  # bytes of the zip
    untracked: list[str] = field(default_factory=list)  # files git does not track, included (new modules beside tracked ones)
    skipped: list[str] = field(default_factory=list)  # files git does not track, left out
    languages: tuple[str, ...] = ("python",)  # the chapter's: an upload in any of them is graded


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
    r = subprocess.run(["git", "ls-files", "-z", *args], cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        raise OlError(f"`git ls-files` failed in {REPO} ({r.stderr.strip()}): the bundle is built from a git checkout of ol")
    return [f for f in r.stdout.split("\0") if f]


def _harness_files(out_zip: Path) -> tuple[list[str], list[str], list[str]]:
    """(files, untracked included, untracked skipped). Tracked files as they are in the working tree,
    and untracked ones only beside tracked files (a module not yet added), never at the top or a zip:
    grades, bundles and uploads lying around the checkout stay out."""
    tracked = _git_files()
    beside = {str(Path(f).parent) for f in tracked} - {"."}
    new, skipped = [], []
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
    names = {"chapter": chapter.chapter, "seed_file": SEED_FILE, "python_file": PYTHON_FILE, "fallback_file": FALLBACK_FILE}
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
           SEED_FILE: (f"{seed}\n", 0o644), META_FILE: (json.dumps(meta, indent=1) + "\n", 0o644),
           FALLBACK_FILE: (json.dumps(grader_failed(meta["tests"], None), indent=2) + "\n", 0o644)}
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
             "  Python 3.11+ and ol's packages" + "".join(language(name).image.summary for name in b.languages)
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


def _rejection(chapter: str, submission: Path) -> str | None:
    """The layout function's reason this upload is no submission, or None when it accepts it."""
    try:
        detect(load_chapter(chapter), submission).close()
    except BadSubmission as e:
        return str(e).replace(str(submission.resolve()), "your upload").replace(str(submission), "your upload")
    return None


def _refused(report: Path, submission: Path) -> str | None:
    """The judge's reason for refusing an upload the layout function accepted (a crate without src/lib.rs):
    the one object `ol check --gradescope` writes on a BadSubmission, in the judge's private folder."""
    try:
        reason = refusal_in(report.read_text())
    except OSError:
        return None
    if reason is None:
        return None
    return " ".join(reason.replace(str(submission.resolve()), "your upload").replace(str(submission), "your upload").split())


def _report(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("tests"), list) and data["tests"] and "score" in data
    return data if ok else None


def results_for(source: Path, code: int, report: Path, submission: Path) -> tuple[dict, str]:
    """(results.json, what happened) for an `ol check` that ended with `code`."""
    meta = json.loads((source / META_FILE).read_text())
    if code in (0, 1):
        data = _report(report)
        if data is not None:
            return data, "graded"
        why = f"ol check ended with code {code} but left no readable report"
    elif code == 2:
        try:
            reason = _rejection(meta["chapter"], submission)
        except Exception as e:  # noqa: BLE001 -- the harness does not import: the grader is broken, not the upload
            reason, why = None, f"ol check refused its input (exit 2) and the layout check failed: {type(e).__name__}: {e}"
        else:
            reason = reason if reason is not None else _refused(report, submission)
            why = "ol check refused its own arguments (exit 2) though the upload is laid out right"
        if reason is not None:
            return upload_rejected(meta["tests"], meta["upload"], _listing(submission), reason), "rejected upload"
    elif code > SIGNALLED:
        return killed(meta["tests"], code - SIGNALLED), f"killed by signal {code - SIGNALLED}"
    else:
        why = f"ol check failed (exit {code}): its output above says why"
    return grader_failed(meta["tests"], code), f"grader failure: {why}"


def main(argv: list[str]) -> int:
    """python -m harness.staff.gradescope SOURCE CODE REPORT SUBMISSION RESULTS (run_autograder's last step)."""
    source, code, report, submission, results = Path(argv[0]), int(argv[1]), Path(argv[2]), Path(argv[3]), Path(argv[4])
    data, what = results_for(source, code, report, submission)
    seed = (source / SEED_FILE).read_text().strip() if (source / SEED_FILE).is_file() else ""
    text = redact(json.dumps(data, indent=2), seed)
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(text + "\n")
    print(f"run_autograder: wrote {results}: {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
