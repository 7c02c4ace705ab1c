"""The Rust contract and its reference agree: every line of the stub (spec/rust/spec.rs), except its todo!()
bodies and its allow(unused_variables), is in the reference's spec.rs, in order; the stub's pub items are
exactly the reference's; the chapter's [language.rust] table names files that exist."""

import re

import pytest

from harness.kernel.paths import REPO
from harness.registry import load_chapter

STUB = REPO / "spec/rust/spec.rs"
REF = REPO / "reference/rust/crates/tl-engine/src/spec.rs"
PUB = re.compile(r"^\s*pub (?:fn|struct|enum|trait|const) (\w+)", re.M)


def _contract_lines() -> list[str]:
    return [line for line in STUB.read_text().splitlines()
            if line.strip() and "todo!(" not in line and "allow(unused_variables)" not in line]


def test_the_reference_keeps_every_line_of_the_contract_in_order():
    ref = REF.read_text().splitlines()
    at = 0
    for line in _contract_lines():
        try:
            at = ref.index(line, at) + 1
        except ValueError:
            raise AssertionError(f"the Rust reference lacks (or reorders) the contract's line: {line!r}") from None


def test_the_stub_and_the_reference_declare_the_same_pub_items():
    ref_text = REF.read_text().split("#[cfg(test)]")[0]
    assert PUB.findall(STUB.read_text()) == PUB.findall(ref_text)


def test_every_body_of_the_stub_is_a_todo_naming_its_function():
    todos = re.findall(r'todo!\("([\w:]+)"\)', STUB.read_text())
    fns = [f for f in PUB.findall(STUB.read_text()) if f not in ("SpecError", "Draft", "SpecConfig", "Verified", "Target",
                                                                  "SpecStats", "FinishReason", "Generated", "MAX_K", "MAX_NGRAM",
                                                                  "DEFAULT_MAX_NGRAM", "DEFAULT_MIN_NGRAM", "name", "parse", "generate")]
    assert [t.split("::")[-1] for t in todos] == fns


def test_the_rust_table_names_files_that_exist():
    lang = load_chapter("L10.8").language("rust")
    assert lang.contract == STUB.resolve()
    for rel in (*lang.deps, *lang.student_files):
        assert (lang.reference / rel).is_file(), rel


def test_without_cargo_a_rust_check_says_what_to_install(tmp_path):
    """No rustc on PATH (nor in ~/.cargo): exit 2 before any test, naming what to install."""
    import os
    import subprocess

    ol = [str(REPO / "ol")]
    assert subprocess.run([*ol, "start", "L10.8", "--lang", "rust"], cwd=tmp_path, capture_output=True).returncode == 0
    env = {**os.environ, "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    if any(os.access(os.path.join(d, "rustc"), os.X_OK) for d in ("/usr/bin", "/bin")):
        import pytest
        pytest.skip("this machine has a system rustc")
    r = subprocess.run([*ol, "check", "L10.8"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "needs cargo and rustc" in r.stderr and "apt install cargo rustc" in r.stderr, r.stderr


@pytest.mark.slow
def test_ol_check_in_this_repository_shows_the_demo():
    """The repository's own rust/ holds the course's crates, not a workspace: the README's first command
    (`./ol check L10.8` in a fresh clone, typed at a terminal) still shows the demo."""
    from tests.harness.tty_kit import at_a_terminal

    code, text = at_a_terminal([str(REPO / "ol"), "check", "L10.8"], cwd=REPO, timeout=600)
    assert code == 0 and "No submission at ./" in text and "the sample's bug is caught" in text, text[-2000:]
