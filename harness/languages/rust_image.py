"""What an autograder image (Gradescope's setup.sh and run_autograder, harness.staff.gradescope) does for Rust.

    setup          after ol's environment is made: cargo and rustc >= 1.75, found as the judge finds them, else
                   installed from the base image's archive
    after_private  once the answers are the grader's alone: the reference built once, confined as an upload's
                   build is (a machine that cannot build Rust fails the image), kept in bwrap as the template
    run_env        before `ol check`: that template, and no build cache (each upload has a fresh container)

The commands the steps run are harness.languages.rust_setup's (`python -m` runs it).
"""

from .rust_workspace import TEMPLATE_ENV

TEMPLATE_DIR = ".ol-rust-template"  # in source/, made by setup.sh (bwrap): the Rust reference's build

SETUP = r"""# Rust: cargo and rustc >= 1.75 (the manifests' rust-version), found the way the judge finds them (harness.languages.rust:
# rustc on PATH, else ~/.cargo/bin; a test's machine has them, and skips the install), else installed from the
# base image's archive. Both of Gradescope's bases package 1.75 as plain `cargo` and `rustc` on amd64
# (packages.ubuntu.com; documentation.ubuntu.com, "Available Rust versions"): Ubuntu 22.04 in jammy-updates and
# jammy-security (1.75.0+dfsg0ubuntu1~bpo0-0ubuntu0.22.04.1; jammy as released, and its other architectures, have
# 1.58), Ubuntu 24.04 in noble itself (1.75.0+dfsg0ubuntu1-0ubuntu7). rustc depends on gcc, binutils and libc6-dev
# (the linker it calls), so nothing recommended is needed. The toolchain lands in /usr, where the uid fallback's
# worker uid can run it too.
rust_probe() { PYTHONPATH="$src" "$venv_py" -P -s -m harness.languages.rust_setup toolchain; }
if [ "${OL_SETUP_RUST:-1}" = 0 ]; then
  echo "setup.sh: OL_SETUP_RUST=0: no Rust set up; a Rust upload is reported as a grader failure, not graded" >&2
elif ! rust_probe; then
  echo "setup.sh: installing cargo and rustc from the distribution" >&2
  apt_install --no-install-recommends cargo rustc || true   # the probe says what is still missing
  rust_probe || { echo "setup.sh: still no Rust 1.75 or newer the judge can use after apt-get (its output is above):" \
                       "choose Gradescope's Ubuntu 22.04 or 24.04 base image (amd64)" >&2; exit 1; }
fi
"""

AFTER_PRIVATE = r"""# The Rust reference built once, confined as every Rust upload's build is, after the answers were made private (as
# when grading): proves this image can build Rust, and in bwrap leaves the template each build copies. It holds the
# reference's source and compiled worker, so it is the grader's (root's) alone; the judge copies what a build needs.
if [ "${OL_SETUP_RUST:-1}" != 0 ]; then
  rm -rf "$src/TEMPLATE_DIR"
  PYTHONPATH="$src" "$venv_py" -P -s -m harness.languages.rust_setup template "$src" "{chapter}" ||
    { echo "setup.sh: the Rust reference does not build here (above), so no Rust upload could be graded" >&2; exit 1; }
  if [ -e "$src/TEMPLATE_DIR" ]; then
    chown -R 0:0 "$src/TEMPLATE_DIR" 2>/dev/null || true
    chmod -R go-rwx "$src/TEMPLATE_DIR"
  fi
fi
""".replace("TEMPLATE_DIR", TEMPLATE_DIR)

RUN_ENV = r"""template="$src/TEMPLATE_DIR"  # setup.sh's build of the Rust reference (bwrap only): a Rust build starts from a copy
[ -d "$template" ] || template=""
# A Rust build never uses a cache: every submission is graded in a fresh container, so one would only be written.
export OL_RUST_CACHE=0 TEMPLATE_ENV="$template"
""".replace("TEMPLATE_DIR", TEMPLATE_DIR).replace("TEMPLATE_ENV", TEMPLATE_ENV)

SUMMARY = " and Rust 1.75+ (cargo, rustc), and builds the Rust reference once,"
