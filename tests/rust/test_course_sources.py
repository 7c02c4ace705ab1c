"""The chapter's own Rust (chapter.toml's [language.rust] `course_sources`: the worker's op table and `cargo test`'s
front end live in the pack, chapters/L10_8/rust/) reaches every workspace ol assembles: the judge's build (its
workspace, its cache key, a rebuild when the pack's ops.rs changes) and the student's (`ol start`)."""

import dataclasses
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from harness.kernel import cache
from harness.languages import rust
from harness.languages.stub import write_rust_workspace
from harness.registry import load_chapter
from harness.sandbox.confine import choose
from harness.subjects.reference import copy_reference

CH = load_chapter("L10.8")
LANG = CH.language("rust")
PACK_OPS = CH.pack_dir / "rust" / "worker" / "ops.rs"
JUDGE_PLACES = {"crates/tl-worker/src/ops.rs", "crates/tl-worker/src/ops/engine.rs"}  # the front end is ol start's only
needs_cargo = pytest.mark.skipif(rust.missing() is not None, reason="needs cargo and rustc")


def with_own_sources(tmp_path: Path):
    """The chapter, its Rust table's course_sources copied to tmp_path (so a test may edit them), and the copies."""
    copies = {}
    for place, source in LANG.course_sources.items():
        copies[place] = tmp_path / "pack" / source.relative_to(CH.pack_dir)
        copies[place].parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, copies[place])
    lang = dataclasses.replace(LANG, course_sources=copies)
    return dataclasses.replace(CH, languages={**CH.languages, "rust": lang}), copies


def test_the_pack_declares_its_op_table_and_front_end_and_rust_crates_holds_none():
    assert {p: s.relative_to(CH.pack_dir).as_posix() for p, s in LANG.course_sources.items()} == {
        "crates/tl-worker/src/ops.rs": "rust/worker/ops.rs", "crates/tl-worker/src/ops/engine.rs": "rust/worker/ops/engine.rs",
        "crates/tl-check/Cargo.toml": "rust/tl-check/Cargo.toml", "crates/tl-check/src/lib.rs": "rust/tl-check/src/lib.rs",
        "crates/tl-check/tests/l10_8.rs": "rust/tl-check/tests/l10_8.rs",
        "crates/tl-check/src/from_engine.rs": "rust/tl-check/src/from_engine.rs"}
    assert set(rust.judge_sources(LANG)) == JUDGE_PLACES
    course = [p for p in rust.COURSE_CRATES.rglob("*") if p.is_file() and "target" not in p.parts]
    assert not [p for p in course if "tl_engine::" in p.read_text() or "L10" in p.read_text()], "course/crates is generic"


def test_the_judges_workspace_takes_the_packs_files_and_keeps_them_between_builds(tmp_path):
    ch, copies = with_own_sources(tmp_path)
    sub = copy_reference(ch, tmp_path / "sub", "rust")
    ws = tmp_path / "ws"
    rust.assemble(ch.language("rust"), sub, ws)
    for place in JUDGE_PLACES:
        assert (ws / place).read_bytes() == copies[place].read_bytes(), place
    assert not (ws / "crates" / "tl-check").exists(), "the judge builds no front end"
    before = {place: (ws / place).stat().st_mtime_ns for place in JUDGE_PLACES}
    rust.assemble(ch.language("rust"), sub, ws)  # unchanged: left alone, so cargo rebuilds nothing
    assert {place: (ws / place).stat().st_mtime_ns for place in JUDGE_PLACES} == before
    ops = copies["crates/tl-worker/src/ops.rs"]
    ops.write_text(ops.read_text() + "\n// edited\n")
    rust.assemble(ch.language("rust"), sub, ws)
    assert (ws / "crates/tl-worker/src/ops.rs").read_text().endswith("// edited\n")


def test_the_cache_key_of_a_scratch_copy_holds_the_packs_op_table(tmp_path, monkeypatch):
    monkeypatch.setenv("OL_RUST_CACHE", "1")
    ch, copies = with_own_sources(tmp_path)
    sub = copy_reference(ch, tmp_path / "ol-impl-x", "rust")  # one of ol's scratch copies: keyed by content
    key = rust.cache_dir(sub, ch.language("rust"))
    assert key == rust.cache_dir(sub, LANG), "the same bytes: the same key"
    front_end = copies["crates/tl-check/tests/l10_8.rs"]
    front_end.write_text(front_end.read_text() + "\n// not built by the judge\n")
    assert rust.cache_dir(sub, ch.language("rust")) == key
    for place in JUDGE_PLACES:
        copies[place].write_text(copies[place].read_text() + "\n// edited\n")
        assert rust.cache_dir(sub, ch.language("rust")) != key, place
        copies[place].write_text(LANG.course_sources[place].read_text())


def test_ol_start_writes_the_packs_files_into_the_students_workspace(tmp_path):
    write_rust_workspace(CH, tmp_path / "rust")
    for place, source in LANG.course_sources.items():
        assert (tmp_path / "rust" / place).read_bytes() == source.read_bytes(), place
    stale = tmp_path / "rust" / "crates" / "tl-check" / "tests" / "old.rs"
    stale.write_text("// an older front end\n")
    write_rust_workspace(CH, tmp_path / "rust", force=True)
    assert not stale.exists(), "the course's crates are always the current copy"


def unknown_op_message(binary: Path) -> str:
    """The built worker's answer to an op no table has (its op table's own message)."""
    judge_in, worker_out = os.pipe()
    worker_in, judge_out = os.pipe()
    proc = subprocess.Popen([str(binary), "--in", str(worker_in), "--out", str(worker_out)], pass_fds=(worker_in, worker_out),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(worker_in), os.close(worker_out)
    with os.fdopen(judge_out, "w") as w, os.fdopen(judge_in) as r:
        assert "hello" in json.loads(r.readline())
        w.write(json.dumps({"id": 1, "op": "nope", "args": {}}) + "\n")
        w.flush()
        answer = json.loads(r.readline())
    proc.wait(timeout=60)  # its in descriptor closed: it exits 0
    return answer["error"]["message"]


@pytest.mark.slow(s=6)
@needs_cargo
def test_an_edit_of_the_packs_ops_rs_rebuilds_the_worker(tmp_path, monkeypatch):
    """Built twice from one submission folder (the same cache folder, kept between checks): the second build, after
    an edit of the pack's op table, is a worker that answers with the edit."""
    monkeypatch.setenv("OL_RUST_CACHE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # a cache of the test's own
    ch, copies = with_own_sources(tmp_path)
    sub = copy_reference(ch, tmp_path / "sub", "rust")
    mode = choose()
    first = rust.build(ch, sub, tmp_path / "b1", mode)
    assert "the protocol has ['blocks_for'" in unknown_op_message(first / "bin" / "tl-worker")
    ops = copies["crates/tl-worker/src/ops.rs"]
    ops.write_text(ops.read_text().replace("; the protocol has [", "; this edited table has ["))
    second = rust.build(ch, sub, tmp_path / "b2", mode)
    assert rust.cache_dir(sub, ch.language("rust")).parent == tmp_path / "cache" / "ol" / "rust"
    assert "this edited table has ['blocks_for'" in unknown_op_message(second / "bin" / "tl-worker")


def test_the_build_cache_keeps_the_most_recently_used_builds_and_any_in_use(tmp_path):
    """Each mutant or scratch copy ol checks leaves a build keyed by its content: the cache keeps the CACHE_KEPT most
    recently used (a build's folder is touched when a build starts in it) and any used within the grace period."""
    now = time.time()
    builds = []
    for i in range(rust.CACHE_KEPT + 6):
        b = tmp_path / f"b{i:02d}"
        (b / "target").mkdir(parents=True)
        (b / "target" / "x").write_text("built")
        cache.mark(b)  # a build ol made (harness.kernel.cache: pruning removes no other)
        age = rust.CACHE_GRACE_S + 1000 * (i + 1)  # b00 the newest, all older than the grace period
        os.utime(b, (now - age, now - age))
        builds.append(b)
    recent = builds[-1]  # the oldest by rank, but used within the grace period: a check may be using it now
    os.utime(recent, (now - 60, now - 60))
    gone = rust.prune_cache(tmp_path)
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert sorted(p.name for p in gone) == [b.name for b in builds[rust.CACHE_KEPT - 1:-1]], gone
    assert kept == sorted([b.name for b in builds[:rust.CACHE_KEPT - 1]] + [recent.name]), kept
    assert rust.prune_cache(tmp_path) == [], "nothing more to prune"
    (tmp_path / "not-ols").mkdir()  # a folder ol did not make, however old: never removed
    os.utime(tmp_path / "not-ols", (now - 10 * rust.CACHE_GRACE_S,) * 2)
    assert tmp_path / "not-ols" not in rust.prune_cache(tmp_path, kept=0, grace_s=0) and (tmp_path / "not-ols").is_dir()


@pytest.mark.slow(s=10)
@needs_cargo
def test_a_build_past_its_deadline_is_stopped_and_the_submission_told(tmp_path, monkeypatch):
    """The build's deadline (BUILD_DEADLINE_S, on the judge's clock, harness.kernel.clock; lowered here to 0.2 s,
    where a build takes seconds): cargo is stopped, and the failure says why."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(rust, "BUILD_DEADLINE_S", 0.2)
    ch = load_chapter("L10.8")
    sub = copy_reference(ch, tmp_path / "sub", "rust")
    with pytest.raises(rust.BuildFailed, match="did not finish compiling within"):
        rust.build(ch, sub, tmp_path / "b", choose(), cache=False)
