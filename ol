#!/usr/bin/env bash
# Bootstrap wrapper, in the way of ./gradlew: on first use (or when pyproject.toml changes) it
# makes a virtual environment in .venv and installs the harness into it, then runs `ol`.
# A fresh clone needs nothing but Python 3.11+.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${OL_VENV:-$root/.venv}"  # OL_VENV: use an existing environment (tests of the Gradescope bundle do)
stamp="$venv/.ol-installed"
py="${OL_PYTHON:-python3}"
want="$(cat "$root/pyproject.toml" | sha256sum | cut -c1-16)"
if [ ! -x "$venv/bin/ol" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "ol: needs Python 3.11 or newer as '$py' (set OL_PYTHON to another interpreter)" >&2
    exit 2
  fi
  echo "ol: setting up $venv (first run only)..." >&2
  log="$(mktemp -t ol-install.XXXXXX.log)"
  if ! { "$py" -m venv "$venv" && "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip &&
         "$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$root[dev]"; } >"$log" 2>&1; then
    last="$(grep -v '^\s*$' "$log" | grep -iE 'error|could not|no matching|connection' | tail -n 1)"
    echo "ol: could not install ol's dependencies into $venv (no network, or no package index?): ${last:-see the log}. Full log: $log" >&2
    exit 3
  fi
  rm -f "$log"
  echo "$want" > "$stamp"
fi
# PYTHONPATH: this checkout's harness, even when the environment was installed from another copy
exec env PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "$venv/bin/python" -m harness.cli "$@"
