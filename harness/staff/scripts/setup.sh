#!/usr/bin/env bash
# Gradescope runs this once, as root and with the network, when it builds the autograder's image
# (Ubuntu 22.04 or 24.04). AUTOGRADER_ROOT lets a test run it outside /autograder; OL_VENV names an
# existing environment for ./ol to use instead of making source/.venv; OL_SETUP_RUST=0 sets up no Rust.
set -euo pipefail
root="${AUTOGRADER_ROOT:-/autograder}"
src="$root/source"
export DEBIAN_FRONTEND=noninteractive   # apt-get must never stop to ask
updated=""
apt_install() { [ -n "$updated" ] || { apt-get update; updated=1; }; apt-get install -y "$@"; }
new_enough() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }
pick() {  # the first interpreter >= 3.11, as an absolute path
  for c in python3 python3.13 python3.12 python3.11; do
    p="$(command -v "$c" 2>/dev/null)" && new_enough "$p" && { echo "$p"; return 0; }
  done
  return 1
}
venv_works() {  # Debian and Ubuntu ship venv's ensurepip in a package of its own
  d="$(mktemp -d)"; r=0
  "$1" -m venv "$d/v" >/dev/null 2>&1 && "$d/v/bin/python" -m pip --version >/dev/null 2>&1 || r=1
  rm -rf "$d"; return $r
}
if ! py="$(pick)"; then
  echo "setup.sh: no Python 3.11 or newer here (Ubuntu 22.04's python3 is 3.10): installing python3.11 from the distribution" >&2
  # 22.04 has python3.11 in universe; 24.04 has none, but its python3 is 3.12
  apt_install python3.11 python3.11-venv || apt_install python3 python3-venv
  py="$(pick)" || { echo "setup.sh: apt-get could not install Python 3.11 or newer (its output is above):" \
                         "choose Gradescope's Ubuntu 22.04 or 24.04 base image" >&2; exit 1; }
fi
if ! venv_works "$py"; then
  ver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  pkgs="python$ver-venv"; [ "$(basename "$py")" = python3 ] && pkgs="python3-venv $pkgs"
  echo "setup.sh: $py cannot make a virtual environment: installing $pkgs" >&2
  apt_install $pkgs
  venv_works "$py" || { echo "setup.sh: $py still cannot make a virtual environment after installing $pkgs:" \
                             "see apt-get's output above" >&2; exit 1; }
fi
chmod +x "$src/ol" "$src/run_autograder" 2>/dev/null || true   # unzip may drop the modes
cd "$src"
# Makes the environment and installs the student lock into it (locks/student.txt: what grading an upload with `ol check`
# needs, no staff tool; OL_EXTRAS is not passed on), now, while there is a network
OL_EXTRAS= OL_PYTHON="$py" bash ./ol --help >/dev/null
echo "$py" > "$src/{interpreter_file}"
echo "setup.sh: ol runs on $py ($("$py" --version 2>&1)) in ${OL_VENV:-$src/.venv}, installed from locks/$(cut -d' ' -f1 "${OL_VENV:-$src/.venv}/.ol-installed").txt"
venv_py="${OL_VENV:-$src/.venv}/bin/python"
{language_setup}
# Where the container refuses user namespaces, workers run as uid 65534 with no namespace (harness/sandbox/confine.py):
# the answers (the reference, the packs' golden files, tests and mutants, the samples) and the seed are made
# the grader's (root's) alone, so that uid cannot read them. The judge copies what a worker needs.
for private in reference chapters examples tests {seed_file}; do
  [ ! -e "$src/$private" ] || chmod -R go-rwx "$src/$private"
done
{language_after_private}
