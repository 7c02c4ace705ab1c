"""`ol mutmut CHAPTER`: mutmut 3 over the reference's chapter files, against the chapter's own tests.

The hand-written mutants prove each named pitfall is caught; this measures what the tests miss beyond them.
mutmut mutates every function of the chapter's files and reruns the tests that reach it; a mutant no test
fails is a survivor.

mutmut works in a `mutants/` directory of its own, which must never meet ours, so it runs in a scratch copy of
the tree without ours, `reference/` renamed `src/` (mutmut strips only a leading `src.` from a mutant's name and
puts `mutants/src` first on sys.path): `import <package>` in the tests is then the mutated copy.

Survivors judged equivalent are recorded in the pack's `mutants/mutmut_equivalent.toml`, one [[mutant]] per name
with the diff it was judged on and why; a later run flags only new survivors (an entry whose diff no longer
matches, as mutmut renumbers an edited function's mutants, is new again).

Library code: nothing is printed; `on_progress(line)` receives mutmut's progress lines.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from ..kernel.errors import RegistryError
from ..languages import in_process
from ..kernel.paths import REPO, git_files
from ..registry import Chapter, load_chapter
from ..subjects.reference import FROM_PATH_ENV

# What the tests reach besides the mutated package; reference/ is the judge's pristine copy.
ALSO_COPY = ("harness", "chapters", "conftest.py", "fixtures", "config", "spec", "otel", "oracle", "reference")

# mutmut 3's exit-code vocabulary (mutmut/stats.py status_by_exit_code)
KILLED = {1: "killed", 3: "killed"}
TIMEOUT = {36, 24, -24, 152, 255}
UNTESTED = {5: "no tests", 33: "no tests"}

_DIFF_SCRIPT = r"""
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
out = {}
for line in sys.stdin:
    name, path = line.rstrip("\n").split("\t")
    try:
        out[name] = get_diff_for_mutant(name, path=path)
    except Exception as e:  # noqa: BLE001
        out[name] = f"(no diff: {type(e).__name__}: {e})"
print(json.dumps(out))
"""


def diff_summary(diff: str) -> str:
    """The changed lines of a unified diff, stripped: what an equivalence entry is keyed on."""
    keep = [l[0] + " " + l[1:].strip() for l in diff.splitlines()
            if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    return "\n".join(keep)


def load_equivalent(chapter: Chapter) -> dict[str, dict]:
    path = chapter.mutants_manifest.parent / "mutmut_equivalent.toml"
    if not path.is_file():
        return {}
    try:
        d = tomllib.loads(path.read_text())
        return {m["name"]: {"diff": m["diff"].strip(), "reason": m["reason"]} for m in d.get("mutant", [])}
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise RegistryError(f"{path}: malformed: {e}") from e


def _make_scratch(scratch: Path) -> None:
    """The tree without our mutants/, with reference/ copied to src/ (what mutmut mutates); reference/
    itself stays, pristine, for the judge (harness.subjects.reference.pristine)."""
    listed = git_files("--cached", "--others", "--exclude-standard")
    if listed is None:
        raise RegistryError(f"`git ls-files` failed in {REPO}: `ol mutmut` copies a git checkout of ol")
    for f in listed:
        top = f.split("/", 1)[0]
        if top in ("mutants", ".venv", "py", "out") or "__pycache__" in f:
            continue
        src = REPO / f
        if not src.is_file():  # deleted in the work tree
            continue
        dsts = [scratch / f] + ([scratch / ("src" + f[len("reference"):])] if top == "reference" else [])
        for dst in dsts:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def _toml_list(xs) -> str:
    return "[" + ", ".join(json.dumps(str(x)) for x in xs) + "]"


def _mutmut_version() -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in re.findall(r"\d+", version("mutmut"))[:2])
    except PackageNotFoundError as e:
        raise RuntimeError("mutmut is not installed: .venv/bin/pip install -e '.[dev]'") from e


def _write_config(scratch: Path, package: str, mutate: tuple[str, ...], tests_dir: str, deselect: list[str]) -> None:
    pyproject = scratch / "pyproject.toml"
    text = pyproject.read_text()
    text = re.sub(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[|\Z)", "", text)  # ours replaces any other
    targets = [f"src/{m}" for m in mutate]
    others = sorted(str(p.relative_to(scratch)) for p in (scratch / "src" / package).rglob("*.py")
                    if str(p.relative_to(scratch)) not in targets)
    extra = []
    for nodeid in deselect:
        extra += ["--deselect", nodeid]
    text += (
        "\n[tool.mutmut]\n"
        + (f"source_paths = {_toml_list([f'src/{package}'])}\n"
           f"only_mutate = {_toml_list(targets)}\n"
           f"pytest_add_cli_args_test_selection = {_toml_list([tests_dir])}\n"
           if _mutmut_version() >= (3, 8) else  # the older names of the same settings
           f"paths_to_mutate = {_toml_list([f'src/{package}'])}\n"
           f"tests_dir = {_toml_list([tests_dir])}\n")
        + f"do_not_mutate = {_toml_list(others)}\n"
        f"also_copy = {_toml_list(ALSO_COPY)}\n"
        f"pytest_add_cli_args = {_toml_list(['--impl', 'reference', *extra])}\n"
        "use_git_change_detection = false\n"
    )
    pyproject.write_text(text)


def _baseline_failures(scratch: Path, tests_dir: str) -> list[dict]:
    """The chapter's tests on the unmutated reference in the scratch layout; mutmut needs them green."""
    junit = scratch / ".ol-baseline.xml"
    # the implementation is sys.path's package; the judge keeps reference/
    env = {**os.environ, "PYTHONPATH": str(scratch / "src"), FROM_PATH_ENV: "1"}
    subprocess.run([sys.executable, "-m", "pytest", tests_dir, "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
                   cwd=scratch, env=env, capture_output=True, text=True)
    if not junit.is_file():
        raise RuntimeError("the baseline run of the chapter's tests wrote no report")
    failed = []
    for tc in ET.parse(junit).getroot().iter("testcase"):
        bad = tc.find("failure") if tc.find("failure") is not None else tc.find("error")
        if bad is not None:
            file = tc.get("file") or (tc.get("classname", "").replace(".", "/") + ".py")
            failed.append({"nodeid": f"{file}::{tc.get('name')}", "message": (bad.get("message") or "")[:300]})
    junit.unlink()
    return failed


def _run_mutmut(scratch: Path, cmd: list[str], on_progress: Callable[[str], None]) -> tuple[int, str]:
    # mutmut's mutated package is the implementation; reference/ is the judge's
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONUNBUFFERED": "1", FROM_PATH_ENV: "1"}
    # text, universal newlines: the spinner's \r ends a line as \n does
    p = subprocess.Popen(cmd, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         encoding="utf-8", errors="replace")
    assert p.stdout is not None  # stdout=PIPE
    tail: list[str] = []
    last = ""
    for line in p.stdout:
        text = line.strip().lstrip("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ ")  # drop the spinner frame: report changes only
        if text and text != last:
            last = text
            tail = (tail + [text])[-40:]
            on_progress(text)
    return p.wait(), "\n".join(tail)


def _read_results(scratch: Path, mutate: tuple[str, ...]) -> dict[str, tuple[int | None, str]]:
    """mutant name -> (exit code, path mutmut knows its file by), from mutants/src/...py.meta."""
    out = {}
    for m in mutate:
        rel = f"src/{m}"
        meta = scratch / "mutants" / (rel + ".meta")
        if not meta.is_file():
            raise RuntimeError(f"mutmut wrote no {meta.relative_to(scratch)}")
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            out[name] = (code, rel)
    return out


def _diffs(scratch: Path, names: list[tuple[str, str]]) -> dict[str, str]:
    if not names:
        return {}
    r = subprocess.run([sys.executable, "-c", _DIFF_SCRIPT], cwd=scratch, input="".join(f"{n}\t{p}\n" for n, p in names),
                       capture_output=True, text=True)
    if r.returncode != 0:
        return {n: f"(no diff: {r.stderr.strip()[-300:]})" for n, _ in names}
    return json.loads(r.stdout)


@dataclass(frozen=True)
class Survivor:
    """A mutant no test failed: mutmut's name, "survived" or "no tests", its diff, and whether the pack's
    mutmut_equivalent.toml judged it equivalent (disposition "equivalent", with the reason) or it is "new"."""
    name: str
    status: str
    diff: str
    disposition: str
    reason: str


@dataclass(frozen=True)
class MutmutResult:
    """One `ol mutmut` run. score = (killed + timed_out) / (total - equivalent), a timeout being a mutant the tests
    stopped. `other`: mutants mutmut ended otherwise ({name, status}); `deselected`: the tests left out because
    they fail on the reference ({nodeid, message})."""
    chapter: str
    score: float
    total: int
    killed: int
    timed_out: int
    equivalent: int
    no_tests: int
    survived: tuple[Survivor, ...]
    other: tuple[dict, ...]
    stale_equivalent: tuple[str, ...]
    deselected: tuple[dict, ...]
    duration_s: float
    command: str

    @property
    def new(self) -> list[Survivor]:
        """The survivors nobody judged equivalent: what the tests miss."""
        return [s for s in self.survived if s.disposition == "new"]

    def to_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def run_mutmut(chapter: str, on_progress: Callable[[str], None], *, max_children: int) -> MutmutResult:
    """Run mutmut over the chapter's reference files against the chapter's tests; see the module doc."""
    ch = load_chapter(chapter)
    own = in_process().name  # mutmut mutates code of ol's own language, run in its process
    mutate = ch.language(own).mutmut
    if not mutate:
        raise RegistryError(f"chapter {chapter} names no files for mutmut (`mutmut` in [language.{own}] of its chapter.toml)")
    tests_dir = str(ch.tests_files[0].parent.relative_to(REPO))  # a pack's graded tests live in one folder
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ol-mutmut-", ignore_cleanup_errors=True) as made:
        scratch = Path(made)
        _make_scratch(scratch)
        on_progress(f"scratch copy at {scratch}; baseline run of {tests_dir}")
        deselected = _baseline_failures(scratch, tests_dir)
        _write_config(scratch, ch.language(own).package, mutate, tests_dir, [d["nodeid"] for d in deselected])
        exe = Path(sys.executable).with_name("mutmut")
        head = [str(exe)] if exe.is_file() else [sys.executable, "-c", "from mutmut.__main__ import cli; cli()"]
        cmd = [*head, "run", "--max-children", str(max_children)]
        code, tail = _run_mutmut(scratch, cmd, on_progress)
        if not (scratch / "mutants").is_dir():
            raise RuntimeError(f"mutmut failed (exit {code}) before writing mutants/:\n{tail}")
        results = _read_results(scratch, mutate)
        known = load_equivalent(ch)
        killed = sum(1 for c, _ in results.values() if c in KILLED)
        timed_out = sum(1 for c, _ in results.values() if c in TIMEOUT)
        open_names = [(n, p) for n, (c, p) in results.items() if c == 0 or c in UNTESTED]
        other = [{"name": n, "status": f"exit {c}"} for n, (c, _) in results.items()
                 if c not in KILLED and c not in TIMEOUT and c != 0 and c not in UNTESTED]
        diffs = _diffs(scratch, open_names)
        survived = []
        for n, _ in sorted(open_names):
            c = results[n][0]
            d = diffs.get(n, "")
            entry = known.get(n)
            eq = entry is not None and entry["diff"] == diff_summary(d)
            survived.append(Survivor(n, "survived" if c == 0 else "no tests", d, "equivalent" if eq else "new",
                                     entry["reason"] if eq and entry is not None else ""))
        equivalent = sum(1 for x in survived if x.disposition == "equivalent")
        stale = sorted(n for n in known if n not in {x.name for x in survived if x.disposition == "equivalent"})
        total = len(results)
        denom = total - equivalent
        return MutmutResult(
            chapter=chapter, score=(killed + timed_out) / denom if denom else 1.0, total=total, killed=killed,
            timed_out=timed_out, equivalent=equivalent, no_tests=sum(1 for x in survived if x.status == "no tests"),
            survived=tuple(survived), other=tuple(other), stale_equivalent=tuple(stale), deselected=tuple(deselected),
            duration_s=round(time.monotonic() - start, 1),
            command=" ".join(cmd) + f"  (in the scratch copy; mutmut exit {code})")
