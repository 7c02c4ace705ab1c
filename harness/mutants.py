"""`ol mutants`: the kill matrix (the reference and every mutant against all tests), and the pitfall
matching that turns a submission's divergences into "your answers match pitfall sNN".
"""

from concurrent.futures import ProcessPoolExecutor, as_completed
import json
import os

from .check import Report, run_check
from .registry import Chapter, load_chapter


def _check_one(chapter_name: str, submission: str) -> Report:
    return run_check(load_chapter(chapter_name), submission)


def kill_matrix(chapter: Chapter, jobs: int | None = None, on_done=None) -> dict:
    """Run the reference and every mutant (in parallel processes); `on_done(label)` after each."""
    subjects = ["reference"] + [f"mutant:{m.id}" for m in chapter.mutants]
    reports: dict[str, Report] = {}
    with ProcessPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool:
        futures = {pool.submit(_check_one, chapter.chapter, s): s for s in subjects}
        for f in as_completed(futures):
            reports[futures[f]] = f.result()
            if on_done:
                on_done(futures[f])
    ref = reports["reference"]
    mutants = []
    for m in chapter.mutants:
        rep = reports[f"mutant:{m.id}"]
        failed = [t.name for t in rep.tests if t.outcome != "pass"]
        mutants.append({"id": m.id, "pitfall": m.pitfall, "must_fail": m.must_fail, "failed_tests": failed,
                        "killed_by_named": m.must_fail in failed})
    return {"chapter": chapter.chapter, "reference_passes": ref.ok,
            "reference_failed_tests": [t.name for t in ref.tests if t.outcome != "pass"],
            "tests": [t.name for t in chapter.tests], "mutants": mutants,
            "ok": ref.ok and all(m["killed_by_named"] for m in mutants)}


# ---- pitfall matching -------------------------------------------------------------------------------

def _answers(impl, golden: dict) -> dict[str, object]:
    """Every golden case's answer (or the error type) keyed by case id: the comparable fingerprint."""
    from .errors import SubmissionFailure

    out: dict[str, object] = {}

    def get(cid, fn, pick):
        try:
            out[cid] = pick(fn())
        except SubmissionFailure as e:
            out[cid] = f"error: {type(e).__name__}"

    for c in golden["verify"]:
        get(c["id"], lambda: impl.verify_draft(c["rows"], c["draft"], c["draft_probs"], c["params"], c["prompt"], c["output"], c["seed"]),
            lambda v: [v["tokens"], v["n_accepted"], v["next_u32"]])
    for c in golden["prompt_lookup"]:
        get(c["id"], lambda: impl.prompt_lookup(c["ctx"], c["k"], c["max_ngram"], c["min_ngram"]), list)
    for c in golden.get("ngram", []):
        get(c["id"], lambda: impl.ngram_draft(c["ctx"], c["k"], c["n"]), list)
    return out


def _expected(golden: dict) -> dict[str, object]:
    exp = {c["id"]: [c["expect"]["tokens"], c["expect"]["n_accepted"], c["expect"]["next_u32"]] for c in golden["verify"]}
    exp.update({c["id"]: c["expect"] for c in golden["prompt_lookup"]})
    exp.update({c["id"]: c["expect"] for c in golden.get("ngram", [])})
    return exp


def match_pitfalls(chapter: Chapter, impl, golden: dict) -> list[dict]:
    """For each mutant whose answers differ from the reference's on some golden cases ("where it shows"),
    how many of those cases the submission answers exactly as the mutant does."""
    from .impls import open_impl

    expected = _expected(golden)
    mine = _answers(impl, golden)
    found = []
    for m in chapter.mutants:
        theirs = _answers(open_impl(chapter, f"mutant:{m.id}"), golden)
        shows = [cid for cid, a in theirs.items() if a != expected[cid]]
        if not shows:
            continue
        same = sum(mine.get(cid) == theirs[cid] for cid in shows)
        if same:
            found.append({"id": m.id, "pitfall": m.pitfall, "matched": same, "shows": len(shows)})
    return sorted(found, key=lambda f: -f["matched"] / f["shows"])


def golden_of(chapter: Chapter, path: str | None = None) -> dict:
    return json.loads(open(path or chapter.golden).read())
