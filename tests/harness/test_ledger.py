"""The pieces of `ol grade`'s engine that need no judge: a submission's parcel (harness.grading.parcel), the
ledger's keys and what it skips (harness.grading.ledger), the harness version (harness.subjects.version), and a
worker's refusal of another version's task (harness.grading.task)."""

import csv
from dataclasses import replace
import hashlib
import io
import json
import os
import signal
import zipfile

import pytest

from harness.grading.ledger import Ledger, default_results_dir, recorded_seed
from harness.kernel.outcomes import Outcome
from harness.grading.parcel import SHIP_CAP, ParcelError, digest, pack, unpack
from harness.kernel.paths import REPO
from harness.registry import load_chapter
from harness.kernel import report as rp
from harness.grading.task import Task, WorkerRefused, run
from harness.subjects.version import differences, version_of

CH = load_chapter("L10.8")


def submission(root):
    sub = root / "alice"
    (sub / "tinyllm" / "infer").mkdir(parents=True)
    (sub / "tinyllm" / "infer" / "spec.py").write_text("x = 1\n")
    (sub / "tinyllm" / "__init__.py").write_text("")
    (sub / "run.sh").write_text("#!/bin/sh\n")
    (sub / "run.sh").chmod(0o755)
    (sub / "empty").mkdir()
    return sub


def test_a_parcel_unpacks_to_the_same_files_and_its_digest_is_content_only(tmp_path):
    sub = submission(tmp_path / "a")
    p = pack(sub)
    assert p.name == "alice" and p.digest == digest(sub)
    back = unpack(p, tmp_path / "back")
    assert back == tmp_path / "back" / "alice"
    files = sorted(q.relative_to(back).as_posix() for q in back.rglob("*"))
    assert files == ["empty", "run.sh", "tinyllm", "tinyllm/__init__.py", "tinyllm/infer", "tinyllm/infer/spec.py"]
    assert (back / "tinyllm" / "infer" / "spec.py").read_text() == "x = 1\n" and os.access(back / "run.sh", os.X_OK)
    other = submission(tmp_path / "b")  # the same files written later, elsewhere: the same digest and bytes
    os.utime(other / "tinyllm" / "infer" / "spec.py", (1, 1))
    assert pack(other).digest == p.digest and pack(other).data == p.data
    (other / "tinyllm" / "infer" / "spec.py").write_text("x = 2\n")
    assert digest(other) != p.digest
    (other / "run.sh").chmod(0o644)
    assert digest(other) != digest(submission(tmp_path / "c")), "the executable bit is content"


def test_a_parcel_ships_no_cache_or_build_output_refuses_a_link_or_fifo_naming_it_and_is_capped(tmp_path):
    sub = submission(tmp_path)
    (sub / "tinyllm" / "__pycache__").mkdir()
    (sub / "tinyllm" / "__pycache__" / "spec.cpython-311.pyc").write_bytes(b"\0")
    (sub / "target").mkdir()
    (sub / "target" / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
    with zipfile.ZipFile(__import__("io").BytesIO(pack(sub).data)) as z:
        names = sorted(z.namelist())
    assert not any(n.endswith(".pyc") or "/target" in n for n in names), names
    (sub / "answers.json").symlink_to(CH.golden)  # a link to the answers, resolved by the packer: never
    with pytest.raises(ParcelError, match=r"^alice/answers.json is a symbolic link \(to .*spec_golden.json\)"):
        pack(sub)
    (sub / "answers.json").unlink()
    (sub / "tree").symlink_to(REPO, target_is_directory=True)
    with pytest.raises(ParcelError, match="alice/tree is a symbolic link"):
        digest(sub)
    (sub / "tree").unlink()
    os.mkfifo(sub / "pipe")  # reading it would block the packer
    with pytest.raises(ParcelError, match="alice/pipe is neither a file nor a folder"):
        pack(sub)
    big = tmp_path / "big"
    big.mkdir()
    (big / "blob").write_bytes(b"\0" * (SHIP_CAP + 1))
    with pytest.raises(ParcelError, match="more than 64 MiB"):
        pack(big)


def test_a_parcel_carries_names_that_are_not_utf8_and_keeps_the_digest_of_utf8_ones(tmp_path):
    sub = submission(tmp_path)
    before = digest(sub)
    latin = os.fsdecode(b"caf\xe9.txt")
    (sub / latin).write_bytes(b"notes\n")
    p = pack(sub)
    back = unpack(p, tmp_path / "back")
    assert (back / latin).read_bytes() == b"notes\n" and p.digest == digest(sub) != before
    (sub / latin).unlink()
    assert digest(sub) == before and unpack(pack(sub), tmp_path / "again").is_dir()


def test_a_parcel_naming_a_path_outside_its_submission_is_refused(tmp_path):
    import io

    from harness.grading.parcel import Parcel

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("alice/../../escape.py", "x")
    with pytest.raises(ParcelError, match="outside the submission"):
        unpack(Parcel("alice", buf.getvalue(), "d"), tmp_path / "in")
    assert not (tmp_path / "escape.py").exists()


def report(name: str, ungraded: str | None = None, sandbox: str = "bwrap") -> rp.Report:
    tests = [rp.TestResult(t.name, t.kind, Outcome.PASS if ungraded is None else Outcome.ERROR, 0.1, "", t.points)
             for t in CH.tests]
    return rp.Report(CH.chapter, name, True, tests, ungraded=ungraded, sandbox=sandbox, language="python")


def a_ledger(tmp_path, names, seed=5, version=None):
    return Ledger(CH, names, tmp_path / "grades.csv", tmp_path / "results", seed, True,
                  version or {"digest": "v1"}, "bwrap")


def test_the_ledger_skips_only_a_grade_with_the_same_key(tmp_path):
    (tmp_path / "results").mkdir()
    first = a_ledger(tmp_path, ["a", "b", "c"])
    assert recorded_seed(tmp_path / "results") == 5, "the seed is recorded before anyone is graded"
    first.record(report("a"), 1.5, "da", "local")
    first.record(report("b", ungraded="its judge was killed"), 0.5, "db", "local")
    first.record(report("c", sandbox="none"), 1.0, "dc", "local")
    csv_rows = list(csv.reader(io.StringIO((tmp_path / "grades.csv").read_text())))
    assert [r[0] for r in csv_rows[1:]] == ["a", "b", "c"]
    again = a_ledger(tmp_path, ["a", "b", "c"])
    assert again.graded("a", "da", unconfined_ok=False)
    assert not again.graded("b", "db", unconfined_ok=False), "an ungraded entry is graded again"
    assert not again.graded("c", "dc", unconfined_ok=False), "an unconfined grade is not kept for a confined run"
    assert again.graded("c", "dc", unconfined_ok=True)
    assert not again.graded("a", "changed", unconfined_ok=False), "other files: graded again"
    assert not a_ledger(tmp_path, ["a"], seed=6).graded("a", "da", False), "another seed: graded again"
    assert not a_ledger(tmp_path, ["a"], version={"digest": "v2"}).graded("a", "da", False), "another harness: again"
    entry = json.loads((tmp_path / "results" / "a.json").read_text())
    assert entry["key"] == {"content": "da", "seed": 5, "ref_deps": True, "harness": "v1"} and entry["wall_s"] == 1.5
    (tmp_path / "results" / "a.json").write_text(entry.__repr__())  # damaged by hand: graded again, not trusted
    assert not a_ledger(tmp_path, ["a"]).graded("a", "da", False)


def test_a_ctrl_c_as_an_entry_is_written_keeps_the_finished_grade(tmp_path, monkeypatch):
    """Ctrl-C just after an entry's file is written (where `ol grade`'s interrupt test once landed: it signals as
    the second entry appears): the grade stands, and the run's stop fills only the entries never graded."""
    from harness.grading import ledger as ledger_mod

    real, typed = ledger_mod.write_atomic, []

    def written_then_interrupted(path, data):
        real(path, data)
        if path.name == "a.json" and not typed:
            typed.append(path)
            os.kill(os.getpid(), signal.SIGINT)  # heard by Python at its next instruction

    (tmp_path / "results").mkdir()
    book = a_ledger(tmp_path, ["a", "b"])
    monkeypatch.setattr(ledger_mod, "write_atomic", written_then_interrupted)
    # Ctrl-C heard as at a terminal: a suite started in the background (`./ol selftest &`) inherits SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            book.record(report("a"), 1.5, "da", "local")
    finally:
        signal.signal(signal.SIGINT, previous)
    book.fill("the run was interrupted before it was graded")
    kept = {n: json.loads((tmp_path / "results" / f"{n}.json").read_text())["ungraded"] for n in ("a", "b")}
    assert kept == {"a": None, "b": "the run was interrupted before it was graded"}, kept


@pytest.fixture
def validations(monkeypatch):
    """The report schema's validations, counted (harness.kernel.report.validate, wrapped), each process's parse cache empty."""
    from harness.grading import ledger

    seen = []
    real = rp.validate
    monkeypatch.setattr(rp, "validate", lambda data: seen.append(data["submission"]) or real(data))
    ledger._parse_entry.cache_clear()
    yield seen
    ledger._parse_entry.cache_clear()


def a_new_process():
    """What a new run starts from: no entry parsed yet (the parse cache lives as long as its process)."""
    from harness.grading import ledger

    ledger._parse_entry.cache_clear()


def test_an_entry_is_validated_against_the_schema_once_while_its_bytes_are_the_same(tmp_path, validations):
    from harness.grading.ledger import Entries

    (tmp_path / "results").mkdir()
    first = a_ledger(tmp_path, ["a", "b", "c"])
    for name in "abc":
        first.record(report(name), 1.0, f"d{name}", "local")
    # the ledger vouches for the bytes it wrote from its Reports (validated where they crossed from their judges)
    a_new_process()
    again = a_ledger(tmp_path, ["a", "b", "c"])  # the next run: each entry read to be skipped, none validated
    assert all(again.graded(n, f"d{n}", False) for n in "abc") and validations == []
    (tmp_path / "results" / ".validated.json").unlink()  # no record: each entry validated once, then kept
    a_new_process()
    third = a_ledger(tmp_path, ["a", "b", "c"])
    assert all(third.graded(n, f"d{n}", False) for n in "abc") and sorted(validations) == ["a", "b", "c"]
    third.write()  # the end of the run: the validated entries' digests kept
    a_new_process()
    fourth = a_ledger(tmp_path, ["a", "b", "c"])
    assert all(fourth.graded(n, f"d{n}", False) for n in "abc") and len(validations) == 3  # none validated again
    entry = tmp_path / "results" / "b.json"
    entry.write_text(entry.read_text().replace('"wall_s": 1.0', '"wall_s": 2.0'))  # new bytes: validated again
    a_new_process()
    assert Entries(tmp_path / "results").read("b")[1] == 2.0 and validations[3:] == ["b"]
    entry.write_text(entry.read_text().replace('"outcome": "pass"', '"outcome": "passed-ish"', 1))  # breaks the schema
    a_new_process()
    assert Entries(tmp_path / "results").read("b") is None and validations[4:] == ["b"]  # never trusted: read as missing


@pytest.mark.parametrize("damage", ["not-json", "listed-by-hand", "another-schema"])
def test_a_corrupt_or_edited_record_of_validated_entries_is_not_trusted(tmp_path, validations, monkeypatch, damage):
    from harness.grading import ledger

    (tmp_path / "results").mkdir()
    book = a_ledger(tmp_path, ["a", "b"])
    book.record(report("a"), 1.0, "da", "local")
    book.record(report("b"), 1.0, "db", "local")
    reader = ledger.Entries(tmp_path / "results")
    reader.read("a"), reader.read("b")
    reader.save()  # a's and b's digests kept, both valid
    record = tmp_path / "results" / ledger.VALIDATED
    data = json.loads(record.read_text())
    entry = tmp_path / "results" / "b.json"
    entry.write_text(entry.read_text().replace('"outcome": "pass"', '"outcome": "passed-ish"', 1))  # b breaks the schema
    if damage == "not-json":
        record.write_text(record.read_text()[:40])
    elif damage == "listed-by-hand":  # the broken b's digest added, the check left as it was
        data["entries"].append(hashlib.sha256(entry.read_bytes()).hexdigest())
        record.write_text(json.dumps(data))
    else:
        monkeypatch.setattr(ledger, "schema_digest", lambda: "another schema's digest")
    a_new_process()
    validations.clear()
    reader = ledger.Entries(tmp_path / "results")
    assert (reader.note is None) if damage == "another-schema" else (ledger.VALIDATED in reader.note)
    assert reader.read("a") is not None and reader.read("b") is None and sorted(validations) == ["a", "b"]


def test_a_submission_named_summary_is_refused_and_the_ledger_sits_beside_the_csv(tmp_path):
    from harness.kernel.errors import UsageError

    (tmp_path / "results").mkdir()
    with pytest.raises(UsageError, match="would overwrite the ledger's summary.json"):
        a_ledger(tmp_path, ["summary"])
    assert default_results_dir(tmp_path / "grades.csv") == tmp_path / "grades-results"


def test_versions_differ_in_words():
    mine = version_of(CH)
    assert mine == version_of(CH) and len(mine["digest"]) == 16
    theirs = {**mine, "files": "0" * 64, "packages": {**mine["packages"], "numpy": "1.0.0"}}
    said = differences(mine, theirs)
    assert len(said) == 2 and "files" in said[0] and f"numpy {mine['packages']['numpy']} here, 1.0.0 on the client" in said[1]


def test_a_task_made_by_another_harness_version_is_refused_before_anything_runs(tmp_path):
    sub = submission(tmp_path)
    version = {**version_of(CH), "files": "0" * 64, "digest": "not-this-one"}
    with pytest.raises(WorkerRefused, match="the harness changed while this run graded .*files") as refused:
        run(Task(CH.chapter, pack(sub), str(sub), 1, True, False, version))
    assert "grade one class with two versions" in str(refused.value)


def test_the_cluster_options_are_refused_before_anything_runs(tmp_path):
    import subprocess
    import sys

    klass = tmp_path / "class"
    submission(klass)
    for extra, words in ((("--scheduler", "tcp://127.0.0.1:9", "--jobs", "2"), "with --scheduler each Dask worker's"),
                         (("--scheduler-file", str(tmp_path / "none.json")), "no such file"),
                         (("--scheduler", "tcp://127.0.0.1:9", "--scheduler-file", str(tmp_path / "f.json")), "not both")):
        r = subprocess.run([sys.executable, "-m", "harness.cli", "grade", "L10.8", str(klass), *extra], capture_output=True,
                           text=True, timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, (extra, r.stderr)
        assert not (tmp_path / "grades.csv").exists() and not (tmp_path / "grades-results").exists()


def test_the_live_progress_counts_and_shows_each_submission_as_it_finishes():
    from rich.console import Console

    from harness.cli.progress import GradeProgress

    console = Console(record=True, width=200, force_terminal=False)
    progress = GradeProgress(console)
    progress.begin(4, ["done-before"], 3)
    for name in ("slow", "fast", "broken"):
        progress.started(name, "tcp://10.0.0.1:4000")
    progress.finished(report("fast"), 2.0, "tcp://10.0.0.1:4000")
    failing = report("broken")
    failing = failing.but(tests=(replace(failing.tests[0], outcome=Outcome.FAIL, points=0.0), *failing.tests[1:]))
    progress.finished(failing, 3.0, "local")
    assert progress.counts == {"passed": 1, "failed": 1, "rejected": 0, "ungraded": 0} and list(progress.running) == ["slow"]
    text = console.export_text()
    assert "1 of 4 submissions already graded" in text and "3 to grade" in text
    assert text.index("16/16 fast score 16/16 in 2.0 s on tcp://10.0.0.1:4000") < text.index("15/16 broken score 15/16 in 3.0 s")
    shown = Console(record=True, width=200)
    shown.print(progress._render())
    live = shown.export_text()
    assert "2/3 1 passed 1 failed 0 rejected 0 ungraded" in live and "running longest: slow 0 s (tcp://10.0.0.1:4000)" in live, live
