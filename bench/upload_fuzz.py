"""Mutated zips and tars through every reader of an upload: each a verdict (accepted, or rejected with its reason),
never an internal error.

    python bench/upload_fuzz.py [--n 4000] [--seed 1] [--out F.json] [--quick]

The uploads are tests/harness/upload_fuzz_kit.py's (an honest package zipped four ways and tarred four ways, each
with one to three mutations: bit flips, truncations, wrong compression methods with LZMA and bzip2, bad headers,
huge declared sizes, links and devices, `..` and absolute names, splices). Each goes through what `ol grade` does
with an entry: the one layout function on the file (harness.subjects.layout.detect, as `ol check`, the judge
and the Gradescope bundle read it), the parcel (harness.grading.parcel.pack, unpack) and the layout of what it
unpacked (harness.grading.judge.layout_of, the task's); then the similarity over the whole class of them
(harness.staff.similar.sources: each one compared or named as skipped, none dropping the others).
Printed side by side per kind of verdict: how many, and the time per upload as a ratio of an honest zip's.
Goal (issue 36, item 2): no internal error in any reader; every rejection with a reason; the similarity names
every entry. Exit 1 when one fails. --quick: 48 uploads (CI).
"""

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.kernel.errors import BadSubmission  # noqa: E402
from harness.grading.judge import layout_of  # noqa: E402
from harness.grading.parcel import ParcelError, pack, unpack  # noqa: E402
from harness.registry import load_chapter  # noqa: E402
from harness.staff.similar import sources  # noqa: E402
from tests.harness.upload_fuzz_kit import BASES, case, verdict  # noqa: E402


def through_the_parcel(chapter, path: Path, scratch: Path) -> tuple[str, str]:
    """The upload as `ol grade` takes it: packed where the class is, unpacked and laid out where it is graded."""
    try:
        parcel = pack(path)
    except ParcelError as e:
        return "rejected", str(e)
    except Exception as e:  # noqa: BLE001 -- an internal error: what the bench looks for
        return "internal", f"pack: {type(e).__name__}: {e}"
    try:
        language, rejection = layout_of(chapter, unpack(parcel, scratch / path.name))
    except Exception as e:  # noqa: BLE001
        return "internal", f"unpack or layout: {type(e).__name__}: {e}"
    return ("rejected", rejection) if rejection is not None else ("accepted", language)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=4000, help="mutated uploads (default 4000)")
    ap.add_argument("--seed", type=int, default=1)
    add_common(ap, "upload_fuzz", "48 uploads")
    a = ap.parse_args()
    n = 48 if a.quick else a.n
    chapter = load_chapter("L10.8")
    counts = collections.Counter()
    failures, seconds = [], collections.defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="ol-fuzz-") as tmp:
        klass, scratch = Path(tmp) / "class", Path(tmp) / "scratch"
        klass.mkdir()
        scratch.mkdir()
        honest = klass / "honest.zip"
        honest.write_bytes(BASES["zip-deflate"])
        assert verdict(chapter, honest)[0] == "accepted"  # warm: the first call imports and reads the chapter
        runs = []
        for _ in range(5):
            start = time.perf_counter()
            verdict(chapter, honest)
            runs.append(time.perf_counter() - start)
        base_s = sorted(runs)[2]  # the median of five
        for i in range(n):
            what, name, data = case(a.seed, i)
            path = klass / name
            path.write_bytes(data)
            for reader, read in (("layout", lambda: verdict(chapter, path)),
                                 ("parcel", lambda: through_the_parcel(chapter, path, scratch / str(i)))):
                start = time.perf_counter()
                kind, text = read()
                seconds[(reader, kind)].append(time.perf_counter() - start)
                counts[(reader, kind)] += 1
                if kind == "internal" or (kind == "rejected" and not text.strip()):
                    failures.append({"upload": name, "what": what, "reader": reader, "error": text.strip().splitlines()[-1:]})
        start = time.perf_counter()
        try:
            docs, skipped = sources(chapter, klass)
            named = {d["name"] for d in docs} | {s["name"] for s in skipped}
            missing = sorted({p.name for p in klass.iterdir() if p.suffix == ".zip"} - named)
            similar_ok = not missing
        except BadSubmission as e:
            similar_ok, missing = False, [f"the class's similarity failed: {e}"]
        except Exception as e:  # noqa: BLE001
            similar_ok, missing = False, [f"the class's similarity failed: {type(e).__name__}: {e}"]
        similar_s = time.perf_counter() - start
    print(f"{n} mutated uploads (seed {a.seed}); an honest zip's layout takes {base_s * 1e3:.1f} ms (median of 5)")
    print(f"{'reader':8} {'verdict':9} {'uploads':>8} {'ms each':>8} {'x honest':>9}")
    for (reader, kind), count in sorted(counts.items()):
        each = sum(seconds[(reader, kind)]) / max(1, count)
        print(f"{reader:8} {kind:9} {count:8d} {each * 1e3:8.1f} {each / base_s if base_s else 0:9.1f}")
    print(f"similarity over the class: every entry compared or named: {'yes' if similar_ok else 'NO'} ({similar_s:.1f} s)")
    print(f"goal: 0 internal errors in every reader: {len(failures)} {'(met)' if not failures else '(NOT met)'}")
    for f in failures[:10]:
        print(f"  {f['upload']} ({f['what']}) in the {f['reader']}: {' '.join(f['error'])}")
    write_figures(out_path(a, "upload_fuzz"), {"n": n, "seed": a.seed, "counts": {f"{r}/{k}": c for (r, k), c in counts.items()},
                                              "internal": failures, "similarity_names_every_entry": similar_ok,
                                              "missing_from_similarity": missing, "honest_layout_s": base_s})
    return 0 if not failures and similar_ok else 1


if __name__ == "__main__":
    sys.exit(main())
