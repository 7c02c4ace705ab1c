#!/usr/bin/env bash
# Gradescope runs this for each submission, offline: setup.sh installed everything. AUTOGRADER_ROOT
# lets a test run it outside /autograder. What it prints is ol's full output, for staff only
# (results.json sets stdout_visibility hidden): it names the assignment's seed.
set -uo pipefail
root="${AUTOGRADER_ROOT:-/autograder}"
src="$root/source"; sub="$root/submission"; res="$root/results"
mkdir -p "$res"
py="$(cat "$src/{interpreter_file}" 2>/dev/null || echo python3)"   # recorded by setup.sh
venv_py="${OL_VENV:-$src/.venv}/bin/python"                  # the environment ./ol uses
[ -x "$venv_py" ] || venv_py="$py"
# The seed stays in its file (root's alone, setup.sh): the judge reads it there, so no command line or
# environment a worker could read holds it.
[ -r "$src/{seed_file}" ] ||
  echo "run_autograder: $src/{seed_file} is missing: rebuild the bundle with ol gradescope (--seed keeps the cases)"
private="$(mktemp -d)"   # the judge writes here: a report the submission planted in results/ is never read
mkdir -p "$private/tmp"  # the judge's temporary files too: removed with $private even if the judge is killed
chmod 0711 "$private" "$private/tmp"  # the uid fallback's worker reaches its own folder in tmp/ by name, lists nothing
{language_run_env}
cd "$private"  # a folder the upload does not control: ol's processes start isolated (python -P), and here too
TMPDIR="$private/tmp" OL_PYTHON="$py" \
  bash "$src/ol" check {chapter} --submission "$sub" --ref-deps-if-missing --fresh "@$src/{seed_file}" --gradescope "$private/results.json" 2>&1
code=$?
echo "run_autograder: ol check exited $code"
rm -f "$res/results.json"     # whatever the submission may have written there
for p in "$venv_py" "$py"; do  # the second only if the environment itself is broken
  PYTHONPATH="$src" "$p" -P -s -m harness.staff.gradescope "$src" "$code" "$private/results.json" "$sub" "$res/results.json" && break
  rm -f "$res/results.json"
done
# No results.json (the grader failed, or no Python could decide): Gradescope marks the run failed, with no
# score: the submission is ungraded, never given a 0 (harness.staff.gradescope)
[ -s "$res/results.json" ] || echo "run_autograder: no results.json: ungraded (the grader failed, not the submission)"
cd "$root" && rm -rf "$private"
exit 0
