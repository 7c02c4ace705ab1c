"""The judge's scratch cargo workspace of one Rust build (its tree: harness.languages.rust's docstring): the judge's
manifests, the course's crates with the pack's files, and the submission's .rs sources, each copied only when it
changed (cargo rebuilds only what changed); sources that could point a given module at the student's own code are
refused before anything is built (harness.languages.rust_source)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Set
from pathlib import Path

from ..kernel.errors import BadSubmission
from ..kernel.paths import REPO
from ..sandbox.confine import COPY_CAP_BYTES, COPY_CAP_FILES
from .rust_source import refusal

TEMPLATE_ENV = "OL_RUST_TEMPLATE"  # `ol grade`: a build of the reference whose output every submission's build starts from

COURSE_CRATES = REPO / "course" / "crates"  # tl-json and tl-worker: the course's, never the student's (never where a default workspace goes: ./rust, ./py)
JUDGE_CRATES = ("tl-json", "tl-worker")  # what the judge's build takes of them, with the pack's course_sources there

WORKSPACE_MANIFEST = """\
# Written by the judge (ol): the grading build of one submission.
[workspace]
members = ["crates/tl-engine", "crates/tl-json", "crates/tl-worker"]
resolver = "2"

[profile.dev]
debug = 0          # panics keep their file and line; no debugger here
incremental = true
"""

ENGINE_MANIFEST = """\
# Written by the judge (ol): no build script, no dependency but the course's codec, no unsafe code.
[package]
name = "tl-engine"
version = "0.1.0"
edition = "2021"
rust-version = "1.75"
build = false
autobins = false
autoexamples = false
autotests = false
autobenches = false

[lib]
path = "src/lib.rs"

[dependencies]
tl-json = { path = "../tl-json" }

[lints.rust]
unsafe_code = "forbid"
"""


def assemble(lang, package_dir: Path, ws: Path) -> Path:
    """The workspace of one build (see the module's docstring), made or brought up to date in `ws`; returns
    its Cargo.toml. Unchanged files are left alone (cargo rebuilds only what changed when `ws` is cached)."""
    src = Path(package_dir) / lang.package / "src"
    if not (src / "lib.rs").is_file():
        raise BadSubmission(f"the crate {Path(lang.package).name} has no src/lib.rs: it needs one "  # its name, not the copy's path
                            "declaring `pub mod spec;` and the earlier chapters' modules (ol start writes it)")
    if (why := refusal(src, given_modules(lang))) is not None:  # a given module is the course's: no #[path] to another
        raise BadSubmission(why)
    ws.mkdir(parents=True, exist_ok=True)
    _write_if_changed(ws / "Cargo.toml", WORKSPACE_MANIFEST)
    chapters_own = judge_sources(lang)
    for crate in JUDGE_CRATES:
        src_dir = Path("crates") / crate / "src"
        keep = {Path(place).relative_to(src_dir) for place in chapters_own if Path(place).is_relative_to(src_dir)}
        _sync(COURSE_CRATES / crate / "src", ws / src_dir, keep=keep)
        _sync_file(COURSE_CRATES / crate / "Cargo.toml", ws / "crates" / crate / "Cargo.toml")
    for place, source in chapters_own.items():  # the pack's part of the course's crates (its op table)
        _sync_file(source, ws / place)
    engine = ws / "crates" / "tl-engine"
    _write_if_changed(engine / "Cargo.toml", ENGINE_MANIFEST)
    _sync(src, engine / "src", only_suffix=".rs")  # only Rust sources: no data an include could read
    for rel in lang.given:  # the course's own modules (the model, the runner target): never the submission's copy
        _sync_file(lang.reference / rel, ws / rel)
    return ws / "Cargo.toml"


def given_modules(lang) -> list[str]:
    """The names of the given modules at the crate's root (chapter.toml `given` in src/: `model`, `runner_target`)."""
    src = Path(lang.package) / "src"
    return [Path(rel).stem for rel in lang.given if Path(rel).parent == src and Path(rel).suffix == ".rs"]


def judge_sources(lang) -> dict[str, Path]:
    """The pack's files (chapter.toml `course_sources`) that the judge's build takes: those in the course's crates it
    builds (JUDGE_CRATES), not `cargo test`'s front end of a student's workspace."""
    return {place: source for place, source in lang.course_sources.items()
            if any(Path(place).is_relative_to(Path("crates") / crate) for crate in JUDGE_CRATES)}


def _write_if_changed(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _sync_file(src: Path, dst: Path) -> None:
    """Copy src to dst unless dst already holds the same bytes (then its time stays, and cargo skips it)."""
    if not dst.is_file() or dst.stat().st_size != src.stat().st_size or dst.read_bytes() != src.read_bytes():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)  # a new time: cargo must see the change, even to an older version
        os.chmod(dst, 0o644)


def _sync(src: Path, dst: Path, only_suffix: str = "", keep: Set[Path] = frozenset()) -> None:
    """Make the tree `dst` hold exactly the regular files of `src` (symlinks skipped: one could name the
    answers) and those of `keep` (paths in `dst` another source writes), unchanged files left as they are,
    within the submission copy caps."""
    wanted: set[Path] = set()
    total = 0
    for root, dirs, names in os.walk(src, followlinks=False):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for n in names:
            path = Path(root) / n
            if path.is_symlink() or not path.is_file() or (only_suffix and path.suffix != only_suffix):
                continue
            total += path.stat().st_size
            if total > COPY_CAP_BYTES or len(wanted) >= COPY_CAP_FILES:
                raise BadSubmission(f"{src} holds more than {COPY_CAP_BYTES >> 20} MiB or {COPY_CAP_FILES} files of source")
            rel = path.relative_to(src)
            wanted.add(rel)
            _sync_file(path, dst / rel)
    kept = wanted | set(keep)
    if dst.exists():
        for path in sorted(dst.rglob("*"), reverse=True):
            if path.is_file() and path.relative_to(dst) not in kept:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
