"""The Rust track as a student and as staff use it: `ol start --lang rust`, `ol check` and `cargo test` in the
workspace, the Rust reference through the Rust worker, a crate that does not compile, panics or loops, and
builds that try to escape (a build script, a `.cargo/config.toml` naming a wrapper, `include_str!` of the
golden file). Each check runs the real commands from the student's folder, with relative paths."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.languages import rust
from harness.kernel.paths import REPO
from harness.registry import load_chapter

pytestmark = [pytest.mark.slow, pytest.mark.skipif(rust.missing() is not None, reason="needs cargo and rustc")]
CH = load_chapter("L10.8")
OL = str(REPO / "ol")
REF_SPEC = REPO / "reference/rust/crates/tl-engine/src/spec.rs"
TESTS = [t.name for t in CH.tests]


def ol(*args, cwd: Path, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([OL, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def report(cwd: Path, *args) -> tuple[int, dict]:
    r = ol("check", "L10.8", *args, "--json", "-", cwd=cwd)
    assert r.returncode in (0, 1), r.stderr[-3000:]
    return r.returncode, json.loads(r.stdout)


@pytest.fixture(scope="module")
def started(tmp_path_factory) -> Path:
    """A student's folder after `ol start L10.8` (the chapter's language, Rust: the workspace is ./rust)."""
    home = tmp_path_factory.mktemp("student")
    r = ol("start", "L10.8", cwd=home)
    assert r.returncode == 0, r.stdout + r.stderr
    return home


def workspace_with(started: Path, tmp_path: Path, spec_rs: str) -> Path:
    """A copy of the started workspace (./rust in a folder of its own) whose spec.rs is `spec_rs`."""
    home = tmp_path / "student"
    shutil.copytree(started / "rust", home / "rust", ignore=shutil.ignore_patterns("target"))
    (home / "rust/crates/tl-engine/src/spec.rs").write_text(spec_rs)
    return home


def by_name(rep: dict) -> dict:
    return {t["name"]: t for t in rep["tests"]}


def test_the_stub_fails_every_test_as_not_implemented(started):
    code, rep = report(started)
    assert code == 1 and rep["sandbox"] in ("bwrap", "uid", "none")
    tests = by_name(rep)
    assert sorted(tests) == sorted(TESTS)
    for t in tests.values():
        assert t["outcome"] != "pass" and t["message"].startswith("not implemented: ") and "\n" not in t["message"], t


def test_cargo_test_in_the_workspace_runs_the_judge(started):
    r = subprocess.run(["cargo", "test", "--offline", "-q"], cwd=started / "rust", capture_output=True, text=True, timeout=900)
    assert r.returncode != 0
    lines = [line for line in r.stdout.splitlines() if line.startswith("test ") and line.endswith(("ok", "FAILED"))]
    assert len(lines) == 16 and all(line.endswith("FAILED") for line in lines), r.stdout[-3000:]
    assert "not implemented" in r.stdout and "test result: FAILED. 0 passed; 16 failed" in r.stdout


def test_cargo_test_runs_only_the_named_test_and_builds_nothing_of_the_students(started, tmp_path):
    """`cargo test -- NAME` hands the filter to the judge, which runs that test alone; cargo itself compiles only the
    front end (crates/tl-check, no tl-engine dependency): the judge's sandboxed build is the crate's one build."""
    home = workspace_with(started, tmp_path, REF_SPEC.read_text().split("#[cfg(test)]")[0])  # no #[test] of its own
    ws = home / "rust"
    r = subprocess.run(["cargo", "test", "--offline", "--", "hand_example_prompt_lookup"], cwd=ws, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = [line for line in r.stdout.splitlines() if line.startswith("test ") and " ... " in line]
    assert lines == ["test hand_example_prompt_lookup ... ok"], r.stdout[-3000:]
    assert "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 15 filtered out" in r.stdout
    assert "Compiling tl-engine" not in r.stderr and not list((ws / "target").rglob("libtl_engine*")), r.stderr[-2000:]
    assert "ol: building: compiling tl-engine" in r.stderr  # the judge's build, told as it goes
    assert "your own #[test]s" not in r.stdout
    # a #[test] of the student's own runs after the judge's, with the same filter
    spec = ws / "crates/tl-engine/src/spec.rs"
    spec.write_text(spec.read_text() + "\n#[test]\nfn mine_hand_example_prompt_lookup() { assert_eq!(1 + 1, 3); }\n")
    r = subprocess.run(["cargo", "test", "--offline", "--", "hand_example_prompt_lookup"], cwd=ws, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode != 0 and "test hand_example_prompt_lookup ... ok" in r.stdout, r.stdout[-3000:]
    assert "your own #[test]s" in r.stdout and "mine_hand_example_prompt_lookup" in r.stdout, r.stdout[-3000:]


def test_the_judges_build_is_reused_and_incremental(started, tmp_path):
    """A second check of the same workspace compiles nothing; an edit of spec.rs compiles the crate and the worker
    linked to it, never the course's tl-json again."""
    home = workspace_with(started, tmp_path, REF_SPEC.read_text())
    first = ol("check", "L10.8", "-k", "hand_example_greedy", cwd=home)
    again = ol("check", "L10.8", "-k", "hand_example_greedy", cwd=home)
    spec = home / "rust/crates/tl-engine/src/spec.rs"
    spec.write_text("// an edit\n" + spec.read_text())
    edited = ol("check", "L10.8", "-k", "hand_example_greedy", cwd=home)
    assert [r.returncode for r in (first, again, edited)] == [0, 0, 0], edited.stdout + edited.stderr
    compiled = [[line.split()[-1] for line in r.stdout.splitlines() if line.startswith("ol: building: compiling")]
                for r in (first, again, edited)]
    assert compiled == [["tl-json", "tl-engine", "tl-worker"], [], ["tl-engine", "tl-worker"]], compiled


def test_the_rust_reference_passes_every_test_through_the_rust_worker(tmp_path):
    code, rep = report(tmp_path, "--submission", "reference", "--lang", "rust")
    assert code == 0, [(t["name"], t["message"][:300]) for t in rep["tests"] if t["outcome"] != "pass"]
    assert rep["sandbox"] != "in-process"


def test_the_reference_spec_in_a_student_workspace_passes(started, tmp_path):
    home = workspace_with(started, tmp_path, REF_SPEC.read_text())
    code, rep = report(home / "rust")  # from inside the workspace, as `cargo test` runs it
    assert code == 0, [(t["name"], t["message"][:300]) for t in rep["tests"] if t["outcome"] != "pass"]
    code, rep = report(home, "--submission", "rust/crates/tl-engine/src/spec.rs")  # a bare spec.rs, relative
    assert code == 0


def test_a_compile_error_fails_every_test_with_rustcs_first_error(started, tmp_path):
    broken = REF_SPEC.read_text().replace("pub fn blocks_for(tokens: usize, block_tokens: usize) -> Result<usize, SpecError> {",
                                          "pub fn blocks_for(tokens: usize, block_tokens: usize) -> Result<usize, SpecError> {\n    let x: u32 = \"nope\";", 1)
    assert broken != REF_SPEC.read_text()
    home = workspace_with(started, tmp_path, broken)
    code, rep = report(home)
    assert code == 1
    line = broken.splitlines().index('    let x: u32 = "nope";') + 1
    for t in rep["tests"]:
        assert t["outcome"] == "error" and f"crates/tl-engine/src/spec.rs:{line}: mismatched types" in t["message"], t["message"]
    assert "expected `u32`" in rep["load_error"]


def test_a_panic_is_reported_with_its_file_line_and_source(started, tmp_path):
    src = REF_SPEC.read_text()
    body = re.search(r"pub fn blocks_for\(tokens: usize, block_tokens: usize\) -> Result<usize, SpecError> \{\n", src)
    panicking = src[:body.end()] + "    let zero = block_tokens - block_tokens;\n    let _ = tokens / zero;\n" + src[body.end():]
    home = workspace_with(started, tmp_path, panicking)
    code, rep = report(home)
    assert code == 1
    t = by_name(rep)["rollback_hand_example"]
    line = panicking.splitlines().index("    let _ = tokens / zero;") + 1
    assert t["outcome"] == "error" and "panicked" in t["message"] and "divide by zero" in t["message"], t["message"]
    assert t["message"].startswith("rollback(&mut pool, &mut vec![0, 1, 2], 5) panicked at crates/tl-engine/src/spec.rs:"), t["message"]
    assert f"crates/tl-engine/src/spec.rs:{line}" in t["message"] and "let _ = tokens / zero;" in t["message"]
    assert by_name(rep)["hand_example_prompt_lookup"]["outcome"] == "pass"  # the rest of the crate still works


@pytest.mark.slow(s=35)
def test_a_loop_is_a_timeout_and_the_other_tests_still_run(started, tmp_path):
    src = REF_SPEC.read_text()
    body = re.search(r"pub fn prompt_lookup\(ctx: &\[u32\], k: usize, max_ngram: usize, min_ngram: usize\) -> Result<Vec<u32>, SpecError> \{\n", src)
    # loops on the chapter's section-3 context only: one call of one test, so the check stays short
    looping = src[:body.end()] + "    if ctx == [5, 6, 7, 8, 5, 6] { loop { std::hint::spin_loop(); } }\n" + src[body.end():]
    home = workspace_with(started, tmp_path, looping)
    code, rep = report(home)
    tests = by_name(rep)
    assert code == 1 and tests["hand_example_prompt_lookup"]["outcome"] == "timeout"
    assert "prompt_lookup" in tests["hand_example_prompt_lookup"]["message"], tests["hand_example_prompt_lookup"]["message"]
    assert tests["rollback_hand_example"]["outcome"] == "pass" and tests["verify_matches_python_l8_6"]["outcome"] == "pass"
    timed_out = {n for n, t in tests.items() if t["outcome"] != "pass"}  # the tests that call it on that context
    assert timed_out == {"hand_example_prompt_lookup", "prompt_lookup_matches_python_l8_6", "config_parses_runtime_values"}, \
        {n: tests[n]["outcome"] for n in timed_out}  # each a timeout; a fresh worker serves every other test
    assert all(tests[n]["outcome"] == "timeout" for n in timed_out)


def test_a_hostile_build_gains_nothing(started, tmp_path):
    """A build script, a cargo config naming a wrapper and include_str! of the golden file: none runs or reads."""
    marker = tmp_path / "ran"
    golden = CH.golden.resolve()
    spec = REF_SPEC.read_text() + f'\n#[allow(dead_code)]\nconst STOLEN: &str = include_str!("{golden}");\n'
    home = workspace_with(started, tmp_path, spec)
    crate = home / "rust/crates/tl-engine"
    (crate / "build.rs").write_text(f'fn main() {{ std::fs::write("{marker}", "build.rs").unwrap(); }}\n')
    (crate / "Cargo.toml").write_text((crate / "Cargo.toml").read_text().replace("build = false", 'build = "build.rs"'))
    wrapper = tmp_path / "wrapper.sh"
    wrapper.write_text(f'#!/bin/sh\necho wrapper >> "{marker}"\nexec "$@"\n')
    wrapper.chmod(0o755)
    for d in (home / "rust/.cargo", home / ".cargo"):
        d.mkdir(exist_ok=True)
        (d / "config.toml").write_text(f'[build]\nrustc-wrapper = "{wrapper}"\n')
    code, rep = report(home)
    assert not marker.exists(), f"student code ran at build time: {marker.read_text()}"
    assert code == 1 and all(t["outcome"] == "error" for t in rep["tests"])
    assert "couldn't read" in rep["load_error"] or "No such file" in rep["load_error"], rep["load_error"]
    # without the include, the same workspace (build.rs and wrapper still there) builds the judge's way and passes
    (crate / "src/spec.rs").write_text(REF_SPEC.read_text())
    code, rep = report(home)
    assert code == 0 and not marker.exists()


def test_ol_diff_works_on_a_rust_submission_and_prints_a_case_as_a_rust_test(tmp_path):
    r = ol("diff", "L10.8", "--submission", "reference", "--lang", "rust", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = ol("diff", "L10.8", "--case", "v050", "--lang", "rust", cwd=tmp_path)
    assert r.returncode == 0 and "fn golden_v050()" in r.stdout and "Pcg32::from_seed(" in r.stdout


def test_a_pasted_golden_case_compiles_and_passes_in_the_students_crate(started, tmp_path):
    home = workspace_with(started, tmp_path, REF_SPEC.read_text())
    cases = "\n".join(ol("diff", "L10.8", "--case", c, "--lang", "rust", cwd=home).stdout for c in ("v050", "pl000", "ng010", "r000"))
    spec = home / "rust/crates/tl-engine/src/spec.rs"
    spec.write_text(spec.read_text() + "\n" + cases)
    r = subprocess.run(["cargo", "test", "--offline", "-q", "-p", "tl-engine", "--lib", "golden_"], cwd=home / "rust",
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and re.search(r"test result: ok\. ([4-9]|\d\d+) passed; 0 failed", r.stdout), r.stdout[-3000:] + r.stderr[-3000:]


def test_the_given_modules_are_always_the_courses(started, tmp_path):
    """A student's runner_target.rs or model.rs (edited, or written by an older `ol start`) is not built: the
    judge compiles the course's copies, so neither a stale copy nor an edit changes what the tests run on."""
    home = workspace_with(started, tmp_path, REF_SPEC.read_text())
    src = home / "rust/crates/tl-engine/src"
    (src / "runner_target.rs").write_text("this is not the course's runner target\n")
    (src / "model.rs").write_text("pub fn nothing() {}\n")
    code, rep = report(home)
    assert code == 0, [(t["name"], t["message"][:200]) for t in rep["tests"] if t["outcome"] != "pass"]


def test_the_grading_template_holds_no_answer(tmp_path, monkeypatch):
    """`ol grade`'s template (the build every Rust submission starts from, visible to its build) is made from the
    contract's stub, not the reference's spec.rs, and keeps no built worker: a submission that embeds the
    template's worker binary does not compile, and one that reads the template's spec.rs gets the stub."""
    from harness.sandbox.confine import choose
    from harness.languages.rust import BuildFailed, FIXED_TARGET, FIXED_WS, build, prebuild_template
    from harness.subjects.open import copy_reference

    mode = choose()
    if mode.name != "bwrap":
        pytest.skip("the template is used in bwrap mode only")
    template = prebuild_template(CH, tmp_path / "template", mode)
    assert (template / "ws/crates/tl-engine/src/spec.rs").read_text() == (REPO / "spec/rust/spec.rs").read_text()
    built = [p for p in (template / "target").rglob("*") if p.is_file() and p.name.startswith(("tl-worker", "tl_worker-"))
             and p.suffix != ".d"]  # a .d file is dep-info: the names of the sources, no code
    assert not built, built
    monkeypatch.setenv("OL_RUST_TEMPLATE", str(template))
    sub = copy_reference(CH, tmp_path / "ol-impl-sub", "rust")
    spec = sub / "crates/tl-engine/src/spec.rs"
    spec.write_text(spec.read_text() + f'\n#[allow(dead_code)]\nstatic STOLEN: &[u8] = include_bytes!("{FIXED_TARGET}/debug/tl-worker");\n')
    with pytest.raises(BuildFailed, match="couldn't read"):
        build(CH, sub, tmp_path / "b1", mode, cache=False)
    spec.write_text(REF_SPEC.read_text() + f'\n#[allow(dead_code)]\nstatic SEEN: &str = include_str!("{FIXED_WS}/crates/tl-engine/src/spec.rs");\n')
    assert (build(CH, sub, tmp_path / "b2", mode, cache=False) / "bin/tl-worker").is_file()  # its own spec.rs: nothing gained


def test_a_machine_keeps_one_grading_template_per_harness_version(tmp_path, monkeypatch):
    """The template is built once per machine and harness version (every later run, and each Dask worker of
    the machine, starts from it); another version builds its own; only the newest few are kept; a build that
    fails leaves nothing a later run would take for a template."""
    from harness.languages import rust
    from harness.sandbox.confine import choose

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    built = []

    def fake_build(chapter, dest, mode):  # the real one is test_the_grading_template_holds_no_answer's
        if "broken" in built:
            raise RuntimeError("the build failed")
        dest.mkdir(parents=True)
        (dest / "made").write_text(str(len(built)))
        built.append(dest)
        return dest

    monkeypatch.setattr(rust, "prebuild_template", fake_build)
    mode = choose()
    first = rust.machine_template(CH, mode, "digest-1")
    again = rust.machine_template(CH, mode, "digest-1")
    assert again == first and len(built) == 1 and (first / "made").read_text() == "0", (first, again, built)
    other = rust.machine_template(CH, mode, "digest-2")
    assert other != first and len(built) == 2
    for i in range(3, 3 + rust.TEMPLATES_KEPT):
        rust.machine_template(CH, mode, f"digest-{i}")
    root = first.parent
    kept = sorted(d.name for d in root.iterdir())
    assert len(kept) == rust.TEMPLATES_KEPT and first.name not in kept, kept
    built.append("broken")
    with pytest.raises(RuntimeError, match="the build failed"):
        rust.machine_template(CH, mode, "digest-broken")
    assert sorted(d.name for d in root.iterdir()) == kept, "a failed build left a folder behind"
