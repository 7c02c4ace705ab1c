"""`ol similar` (harness.staff.similar, copydetect): a renamed copy planted among independently written honest
submissions is found in both languages, and nothing among the honest ones; the stub and the given files count
for no pair; the examples/submissions samples (the reference plus one bug each) are found alike, as they are."""

import json
import subprocess
import sys
import zipfile
from itertools import combinations
from pathlib import Path

import pytest

from harness.kernel.paths import REPO
from harness.staff import similar as sim
from harness.cli.grade import SIMILAR_THRESHOLD

from tests.harness.similar_kit import CH, stub, write_class


def flagged(found: dict) -> set[frozenset]:
    return {frozenset(p["names"]) for p in found["pairs"]}


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    return write_class(tmp_path_factory.mktemp("similar"))


@pytest.mark.slow(s=2)
def test_the_planted_copy_is_found_in_each_language_and_no_honest_pair_is(klass):
    found = sim.similar(CH, klass)
    assert found["compared"] == 8 and found["by_language"] == {"python": 4, "rust": 4} and not found["skipped"]
    assert flagged(found) == {frozenset({"py-a", "py-copy"}), frozenset({"rs-a", "rs-copy"})}, found["pairs"]
    for p in found["pairs"]:
        assert min(p["scores"]) > 0.9, p["scores"]  # renaming and comments change nothing copydetect looks at
        for side in p["sides"]:
            assert side["slices"] and all(0 <= s < e <= len(side["code"]) for s, e in side["slices"])
        marked = "".join(p["sides"][1]["code"][s:e] for s, e in p["sides"][1]["slices"])
        assert ("while ext_len" in marked or "drafted" in marked), marked[:300]  # the copy's renamed code is what matched
    every = sim.similar(CH, klass, threshold=0.0)  # every pair with any overlap: the honest pairs' scores
    honest = [p for p in every["pairs"] if "py-copy" not in p["names"] and "rs-copy" not in p["names"]]
    assert len(honest) == 6 and max(max(p["scores"]) for p in honest) < sim.THRESHOLD, [(p["names"], p["scores"]) for p in honest]


def test_the_code_every_student_got_counts_for_no_pair(klass, monkeypatch):
    """Without the stub as boilerplate, its contract text (most of each file) makes every honest pair alike."""
    monkeypatch.setattr(sim, "boilerplate", lambda chapter, lang: [])
    found = sim.similar(CH, klass)
    assert len(flagged(found)) == 12  # every pair of the four of each language
    assert all(min(p["scores"]) > 0.6 for p in found["pairs"])


def test_an_untouched_stub_is_named_not_compared_and_a_zip_is_read(tmp_path):
    klass = tmp_path / "class"
    (klass / "lazy").mkdir(parents=True)
    (klass / "lazy" / "spec.py").write_text(stub("python"))
    (klass / "idle-rust").mkdir()
    (klass / "idle-rust" / "spec.rs").write_text(stub("rust"))
    honest = write_class(tmp_path / "honest", planted=False)
    with zipfile.ZipFile(klass / "zipped.zip", "w") as z:
        z.write(honest / "py-a" / "spec.py", "py/tinyllm/infer/spec.py")
    (klass / "py-a").mkdir()
    (klass / "py-a" / "spec.py").write_text((honest / "py-a" / "spec.py").read_text())
    (klass / "latin1").mkdir()
    (klass / "latin1" / "spec.py").write_bytes("# Jos\xe9\n".encode("latin-1") + (honest / "py-b" / "spec.py").read_bytes())
    (klass / "empty").mkdir()
    found = sim.similar(CH, klass)
    why = {s["name"]: s["why"] for s in found["skipped"]}
    assert why["lazy"] == why["idle-rust"] == "nothing but the code every student got"
    assert why["latin1"] == "tinyllm/infer/spec.py is not UTF-8 text" and why["empty"].startswith("no submission: ")
    assert flagged(found) == {frozenset({"py-a", "zipped.zip"})}


@pytest.mark.slow(s=5)
def test_the_example_samples_are_alike_as_they_are_copies_of_the_reference():
    """examples/submissions: each sample is the reference with one bug; every pair within a language is flagged."""
    found = sim.similar(CH, REPO / "examples" / "submissions")
    by_lang = {lang: sorted(n for n in (REPO / "examples" / "submissions").iterdir() if n.is_dir()
                            and n.name.startswith("rust-") == (lang == "rust")) for lang in ("python", "rust")}
    want = {frozenset({a.name, b.name}) for names in by_lang.values() for a, b in combinations(names, 2)}
    assert flagged(found) == want and all(min(p["scores"]) > 0.9 for p in found["pairs"])


@pytest.mark.slow(s=7)
def test_ol_similar_exits_1_on_a_flagged_pair_writes_escaped_html_and_the_results_file(klass, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    r = subprocess.run([sys.executable, "-m", "harness.cli", "similar", "L10.8", str(klass), "--html", str(tmp_path / "s.html"),
                        "--results-dir", str(results)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 1 and "2 pairs flagged" in r.stdout and "py-copy" in r.stdout, r.stdout + r.stderr
    html = (tmp_path / "s.html").read_text()
    assert html.count("<mark>") >= 2 and html.count("<details") == 2  # each pair's matching regions, side by side
    assert "Vec&lt;u32&gt;" in html and "Vec<u32>" not in html  # Rust's generics as text, not tags
    saved = json.loads((results / ".similarity.json").read_text())
    assert flagged(saved) == flagged(sim.similar(CH, klass))
    honest = tmp_path / "honest"
    write_class(honest, planted=False)
    r = subprocess.run([sys.executable, "-m", "harness.cli", "similar", "L10.8", str(honest / "class")], capture_output=True,
                       text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0 and "0 pairs flagged" in r.stdout, r.stdout + r.stderr


def test_the_cli_s_default_threshold_is_the_library_s():
    assert SIMILAR_THRESHOLD == sim.THRESHOLD


def test_the_side_by_side_view_keeps_every_matched_character_and_folds_long_unmatched_runs():
    from harness.render.html import CONTEXT, segments

    code = "\n".join(f"line {i}" for i in range(40))
    start, end = code.index("line 20"), code.index("line 22")
    runs = segments(code, [[start, end]])
    assert [m for _, m in runs] == [False, True, False] and runs[1][0] == code[start:end]
    before, after = runs[0][0].split("\n"), runs[2][0].split("\n")
    assert before[0] == "    ... 17 lines ..." and before[1:] == [f"line {i}" for i in range(17, 20)] + [""]
    assert after[:CONTEXT + 1] == ["line 22", "line 23", "line 24", "line 25"] and after[-1] == "    ... 14 lines ..."
    assert segments("short\ncode", [[0, 5]]) == [("short", True), ("\ncode", False)]


def test_a_long_side_is_cut_and_counted():
    from harness.render.html import SIDE_LINES, cut_lines

    runs = [("a\n" * (SIDE_LINES - 1), False), ("b\nb\nb\n", True), ("c\n" * 10, False)]
    cut = cut_lines(runs)
    assert cut[0] == runs[0] and cut[1] == ("b", True) and cut[2] == ("\n    ... 12 more lines", False)
    assert cut_lines(runs[:1]) == runs[:1]


def _reexporting(at, lang: str, found: dict) -> None:
    """A submission whose chapter file only re-exports a module of its own holding the code (issue 36, item 6): in
    Python a workspace's package, in Rust the crate folder alone; the given and earlier chapters' files as the
    reference has them."""
    from tests.harness.similar_kit import fill

    if lang == "python":
        pkg = at / "tinyllm"
        for rel in CH.language("python").deps:
            (pkg.parent / rel).parent.mkdir(parents=True, exist_ok=True)
            (pkg.parent / rel).write_bytes((REPO / "reference" / rel).read_bytes())
        (pkg / "infer" / "spec.py").write_text("from tinyllm.infer.mine import *  # noqa: F401,F403\n")
        (pkg / "infer" / "mine.py").write_text(fill(stub("python"), found, "python"))
        return
    crate = at / "tl-engine"
    (crate / "src").mkdir(parents=True)
    for rel in CH.language("rust").deps:
        (crate / "src" / Path(rel).name).write_bytes((REPO / "reference" / "rust" / rel).read_bytes())
    lib = crate / "src" / "lib.rs"
    lib.write_text(lib.read_text() + "pub mod mine;\n")
    (crate / "src" / "spec.rs").write_text("pub use crate::mine::*;\n")
    (crate / "src" / "mine.rs").write_text(fill(stub("rust"), found, "rust"))


@pytest.mark.slow(s=3)
def test_a_module_the_chapter_file_only_re_exports_is_compared_in_each_language(tmp_path):
    """Two submissions sharing a byte-identical module that `spec` only re-exports were never compared (only
    spec.py/spec.rs were read); now every source file a submission adds is, and the files the course gave are not."""
    from tests.harness.similar_kit import SAMPLES, bodies

    klass = tmp_path / "class"
    for lang, ext in (("python", "py"), ("rust", "rs")):
        for who, style in (("one", "a"), ("two", "a"), ("apart", "b")):
            _reexporting(klass / f"{ext}-{who}", lang, bodies(SAMPLES / f"{ext}_{style}.{ext}"))
    given = klass / "rs-two" / "tl-engine" / "src" / "model.rs"  # a given file of its own: never compared
    given.write_text(given.read_text() + "\npub fn extra_given_code() -> u32 { (0..10).map(|x| x * 3 + 1).sum() }\n")
    found = sim.similar(CH, klass)
    assert flagged(found) == {frozenset({"py-one", "py-two"}), frozenset({"rs-one", "rs-two"})}, \
        [(p["names"], p["scores"]) for p in found["pairs"]]
    files = {n: f for p in found["pairs"] for n, f in zip(p["names"], p["files"])}
    assert files["py-one"] == "tinyllm/infer/spec.py, tinyllm/infer/mine.py", files  # the reference's deps: not its own
    assert files["rs-two"] == "crates/tl-engine/src/spec.rs, crates/tl-engine/src/lib.rs, crates/tl-engine/src/mine.rs", files
    assert all("extra_given_code" not in side["code"] for p in found["pairs"] for side in p["sides"])
