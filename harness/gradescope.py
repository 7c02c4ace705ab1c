"""Gradescope: the results.json of one check, and the autograder bundle that produces it.

results.json follows Gradescope's autograder specification: top-level `score`, `output`,
`visibility`, and `tests`, each with `name`, `score`, `max_score`, `status` ("passed"/"failed"),
`output` and `visibility`. harness/schemas/gradescope_results.schema.json states the subset we write.
"""

import io
import subprocess
import zipfile
from pathlib import Path

from .check import Report
from .paths import REPO

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this after setup.sh. AUTOGRADER_ROOT lets a test run it outside /autograder.
set -uo pipefail
root="${AUTOGRADER_ROOT:-/autograder}"
src="$root/source"; sub="$root/submission"; res="$root/results"
mkdir -p "$res"
work="$(mktemp -d)"
flags=""
if [ -d "$sub/tinyllm" ]; then
  cp -r "$sub/tinyllm" "$work/tinyllm"
elif [ -f "$sub/spec.py" ]; then       # only the chapter's file was uploaded
  mkdir -p "$work/tinyllm/infer" && cp "$sub/spec.py" "$work/tinyllm/infer/spec.py"
else
  found="$(find "$sub" -path '*tinyllm/infer/spec.py' | head -n 1)"
  [ -n "$found" ] && cp -r "$(dirname "$(dirname "$found")")" "$work/tinyllm"
fi
for dep in tinyllm/rng.py tinyllm/kv.py tinyllm/infer/sampling.py; do
  [ -f "$work/$dep" ] || flags="--ref-deps"
done
private="$(mktemp -d)"   # the judge writes here; only a finished check's report is copied to results/
"$src/ol" check {chapter} --submission "$work" $flags --fresh --gradescope "$private/results.json" > "$private/ol-output.txt" 2>&1
code=$?
cp "$private/ol-output.txt" "$res/ol-output.txt"
rm -f "$res/results.json"     # whatever the submission may have written there
if { [ "$code" = 0 ] || [ "$code" = 1 ]; } && [ -f "$private/results.json" ]; then
  cp "$private/results.json" "$res/results.json"
else
  python3 - "$res/results.json" "$res/ol-output.txt" "$code" <<'PY'
import json, sys
out = open(sys.argv[2], errors="replace").read()[-8000:]
json.dump({"score": 0, "output": f"The grader could not grade this submission (exit {sys.argv[3]}):\n{out}",
           "visibility": "visible", "tests": []}, open(sys.argv[1], "w"))
PY
fi
exit 0
"""

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once when it builds the autograder image.
set -euo pipefail
apt-get update && apt-get install -y python3 python3-venv python3-pip
cd /autograder/source && ./ol --help >/dev/null   # makes .venv and installs the harness
"""


def results_json(rep: Report, pitfall_matches: list[dict], seed: int | None) -> dict:
    tests = []
    for t in rep.tests:
        lines = [f"{t.outcome}: {t.message}" if t.outcome != "pass" else "passed"]
        lines += [f"known pitfall: {p}" for p in t.pitfalls]
        tests.append({"name": t.name, "score": t.points, "max_score": t.max_points,
                      "status": "passed" if t.outcome == "pass" else "failed", "output": "\n".join(lines)[:8000],
                      "visibility": "visible"})
    hints = [f"your answers match pitfall {m['id']}, {m['pitfall']}, on {m['matched']} of {m['shows']} cases where it shows"
             for m in pitfall_matches[:3]]
    head = f"{rep.passed} of {len(rep.tests)} tests passed" + (f" (fresh cases, seed {seed})" if seed is not None else "")
    return {"score": rep.score, "output": "\n".join([head, *hints]), "visibility": "visible", "tests": tests}


def build_bundle(chapter: str, out_zip: Path) -> int:
    """autograder.zip: setup.sh, run_autograder, and the harness's tracked files under source/."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER.replace("{chapter}", chapter))):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            z.writestr(info, text)
        for f in files:
            p = REPO / f
            if p.is_file():
                info = zipfile.ZipInfo.from_file(p, f"source/{f}")
                with open(p, "rb") as fh:
                    z.writestr(info, fh.read(), zipfile.ZIP_DEFLATED)
    out_zip.write_bytes(buf.getvalue())
    return len(files)
