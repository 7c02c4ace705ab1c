"""The `ol` command line, run as a student or staff member runs it: exit codes, reports, stubs, bundles."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from harness.registry import load_chapter

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "harness" / "schemas"
N = len(load_chapter("L10.8").tests)  # the chapter's test count: its table says, not this file


def ol(*args, cwd=None, timeout=600, env=None):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], cwd=cwd or REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def test_unknown_chapter_is_a_usage_error():
    r = ol("check", "L99.9", "--submission", "reference")
    assert r.returncode == 2, r.stderr
    assert "unknown chapter 'L99.9'" in r.stderr and "L10.8" in r.stderr and "Traceback" not in r.stderr


def test_missing_submission_path_is_a_usage_error(tmp_path):
    r = ol("check", "L10.8", "--submission", tmp_path / "nope")
    assert r.returncode == 2 and "no submission at" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "empty").mkdir()
    r = ol("check", "L10.8", "--submission", tmp_path / "empty")
    assert r.returncode == 2 and "is not a submission of L10.8" in r.stderr and "tinyllm/" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr and "passed" not in r.stdout, r.stderr
    r = ol("diff", "L10.8", "--submission", tmp_path / "empty")
    assert r.returncode == 2 and "is not a submission of L10.8" in r.stderr.splitlines()[0] and "Traceback" not in r.stderr


def test_bad_fresh_seed_is_a_usage_error():
    r = ol("check", "L10.8", "--submission", "reference", "--fresh", "banana")
    assert r.returncode == 2 and "--fresh takes an integer seed" in r.stderr


@pytest.mark.slow
def test_reference_passes_all_with_valid_json_and_junit(tmp_path):
    r = ol("check", "L10.8", "--submission", "reference", "--json", tmp_path / "r.json", "--junit", tmp_path / "r.xml")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads((tmp_path / "r.json").read_text())
    jsonschema.validate(report, json.loads((SCHEMAS / "check_report.schema.json").read_text()))
    assert report["summary"] == {**report["summary"], "passed": N, "failed": 0, "total": N}
    suite = ET.parse(tmp_path / "r.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    assert int(suite.get("tests")) == N and int(suite.get("failures")) == 0 and int(suite.get("errors")) == 0
    assert report["sandbox"] == "in-process" and suite.find("properties/property[@name='sandbox']").get("value") == "in-process"


@pytest.mark.slow
def test_fresh_stub_fails_every_test_with_not_implemented(tmp_path):
    r = ol("start", "L10.8", tmp_path / "ws")
    assert r.returncode == 0, r.stderr
    assert ol("start", "L10.8", tmp_path / "ws").returncode == 2, "start must refuse to overwrite"
    r = ol("check", "L10.8", "--submission", tmp_path / "ws", "--ref-deps", "--json", tmp_path / "s.json", timeout=900)
    assert r.returncode == 1
    report = json.loads((tmp_path / "s.json").read_text())
    assert report["summary"]["passed"] == 0 and report["summary"]["total"] == N
    for t in report["tests"]:
        assert "not implemented" in t["message"], f"{t['name']}: {t['message'][:300]}"


@pytest.mark.slow(s=18)
def test_fixtures_check_passes_and_catches_a_one_byte_edit(tmp_path):
    r = ol("fixtures", "L10.8", "--check")
    assert r.returncode == 0, r.stderr
    copy = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(copy)], check=True)
    golden = copy / "chapters" / "L10_8" / "fixtures" / "spec_golden.json"
    if not golden.exists():
        pytest.fail("the golden file is not committed")
    data = bytearray(golden.read_bytes())
    i = data.index(b'"expect"') + 20
    data[i] = ord("7") if data[i] != ord("7") else ord("8")
    golden.write_bytes(bytes(data))
    r = subprocess.run([sys.executable, "-m", "harness.cli", "fixtures", "L10.8", "--check"], cwd=copy, capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(copy)})
    assert r.returncode == 1 and "differ" in r.stderr, r.stderr


@pytest.mark.parametrize("mutant, section, count", [("s13", "rollback", "7 of 12"), ("s07", "verify", "62 of 128"),
                                                    ("s10", "generate", "12 of 18")])
def test_diff_shows_every_golden_section_a_pitfall_breaks(tmp_path, mutant, section, count):
    r = ol("diff", "L10.8", "--submission", f"mutant:{mutant}", "--json", tmp_path / "d.json")
    assert r.returncode == 1 and f"{section}: {count} cases diverge" in r.stdout, r.stdout[-2000:] + r.stderr
    data = json.loads((tmp_path / "d.json").read_text())
    assert set(data["sections"]) == {"verify", "prompt_lookup", "ngram", "generate", "rollback"}
    assert data["by_tag"].get(f"shows:{mutant}", 0) >= int(count.split()[0]), data["by_tag"]


def test_diff_of_the_reference_finds_nothing():
    r = ol("diff", "L10.8", "--submission", "reference")
    assert r.returncode == 0 and "0 divergent cases" in r.stdout, r.stdout[-2000:]
