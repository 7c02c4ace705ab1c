"""Gradescope's results.json (harness/schemas/gradescope_results.schema.json states every field): a check's Report,
or, when no check could grade, an upload the layout function rejects or a check killed before it reported. Each
lists every test of the chapter, failed when not passed: no results.json is an empty list that reads as a pass.
A grader that failed gets none (harness.staff.gradescope: ungraded, never a 0).

Students see `output` and the tests; ol's own output (with the seed) goes to run_autograder's stdout, which
`stdout_visibility` keeps hidden; the seed is never written here. Stdlib only: run_autograder's last step may run
without ol's environment. Every `output` a submission wrote (its messages, its file names) is spelled as
harness.render.literal.visible spells it (ESC as the four characters `\\x1b`): JSON escaping alone would still
carry NUL, ESC sequences and lone surrogates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .literal import visible

if TYPE_CHECKING:
    from ..kernel.report import Report

OUTPUT_CAP = 8000  # characters of one test's output: Gradescope shows it in a page, not a log
SEED_DIGITS = 8  # a seed this long is redacted wherever it appears; a shorter one would clash with ordinary numbers
# Gradescope renders the top-level output as HTML ("simple_format") unless told otherwise, and a
# traceback's `<module>` would vanish as a tag: plain text, as the tests' outputs are by default.
FORMAT = {"output_format": "text", "visibility": "visible", "stdout_visibility": "hidden"}


def hint_lines(rep: Report, limit: int = 3) -> list[str]:
    return [f"your answers match pitfall {m['id']}, {m['pitfall']}, on {m['matched']} of {m['shows']} golden cases where it shows"
            for m in rep.pitfall_matches[:limit]]


def _test(name: str, score: float, max_score: float, passed: bool, output: str) -> dict:
    return {"name": name, "score": score, "max_score": max_score, "status": "passed" if passed else "failed",
            "output": visible(output)[:OUTPUT_CAP], "visibility": "visible"}


def results_json(rep: Report) -> dict:
    tests = []
    for t in rep.tests:
        lines = [f"{t.outcome.value}: {t.message}" if not t.outcome.passed else "passed"]
        lines += [f"known pitfall: {p}" for p in t.pitfalls]
        tests.append(_test(t.name, t.points, t.max_points, t.outcome.passed, "\n".join(lines)))
    head = f"{rep.passed} of {len(rep.tests)} tests passed" + (" (fresh cases)" if rep.fresh_seed is not None else "")
    if rep.load_error:
        head = f"Your submission could not be loaded, so no test ran:\n{rep.load_error}"
    if rep.ungraded:
        head = f"The grader could not grade this submission (not a verdict on your code): {rep.ungraded}"
    extra = {"ol": "ungraded" if rep.ungraded else "graded", "sandbox": rep.sandbox}
    if rep.ungraded:  # never uploaded as a grade: the bundle's last step writes no results.json for it (staff.gradescope)
        extra["fault"] = rep.ungraded
    if rep.language:  # which worker graded it (python | rust): one assignment takes uploads in either
        extra["language"] = rep.language
    return {"score": rep.score, "output": visible("\n".join([head, *hint_lines(rep)])), **FORMAT, "tests": tests,
            "extra_data": extra}


def _not_graded(tests: list[dict], output: str, why: str, ol: str) -> dict:
    return {"score": 0.0, "output": output, **FORMAT,
            "tests": [_test(t["name"], 0.0, t["max_score"], False, why) for t in tests], "extra_data": {"ol": ol}}


def upload_rejected(tests: list[dict], upload: str, listing: str, reason: str) -> dict:
    """No submission in the upload (the layout function's `reason`): one sentence saying what to upload."""
    held = f"your upload held {listing}" if listing else "your upload was empty"
    output = visible(f"Nothing was graded ({held}): upload {upload}.")  # the listing is the upload's own names
    return _not_graded(tests, output, f"not run: {reason}", "rejected upload")


def killed(tests: list[dict], signal: int) -> dict:
    """The check was killed before it reported: by the submission itself, or by memory running out."""
    output = (f"Your upload was not graded: the grading process was killed (signal {signal}) before it could report. "
              "Code that kills processes or uses up the memory does this: fix that and resubmit; if your code does "
              "neither, tell your course staff.")
    return _not_graded(tests, output, "not run: the grading process was killed (see above)", "killed")


def redact(text: str, seed: str) -> str:
    """`text` without the assignment's seed: results.json is shown to students."""
    return text.replace(seed, "[seed]") if len(seed) >= SEED_DIGITS else text
