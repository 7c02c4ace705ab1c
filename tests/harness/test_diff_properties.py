"""`ol diff` shows the property checks too (issue 38, item 6): a mutant whose golden cases all agree but whose
property check fails (x04: prompt_lookup accepts min_ngram 0 when k is 0) gets, under `--only prompt_lookup`, the
check's smallest input and the test it fails, exit 1; under `--only ngram`, whose cases and checks agree, a plain
sentence that the check fails elsewhere and which test; the reference, neither. `ol diff` once exited 0 saying
"0 of 150 cases diverge" while `ol check` failed a property of that very function."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def ol(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow(s=20)
def test_the_selected_functions_property_failure_is_shown_with_its_smallest_input(tmp_path):
    r = ol("diff", "L10.8", "--submission", "mutant:x04", "--only", "prompt_lookup", "--json", tmp_path / "d.json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "prompt_lookup: 0 of 150 cases diverge" in r.stdout, r.stdout  # the golden cases agree
    assert "property check failed (prompt_lookup, test hand_example_prompt_lookup): smallest input where yours differs: " \
           "prompt_lookup([" in r.stdout, r.stdout
    data = json.loads((tmp_path / "d.json").read_text())
    assert [(p["function"], p["test"]) for p in data["properties"]] == [("prompt_lookup", "hand_example_prompt_lookup")]
    check = subprocess.run([sys.executable, "-m", "harness.cli", "check", "L10.8", "--submission", "mutant:x04",
                            "--test", "hand_example_prompt_lookup", "--json", "-"], cwd=REPO, capture_output=True, text=True,
                           timeout=600)
    assert [t["outcome"] for t in json.loads(check.stdout)["tests"]] == ["fail"], check.stdout[-2000:]  # ol check agrees


@pytest.mark.slow(s=20)
def test_a_check_failing_elsewhere_is_said_plainly_naming_the_test():
    r = ol("diff", "L10.8", "--submission", "mutant:x04", "--only", "ngram")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "ngram: 0 of 40 cases diverge" in r.stdout and "property check failed" not in r.stdout, r.stdout
    assert "the check fails elsewhere: hand_example_prompt_lookup (prompt_lookup)" in " ".join(r.stdout.split()), r.stdout


@pytest.mark.slow(s=20)
def test_the_reference_has_no_property_failure():
    r = ol("diff", "L10.8", "--submission", "reference", "--only", "verify_draft")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every property check agrees" in " ".join(r.stdout.split()) and "property check failed" not in r.stdout, r.stdout


SEARCH_STORAGE = """
import os, sys
from harness.pack import differential
differential._storage()
where = os.environ["HYPOTHESIS_STORAGE_DIRECTORY"]
print(where)
if os.fork() == 0:  # a child forked after the search: it exits normally, the folder is its parent's
    sys.exit(0)
os.wait()
print(os.path.isdir(where))
"""


def test_a_search_storage_folder_made_outside_the_cache_is_removed_when_its_maker_exits(tmp_path):
    """A refused cache folder (ol's hypothesis folder open to others, as Hypothesis itself makes it) sends the
    search's storage to a folder of TMPDIR: it goes when the process that made it exits, not when a child does."""
    hypothesis = tmp_path / "xdg" / "ol" / "hypothesis"
    hypothesis.mkdir(parents=True)
    hypothesis.chmod(0o755)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "HYPOTHESIS_STORAGE_DIRECTORY"}
    r = subprocess.run([sys.executable, "-c", SEARCH_STORAGE], cwd=REPO, capture_output=True, text=True, timeout=60,
                       env={**env, "XDG_CACHE_HOME": str(tmp_path / "xdg"), "TMPDIR": str(scratch)})
    assert r.returncode == 0, r.stderr
    where, alive_after_child = r.stdout.split()
    assert Path(where).parent == scratch, "the refused cache folder is not used"
    assert alive_after_child == "True", "a forked child's exit must not remove its parent's folder"
    assert not list(scratch.iterdir()), f"left behind: {list(scratch.iterdir())}"
