"""A Rust student reads Rust in every message (issue 38, item 6): real Rust mutants, each the twin of a Python one,
through `ol check --lang rust --json -`; no failing test's message holds a Python-only spelling (True/False, a dict
`{'`, a keyword argument in a call, `SpecConfig.parse(`, `Pcg32.from_seed(`, spec.pyi, nan), and the Python twin's
run fails the same tests, in Python's spelling. The mutants reach the property checks of each part (the drafts'
refusals, propose, the step, the verifier, the sampler's p), the hand examples' own messages and the pool's steps."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from harness.languages import rust
from harness.kernel.paths import REPO

pytestmark = [pytest.mark.slow, pytest.mark.skipif(rust.missing() is not None, reason="needs cargo and rustc")]

PYTHON_ONLY = {
    "True/False": re.compile(r"\b(True|False)\b"),
    "a dict": re.compile(r"\{'"),
    "a keyword argument": re.compile(r"\w\((?:[^()]*, )?[a-z_]+=[^=]"),
    "SpecConfig.parse(": re.compile(r"SpecConfig\.parse"),
    "Pcg32.from_seed(": re.compile(r"Pcg32\.from_seed"),
    "spec.pyi": re.compile(r"spec\.pyi"),
    "nan": re.compile(r"\bnan\b"),
}
RUST_ONLY = re.compile(r"&\[|vec!\[|SamplingParams \{|SpecConfig \{|::|\btrue\b|\bfalse\b|spec\.rs")


def failing(mid: str, *lang: str) -> dict[str, str]:
    r = subprocess.run([str(REPO / "ol"), "check", "L10.8", "--submission", f"mutant:{mid}", *lang, "--json", "-"],
                       capture_output=True, text=True, timeout=900, env=dict(os.environ), cwd=Path(REPO))
    assert r.returncode == 1, r.stderr[-3000:]  # a mutant fails some test
    return {t["name"]: t["message"] for t in json.loads(r.stdout)["tests"] if t["outcome"] != "pass"}


def python_spellings(message: str) -> list[str]:
    return [name for name, pattern in PYTHON_ONLY.items() if pattern.search(message)]


@pytest.mark.parametrize("mid", ["x04", "x09", "x13", "x16", "x22", "x29", "x31", "x33", "x35", "x18"])
def test_a_rust_mutant_reads_rust_where_its_python_twin_reads_python(mid):
    rust_fails, python_fails = failing(mid, "--lang", "rust"), failing(mid)
    assert rust_fails, f"{mid} passes in Rust"
    assert set(rust_fails) == set(python_fails), "the twins should fail the same tests"
    for test, message in rust_fails.items():
        assert not python_spellings(message), f"{mid} {test}: Python spelling {python_spellings(message)} in\n{message}"
    python_side = " ".join(python_fails.values())
    assert not RUST_ONLY.search(python_side), f"{mid}: Rust spelling in the Python run:\n{python_side}"
    rust_side = " ".join(rust_fails.values())
    assert python_spellings(python_side) == [] or RUST_ONLY.search(rust_side), (mid, python_side, rust_side)


@pytest.mark.parametrize("mid, only", [("x04", "prompt_lookup"), ("s13", "rollback"), ("x16", "verify")])
def test_ol_diff_of_a_rust_mutant_reads_rust(mid, only):
    """`ol diff`'s table (a case's inputs, expected and got) and its property failures, for a Rust port."""
    r = subprocess.run([str(REPO / "ol"), "diff", "L10.8", "--submission", f"mutant:{mid}", "--lang", "rust", "--only", only],
                       capture_output=True, text=True, timeout=900, env=dict(os.environ), cwd=Path(REPO))
    assert r.returncode == 1 and ("property check failed" in r.stdout or "0 of" not in r.stdout), r.stdout[-3000:] + r.stderr
    assert not python_spellings(r.stdout), f"{mid}: Python spelling {python_spellings(r.stdout)} in\n{r.stdout[-3000:]}"
