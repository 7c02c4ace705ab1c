"""`ol similar`: pairs of submissions whose code is unusually alike, found by copydetect (MOSS-style winnowing).

What is compared: one document per submission, every source file of its package (a file with the suffix of the
chapter's file), found by the one layout function and read through harness.subjects.upload's walk, the chapter's
file first, then the others by path; within each language only. What is left out: the code every student got, as
copydetect's boilerplate (the stub `ol start` writes, the given files and the earlier chapters' files, `deps`); a
given file of the submission, and a file byte for byte the course's. An entry that cannot be read, whatever the
error, is named in `skipped` with the reason; the rest of its class is compared.

How copydetect measures (its defaults, kept): Pygments tokens, filtered (every name becomes V, F or O, every string
S, comments and whitespace dropped: renaming, rewording comments and reformatting change nothing); every substring
of NOISE filtered characters is hashed (window 1: the scores do not depend on the per-process hash seed); a side's
score is the share of its fingerprinted code found in the other. A pair is flagged when either side's reaches
THRESHOLD. It misses code reordered in pieces shorter than NOISE, filler interleaved, a loop rewritten as a
comprehension, a translation between languages; and two students who copied one outside source are flagged as a
copy and its original are: it finds alike code, never who wrote it. A flagged pair is a reason to read both, not
a verdict. Library code: returns data.
"""

from __future__ import annotations

import io
from importlib.metadata import version
from itertools import combinations
from pathlib import Path

import numpy as np

from ..kernel.errors import BadSubmission
from ..subjects import upload
from ..subjects.upload import submissions_in
from ..languages.stub import make_stub
from ..subjects.layout import detect

NOISE = 25  # copydetect's noise threshold (its default): the shortest match counted, in filtered characters
THRESHOLD = 0.5  # a pair is flagged when either side has at least this share of its code in the other
FILE_CAP = 512 * 1024  # bytes of one source file compared: source is kilobytes, a bigger one is left out (named)
MAX_PAIRS = 100  # flagged pairs kept with their code (the most alike first); the rest counted


def detector_name() -> str:
    """The installed detector and its version, read without importing it."""
    return f"copydetect {version('copydetect')}"


def boilerplate(chapter, lang: str) -> list[tuple[str, str]]:
    """(name, text) of the code every student of `lang` got: the stub `ol start` writes, the given files and the
    earlier chapters' files the reference supplies."""
    spec = chapter.language(lang)
    course = [(f, (spec.reference / f).read_text(encoding="utf-8")) for f in dict.fromkeys((*spec.given, *spec.deps))
              if (spec.reference / f).is_file()]
    stub = make_stub(chapter, lang) if spec.contract.suffix == ".pyi" else spec.contract.read_text(encoding="utf-8")
    return [(Path(spec.student_file).name, stub), *course]


def sources(chapter, submissions_dir: Path, only: set[str] | None = None) -> tuple[list[dict], list[dict]]:
    """Each submission's own source files as one document, and the entries not compared, with why (an entry that
    cannot be read, whatever the error); `only`: these entries alone (`ol grade` leaves out those it rejected)."""
    docs, skipped = [], []
    for path in submissions_in(chapter, submissions_dir):
        if only is not None and path.name not in only:
            continue
        try:
            sub = detect(chapter, str(path))
            try:
                doc = _document(chapter, sub)
            finally:
                sub.close()
        except BadSubmission as e:
            doc = f"no submission: {e}"
        except Exception as e:  # noqa: BLE001 -- ol's failure on this one entry: named, the class still compared
            doc = f"ol could not read it ({type(e).__name__}: {e}); compare again once the cause is fixed"
        if isinstance(doc, str):
            skipped.append({"name": path.name, "why": doc})
        else:
            docs.append({"name": path.name, **doc})
    return docs, skipped


def own_sources(chapter, sub) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """([(path in the submission, text)] of every source file the submission adds, the chapter's file first), and the
    files left out, with why (over FILE_CAP, not UTF-8: neither compiles nor imports); a file at a given path, or byte
    for byte the course's, is not the submission's own."""
    spec = chapter.language(sub.language)
    suffix = Path(spec.student_file).suffix
    found, left_out = [], {}
    with upload.reading(str(sub.origin)):  # whatever reading it raises: the entry is named, not compared
        for rel, path, folder, _ in upload.walk(sub.root / spec.package, spec.package):
            if folder or not rel.endswith(suffix) or rel in spec.given:
                continue
            if path.stat().st_size > FILE_CAP:
                left_out[rel] = f"over {FILE_CAP // 1024} KiB"
                continue
            data = path.read_bytes()
            course = spec.reference / rel
            if rel in spec.deps and course.is_file() and course.read_bytes() == data:
                continue
            try:
                found.append((rel, data.decode("utf-8")))
            except UnicodeDecodeError:
                left_out[rel] = "not UTF-8 text"
    found.sort(key=lambda f: (f[0] != spec.student_file, f[0]))
    return found, left_out


def _document(chapter, sub) -> dict | str:
    """{"language", "file", "code"} of what the submission adds (own_sources: one text, each file headed by a
    comment naming it), or why it cannot be compared."""
    spec = chapter.language(sub.language)
    files, left_out = own_sources(chapter, sub)
    if spec.student_file in left_out:
        return f"{spec.student_file} is {left_out[spec.student_file]}"
    if not files:
        return f"no source file of its own in {spec.package}/"
    mark = "//" if Path(spec.student_file).suffix == ".rs" else "#"
    code = "\n".join(f"{mark} ---- {rel}\n{text}" if len(files) > 1 else text for rel, text in files)
    label = ", ".join(rel for rel, _ in files)
    if left_out:
        label += " (left out: " + ", ".join(f"{rel}, {why}" for rel, why in left_out.items()) + ")"
    return {"language": sub.language, "file": label, "code": code}


def _detector():
    """copydetect's fingerprint and comparison, imported on first use: copydetect and its lexers cost 0.5 s, which a
    resumed `ol grade` reusing its kept result (harness.staff.similar_cache) never needs."""
    from copydetect import CodeFingerprint, compare_files

    return CodeFingerprint, compare_files


def _fingerprint(name: str, code: str, boiler=None):
    fingerprint, _ = _detector()
    return fingerprint(name, NOISE, 1, boilerplate=boiler, fp=io.StringIO(code))


def similar(chapter, submissions_dir: Path, threshold: float = THRESHOLD, only: set[str] | None = None) -> dict:
    """The class's flagged pairs, the most alike first, each with both sides' code and matching character ranges
    (`only`: of these entries alone)."""
    docs, skipped = sources(chapter, submissions_dir, only)
    _, compare_files = _detector()
    pairs, compared, by_language = [], 0, {}
    for lang in chapter.languages:
        mine = [d for d in docs if d["language"] == lang]
        if not mine:
            continue
        ext = Path(chapter.language(lang).student_file).name
        boiler = np.unique(np.array([h for name, text in boilerplate(chapter, lang)
                                     for h in _fingerprint(name, text).hashes], dtype=np.int64))
        prints = []
        for d in mine:
            fp = _fingerprint(ext, d["code"], boiler)
            if fp.token_coverage == 0:
                skipped.append({"name": d["name"], "why": "nothing but the code every student got"})
            else:
                prints.append((d, fp))
        by_language[lang] = len(prints)
        compared += len(prints)
        for (a, fa), (b, fb) in combinations(prints, 2):
            overlap, scores, slices = compare_files(fa, fb)
            if overlap and max(scores) >= threshold:
                pairs.append(_pair(lang, a, b, scores, slices, int(overlap)))
    pairs.sort(key=lambda p: (-max(p["scores"]), p["names"]))
    return {"detector": detector_name(), "noise": NOISE, "threshold": threshold,
            "compared": compared, "by_language": by_language, "given": True, "skipped": sorted(skipped, key=lambda s: s["name"]),
            "pairs": pairs[:MAX_PAIRS], "more": max(0, len(pairs) - MAX_PAIRS)}


def _pair(lang: str, a: dict, b: dict, scores, slices, overlap: int) -> dict:
    return {"names": [a["name"], b["name"]], "language": lang, "files": [a["file"], b["file"]],
            "scores": [round(float(s), 4) for s in scores], "overlap": overlap,
            "sides": [{"code": d["code"], "slices": [[int(s), int(e)] for s, e in zip(*sl)]} for d, sl in zip((a, b), slices)]}
