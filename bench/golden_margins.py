"""How close the golden file's sampled verify cases come to flipping in an honest port.

A port's exp may differ from numpy's by an ulp (spec/sampling.md, section 10). For every verify case
this prints the smallest margin, in units of roundoff u = 2^-53, between a number the verifier
compares and the boundary it is compared with (chapters/L10_8/oracle/margins.py), and counts the
fragile ones: a margin of at most N_MARGIN units. The oracle replaces any such case when it writes
the file (so a regenerated file prints 0); on a file written before that rule, it counts what the
rule would replace. --golden F surveys another golden file (a fresh one, `ol check --fresh`'s).

    python bench/golden_margins.py [--golden F] [--quick] [--out F.json]
"""

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from _benchkit import add_common, out_path, write_figures  # noqa: E402

from chapters.L10_8 import oracle  # noqa: E402
from chapters.L10_8.oracle import margins, verify_cases  # noqa: E402
from harness.subjects.reference import pristine  # noqa: E402

GOLDEN = REPO / "chapters/L10_8/fixtures/spec_golden.json"


def survey(lib, cases: list[dict]) -> dict:
    worst = [(verify_cases.worst_margin(lib, c), c["id"]) for c in cases]
    sampled = sum(c["params"]["temperature"] > 0 for c in cases)
    fragile = [cid for (_, m), cid in worst if m <= margins.N_MARGIN]
    (what, m), cid = min(worst, key=lambda w: w[0][1])
    return {"cases": len(cases), "sampled": sampled, "fragile": fragile, "closest": {"case": cid, "units": m, "decision": what}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--golden", type=Path, default=GOLDEN, help="the golden file (default: the shipped one)")
    add_common(ap, "golden_margins", "the same survey (it takes seconds)")
    a = ap.parse_args()
    lib = oracle.bind(pristine("L10.8"))
    figures = {"n_margin_units": margins.N_MARGIN, "golden": str(a.golden), "shipped": survey(lib, oracle.load(a.golden)["verify"])}
    s = figures["shipped"]
    print(f"{a.golden.name}: {s['cases']} verify cases ({s['sampled']} sampled), {len(s['fragile'])} fragile "
          f"(margin <= N = {margins.N_MARGIN} units of roundoff); closest: {s['closest']['case']} at "
          f"{s['closest']['units']:.3g} units ({s['closest']['decision']})")
    write_figures(out_path(a, "golden_margins"), figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
