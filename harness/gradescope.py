"""Gradescope: the autograder bundle (setup.sh, run_autograder and the harness at the zip's root).

Gradescope extracts the zip into /autograder/source, runs setup.sh once when it builds the image,
then run_autograder per submission with the upload in /autograder/submission; results.json goes
to /autograder/results (harness.render.gradescope writes it). The upload's layout (a bare chapter
file, a package folder, a zip of either) is found by the one layout function, inside `ol check`.
"""

import io
import subprocess
import zipfile
from pathlib import Path

from .paths import REPO

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this after setup.sh. AUTOGRADER_ROOT lets a test run it outside /autograder.
set -uo pipefail
root="${AUTOGRADER_ROOT:-/autograder}"
src="$root/source"; sub="$root/submission"; res="$root/results"
mkdir -p "$res"
private="$(mktemp -d)"   # the judge writes here; only a finished check's report is copied to results/
"$src/ol" check {chapter} --submission "$sub" --ref-deps-if-missing --fresh --gradescope "$private/results.json" > "$private/ol-output.txt" 2>&1
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


def build_bundle(chapter: str, out_zip: Path) -> int:
    """autograder.zip: setup.sh, run_autograder, and the project's tracked files, all at the zip's root."""
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
                info = zipfile.ZipInfo.from_file(p, f)
                with open(p, "rb") as fh:
                    z.writestr(info, fh.read(), zipfile.ZIP_DEFLATED)
    out_zip.write_bytes(buf.getvalue())
    return len(files)
