"""The Gradescope bundle, run the way Gradescope runs it (its autograder specification): the zip
extracted into /autograder/source, setup.sh run there, run_autograder copied to /autograder and run
from there with the upload in /autograder/submission, results/results.json read back and checked
against every field the specification documents.

/autograder is ROOT/autograder bind-mounted in a private mount namespace (`unshare --mount`), so
the scripts run at their real paths and nothing of the host changes but an empty /autograder mount
point. run_autograder also runs without a network (`unshare --net`): grading must need none.
setup.sh runs with ol's existing environment (OL_VENV) and this machine's Rust toolchain, so it installs
nothing (without cargo, OL_SETUP_RUST=0: no apt-get on the host, and the Rust uploads' tests skip); it
still builds the Rust reference (the template a Rust upload's build starts from).
"""

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from harness.staff import gradescope
from harness.languages import rust

from harness.registry import load_chapter
from tests.harness import uid_kit

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "harness" / "schemas" / "gradescope_results.schema.json").read_text())
CHAPTER = load_chapter("L10.8")
NAMES = [t.name for t in CHAPTER.tests]  # the chapter's table says how many, not this file
FULL = CHAPTER.max_points
REF = REPO / "reference" / "tinyllm"
RUST_REF_SPEC = REPO / "reference" / "rust" / "crates" / "tl-engine" / "src" / "spec.rs"
RUST_STUB = REPO / "spec" / "rust" / "spec.rs"  # what `ol start --lang rust` writes: every function todo!()
BUGGY = REPO / "examples" / "submissions" / "s01-first-occurrence"  # fails some tests, passes others
VENV = Path(os.environ.get("OL_VENV") or REPO / ".venv")
MOUNT = Path("/autograder")  # where Gradescope puts everything
SEED = 7  # the bundles built for one look at their files
SECRET_SEED = 6_917_529_027_641_081_857  # 19 digits: a seed that cannot turn up in a report by accident (the graded bundle's)
RUN_TIMEOUT_S = 600  # one run_autograder: a full check takes seconds, a loaded 2-core machine is slower


HAS_RUST = rust.missing() is None  # the judge finds cargo and rustc >= 1.75 (else setup.sh would run this machine's apt-get)
needs_rust = pytest.mark.skipif(not HAS_RUST, reason="needs cargo and rustc 1.75+")


def build(tmp: Path, seed: int) -> Path:
    """`ol gradescope` as staff run it, from a directory outside the checkout."""
    r = subprocess.run([sys.executable, "-m", "harness.cli", "gradescope", "L10.8", "--out", "autograder.zip", "--seed", str(seed)],
                       cwd=tmp, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"seed {seed}" in r.stdout, r.stdout  # staff are told the seed, to replay a grade
    return tmp / "autograder.zip"


def extract(bundle: Path, root: Path) -> Path:
    """Gradescope's image build: the zip into ROOT/autograder/source (modes kept, as unzip keeps them),
    run_autograder copied to ROOT/autograder/run_autograder."""
    source = root / "autograder" / "source"
    with zipfile.ZipFile(bundle) as z:
        for info in z.infolist():
            name = Path(info.filename)
            assert not name.is_absolute() and ".." not in name.parts and "\\" not in info.filename, info.filename
            z.extract(info, source)
            mode = info.external_attr >> 16 & 0o777
            if mode and not info.is_dir():
                (source / name).chmod(mode)
    shutil.copy2(source / "run_autograder", root / "autograder" / "run_autograder")
    return root


def _stamp_matches(source: Path) -> None:
    """VENV was made by ./ol from this source's pyproject.toml and lock (its .ol-installed: the role, then the first 16
    hex digits of sha256 over pyproject.toml and locks/ROLE.txt, as ./ol writes it), so setup.sh installs nothing."""
    stamp = VENV / ".ol-installed"
    role = stamp.read_text().split()[0] if stamp.is_file() else "student"
    lock = source / "locks" / f"{role}.txt"
    digest = hashlib.sha256((source / "pyproject.toml").read_bytes() + (lock.read_bytes() if lock.is_file() else b"")).hexdigest()
    if not stamp.is_file() or stamp.read_text().strip() != f"{role} {digest[:16]}":
        pytest.skip(f"{VENV} is not installed from this pyproject.toml and lock (its .ol-installed stamp differs): run ./ol --help "
                    "to refresh it (this test will not let ./ol reinstall into a shared environment)")


def _namespace() -> list[str]:
    """unshare's flags for a private mount namespace in which /autograder can be bind-mounted."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed: install it to run the bundle at /autograder")
    try:
        MOUNT.mkdir(exist_ok=True)  # the mount point; the namespace mounts over it, the host's stays empty
    except OSError as e:
        pytest.skip(f"cannot create the mount point {MOUNT} ({e.strerror}): create it as root, empty, and rerun")
    tried = []
    for flags in (["--mount", "--propagation", "private"], ["--user", "--map-root-user", "--mount", "--propagation", "private"]):
        r = subprocess.run(["unshare", *flags, "mount", "--bind", "/tmp", str(MOUNT)], capture_output=True, text=True)
        if r.returncode == 0:
            return flags
        tried.append(f"unshare {' '.join(flags)}: {r.stderr.strip()}")
    pytest.skip("no private mount namespace can be made here (" + "; ".join(tried) + "): run as root, or allow user namespaces")


@dataclass
class Autograder:
    flags: list[str]
    root: Path
    setup_log: str = ""

    @property
    def dir(self) -> Path:
        return self.root / "autograder"

    def run(self, command: str, offline: bool, prelude: str = "", env_extra: dict | None = None) -> subprocess.CompletedProcess:
        """`command` at /autograder, /autograder being ROOT/autograder; `offline`: no network either;
        `prelude`: shell run first in the namespace."""
        script = f'{prelude}mount --bind "{self.dir}" /autograder && cd /autograder && {command}'
        env = {k: v for k, v in os.environ.items() if k != "AUTOGRADER_ROOT"}  # the scripts' default, /autograder
        rust = {} if HAS_RUST else {"OL_SETUP_RUST": "0"}  # no apt-get on this machine: the Rust tests skip
        return subprocess.run(["unshare", *(["--net"] if offline else []), *self.flags, "bash", "-c", script],
                              capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                              env={**env, "OL_VENV": str(VENV), **rust, **(env_extra or {})})

    def setup(self) -> str:
        _stamp_matches(self.dir / "source")
        r = self.run("bash /autograder/source/setup.sh", offline=False)
        assert r.returncode == 0, r.stdout + r.stderr
        self.setup_log = r.stdout + r.stderr
        return self.setup_log

    def grade(self, upload, prelude: str = "", env_extra: dict | None = None) -> tuple[dict, str]:
        """Put an upload in submission/, run run_autograder, and return results.json (checked) and its stdout."""
        sub, res = self.dir / "submission", self.dir / "results"
        for d in (sub, res):
            shutil.rmtree(d, ignore_errors=True)
        sub.mkdir()
        upload(sub)
        r = self.run("/autograder/run_autograder", offline=True, prelude=prelude, env_extra=env_extra)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        data = json.loads((res / "results.json").read_text())
        jsonschema.validate(data, SCHEMA)
        assert data["stdout_visibility"] == "hidden" and data["output_format"] == "text", data
        assert [t["name"] for t in data["tests"]] == NAMES, (data.get("output"), r.stdout[-3000:])
        assert sum(t["max_score"] for t in data["tests"]) == FULL
        assert os.listdir(res) == ["results.json"], "only results.json: Gradescope documents no other file there as private"
        return data, r.stdout + r.stderr


    def ungraded(self, upload) -> str:
        """Put an upload in submission/ and run run_autograder, which must write no results.json (the grader failed:
        Gradescope then marks the run failed, with no score): its stdout."""
        sub, res = self.dir / "submission", self.dir / "results"
        for d in (sub, res):
            shutil.rmtree(d, ignore_errors=True)
        sub.mkdir()
        upload(sub)
        r = self.run("/autograder/run_autograder", offline=True)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        assert not (res / "results.json").exists(), (res / "results.json").read_text()
        return r.stdout + r.stderr


def make(tmp: Path, seed: int) -> Autograder:
    ag = Autograder(_namespace(), extract(build(tmp, seed), tmp / "root"))
    ag.setup()
    return ag


@pytest.fixture(scope="module")
def autograder(tmp_path_factory) -> Autograder:
    return make(tmp_path_factory.mktemp("gradescope"), SECRET_SEED)


# The tests of the module's bundle in two groups, each dealt whole to one xdist worker (conftest.py), which sets
# the bundle up once (about 25 s): two workers, not one (each group is about 150 s of grading), nor six.
PYTHON_UPLOADS = pytest.mark.xdist_group("gradescope_python")
RUST_AND_UID_UPLOADS = pytest.mark.xdist_group("gradescope_rust_uid")


def _zip(path: Path, files: dict[str, Path]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, src in files.items():
            z.write(src, name)


def _package() -> dict[str, Path]:
    return {f"tinyllm/{p.relative_to(REF)}": p for p in sorted(REF.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


UPLOADS = {  # every layout the layout function accepts, as a student would upload it
    "bare spec.py": lambda sub: shutil.copyfile(REF / "infer" / "spec.py", sub / "spec.py"),
    "tinyllm folder": lambda sub: shutil.copytree(REF, sub / "tinyllm", ignore=shutil.ignore_patterns("__pycache__")),
    "zip of spec.py": lambda sub: _zip(sub / "submission.zip", {"spec.py": REF / "infer" / "spec.py"}),
    "zip of the folder": lambda sub: _zip(sub / "tinyllm.zip", _package()),
}


@PYTHON_UPLOADS
@pytest.mark.slow(s=15)
@pytest.mark.parametrize("layout", list(UPLOADS))
def test_every_accepted_layout_of_the_reference_scores_full(autograder, layout):
    data, log = autograder.grade(UPLOADS[layout])
    assert data["score"] == FULL and all(t["status"] == "passed" for t in data["tests"]), (data["output"], log[-3000:])
    assert data["extra_data"]["ol"] == "graded" and data["extra_data"]["sandbox"] in ("bwrap", "uid")
    assert f"fresh cases from seed {SECRET_SEED}" in log  # graded on the assignment's cases; the seed is in the staff-only stdout


@pytest.fixture(scope="module")
def rust_workspace(tmp_path_factory) -> Path:
    """A student's ./rust after `ol start L10.8 --lang rust`: the cargo workspace, the stub in its spec.rs."""
    home = tmp_path_factory.mktemp("student")
    r = subprocess.run([sys.executable, "-m", "harness.cli", "start", "L10.8", "--lang", "rust"], cwd=home, capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stdout + r.stderr
    return home / "rust"


def _crate(workspace: Path, spec: str, into: Path) -> None:
    shutil.copytree(workspace / "crates" / "tl-engine", into)
    (into / "src" / "spec.rs").write_text(spec)


def _workspace_zip(workspace: Path, spec: str, path: Path) -> None:
    """`zip -r rust.zip rust`, the workspace's spec.rs being `spec`."""
    with zipfile.ZipFile(path, "w") as z:
        for p in sorted(workspace.rglob("*")):
            rel = p.relative_to(workspace)
            if p.is_file() and "target" not in rel.parts:
                name = f"rust/{rel}"
                z.writestr(name, spec) if rel == Path("crates/tl-engine/src/spec.rs") else z.write(p, name)


RUST_UPLOADS = {  # what a Rust student uploads: the file, the crate's folder, the zipped workspace
    "bare spec.rs": lambda sub, ws, spec: (sub / "spec.rs").write_text(spec),
    "tl-engine folder": lambda sub, ws, spec: _crate(ws, spec, sub / "tl-engine"),
    "zip of the workspace": lambda sub, ws, spec: _workspace_zip(ws, spec, sub / "rust.zip"),
}
RUST_SPECS = {"reference": RUST_REF_SPEC, "stub": RUST_STUB}


@RUST_AND_UID_UPLOADS
@pytest.mark.slow(s=15)
@needs_rust
@pytest.mark.parametrize("spec", list(RUST_SPECS))
@pytest.mark.parametrize("layout", list(RUST_UPLOADS))
def test_every_rust_layout_is_graded_by_the_rust_worker(autograder, rust_workspace, layout, spec):
    """The same bundle grades Rust: the Rust reference's spec.rs scores full marks, the stub 0, each test
    saying it is not implemented, in every layout a Rust student may upload."""
    text = RUST_SPECS[spec].read_text()
    data, log = autograder.grade(lambda sub: RUST_UPLOADS[layout](sub, rust_workspace, text))
    assert data["extra_data"]["ol"] == "graded" and data["extra_data"]["language"] == "rust", (data["extra_data"], log[-3000:])
    assert data["extra_data"]["sandbox"] in ("bwrap", "uid") and f"fresh cases from seed {SECRET_SEED}" in log
    if spec == "reference":
        assert data["score"] == FULL and all(t["status"] == "passed" for t in data["tests"]), (data["output"], log[-3000:])
    else:
        assert data["score"] == 0 and all(t["status"] == "failed" for t in data["tests"]), data["output"]
        for t in data["tests"]:
            first, *rest = t["output"].strip().splitlines()  # the message in one line, then the test's known pitfalls
            assert first.startswith("error: not implemented: ") and all(line.startswith("known pitfall: ") for line in rest), t


@RUST_AND_UID_UPLOADS
@pytest.mark.slow(s=1)
@needs_rust
def test_setup_built_the_rust_reference_once_into_a_template_only_the_grader_can_read(autograder):
    """setup.sh found this machine's toolchain (no apt-get) and built the template in the sandbox: the build
    each Rust build copies, made from the contract's stub (never the reference's spec.rs), and the grader's
    alone like the answers all the same."""
    log = autograder.setup_log
    assert "setup.sh: Rust 1." in log and "installing cargo" not in log, log[-3000:]
    template = autograder.dir / "source" / ".ol-rust-template"
    if "built the Rust reference in the sandbox" not in log:  # setup ran where bwrap cannot: the build only proved itself
        assert "the Rust reference builds here" in log and not template.exists(), log[-3000:]
        pytest.skip("no bwrap here: no template to check")
    assert (template / "ws" / "crates" / "tl-engine" / "src" / "spec.rs").read_text() == RUST_STUB.read_text()
    for p in [template, *template.rglob("*")]:
        st = p.lstat()
        assert st.st_uid == os.geteuid() and not stat.S_IMODE(st.st_mode) & 0o077, f"{p} is not the grader's alone"


@PYTHON_UPLOADS
@pytest.mark.slow(s=12)
def test_a_broken_spec_scores_zero_saying_it_could_not_be_loaded_where(autograder):
    data, _ = autograder.grade(lambda sub: (sub / "spec.py").write_text("def prompt_lookup(:\n"))
    assert data["score"] == 0 and all(t["status"] == "failed" for t in data["tests"])
    assert "could not be loaded" in data["output"] and "spec.py, line 1" in data["output"], data["output"]


REJECTED = {  # nothing the layout function accepts
    "empty": (lambda sub: None, "your upload was empty"),
    "README.txt only": (lambda sub: (sub / "README.txt").write_text("my solution\n"), "README.txt"),
    "misnamed solution.py": (lambda sub: shutil.copyfile(REF / "infer" / "spec.py", sub / "solution.py"), "solution.py"),
}


@PYTHON_UPLOADS
@pytest.mark.slow(s=2)
@pytest.mark.parametrize("case", list(REJECTED))
def test_an_upload_with_no_submission_is_told_in_one_sentence_what_to_upload(autograder, case):
    upload, quoted = REJECTED[case]
    data, log = autograder.grade(upload)
    out = data["output"]
    assert "\n" not in out and out.endswith(".") and ". " not in out, f"one sentence: {out!r}"
    assert "spec.py" in out and "tinyllm/ folder" in out and ".zip" in out and quoted in out, out
    assert data["score"] == 0 and all(t["status"] == "failed" and t["score"] == 0 for t in data["tests"])
    assert "is not a submission of L10.8" in data["tests"][0]["output"]  # the layout function's own reason
    assert data["extra_data"] == {"ol": "rejected upload"} and "ol check exited 2" in log


LINKED = {  # an upload that is (or holds) a link to the answers: before issue 25 each scored 16/16 with no code
    "tinyllm/ a link to the reference": ("tinyllm", "/autograder/source/reference/tinyllm", "tinyllm is a symbolic link"),
    "bare spec.py a link to the reference": ("spec.py", "/autograder/source/reference/tinyllm/infer/spec.py",
                                             "spec.py is a symbolic link"),
    "spec.py -> /etc/shadow": ("spec.py", "/etc/shadow", "spec.py is a symbolic link (to /etc/shadow)"),
    "tl-engine/ a link to the reference crate": ("tl-engine", "/autograder/source/reference/rust/crates/tl-engine",
                                                 "tl-engine is a symbolic link"),
    "bare spec.rs a link to the reference": ("spec.rs", "/autograder/source/reference/rust/crates/tl-engine/src/spec.rs",
                                             "spec.rs is a symbolic link"),
}


@PYTHON_UPLOADS
@pytest.mark.slow(s=2)
@pytest.mark.parametrize("case", list(LINKED))
def test_an_upload_holding_a_link_is_rejected_naming_it_and_nothing_it_names_is_read(autograder, case):
    name, target, words = LINKED[case]
    data, log = autograder.grade(lambda sub: (sub / name).symlink_to(target))
    assert data["score"] == 0 and all(t["status"] == "failed" and t["score"] == 0 for t in data["tests"]), data
    assert data["extra_data"] == {"ol": "rejected upload"} and "ol check exited 2" in log, (data, log[-2000:])
    assert words in data["tests"][0]["output"] and "upload the file or folder itself" in data["tests"][0]["output"], data
    try:
        secrets = [line for line in Path("/etc/shadow").read_bytes().splitlines()[:3] if len(line) > 8]
    except OSError:
        secrets = []
    for secret in secrets:
        assert secret.decode(errors="replace") not in json.dumps(data) + log


@PYTHON_UPLOADS
@pytest.mark.slow(s=2)
def test_a_harness_error_leaves_the_upload_ungraded_never_a_zero(autograder):
    toml = autograder.dir / "source" / "chapters" / "L10_8" / "chapter.toml"
    good = toml.read_text()
    toml.write_text(good + "tests = [\n")  # the pack no longer loads: exit 3, whatever the upload
    try:
        log = autograder.ungraded(UPLOADS["bare spec.py"])
    finally:
        toml.write_text(good)
    assert "ol check exited 3" in log and "ungraded: ol check failed (exit 3)" in log, log[-3000:]


def test_an_upload_the_judge_refuses_after_the_layout_check_is_rejected_as_ol_grade_rejects_it(tmp_path):
    """A crate the layout function accepts (tl-engine/src/spec.rs) that the judge refuses as malformed (no
    src/lib.rs and no --ref-deps: exit 2, a BadSubmission). The bundle's --ref-deps-if-missing supplies lib.rs,
    so no real upload reaches this today; when one does, the check writes its reason where results.json would
    be, and the bundle's last step makes it a rejected upload, as `ol grade` does, not a grader failure."""
    sub = tmp_path / "submission"
    (sub / "tl-engine" / "src").mkdir(parents=True)
    shutil.copyfile(REPO / "reference" / "rust" / "crates" / "tl-engine" / "src" / "spec.rs", sub / "tl-engine" / "src" / "spec.rs")
    said = tmp_path / "private" / "results.json"
    r = subprocess.run([sys.executable, "-m", "harness.cli", "check", "L10.8", "--submission", str(sub), "--gradescope", str(said)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2 and "has no src/lib.rs" in r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    source = tmp_path / "source"
    source.mkdir()
    chapter = load_chapter("L10.8")
    (source / gradescope.META_FILE).write_text(json.dumps(
        {"chapter": "L10.8", "upload": "spec.rs", "tests": [{"name": t.name, "max_score": t.points} for t in chapter.tests]}))
    data, what = gradescope.results_for(source, 2, said, sub)
    jsonschema.validate(data, SCHEMA)
    assert what == "rejected upload" and data["extra_data"] == {"ol": "rejected upload"}, (what, data)
    assert data["score"] == 0 and all(t["score"] == 0 for t in data["tests"]), data
    why = data["tests"][0]["output"]
    assert "the crate tl-engine has no src/lib.rs" in why and "/tmp" not in why and str(tmp_path) not in why, why
    said.write_text("{}")  # no refusal written (a check refusing its own arguments): the grader failed, not the upload
    assert gradescope.results_for(source, 2, said, sub) == (None, "ungraded: ol check refused its own arguments (exit 2) "
                                                                   "though the upload is laid out right"), "a refusal must be the judge's own"


@PYTHON_UPLOADS
@pytest.mark.slow(s=4)
def test_when_no_python_can_write_results_the_upload_is_ungraded_with_no_score(autograder):
    meta = autograder.dir / "source" / ".ol-gradescope.json"
    meta.rename(meta.with_suffix(".away"))  # run_autograder's last step fails under every interpreter
    try:
        log = autograder.ungraded(lambda sub: None)
    finally:
        meta.with_suffix(".away").rename(meta)
    assert "ol check exited 2" in log and "wrote" not in log.split("ol check exited 2", 1)[1]
    assert "no results.json: ungraded" in log, log[-3000:]


KILLER = """
import json as _json, os as _os, signal as _signal
_argv = []
try:  # a submission that tries to kill its judge (and, failing that, everything else) after forging both reports
    _argv = open(f"/proc/{_os.getppid()}/cmdline", "rb").read().split(b"\\0")
    for _path in ([_argv[_argv.index(b"--gradescope") + 1].decode()] if b"--gradescope" in _argv else []) + ["/autograder/results/results.json"]:
        with open(_path, "w") as _f:
            _json.dump({"score": 16.0, "tests": [{"name": "forged", "score": 16.0}]}, _f)
except OSError:
    pass
if b"check" in _argv:  # its parent is the judge: unconfined (never, with the sandbox)
    _os.kill(_os.getppid(), _signal.SIGKILL)
"""


@PYTHON_UPLOADS
@pytest.mark.slow(s=15)
def test_a_submission_that_tries_to_kill_its_judge_and_forge_results_gets_its_honest_grade(autograder):
    """The s01 sample (honestly FULL - 1) with a payload that forges results.json and kills its parent: in
    the sandbox its parent is the sandbox's init and /autograder is out of view, so the grade is honest."""
    def upload(sub):
        (sub / "spec.py").write_text(KILLER + (BUGGY / "tinyllm" / "infer" / "spec.py").read_text())
    data, log = autograder.grade(upload)
    assert "ol check exited 1" in log, log[-3000:]
    assert data["extra_data"]["ol"] == "graded" and data["extra_data"]["sandbox"] in ("bwrap", "uid"), data["extra_data"]
    assert data["score"] == FULL - 1 and "forged" not in json.dumps(data), data["output"]


PEEKER = """
import os as _os
for _path in ("/autograder/source/chapters/L10_8/fixtures/spec_golden.json", "/autograder/source/reference/tinyllm/infer/spec.py",
              "/autograder/source/.ol-assignment-seed"):
    try:
        open(_path).read(1)
    except OSError:
        continue
    raise RuntimeError(f"read {_path}")   # the answers were readable: a load error, a score of 0
if _os.getuid() == 0:
    raise RuntimeError("not the fallback's uid")
"""


@RUST_AND_UID_UPLOADS
@pytest.mark.slow(s=18)
def test_without_namespaces_the_bundle_grades_as_an_unprivileged_uid_that_cannot_read_the_answers(autograder, worker_uids):
    """Gradescope's own advice, where bubblewrap cannot run: the worker is uid 65534, and setup.sh made the
    answers, the reference and the seed root's alone. The s01 sample with a payload that raises if it can
    read any of them keeps its honest FULL - 1."""
    uid_kit.namespace()  # skips where the uid fallback cannot run at all
    data, log = autograder.grade(lambda sub: (sub / "spec.py").write_text(PEEKER + (BUGGY / "tinyllm" / "infer" / "spec.py").read_text()),
                                 prelude=uid_kit.prelude([Path(os.path.realpath(sys.executable)), VENV, REPO]), env_extra={"OL_SANDBOX": "uid", "OL_SANDBOX_UID": str(worker_uids()[0])})
    assert data["extra_data"] == {"ol": "graded", "sandbox": "uid", "language": "python"}, (data["extra_data"], log[-3000:])
    assert data["score"] == FULL - 1, (data["output"], log[-3000:])


SEED_SEEKER = """
import os as _os
_seen, _found = 0, []
for _pid in (p for p in _os.listdir("/proc") if p.isdigit()):
    for _what in ("cmdline", "environ"):
        try:
            with open(f"/proc/{_pid}/{_what}", "rb") as _f:
                _items = _f.read().decode(errors="replace").split("\\0")
        except OSError:
            continue
        _seen += _what == "cmdline" and "--gradescope" in _items  # the judge's own command line is readable
        _found += [f"{_pid}/{_what}" for _i in _items if _i == "SEED" or _i.endswith("=SEED")]
if not _seen:
    raise RuntimeError("saw no judge's command line: the search proves nothing")
if _found:
    raise RuntimeError(f"the seed is in {_found}")   # a load error: a score of 0
"""


@RUST_AND_UID_UPLOADS
@pytest.mark.slow(s=17)
def test_without_namespaces_the_seed_is_on_no_command_line_or_environment_the_worker_can_read(autograder, worker_uids):
    """The uid fallback's worker reads every /proc/*/cmdline and /proc/*/environ it may while it is graded: the
    assignment's seed is in none (the judge reads it from setup.sh's root-only file). s01 keeps FULL - 1."""
    uid_kit.namespace()
    seeker = SEED_SEEKER.replace("SEED", str(SECRET_SEED))
    data, log = autograder.grade(lambda sub: (sub / "spec.py").write_text(seeker + (BUGGY / "tinyllm" / "infer" / "spec.py").read_text()),
                                 prelude=uid_kit.prelude([Path(os.path.realpath(sys.executable)), VENV, REPO]),
                                 env_extra={"OL_SANDBOX": "uid", "OL_SANDBOX_UID": str(worker_uids()[0])})
    assert data["extra_data"]["sandbox"] == "uid", (data["extra_data"], log[-3000:])
    assert data["score"] == FULL - 1, (data["output"], log[-3000:])
    assert f"fresh cases from seed {SECRET_SEED}" in log, "graded on the assignment's cases, read from its file"


@RUST_AND_UID_UPLOADS
@pytest.mark.slow(s=31)
@needs_rust
def test_without_namespaces_a_rust_upload_is_built_and_graded_as_the_unprivileged_uid(autograder, worker_uids):
    """uid mode builds the crate as the worker uid, from scratch (a template is bwrap's alone), with the
    toolchain: apt's lives in /usr; here rustup's, under /root, is made reachable as uid_kit does for Python.
    The reference's spec.rs scores full marks; a spec.rs that includes the template's copy of the
    reference source (root's alone) does not compile."""
    from harness.languages.rust import toolchain

    uid_kit.namespace()
    tc = toolchain()
    rustc = Path(shutil.which("rustc") or Path.home() / ".cargo/bin/rustc")  # where the judge looks (rustup's proxy here)
    reach = uid_kit.prelude([Path(os.path.realpath(sys.executable)), VENV, REPO, tc.sysroot, rustc])
    env = {"OL_SANDBOX": "uid", "OL_SANDBOX_UID": str(worker_uids()[0])}
    data, log = autograder.grade(lambda sub: shutil.copyfile(RUST_REF_SPEC, sub / "spec.rs"), prelude=reach, env_extra=env)
    assert data["extra_data"] == {"ol": "graded", "sandbox": "uid", "language": "rust"}, (data["extra_data"], log[-3000:])
    assert data["score"] == FULL, (data["output"], log[-3000:])
    stolen = "/autograder/source/.ol-rust-template/ws/crates/tl-engine/src/spec.rs"
    spec = RUST_REF_SPEC.read_text() + f'\n#[allow(dead_code)]\nconst STOLEN: &str = include_str!("{stolen}");\n'
    data, log = autograder.grade(lambda sub: (sub / "spec.rs").write_text(spec), prelude=reach, env_extra=env)
    assert data["extra_data"]["sandbox"] == "uid" and data["score"] == 0, (data["output"], log[-3000:])
    assert "could not be loaded" in data["output"] and "couldn't read" in data["output"], data["output"]


@PYTHON_UPLOADS
@pytest.mark.slow(s=35)
def test_one_seed_gives_identical_results_and_students_never_see_it(autograder):
    ag = autograder  # the assignment's bundle, set up once for the module (its seed: SECRET_SEED)
    upload = lambda sub: shutil.copytree(BUGGY, sub / BUGGY.name, ignore=shutil.ignore_patterns("__pycache__"))  # noqa: E731
    first, log = ag.grade(upload)
    text = (ag.dir / "results" / "results.json").read_text()
    second, _ = ag.grade(upload)
    assert (ag.dir / "results" / "results.json").read_text() == text, "a regrade must give the same results.json"
    assert 0 < first["score"] < FULL, first["output"]
    assert str(SECRET_SEED) not in text and f"fresh cases from seed {SECRET_SEED}" in log  # staff's stdout only


def test_bundle_names_are_relative_with_the_scripts_and_seed_at_the_root(tmp_path):
    bundle = build(tmp_path, SEED)
    with zipfile.ZipFile(bundle) as z:
        infos = {i.filename: i for i in z.infolist()}
        for name in infos:
            assert not name.startswith("/") and ".." not in Path(name).parts and "\\" not in name, name
            assert not name.startswith(".venv/") and "__pycache__" not in name, name
        for script in ("setup.sh", "run_autograder"):
            assert stat.S_IMODE(infos[script].external_attr >> 16) == 0o755, script
        assert z.read(".ol-assignment-seed") == b"7\n"
        assert {"ol", "pyproject.toml", "harness/staff/gradescope.py", "harness/render/gradescope.py"} <= set(infos)


@pytest.mark.slow(s=90)
def test_setup_installs_the_student_lock_and_nothing_else(tmp_path):
    """setup.sh as Gradescope runs it, into a new environment (not OL_VENV's): what it installs is locks/student.txt
    exactly (pip freeze), the judge's packages at the versions this environment grades with; no staff tool."""
    ag = Autograder(_namespace(), extract(build(tmp_path, SEED), tmp_path / "root"))
    src = ag.dir / "source"
    r = ag.run("bash /autograder/source/setup.sh", offline=False,
               env_extra={"OL_VENV": "/autograder/source/.venv", "OL_SETUP_RUST": "0"})
    if r.returncode != 0 and "could not install ol's dependencies" in r.stderr:
        pytest.skip(f"no package index reachable for a fresh install: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "ol: [2/3] installing the lock, locks/student.txt: " in r.stderr, r.stderr[-3000:]
    assert (src / ".venv" / ".ol-installed").read_text().startswith("student ")
    probe = ("import json; from importlib import metadata; from harness.kernel import roles; "
             "print(json.dumps([roles.drift('student'), {n: metadata.version(n) for n in roles.locked_names('student')}]))")
    p = subprocess.run([str(src / ".venv" / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(src)})
    assert p.returncode == 0, p.stderr
    drift, versions = json.loads(p.stdout)
    assert drift == [], f"the image's environment is not locks/student.txt: {drift}"
    from importlib import metadata
    here = {name: metadata.version(name) for name in versions}
    assert versions == here, "the image grades with the versions of this (the client's) environment"
    frozen = subprocess.run([str(src / ".venv" / "bin" / "python"), "-m", "pip", "freeze", "--exclude-editable"],
                            capture_output=True, text=True, timeout=120).stdout
    assert "distributed==" not in frozen and "matplotlib==" not in frozen and "mutmut==" not in frozen, frozen


@pytest.mark.slow(s=16)
def test_setup_installs_python311_when_python3_is_older(tmp_path):
    """Ubuntu 22.04: python3 is 3.10, so setup.sh asks apt-get for python3.11 and python3.11-venv and uses it."""
    root = extract(build(tmp_path, SEED), tmp_path / "root")
    _stamp_matches(root / "autograder" / "source")
    fake, system = tmp_path / "fakebin", tmp_path / "sysbin"
    fake.mkdir(), system.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):  # the host's commands, without any Python or apt-get
        for p in sorted(Path(d).glob("*")) if Path(d).is_dir() else []:
            if not p.name.startswith("python") and p.name != "apt-get" and not (system / p.name).exists() and os.access(p, os.X_OK):
                (system / p.name).symlink_to(p)
    (fake / "python3").write_text('#!/bin/sh\n# Ubuntu 22.04\'s python3: 3.10, which fails the version probe\n'
                                  '[ "$1" = --version ] && { echo "Python 3.10.12"; exit 0; }\nexit 1\n')
    log = tmp_path / "apt-get.log"
    (fake / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> "{log}"\ncase " $* " in *" python3.11 "*)\n'
                                  f'  printf \'#!/bin/sh\\nexec "{sys.executable}" "$@"\\n\' > "{fake}/python3.11"\n'
                                  f'  chmod +x "{fake}/python3.11";;\nesac\n')
    for f in ("python3", "apt-get"):
        (fake / f).chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{system}", "AUTOGRADER_ROOT": str(root / "autograder"), "OL_VENV": str(VENV)}
    r = subprocess.run(["bash", str(root / "autograder" / "source" / "setup.sh")], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "update" and any({"install", "python3.11", "python3.11-venv"} <= set(c.split()) for c in calls), calls
    assert (root / "autograder" / "source" / ".ol-python").read_text().strip() == str(fake / "python3.11")


RUST_ARCHIVE = ("apt-get installs them", "apt-get has none", "OL_SETUP_RUST=0")


@pytest.mark.slow
@needs_rust
@pytest.mark.parametrize("case", RUST_ARCHIVE)
def test_setup_installs_cargo_and_rustc_from_the_archive_when_the_judge_finds_none(tmp_path, case):
    """No rustc on PATH or in ~/.cargo/bin: setup.sh asks apt-get for cargo and rustc (no recommends), and
    builds the reference with what it installed; an archive without them fails the image's build, saying
    so; OL_SETUP_RUST=0 asks apt-get nothing. The fake apt-get "installs" this machine's real toolchain."""
    from harness.languages.rust import toolchain

    sysroot = toolchain().sysroot
    root = extract(build(tmp_path, SEED), tmp_path / "root")
    src = root / "autograder" / "source"
    _stamp_matches(src)
    fake, system, home = tmp_path / "fakebin", tmp_path / "sysbin", tmp_path / "home"
    for d in (fake, system, home):
        d.mkdir()
    rust_bins = {Path(os.path.realpath(Path.home() / ".cargo" / "bin")), Path(os.path.realpath(sysroot / "bin"))}
    for d in os.environ["PATH"].split(os.pathsep):  # the host's commands, without apt-get, Python or Rust
        if not Path(d).is_dir() or Path(os.path.realpath(d)) in rust_bins:
            continue
        for p in sorted(Path(d).glob("*")):
            if (p.name not in ("apt-get", "cargo", "rustc", "rustup") and not p.name.startswith("python")
                    and not (system / p.name).exists() and os.access(p, os.X_OK)):
                (system / p.name).symlink_to(p)
    (fake / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # a Python 3.11+: nothing to install
    log = tmp_path / "apt-get.log"
    install = {"apt-get installs them": f'ln -s "{sysroot}/bin/rustc" "{sysroot}/bin/cargo" "{fake}/"',
               "apt-get has none": 'echo "E: Unable to locate package rustc" >&2; exit 100'}.get(case, "exit 100")
    (fake / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> "{log}"\ncase " $* " in *" install "*) {install};; esac\n')
    for f in ("python3", "apt-get"):
        (fake / f).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN")}
    env.update(PATH=f"{fake}:{system}", HOME=str(home), AUTOGRADER_ROOT=str(root / "autograder"), OL_VENV=str(VENV))
    if case == "OL_SETUP_RUST=0":
        env["OL_SETUP_RUST"] = "0"
    r = subprocess.run(["bash", str(src / "setup.sh")], capture_output=True, text=True, timeout=600, env=env)
    calls = log.read_text().splitlines() if log.exists() else []
    out = r.stdout + r.stderr
    template = src / ".ol-rust-template"
    if case == "OL_SETUP_RUST=0":
        assert r.returncode == 0 and calls == [] and "OL_SETUP_RUST=0: no Rust set up" in r.stderr, out
        assert not template.exists()
        return
    assert calls == ["update", "install -y --no-install-recommends cargo rustc"], calls
    assert "no rustc on PATH" in r.stderr and "installing cargo and rustc from the distribution" in r.stderr, out
    if case == "apt-get has none":
        assert r.returncode == 1 and "still no Rust 1.75 or newer" in r.stderr and not template.exists(), out
        return
    assert r.returncode == 0, out
    assert "setup.sh: Rust 1." in r.stdout and f"{fake}/rustc" not in r.stdout, out  # the real binaries, not the links
    assert "built the Rust reference in the sandbox" in r.stdout or "the Rust reference builds here" in r.stdout, out
