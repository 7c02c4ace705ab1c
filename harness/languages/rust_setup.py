"""The commands of an autograder image's Rust steps (harness.languages.rust_image):

    python -m harness.languages.rust_setup toolchain                (setup.sh: is there a toolchain the judge can use?)
    python -m harness.languages.rust_setup template SOURCE CHAPTER  (setup.sh: the Rust reference built once)
"""

import shutil
import sys
import time
from pathlib import Path

from ..kernel.errors import OlError, UsageError
from ..registry import load_chapter
from ..sandbox.confine import choose
from .rust import prebuild_template, toolchain
from .rust_image import TEMPLATE_DIR


def probe_toolchain() -> int:
    """The toolchain the judge would build with, said; 1 (with the reason) when there is none it can use."""
    try:
        tc = toolchain()
    except UsageError as e:
        print(f"setup.sh: {e}", file=sys.stderr)
        return 1
    print(f"setup.sh: Rust {'.'.join(map(str, tc.version))}: {tc.rustc} and {tc.cargo}")
    return 0


def build_template(source: Path, chapter_name: str) -> int:
    """Build the Rust reference into source/TEMPLATE_DIR, confined as grading confines builds. In bwrap it stays (every
    upload's build starts from a copy); elsewhere it only proved the build works, and goes."""
    dest = source / TEMPLATE_DIR
    started = time.monotonic()
    try:
        mode = choose()
        prebuild_template(load_chapter(chapter_name), dest, mode)
    except OlError as e:
        shutil.rmtree(dest, ignore_errors=True)
        print(f"setup.sh: {e}", file=sys.stderr)
        return 1
    took = time.monotonic() - started
    if mode.name == "bwrap":
        print(f"setup.sh: built the Rust reference in the sandbox in {took:.1f} s: a Rust upload's build starts from it "
              "and compiles only the student's crate")
    else:
        shutil.rmtree(dest, ignore_errors=True)
        print(f"setup.sh: the Rust reference builds here ({mode.name} mode, {took:.1f} s); outside bwrap a Rust upload's "
              "build starts clean and compiles all three crates")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["toolchain"]:
        return probe_toolchain()
    if argv[:1] == ["template"] and len(argv) == 3:
        return build_template(Path(argv[1]), argv[2])
    print("usage: python -m harness.languages.rust_setup toolchain | template SOURCE CHAPTER", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
