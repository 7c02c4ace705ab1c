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
  started=$SECONDS
  echo "ol: first run: setting up $venv, ol's Python environment (numpy, scipy, pytest, rich, click, dask; a few minutes, once)" >&2
  log="$(mktemp -t ol-install.XXXXXX.log)"
  # What pip collects, as it goes: one line a package on a pipe, one line rewritten at a terminal
  progress() {
    local n=0 line name
    while IFS= read -r line; do
      printf '%s\n' "$line" >>"$log"
      case "$line" in
        Collecting*|"Processing "*)
          n=$((n + 1)); name="${line#* }"; name="${name%% *}"
          if [ -t 2 ]; then printf '\r\033[Kol: [3/3]   %d packages so far: %s' "$n" "$name" >&2
          else printf 'ol: [3/3]   package %d: %s\n' "$n" "$name" >&2; fi ;;
        "Installing collected packages"*)
          [ -t 2 ] && printf '\r\033[K' >&2
          echo "ol: [3/3]   installing the $n packages collected (unpacking; about a minute)" >&2 ;;
      esac
    done
    [ -t 2 ] && printf '\r\033[K' >&2
    return 0
  }
  echo "ol: [1/3] creating the virtual environment" >&2
  if ! "$py" -m venv "$venv" >>"$log" 2>&1 ||
     ! { echo "ol: [2/3] upgrading pip" >&2; "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >>"$log" 2>&1; } ||
     ! { echo "ol: [3/3] installing ol and what it needs" >&2
         "$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off -e "$root[dev]" 2>&1 | progress; }; then
    last="$(grep -v '^\s*$' "$log" | grep -iE 'error|could not|no matching|connection' | tail -n 1)"
    echo "ol: could not install ol's dependencies into $venv (no network, or no package index?): ${last:-see the log}. Full log: $log" >&2
    exit 3
  fi
  rm -f "$log"
  echo "$want" > "$stamp"
  if [ $# -eq 0 ]; then
    echo "ol: ready in $((SECONDS - started)) s. Next: \`./ol start L10.8\` writes your workspace, then \`./ol check L10.8\`" >&2
  else
    echo "ol: ready in $((SECONDS - started)) s; now running: ol $*" >&2
  fi
fi
# Isolated: -P puts no folder of the caller's on sys.path (`-m` would put the current folder first, ahead of the
# standard library: a student's json.py or harness/ would run as ol), and PYTHONPATH is this checkout's root
# alone (its harness, even when the environment was installed from another copy; no entry of the caller's, whose
# empty entry would be the current folder again); -s: no user site-packages
exec env PYTHONPATH="$root" "$venv/bin/python" -P -s -m harness "$@"
