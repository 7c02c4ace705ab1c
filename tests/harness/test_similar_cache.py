"""The class's similarity kept in the results directory (harness.staff.similar_cache, issue 28): reused while the
class's code, the code every student got and the detector are as they were; compared again, and the same as a
fresh comparison, when any of them changed; never trusted when its files are corrupt or edited (said in a note).
Observed through a counter of the comparisons made and the kept file's inode and mtime, never the clock."""

import json
import shutil

import pytest

from harness.staff import similar as sim
from harness.staff import similar_cache as cache
from harness.grading.class_report import SIMILARITY

from tests.harness.similar_kit import CH, write_class
from tests.harness.test_similar import flagged


@pytest.fixture
def counted(monkeypatch):
    """Every comparison the cache makes, counted (harness.staff.similar.similar, wrapped)."""
    calls = []
    real = sim.similar

    def similar(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(sim, "similar", similar)
    return calls


@pytest.fixture(scope="module")
def python_class(tmp_path_factory):
    """py-a, py-b, py-c (honest) and py-copy (py-a renamed): the Rust ones left out, for speed."""
    klass = write_class(tmp_path_factory.mktemp("similar-cache"))
    for entry in klass.glob("rs-*"):
        shutil.rmtree(entry)
    return klass


@pytest.fixture
def klass(python_class, tmp_path):
    return shutil.copytree(python_class, tmp_path / "class")


def stat(path):
    s = path.stat()
    return s.st_ino, s.st_mtime_ns


def test_a_kept_similarity_is_reused_while_nothing_changed(klass, tmp_path, counted):
    results = tmp_path / "results"
    first = cache.compute(CH, klass, results)
    assert len(counted) == 1 and flagged(first) == {frozenset({"py-a", "py-copy"})}
    before = stat(results / SIMILARITY), stat(results / cache.KEY)
    look = cache.lookup(CH, klass, results)
    assert look.found == first and look.note is None and len(counted) == 1  # no comparison made
    assert (stat(results / SIMILARITY), stat(results / cache.KEY)) == before


def fresh(klass, tmp_path, **kwargs) -> dict:
    """The similarity of `klass` compared in a results directory of its own, with nothing kept."""
    other = tmp_path / f"fresh-{len(list(tmp_path.glob('fresh-*')))}"
    return cache.compute(CH, klass, other, **kwargs)


def test_one_submission_changed_is_compared_again_and_gives_what_a_fresh_comparison_gives(klass, tmp_path, counted):
    results = tmp_path / "results"
    cache.compute(CH, klass, results)
    (klass / "py-b" / "spec.py").write_text((klass / "py-a" / "spec.py").read_text() + "\n# mine\n")  # py-b now copies py-a
    look = cache.lookup(CH, klass, results)
    assert look.found is None and look.note is None  # a changed class is no fault: compared again, silently
    again = cache.compute(CH, klass, results, key=look.key)
    assert len(counted) == 2
    want = {frozenset({"py-a", "py-copy"}), frozenset({"py-a", "py-b"}), frozenset({"py-b", "py-copy"})}
    assert flagged(again) == want and again == fresh(klass, tmp_path)
    assert cache.lookup(CH, klass, results).found == again and len(counted) == 3  # kept again under the new key


def test_a_changed_stub_or_threshold_or_class_membership_is_compared_again(klass, tmp_path, counted, monkeypatch):
    results = tmp_path / "results"
    kept = cache.compute(CH, klass, results)
    assert cache.lookup(CH, klass, results, threshold=0.3).found is None
    assert cache.lookup(CH, klass, results, only={"py-a", "py-b", "py-c"}).found is None  # py-copy rejected this time
    real = sim.boilerplate
    monkeypatch.setattr(sim, "boilerplate", lambda chapter, lang: [(n, t + "\n# one line more\n") for n, t in real(chapter, lang)])
    assert cache.lookup(CH, klass, results).found is None  # the stub every student got changed
    monkeypatch.setattr(sim, "boilerplate", lambda chapter, lang: [])  # no stub at all: its text now counts
    again = cache.compute(CH, klass, results)
    assert len(flagged(again)) == 6 and again != kept  # every pair of the four (test_similar's stub test, in Python)
    assert again == fresh(klass, tmp_path)
    monkeypatch.setattr(sim, "boilerplate", real)
    assert cache.lookup(CH, klass, results).found is None  # back to the real stub: not the result kept


@pytest.mark.parametrize("damage", ["key-not-json", "key-fields", "result-edited", "result-cut", "result-gone"])
def test_a_corrupt_or_edited_kept_file_is_never_trusted_and_is_said(klass, tmp_path, counted, damage):
    results = tmp_path / "results"
    kept = cache.compute(CH, klass, results)
    key_file, result_file = results / cache.KEY, results / SIMILARITY
    if damage == "key-not-json":
        key_file.write_text('{"format": 1, "key": ')
    elif damage == "key-fields":
        key_file.write_text(json.dumps({"format": 1, "key": ["not", "a", "string"], "result_sha256": "0"}))
    elif damage == "result-edited":  # still valid JSON, the pair taken out by hand
        result_file.write_text(json.dumps({**kept, "pairs": []}, indent=1) + "\n")
    elif damage == "result-cut":
        result_file.write_bytes(result_file.read_bytes()[:100])
    else:
        result_file.unlink()
    look = cache.lookup(CH, klass, results)
    assert look.found is None and look.note, look
    assert (cache.KEY if damage.startswith("key") else SIMILARITY) in look.note
    again = cache.compute(CH, klass, results, key=look.key)
    assert again == kept and flagged(again) == {frozenset({"py-a", "py-copy"})} and len(counted) == 2
    assert cache.lookup(CH, klass, results).found == kept  # the recomputed result is kept and trusted again


def test_a_file_changed_during_the_comparison_keeps_no_key(klass, tmp_path, monkeypatch):
    results = tmp_path / "results"
    real = sim.similar

    def similar_while_edited(*args, **kwargs):
        found = real(*args, **kwargs)
        (klass / "py-c" / "spec.py").write_text("# rewritten while the class was compared\n")
        return found

    monkeypatch.setattr(sim, "similar", similar_while_edited)
    cache.compute(CH, klass, results)
    assert (results / SIMILARITY).is_file() and not (results / cache.KEY).exists()
    look = cache.lookup(CH, klass, results)
    assert look.found is None and look.note is None


def test_an_entry_with_no_content_digest_is_compared_every_time(klass, tmp_path, counted):
    (klass / "py-c" / "link.py").symlink_to(klass / "py-a" / "spec.py")  # a link: the parcel refuses it, so no digest
    results = tmp_path / "results"
    first = cache.compute(CH, klass, results)
    assert not (results / cache.KEY).exists()
    look = cache.lookup(CH, klass, results)
    assert look.found is None and look.key is None
    assert cache.compute(CH, klass, results) == first and len(counted) == 2
