"""What the threads of one grading process share (`ol grade --jobs N`, `dask worker --nthreads N`) is safe when
they use it at once (harness.grading.task's docstring lists it): the chapter's tests files (CPython 3.11's ast.parse is
not thread-safe: two at once raise "SystemError: AST constructor recursion depth mismatch"), parsed once per
process; the registry; the judge's reference package; a grading run's fresh cases, Rust template and zygote,
each made once and none waiting behind another; the Rust machine template, built by one thread at a time.

The threads here run beside one making garbage whose finalizers run Python code: the collector then runs it
in the middle of another thread's ast.parse and the interpreter switches threads there, as it does in a Dask
worker (its event loop's garbage), which is what made two parses overlap."""

import importlib
import json
import os
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness import registry
from harness.registry import testfiles
from harness.languages import rust
from harness.grading import task
from harness.sandbox.confine import Mode
from harness.grading.judge import JUDGE_PRELOAD, judge_env
from harness.subjects.reference import load_package
from harness.registry import load_chapter

REPO = Path(__file__).resolve().parents[2]
KIT = Path(__file__).resolve().parent  # zygote_kit.py
THREADS = 8
COPIES = 24  # of each tests file (without PARSE_LOCK this test failed 8 runs of 8 on Python 3.11.7)


class _Cycle:
    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:  # Python code the collector runs, in whichever thread set it off
        sum(range(50))


@contextmanager
def garbage_with_finalizers():
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            for _ in range(200):
                _Cycle()
            time.sleep(0)

    t = threading.Thread(target=churn, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def at_once(fn, args: list) -> list:
    """fn(arg) for every arg, from THREADS threads started together; the results in order (the first error raised)."""
    start = threading.Barrier(THREADS)

    def worker(share):
        start.wait()
        return [fn(a) for a in share]

    shares = [args[i::THREADS] for i in range(THREADS)]
    with ThreadPoolExecutor(THREADS) as pool:
        done = [f.result() for f in [pool.submit(worker, s) for s in shares]]
    out = [None] * len(args)
    for i, share in enumerate(done):
        out[i::THREADS] = share
    return out


@pytest.mark.slow(s=2)
def test_many_threads_read_the_tests_files_at_once(tmp_path):
    chapter = load_chapter("L10.8")
    copies = []  # new files, each parsed on its first read: many parses at once, not one cached parse
    for n in range(COPIES):
        for f in chapter.tests_files:
            copy = tmp_path / f"{n}-{f.name}"
            shutil.copyfile(f, copy)
            copies.append(copy)
    want = [registry.test_functions(f) for f in chapter.tests_files] * COPIES
    with garbage_with_finalizers():
        got = at_once(registry.test_functions, copies * 3)  # each copy three times over: parsed, then read from the cache
    assert got == want * 3


@pytest.mark.slow(s=2)
def test_many_threads_load_the_chapter_at_once():
    want = load_chapter("L10.8")
    with garbage_with_finalizers():
        got = at_once(lambda _: load_chapter("L10.8"), list(range(12 * THREADS)))
    assert all(ch == want for ch in got)
    assert importlib.import_module(registry.PACKAGE).__path__.count(str(registry.CHAPTERS_DIR)) <= 1, "added once"


def test_a_tests_file_is_parsed_once_per_process_and_again_when_it_changes(tmp_path, monkeypatch):
    f = tmp_path / "test_some.py"
    f.write_text("import numpy\nfrom chapters.L10_8 import ops\nfrom . import near\n\ndef test_a():\n    pass\n")
    parses = []
    real = testfiles.ast.parse
    monkeypatch.setattr(testfiles.ast, "parse", lambda *a, **k: parses.append(a[1:2]) or real(*a, **k))
    first = registry.parsed_tests(f)
    assert first.functions == ("a",) and first.imports == ("numpy", "chapters.L10_8")
    at_once(registry.parsed_tests, [f] * (2 * THREADS))
    assert len(parses) == 1, "read from the process's parse, not parsed again"
    f.write_text(f.read_text() + "\n\ndef test_b():\n    pass\n")
    os.utime(f, ns=(time.time_ns(), time.time_ns() + 10**9))  # a second later, whatever the clock's grain
    assert registry.parsed_tests(f).functions == ("a", "b") and len(parses) == 2


def test_a_parse_upset_by_one_outside_the_harness_is_made_again(monkeypatch):
    real, upsets = testfiles.ast.parse, [2]

    def upset(*args, **kw):  # what a traceback's parse in another thread at that moment does to it
        if upsets[0]:
            upsets[0] -= 1
            raise SystemError("AST constructor recursion depth mismatch (before=18, after=10)")
        return real(*args, **kw)

    monkeypatch.setattr(testfiles.ast, "parse", upset)
    assert isinstance(registry.parse("x = 1\n"), testfiles.ast.Module) and upsets == [0]
    upsets[0] = registry.PARSE_ATTEMPTS
    with pytest.raises(SystemError):
        registry.parse("x = 1\n")
    monkeypatch.setattr(testfiles.ast, "parse", lambda *a, **k: (_ for _ in ()).throw(SystemError("another")))
    with pytest.raises(SystemError, match="another"):
        registry.parse("x = 1\n")


def test_a_package_loading_in_one_thread_is_not_taken_half_made_by_another(tmp_path):
    pkg = tmp_path / "slowpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import time\ntime.sleep(0.3)\nDONE = True\n")
    alias = f"ol_test_slowpkg_{os.getpid()}"
    try:
        got = at_once(lambda _: (m := load_package(pkg, alias), getattr(m, "DONE", False)), list(range(THREADS)))
        assert all(done for _, done in got), "a thread took the package before it had run"
        assert len({id(m) for m, _ in got}) == 1, "loaded once"
    finally:
        sys.modules.pop(alias, None)


def _run(tmp_path) -> task._Run:
    return task._Run(load_chapter("L10.8"), None, Mode("bwrap"), tmp_path, None)


def test_a_run_s_fresh_cases_and_zygote_do_not_wait_behind_its_rust_template(tmp_path, monkeypatch):
    run = _run(tmp_path)
    building, release = threading.Event(), threading.Event()

    def slow_template(chapter, mode, digest):
        building.set()
        release.wait(30)
        return tmp_path / "template"

    class FakeZygote:
        def __init__(self, *args, **kwargs) -> None:
            pass

    monkeypatch.setattr(rust, "machine_template", slow_template)
    monkeypatch.setattr("harness.grading.zygote.Zygote", FakeZygote)
    builder = threading.Thread(target=run.env_for, args=("rust",))
    builder.start()
    try:
        assert building.wait(10)
        with ThreadPoolExecutor(2) as pool:
            golden, zygote = pool.submit(run.fresh_golden), pool.submit(run.forks)
            assert golden.result(timeout=5) == run.chapter.golden, "the cases waited for the Rust build"
            assert isinstance(zygote.result(timeout=5), FakeZygote), "the zygote waited for the Rust build"
    finally:
        release.set()
        builder.join()
    assert run.env_for("rust") == {"OL_RUST_TEMPLATE": str(tmp_path / "template")}


def test_a_run_s_parts_are_made_once_by_threads_asking_at_once(tmp_path, monkeypatch):
    run = _run(tmp_path)
    made = []

    class FakeZygote:
        def __init__(self, *args, **kwargs) -> None:
            time.sleep(0.2)
            made.append(self)

    def template(chapter, mode, digest):
        time.sleep(0.2)
        made.append("template")
        return tmp_path / "template"

    monkeypatch.setattr("harness.grading.zygote.Zygote", FakeZygote)
    monkeypatch.setattr(rust, "machine_template", template)
    zygotes = at_once(lambda _: run.forks(), list(range(THREADS)))
    envs = at_once(lambda _: run.env_for("rust"), list(range(THREADS)))
    assert len({id(z) for z in zygotes}) == 1 and len(made) == 2
    assert len({id(e) for e in envs}) == 1 and envs[0] == {"OL_RUST_TEMPLATE": str(tmp_path / "template")}


def test_one_thread_at_a_time_builds_the_machine_s_rust_template(monkeypatch):
    busy, most = [0], [0]
    lock = threading.Lock()

    def build(chapter, mode, digest):
        with lock:
            busy[0] += 1
            most[0] = max(most[0], busy[0])
        time.sleep(0.05)
        with lock:
            busy[0] -= 1
        return Path("/nowhere")

    monkeypatch.setattr(rust, "_machine_template", build)
    at_once(lambda _: rust.machine_template(None, Mode("bwrap"), "digest"), list(range(THREADS)))
    assert most[0] == 1


@pytest.mark.slow(s=2.5)
def test_one_zygote_serves_judges_from_many_threads_at_once(tmp_path):
    from harness.grading.zygote import Zygote

    env = judge_env("bwrap") | {"PYTHONPATH": f"{REPO}{os.pathsep}{KIT}"}
    z = Zygote("L10.8", env, tmp_path / "home", preload=JUDGE_PRELOAD)
    try:
        def judge(i: int) -> dict:
            home = tmp_path / f"judge-{i}"
            home.mkdir()
            r = z.run([str(i)], {"PATH": os.environ["PATH"], "TMPDIR": str(home), "OL_JUDGE": str(i)}, home, 60,
                      main="zygote_kit:where")
            assert r.returncode == 7, r.stderr
            return json.loads(r.stdout)

        seen = at_once(judge, list(range(2 * THREADS)))
    finally:
        z.close()
    for i, s in enumerate(seen):
        assert s["args"] == [str(i)] and s["env"]["OL_JUDGE"] == str(i) and s["cwd"] == s["tmp"] == str(tmp_path / f"judge-{i}")
    assert len({s["pid"] for s in seen}) == len(seen)
