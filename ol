#!/usr/bin/env bash
# Bootstrap wrapper, in the way of ./gradlew: on first use (or when the lock changes) it makes a virtual
# environment in .venv and installs into it exactly what the lock names, then runs `ol`.
# A fresh clone needs nothing but Python 3.11+ (and pip, which venv brings).
#
# Installs by role (README, "Installs by role"), each from its own export of the one lock (uv.lock):
#   student  locks/student.txt  the default: ol check, start, diff, tests, cargo test
#   staff    locks/staff.txt    + ol grade, report, similar, mutmut, the Dask workers: OL_EXTRAS=staff ./ol ...
#   dev      locks/dev.txt      + ol's own suite: `./ol selftest` asks for it by itself
# A role once installed stays (a staff .venv is not made a student's again); the stamp holds the role and a
# digest of pyproject.toml and the role's lock, so an edit of either installs again.
set -euo pipefail
# this file's own folder, the checkout, even when `ol` is reached through a symbolic link (one on PATH)
root="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
venv="${OL_VENV:-$root/.venv}"  # OL_VENV: use an existing environment (tests of the Gradescope bundle do)
stamp="$venv/.ol-installed"
py="${OL_PYTHON:-python3}"
rank() { case "$1" in student) echo 1 ;; staff) echo 2 ;; dev) echo 3 ;; *) echo 0 ;; esac; }
asked="${OL_EXTRAS:-student}"
if [ "$(rank "$asked")" = 0 ]; then
  echo "ol: OL_EXTRAS=$asked is no role: use student (the default), staff or dev" >&2
  exit 2
fi
command=""
for a in "$@"; do case "$a" in -*) ;; *) command="$a"; break ;; esac; done
why=""
if [ "$command" = selftest ] && [ "$(rank "$asked")" -lt 3 ]; then
  asked=dev; why="\`ol selftest\` runs ol's own suite, which needs the dev set (pytest-xdist and the staff's tools)"
fi
had=""
[ -f "$stamp" ] && had="$(cut -d' ' -f1 "$stamp")"
role="$asked"
[ "$(rank "$had")" -gt "$(rank "$asked")" ] && role="$had"
lock="$root/locks/$role.txt"
want="$role $(cat "$root/pyproject.toml" "$lock" | sha256sum | cut -c1-16)"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "ol: needs Python 3.11 or newer as '$py' (set OL_PYTHON to another interpreter)" >&2
    exit 2
  fi
  started=$SECONDS
  n_locked="$(grep -c '^[A-Za-z0-9]' "$lock")"
  if [ -n "$why" ] && [ -n "$had" ]; then
    echo "ol: $why: adding it to $venv" >&2
  elif [ -x "$venv/bin/python" ] && [ -f "$stamp" ]; then
    echo "ol: the lock or pyproject.toml changed, or another role was asked for: installing the $role set into $venv again" >&2
  else
    echo "ol: first run: setting up $venv, ol's Python environment (the $role set: numpy, scipy, pytest, rich, click...; a minute or two, once)" >&2
    [ -n "$why" ] && echo "ol: $why" >&2
  fi
  log="$(mktemp -t ol-install.XXXXXX.log)"
  # What pip collects, as it goes: one line a package on a pipe, one line rewritten at a terminal
  progress() {
    local n=0 line name
    while IFS= read -r line; do
      printf '%s\n' "$line" >>"$log"
      case "$line" in
        Collecting*|"Processing "*)
          n=$((n + 1)); name="${line#* }"; name="${name%% *}"; name="${name##*/}"
          if [ -t 2 ]; then printf '\r\033[Kol: [2/3]   %d of the lock'"'"'s packages so far: %s' "$n" "$name" >&2
          else printf 'ol: [2/3]   package %d: %s\n' "$n" "$name" >&2; fi ;;
        "Installing collected packages"*)
          [ -t 2 ] && printf '\r\033[K' >&2
          echo "ol: [2/3]   installing the $n packages collected (unpacking; about a minute)" >&2 ;;
      esac
    done
    [ -t 2 ] && printf '\r\033[K' >&2
    return 0
  }
  pip() { "$venv/bin/python" -m pip --disable-pip-version-check "$@"; }
  # Packages the environment holds that the lock does not name (an older lock's): removed, so that the
  # environment is the lock, no more (pip freeze --exclude-editable lists exactly the lock's pins)
  strays() {
    comm -23 <(pip freeze --exclude-editable 2>>"$log" | sed -n 's/^\([A-Za-z0-9._-]*\)==.*/\1/p' | tr 'A-Z_.' 'a-z--' | sort -u) \
             <(sed -n 's/^\([A-Za-z0-9._-]*\)==.*/\1/p' "$lock" | tr 'A-Z_.' 'a-z--' | sort -u)
  }
  echo "ol: [1/3] creating the virtual environment" >&2
  if ! { [ -x "$venv/bin/python" ] || "$py" -m venv "$venv" >>"$log" 2>&1; } ||
     ! { echo "$role unfinished" > "$stamp"  # a half-made environment is made again by the next run, of the same role
         echo "ol: [2/3] installing the lock, locks/$role.txt: $n_locked pinned packages, each checked against its hash" >&2
         pip install --progress-bar off --require-hashes --no-deps -r "$lock" 2>&1 | progress
         [ "${PIPESTATUS[0]}" = 0 ]; } ||
     ! { echo "ol: [3/3] installing ol itself (editable, nothing more)" >&2
         gone="$(strays)"; [ -z "$gone" ] || pip uninstall -y $gone >>"$log" 2>&1
         pip install --progress-bar off --no-deps -e "$root" >>"$log" 2>&1; }; then
    last="$(grep -v '^\s*$' "$log" | grep -iE 'error|could not|no matching|connection|hash' | tail -n 1)"
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
