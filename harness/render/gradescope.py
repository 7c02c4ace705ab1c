"""A Report as Gradescope's results.json (its autograder specification: top-level `score`, `output`,
`visibility`, `tests`, each test with `name`, `score`, `max_score`, `status`, `output`, `visibility`).
harness/schemas/gradescope_results.schema.json states the subset written."""

from ..report import Report

OUTPUT_CAP = 8000  # characters of one test's output: Gradescope shows it in a page, not a log


def hint_lines(rep: Report, limit: int = 3) -> list[str]:
    return [f"your answers match pitfall {m['id']}, {m['pitfall']}, on {m['matched']} of {m['shows']} golden cases where it shows"
            for m in rep.pitfall_matches[:limit]]


def results_json(rep: Report) -> dict:
    tests = []
    for t in rep.tests:
        lines = [f"{t.outcome.value}: {t.message}" if not t.outcome.passed else "passed"]
        lines += [f"known pitfall: {p}" for p in t.pitfalls]
        tests.append({"name": t.name, "score": t.points, "max_score": t.max_points,
                      "status": "passed" if t.outcome.passed else "failed", "output": "\n".join(lines)[:OUTPUT_CAP],
                      "visibility": "visible"})
    head = f"{rep.passed} of {len(rep.tests)} tests passed" + (" (fresh cases)" if rep.fresh_seed is not None else "")
    if rep.load_error:
        head = f"Your submission could not be loaded, so no test ran:\n{rep.load_error}"
    return {"score": rep.score, "output": "\n".join([head, *hint_lines(rep)]), "visibility": "visible", "tests": tests}
