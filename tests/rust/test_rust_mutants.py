"""Four of L10.8's Rust mutants (chapters/L10_8/mutants/rust/) through `ol check --lang rust`: each fails its
`must_fail` test with the message its Python twin gets, and the report's pitfall hints name it. One per part of
the chapter (prompt lookup, the sampled verifier, the bonus token, KV rollback); `ol mutants --lang rust` runs all."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.languages import rust
from harness.kernel.paths import REPO
from harness.registry import load_chapter

pytestmark = [pytest.mark.slow, pytest.mark.skipif(rust.missing() is not None, reason="needs cargo and rustc")]
CH = load_chapter("L10.8")


def symptom(message: str) -> tuple:
    """What a message says, whatever the language spells its values in (chapters.L10_8.spelling: `{'released': 2,
    'table': [0]}` is `Ok(2), the table left vec![0]` in Rust): its lead up to the first colon, and its numbers in
    order."""
    return message.split(":", 1)[0], re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", message)


def report(cwd: Path, *args) -> dict:
    r = subprocess.run([str(REPO / "ol"), "check", "L10.8", *args, "--json", "-"], cwd=cwd, capture_output=True,
                       text=True, timeout=600, env=dict(os.environ))
    assert r.returncode == 1, r.stderr[-3000:]  # a mutant fails some test
    return json.loads(r.stdout)


@pytest.mark.parametrize("mid", ["s01", "s07", "s08", "s13"])
def test_a_rust_mutant_fails_its_test_as_its_python_twin_does(mid, tmp_path):
    m = CH.mutant(mid)
    assert "rust" in m.patches
    rust = report(tmp_path, "--submission", f"mutant:{mid}", "--lang", "rust")
    got = {t["name"]: t for t in rust["tests"]}[m.must_fail]
    assert got["outcome"] == "fail", got
    python = {t["name"]: t for t in report(tmp_path, "--submission", f"mutant:{mid}")["tests"]}[m.must_fail]
    assert symptom(got["message"]) == symptom(python["message"]), "the Rust port should show the same symptom, in Rust"
    assert "{'" not in got["message"] and "True" not in got["message"], got["message"]  # in Rust's spelling
    assert f"{mid}: {m.pitfall} ({m.symptom})" in got["pitfalls"], got["pitfalls"]
    assert mid in [x["id"] for x in rust["pitfall_matches"]], rust["pitfall_matches"]
