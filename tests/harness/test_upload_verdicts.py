"""Every upload gets its own verdict (issue 25, items 1-3): no link in an upload is followed, by any command;
an entry that is no submission (a link, an unreadable archive, past a cap, empty, misnamed) is *rejected*
(0, the reason) and never stops its class; a name that is not UTF-8 or is long is graded.

Every kind is graded through the real `ol grade` in one class beside an honest submission, here and again on a
loopback Dask cluster: each bad one's row says rejected with a reason naming the problem, each unusual name is
graded, the honest one is graded as if alone, exit 0 (the same rows on both engines). The work before the
judge has a deadline, and a judge that refuses a submission the layout check passed rejects it too."""

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REF_SPEC = REPO / "reference" / "tinyllm" / "infer" / "spec.py"
REF_CRATE = REPO / "reference" / "rust" / "crates" / "tl-engine"
SHADOW = Path("/etc/shadow")


def ol(*args, cwd=REPO, timeout=600):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})


def _secret_lines() -> list[bytes]:
    """The first line of /etc/shadow, when this process can read it: it must appear in no output."""
    try:
        return [line for line in SHADOW.read_bytes().splitlines()[:3] if len(line) > 8]
    except OSError:
        return []


# ---- the uploads: each makes the entry `at` (a folder, a file or a zip) ----

def _folder_linking_the_package(at: Path) -> None:
    at.mkdir()
    (at / "tinyllm").symlink_to(REPO / "reference" / "tinyllm")


def _bare_spec_link(at: Path) -> None:
    at.mkdir()
    (at / "spec.py").symlink_to(REF_SPEC)


def _spec_to_shadow(at: Path) -> None:
    at.mkdir()
    (at / "spec.py").symlink_to(SHADOW)


def _crate_link(at: Path) -> None:
    at.mkdir()
    (at / "tl-engine").symlink_to(REF_CRATE)


def _bare_spec_rs_link(at: Path) -> None:
    at.mkdir()
    (at / "spec.rs").symlink_to(REF_CRATE / "src" / "spec.rs")


def _linked_module_inside(at: Path) -> None:  # an honest-looking package whose spec.py links to the answers
    (at / "tinyllm" / "infer").mkdir(parents=True)
    (at / "tinyllm" / "infer" / "spec.py").symlink_to(REF_SPEC)


def _entry_is_a_link(at: Path) -> None:  # the class folder's entry itself: a link to the reference's package
    honest = at.parent.parent / "elsewhere"
    (honest / "tinyllm").mkdir(parents=True)
    shutil.copytree(REPO / "reference" / "tinyllm", honest / "tinyllm", dirs_exist_ok=True)
    at.symlink_to(honest)


def _zip_with_link_entry(at: Path) -> None:
    with zipfile.ZipFile(at, "w") as z:
        z.writestr("tinyllm/infer/__init__.py", "")
        info = zipfile.ZipInfo("tinyllm/infer/spec.py")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(info, str(REF_SPEC))


def _encrypted_zip(at: Path) -> None:
    with zipfile.ZipFile(at, "w", zipfile.ZIP_STORED) as z:
        z.writestr("spec.py", REF_SPEC.read_bytes())
    data = bytearray(at.read_bytes())
    local, central = data.index(b"PK\x03\x04"), data.index(b"PK\x01\x02")
    data[local + 6] |= 0x1  # the "encrypted" flag, in both headers: zipfile asks for a password (RuntimeError)
    data[central + 8] |= 0x1
    at.write_bytes(bytes(data))


def _unknown_method_zip(at: Path) -> None:
    with zipfile.ZipFile(at, "w", zipfile.ZIP_STORED) as z:
        z.writestr("spec.py", REF_SPEC.read_bytes())
    data = bytearray(at.read_bytes())
    local, central = data.index(b"PK\x03\x04"), data.index(b"PK\x01\x02")
    data[local + 8:local + 10] = (99).to_bytes(2, "little")  # method 99 (AE-x): NotImplementedError
    data[central + 10:central + 12] = (99).to_bytes(2, "little")
    at.write_bytes(bytes(data))


def _corrupt_deflate_zip(at: Path) -> None:
    with zipfile.ZipFile(at, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("spec.py", REF_SPEC.read_bytes())
    data = bytearray(at.read_bytes())
    start = data.index(b"PK\x03\x04") + 30 + len("spec.py")
    data[start:start + 64] = b"\xff" * 64  # the deflate stream: zlib.error
    at.write_bytes(bytes(data))


def _corrupt_stream_zip(method: int):
    """A zip whose one entry's stream (LZMA, bzip2) is corrupt: lzma.LZMAError, OSError, ..., each its own type."""
    def make(at: Path) -> None:
        with zipfile.ZipFile(at, "w", method) as z:
            z.writestr("spec.py", REF_SPEC.read_bytes())
        data = bytearray(at.read_bytes())
        start = data.index(b"PK\x03\x04") + 30 + len("spec.py") + 24
        data[start:start + 32] = bytes(b ^ 0x55 for b in data[start:start + 32])
        at.write_bytes(bytes(data))
    return make


def _folder_chain(at: Path) -> None:  # 1,200 levels: os.walk and rglob would exhaust Python's recursion
    deep = at
    for _ in range(1201):  # one by one: os.makedirs itself recurses
        os.mkdir(deep)
        deep = deep / "d"
    (at / "spec.py").write_bytes(REF_SPEC.read_bytes())


def _many_empty_entries_zip(at: Path) -> None:  # the 9 MiB upload of 100,000 empty entries
    with zipfile.ZipFile(at, "w", zipfile.ZIP_STORED) as z:
        z.writestr("spec.py", REF_SPEC.read_bytes())
        for i in range(100_000):
            z.writestr(f"e/{i}", b"")


def _many_empty_files(at: Path) -> None:
    (at / "e").mkdir(parents=True)
    (at / "spec.py").write_bytes(REF_SPEC.read_bytes())
    for i in range(4100):
        (at / "e" / str(i)).touch()


def _fifo(at: Path) -> None:
    at.mkdir()
    (at / "spec.py").write_bytes(REF_SPEC.read_bytes())
    os.mkfifo(at / "pipe")


def _empty(at: Path) -> None:
    at.mkdir()


def _misnamed(at: Path) -> None:
    at.mkdir()
    (at / "solution.py").write_bytes(REF_SPEC.read_bytes())


REJECTED = {  # kind: (entry name, maker, words the reason must hold)
    "tinyllm/ a link to the reference": ("linked-package", _folder_linking_the_package, "tinyllm is a symbolic link"),
    "bare spec.py a link to the reference": ("linked-bare", _bare_spec_link, "spec.py is a symbolic link"),
    "spec.py -> /etc/shadow": ("shadow", _spec_to_shadow, "spec.py is a symbolic link (to /etc/shadow)"),
    "tl-engine/ a link to the reference crate": ("linked-crate", _crate_link, "tl-engine is a symbolic link"),
    "bare spec.rs a link to the reference": ("linked-rs", _bare_spec_rs_link, "spec.rs is a symbolic link"),
    "spec.py in the package a link": ("linked-module", _linked_module_inside, "tinyllm/infer/spec.py is a symbolic link"),
    "the class entry a link": ("linked-entry", _entry_is_a_link, "linked-entry is a symbolic link"),
    "zip with a symlink entry": ("zip-link.zip", _zip_with_link_entry, "as a symbolic link"),
    "zip with the encrypted flag": ("encrypted.zip", _encrypted_zip, "is encrypted"),
    "zip with an unknown compression method": ("method99.zip", _unknown_method_zip, "compression method"),
    "zip with a corrupt deflate stream": ("corrupt.zip", _corrupt_deflate_zip, "not a readable zip archive"),
    "zip with a corrupt LZMA stream": ("corrupt-lzma.zip", _corrupt_stream_zip(zipfile.ZIP_LZMA),
                                       "is not a readable zip archive (LZMAError"),
    "zip with a corrupt bzip2 stream": ("corrupt-bzip2.zip", _corrupt_stream_zip(zipfile.ZIP_BZIP2),
                                        "is not a readable zip archive ("),
    "1,200-level folder chain": ("chain", _folder_chain, "more than 32 folders deep"),
    "zip of 100,000 empty entries": ("flood.zip", _many_empty_entries_zip, "more than 4000 entries"),
    "folder of 4,100 empty files": ("flood", _many_empty_files, "more than 4000 files and folders"),
    "a FIFO": ("fifo", _fifo, "pipe is neither a file nor a folder"),
    "empty": ("empty", _empty, "is not a submission of L10.8"),
    "misnamed solution.py": ("misnamed", _misnamed, "is not a submission of L10.8"),
}


GRADED = {  # names ol grade must grade, not refuse, and show escaped or whole
    "a folder name that is not UTF-8": (os.fsdecode(b"Jos\xe9"), "Jos\\udce9"),
    "a name of 240 bytes": ("n" * 240, "n" * 240),
}


def _class(tmp_path: Path, name: str, make) -> Path:
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "honest").mkdir()
    (klass / "honest" / "spec.py").write_bytes(REF_SPEC.read_bytes())
    make(klass / name)
    return klass


def _grade(tmp_path: Path, klass: Path):
    out = tmp_path / "out"
    r = ol("grade", "L10.8", klass, "--ref-deps", "--seed", "5", "--jobs", "2", "--out", out / "grades.csv",
           "--results-dir", out / "results")
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    return r, rows, out


def _remove(path: Path) -> None:
    subprocess.run(["rm", "-rf", str(path)], check=False)  # a 1,200-level chain is past shutil.rmtree's recursion


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    """One class of every bad entry and unusual name above beside one honest submission, graded once by `ol grade` (as a
    class would send them: all at once, so each bad entry must also leave every other one alone)."""
    tmp_path = tmp_path_factory.mktemp("hostile-class")
    klass = tmp_path / "class"
    klass.mkdir()
    (klass / "honest").mkdir()
    (klass / "honest" / "spec.py").write_bytes(REF_SPEC.read_bytes())
    for name, make, _words in REJECTED.values():
        make(klass / name)
    for name, _shown in GRADED.values():  # graded beside them: a name that is not UTF-8, one of 240 bytes
        (klass / name).mkdir()
        (klass / name / "spec.py").write_bytes(REF_SPEC.read_bytes())
        (klass / name / os.fsdecode(b"notes-\xe9.txt")).write_bytes(b"a file of the upload whose name is Latin-1\n")
    try:
        r, rows, out = _grade(tmp_path, klass)
        yield r, rows, out, (r.stdout + r.stderr).decode(errors="replace"), klass
    finally:
        _remove(klass)


@pytest.mark.xdist_group("hostile_class")  # the class graded once, not once per xdist worker
@pytest.mark.slow(s=40)
def test_a_class_of_bad_entries_is_graded_whole_and_the_honest_one_as_if_alone(hostile_class):
    r, rows, out, said, _klass = hostile_class
    assert r.returncode == 0, said[-3000:]
    assert set(rows) == {name for name, _m, _w in REJECTED.values()} | {s for _n, s in GRADED.values()} | {"honest"}, \
        (rows.keys(), said[-2000:])
    honest = rows["honest"]
    assert honest["status"] == "graded" and honest["failed"] == "0" and honest["passed"] == "16", honest
    assert f"{len(REJECTED)} of {len(REJECTED) + len(GRADED) + 1} entries are no submission" in said and "Traceback" not in said, said[-2000:]
    for secret in _secret_lines():  # no step read the file a link names
        for f in out.rglob("*"):
            assert not f.is_file() or secret not in f.read_bytes(), f
        assert secret not in r.stdout + r.stderr


@pytest.mark.xdist_group("hostile_class")  # the class graded once, not once per xdist worker
@pytest.mark.slow(s=0.1)  # the class's run is the test above's (slow): these read its rows
@pytest.mark.parametrize("kind", list(REJECTED))
def test_a_bad_entry_is_its_own_rejected_row_naming_the_problem(hostile_class, kind):
    name, _make, words = REJECTED[kind]
    _r, rows, _out, said, _klass = hostile_class
    bad = rows[name]
    assert bad["status"] == "rejected" and bad["score"] == "0.0" and words in bad["reason"], (bad, said[-2000:])
    assert "\n" not in bad["reason"], bad["reason"]
    assert all(bad[t] == "rejected" for t in bad if t.startswith(("hand_", "prompt_", "verify_"))), bad


@pytest.mark.xdist_group("hostile_class")  # the class graded once, not once per xdist worker
@pytest.mark.slow(s=15)
def test_the_class_of_bad_entries_keeps_its_similarity_and_ol_similar_names_each_unreadable_one(hostile_class, tmp_path):
    """Issue 36, item 2: a zip whose LZMA stream is corrupt once made its entry ungraded for ever and dropped the whole
    class's similarity section; `ol similar` on the class was an internal error (exit 3). Now the report has the
    section, and `ol similar` on the same class exits 0 or 1 naming each entry it could not compare, with why."""
    r, _rows, out, said, klass = hostile_class
    assert (out / "results" / ".similarity.json").is_file() and "could not be computed" not in said, said[-2000:]
    found = tmp_path / "similar.json"
    s = ol("similar", "L10.8", klass, "--json", found)
    assert s.returncode in (0, 1), (s.stdout + s.stderr).decode(errors="replace")[-2000:]
    skipped = {e["name"]: e["why"] for e in json.loads(found.read_text())["skipped"]}
    for name, _make, words in REJECTED.values():
        if name.startswith("corrupt"):
            assert words in skipped.get(name, ""), (name, skipped)


@pytest.mark.xdist_group("hostile_class")  # the class graded once, not once per xdist worker
@pytest.mark.slow(s=55)
def test_the_class_of_bad_entries_on_a_loopback_dask_cluster_gets_the_local_runs_row_for_each(hostile_class, tmp_path):
    """The same class, graded once by `ol grade --scheduler` on a loopback Dask cluster (one worker of two
    threads): every row is the local run's (status, counts, score, reason, sandbox, each test's verdict; the
    timing column aside), the honest entry graded as if alone, exit 0."""
    from tests.harness.loopback_kit import Loopback

    _r, local, _out, _said, klass = hostile_class
    out = tmp_path / "cluster"
    with Loopback(workers=1, nthreads=2) as cluster:
        r = ol("grade", "L10.8", klass, "--ref-deps", "--seed", "5", "--scheduler", cluster.address,
               "--out", out / "grades.csv", "--results-dir", out / "results")
        logs = cluster.log("w0.log")
    said = (r.stdout + r.stderr).decode(errors="replace")
    assert r.returncode == 0, said[-3000:] + logs[-3000:]
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        remote = {row["submission"]: row for row in csv.DictReader(f)}
    assert set(remote) == set(local), (set(remote) ^ set(local), said[-2000:])
    for name, row in local.items():
        assert {k: v for k, v in remote[name].items() if k != "wall_s"} == {k: v for k, v in row.items() if k != "wall_s"}, name
    assert remote["honest"]["status"] == "graded" and remote["honest"]["passed"] == "16", remote["honest"]
    assert "Dask worker tcp://127.0.0.1:" in said, "the entries that reached a worker say where they were graded"


@pytest.mark.xdist_group("hostile_class")  # the class graded once, not once per xdist worker
@pytest.mark.slow(s=0.1)  # the class's run is test_a_class_of_bad_entries...'s (slow): this reads its rows
@pytest.mark.parametrize("kind", list(GRADED))
def test_an_unusual_name_is_graded_and_shown_escaped(hostile_class, kind):
    _name, shown = GRADED[kind]
    _r, rows, out, said, _klass = hostile_class
    row = rows[shown]
    assert row["status"] == "graded" and row["passed"] == "16", row
    assert shown in said, said[-2000:]
    # every entry's file and the summary, each name within a file system's 255 bytes; and so each feedback page's
    listed = os.listdir(out / "results")
    ledger = [n for n in listed if n.endswith(".json") and not n.startswith(".")]  # not .similarity.json
    assert len(ledger) == len(rows) + 1 and all(len(os.fsencode(n)) < 255 for n in listed), listed
    assert sorted(n for n in listed if n.endswith(".html")) == sorted(n.removesuffix(".json") + ".html" for n in ledger
                                                                       if n != "summary.json")


@pytest.mark.slow
def test_a_rerun_keeps_a_rejection_and_an_honest_grade_and_exits_0(tmp_path):
    klass = _class(tmp_path, "empty", _empty)
    first, rows, out = _grade(tmp_path, klass)
    again, rows_again, _ = _grade(tmp_path, klass)
    assert first.returncode == again.returncode == 0, (first.stderr + again.stderr).decode()[-2000:]
    assert rows_again["empty"]["status"] == "rejected" and rows_again["honest"]["passed"] == "16", rows_again
    assert b"already graded" in again.stderr + again.stdout


CHECKED = {  # `ol check --submission DIR` on a folder holding only the link
    "tinyllm/ a link to the reference": (_folder_linking_the_package, "tinyllm is a symbolic link (to "),
    "bare spec.py a link to the reference": (_bare_spec_link, "spec.py is a symbolic link (to "),
    "spec.py -> /etc/shadow": (_spec_to_shadow, "spec.py is a symbolic link (to /etc/shadow)"),
    "tl-engine/ a link to the reference crate": (_crate_link, "tl-engine is a symbolic link (to "),
    "bare spec.rs a link to the reference": (_bare_spec_rs_link, "spec.rs is a symbolic link (to "),
    "spec.py in the package a link": (_linked_module_inside, "tinyllm/infer/spec.py is a symbolic link (to "),
}


@pytest.mark.parametrize("kind", list(CHECKED))
def test_ol_check_refuses_a_link_in_the_folder_in_one_line_reading_nothing(tmp_path, kind):
    make, words = CHECKED[kind]
    make(tmp_path / "sub")
    r = ol("check", "L10.8", "--submission", tmp_path / "sub", "--json", tmp_path / "report.json",
           "--junit", tmp_path / "junit.xml", cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2 and len(err.strip().splitlines()) == 1 and words in err, (r.returncode, err, r.stdout[-500:])
    assert "upload the file or folder itself" in err and b"passed" not in r.stdout and "Traceback" not in err
    for secret in _secret_lines():
        assert secret not in r.stdout + r.stderr and not any(secret in f.read_bytes() for f in tmp_path.glob("*.*"))


def test_ol_check_refuses_a_zip_whose_entry_is_a_link(tmp_path):
    _zip_with_link_entry(tmp_path / "upload.zip")
    r = ol("check", "L10.8", "--submission", tmp_path / "upload.zip", cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2 and "holds 'tinyllm/infer/spec.py' as a symbolic link" in err, err
    assert len(err.strip().splitlines()) == 1 and b"passed" not in r.stdout


@pytest.mark.slow
def test_the_users_own_link_to_a_submission_is_followed_once(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "spec.py").write_bytes(REF_SPEC.read_bytes())
    (tmp_path / "mylink").symlink_to(tmp_path / "real")
    r = ol("check", "L10.8", "--submission", "./mylink", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout[-2000:] + r.stderr[-2000:]).decode(errors="replace")


@pytest.mark.slow
def test_a_workspace_with_a_virtual_environment_is_graded_as_it_is(tmp_path):
    """A student's own folder holds their tools: a virtual environment (links to the interpreter, thousands
    of files) and node_modules are not the upload; they are neither walked nor copied, so nothing in them
    refuses the submission or counts against the caps (and nothing in them is read)."""
    sub = tmp_path / "py"
    sub.mkdir()
    (sub / "spec.py").write_bytes(REF_SPEC.read_bytes())
    venv = sub / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "lib").mkdir()
    for i in range(4100):  # past the entry cap, were they counted
        (venv / "lib" / f"m{i}.py").write_text("")
    (sub / "node_modules").mkdir()
    (sub / "node_modules" / "answers").symlink_to(REPO / "reference")
    r = ol("check", "L10.8", "--submission", sub, "--json", tmp_path / "report.json", cwd=tmp_path)
    assert r.returncode == 0, (r.stdout[-2000:] + r.stderr[-2000:]).decode(errors="replace")


@pytest.mark.slow(s=20)  # with the run's Rust template, built once per harness version
def test_a_submission_the_judge_refuses_after_the_layout_check_is_rejected_with_its_reason(tmp_path):
    """A crate the layout check accepts (tl-engine/src/spec.rs) but the judge refuses as malformed (no
    src/lib.rs, and no --ref-deps to supply it: exit 2, a BadSubmission): the upload's fault, so a rejected row
    with the judge's one-line reason, not an ungraded one; the class exits 0, the honest entry graded."""
    klass = tmp_path / "class"
    shutil.copytree(REPO / "reference" / "tinyllm", klass / "honest" / "tinyllm",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (klass / "nolib" / "tl-engine" / "src").mkdir(parents=True)
    shutil.copyfile(REF_CRATE / "src" / "spec.rs", klass / "nolib" / "tl-engine" / "src" / "spec.rs")
    out = tmp_path / "out"
    r = ol("grade", "L10.8", klass, "--seed", "5", "--jobs", "2", "--out", out / "grades.csv", "--results-dir", out / "results")
    said = (r.stdout + r.stderr).decode(errors="replace")
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert r.returncode == 0, said[-3000:]
    bad = rows["nolib"]
    assert bad["status"] == "rejected" and bad["score"] == "0.0", (bad, said[-2000:])
    assert "has no src/lib.rs" in bad["reason"] and "\n" not in bad["reason"], bad["reason"]
    assert rows["honest"]["status"] == "graded" and rows["honest"]["passed"] == "16", rows["honest"]


PACE = {  # (entry, step) -> seconds the test's clock moves at each look under that entry's deadline (60 s); each
    # entry's clock is its own, still under its other steps
    ("heavy", "reading and packing"): 0.02,  # 2,000 files and more: past the deadline at about the 3,000th look
    ("light", "reading and packing"): 100.0,  # a source-sized upload: past it at the first look, the machine's fault
    ("heavy.zip", "laying out"): 0.02,  # the archive's extraction where it is graded
    ("light-unpack", "unpacking"): 100.0,
}


@pytest.mark.slow(s=30)
def test_the_work_before_the_judge_has_a_deadline_and_passing_it_is_that_entrys_own_row(tmp_path, monkeypatch):
    """Reading and packing an entry (here), unpacking and laying it out (where it is graded) each pass their
    deadline on a clock this test controls, for its own entries only: each is its own row (rejected when the
    upload is more than source, ungraded when it is source-sized: the machine's fault), the honest one is graded
    as if alone, and the class is never stopped."""
    from harness.subjects import upload
    from harness.grading.grade import GradeOptions, grade
    from harness.registry import load_chapter

    looks, real = {name: 0.0 for name, _step in PACE}, upload.clock

    def clock() -> float:
        d = upload.current()
        if d is None or d.name not in looks:
            return real()
        looks[d.name] += PACE.get((d.name, d.step), 0.0)
        return looks[d.name]

    monkeypatch.setattr(upload, "clock", clock)
    klass = tmp_path / "class"
    for name in ("honest", "light", "light-unpack", "heavy"):
        (klass / name).mkdir(parents=True)
        (klass / name / "spec.py").write_bytes(REF_SPEC.read_bytes())
    (klass / "heavy" / "notes").mkdir()
    for i in range(2000):
        (klass / "heavy" / "notes" / str(i)).touch()
    with zipfile.ZipFile(klass / "heavy.zip", "w") as z:
        z.writestr("spec.py", REF_SPEC.read_bytes())
        for i in range(2000):
            z.writestr(f"notes/{i}", b"")
    out = tmp_path / "out"
    result = grade(load_chapter("L10.8"), klass, GradeOptions(out / "grades.csv", out / "results", seed=5, ref_deps=True, jobs=2))
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {row["submission"]: row for row in csv.DictReader(f)}
    assert rows["honest"]["status"] == "graded" and rows["honest"]["passed"] == "16", rows["honest"]
    for name in ("heavy", "heavy.zip"):
        assert rows[name]["status"] == "rejected" and rows[name]["score"] == "0.0", rows[name]
        assert f"{name} took longer than 60 s to read" in rows[name]["reason"], rows[name]["reason"]
        assert "upload only your source files" in rows[name]["reason"], rows[name]["reason"]
    assert rows["light"]["status"] == "ungraded" and rows["light"]["score"] == "", rows["light"]
    assert rows["light"]["reason"].startswith("Reading and packing light took longer than 60 s"), rows["light"]
    assert rows["light-unpack"]["status"] == "ungraded", rows["light-unpack"]
    assert rows["light-unpack"]["reason"].startswith("Unpacking light-unpack took longer than 60 s"), rows["light-unpack"]
    assert "this machine is too slow or stuck" in rows["light-unpack"]["reason"]
    assert all(v > 60 for v in looks.values()), looks  # each entry's own deadline passed, none other's
    assert result["summary"].rejected == 2 and result["summary"].ungraded == 2, result["summary"]
