"""The Rust language: the grading build of a cargo workspace, and the Rust worker's launch.

A build runs the student's code (macros, `include_str!` of any readable file, `#[path]` modules), so
it is confined like a worker (harness.sandbox.confine, the same mode), and it builds nothing the student
configured: the judge assembles a scratch workspace of its own,

    ws/Cargo.toml                      the judge's: three members, a dev profile, no dependencies
    ws/crates/tl-json, ws/crates/tl-worker    the course's pristine copies (course/crates/ of this repo), with
                                       the pack's files there (chapter.toml `course_sources`: the op table)
    ws/crates/tl-engine/Cargo.toml     the judge's: no build script, tl-json its one dependency,
                                       `unsafe_code` forbidden
    ws/crates/tl-engine/src/**/*.rs    the only files taken from the submission

and runs the toolchain's own cargo with a private CARGO_HOME, offline, from a working directory
outside every student tree (cargo reads `.cargo/config.toml` from the working directory's
ancestors: a `rustc-wrapper` there would run any command), in the dev profile (overflow checks:
a panic with its line, not a wrapped number), under the worker's limits and a deadline.
A compile error is data: BuildFailed, with rustc's first error (file, line, message).

What the machine template (machine_template: the reference's build every bwrap upload's build starts from) saves
(issue 40: a cache stays only with a measured saving of a second or more, in the user's layout): each Rust upload's
build. `ol grade L10.8 DIR --ref-deps --seed 1 --no-similar` over 4 Rust uploads (examples/submissions/rust-*), run
alternately with the template and with it turned off (2026-12-07, this project's 2-core machine, shared, load 2.6
to 9): an upload's judge took 1.5 to 7.6 s less on average, five pairs of runs (--jobs 1: 7.5 and 7.2 s against
9.1 and 11.8 s, whole runs 35.8 and 32.5 s against 40.5 and 53.7 s; --jobs 2: 20.8, 19.1 and 11.0 s against 24.6,
21.2 and 18.6 s, whole runs 51.7, 51.1 and 27.6 s against 71.1, 51.5 and 41.5 s). Its one build costs a run
about 18 s once per harness version and machine (51.9 s with an empty XDG_CACHE_HOME, against about 34 s warm); a
Gradescope image builds it in setup.sh, and every upload is then graded from it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..kernel import cache as cache_folders, clock, errors, stage
from ..kernel.errors import OlError, UsageError
from ..sandbox.bwrap import Limits
from ..sandbox.confine import Mode, confine, kill_group, reap
from .rust_workspace import COURSE_CRATES, TEMPLATE_ENV, assemble, judge_sources  # noqa: F401  (COURSE_CRATES, TEMPLATE_ENV: re-exported)

BUILD_DEADLINE_S = 240.0  # a clean dev build of the workspace takes 3 to 9 s; a loaded grading box, far more
# rustc's peak RSS on this workspace is about 200 MB; its threads and cargo's jobs count as processes;
# the dev profile's incremental files and the worker binary are each a few MiB.
BUILD_LIMITS = Limits(address_space=4 << 30, cpu_seconds=600, file_size=256 << 20, processes=256, open_files=1024)
BUILD_TMP_MB = 512  # the build's private /tmp (the linker's temporary files)
LINKER_PATHS = ("/etc/alternatives",)  # Debian's `cc` is /usr/bin/cc -> /etc/alternatives/cc -> gcc
TOOLS = ("cargo", "rustc", "rustup", "crate")  # the words of Rust's tools and units, said only here (Language.tools)
MINIMUM_RUST = (1, 75)  # `rust-version` of the manifests: what Ubuntu 22.04 and 24.04 package

class BuildFailed(errors.BuildFailed):
    """The submission did not compile (or its build did not finish): every test fails with rustc's first error."""

    def __init__(self, message: str, first_error: str = "") -> None:
        super().__init__(message, f"your crate did not compile: {first_error or (message.splitlines() or [''])[0]}")


@dataclass(frozen=True)
class Toolchain:
    cargo: Path
    rustc: Path
    sysroot: Path
    version: tuple[int, int]


@functools.lru_cache(maxsize=None)
def toolchain() -> Toolchain:
    """The Rust toolchain the judge builds with (the real binaries, not rustup's proxies, so a sandbox
    that sees only the sysroot can run them); a missing or too old one is a UsageError saying what to install."""
    install = ("install Rust 1.75 or newer (`apt install cargo rustc` on Debian or Ubuntu, or rustup from "
               "https://rustup.rs), then run the command again")
    rustc = shutil.which("rustc") or (str(Path.home() / ".cargo/bin/rustc") if (Path.home() / ".cargo/bin/rustc").exists() else None)
    if rustc is None:
        raise UsageError(f"grading Rust needs cargo and rustc, and this machine has no rustc on PATH: {install}")
    try:
        sysroot = Path(subprocess.run([rustc, "--print", "sysroot"], capture_output=True, text=True, timeout=60, check=True).stdout.strip())
        version = subprocess.run([rustc, "--version"], capture_output=True, text=True, timeout=60, check=True).stdout.split()[1]
    except (OSError, subprocess.SubprocessError, IndexError) as e:
        raise UsageError(f"grading Rust needs a working rustc; `{rustc} --print sysroot` failed ({e}): {install}") from None
    cargo = sysroot / "bin" / "cargo"
    if not cargo.exists():
        found = shutil.which("cargo")
        if found is None:
            raise UsageError(f"grading Rust needs cargo, and this machine has rustc ({rustc}) but no cargo: {install}")
        cargo = Path(os.path.realpath(found))
    major, minor = (int(x) for x in version.split("-")[0].split(".")[:2])
    if (major, minor) < MINIMUM_RUST:
        raise UsageError(f"rustc {version} is older than the course's minimum {'.'.join(map(str, MINIMUM_RUST))}: {install}")
    real_rustc = sysroot / "bin" / "rustc"
    return Toolchain(cargo, real_rustc if real_rustc.exists() else Path(os.path.realpath(rustc)), sysroot, (major, minor))


def missing() -> str | None:
    """Why this machine cannot grade Rust (toolchain()'s message), or None when it can."""
    try:
        toolchain()
    except UsageError as e:
        return str(e)
    return None


SCRATCH_PREFIXES = ("ol-impl-", "ol-submission-")  # ol's own scratch copies (the reference, a mutant, --ref-deps, a zip)


def cache_dir(package_dir: Path, lang) -> Path | None:
    """Where the build of one workspace keeps its workspace and target between checks: keyed by the folder's path,
    or for ol's scratch copies (the reference, a mutant) by their sources. None under OL_RUST_CACHE=0 (`ol grade`).
    What it saves (issue 40: a cache stays only with a measured saving of a second or more, in the user's layout):
    `bench/check_speed.py --quick`, a student's workspace made by `ol start`: a check after a one-line edit with this
    cache warm took 15.6 s and 46.0 s against 18.8 s and 50.7 s with it empty, two runs (2026-12-07, this project's
    2-core machine, shared and loaded): 3 to 5 s a check of the student's loop."""
    if os.environ.get("OL_RUST_CACHE", "1") == "0":
        return None
    real = Path(package_dir).resolve()
    key = hashlib.sha256(str(real).encode())
    if any(part.startswith(SCRATCH_PREFIXES) for part in real.parts):
        key = hashlib.sha256()
        for path in sorted((real / lang.package / "src").rglob("*.rs")):
            key.update(str(path.relative_to(real)).encode() + b"\0" + path.read_bytes() + b"\0")
        for place, source in sorted(judge_sources(lang).items()):  # the pack's op table: an edit is another build
            key.update(f"course:{place}".encode() + b"\0" + source.read_bytes() + b"\0")
    return cache_folders.folder("rust") / key.hexdigest()[:16]  # this user's (a uid-mode worker cannot reach it)


CACHE_KEPT = 24  # builds the cache keeps (each tens of MB): a student's workspaces and ol's copies, the most recently used
CACHE_GRACE_S = 6 * 3600  # a build used this recently is never pruned, however many there are (a check may be using it)


def prune_cache(root: Path, kept: int = CACHE_KEPT, grace_s: float = CACHE_GRACE_S) -> list[Path]:
    """Remove the least recently used builds past the `kept` newest, unless used within `grace_s` (every mutant and
    scratch copy leaves a build keyed by its content); only builds ol marked (harness.kernel.cache.prune)."""
    return cache_folders.prune(root, kept, grace_s)


def _first_error(stdout: str, shown: tuple[str, ...]) -> tuple[str, str]:
    """(rustc's first error rendered, its one-line summary `file:line: message`) from cargo's JSON messages."""
    for line in stdout.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        msg = m.get("message") if isinstance(m, dict) and m.get("reason") == "compiler-message" else None
        if not isinstance(msg, dict) or msg.get("level") not in ("error", "error: internal compiler error"):
            continue
        spans = [s for s in msg.get("spans", []) if s.get("is_primary")] or msg.get("spans", [])
        where = f"{spans[0]['file_name']}:{spans[0]['line_start']}: " if spans else ""
        rendered = msg.get("rendered") or msg.get("message", "")
        for prefix in shown:  # paths as the student's workspace names them: crates/tl-engine/src/spec.rs
            rendered = rendered.replace(prefix, "")
        return rendered.strip()[:3000], f"{where}{msg.get('message', '')}"[:300]
    return "", ""


def stub_hit(message: str) -> str:
    """The function a todo!() names: "not yet implemented: rollback"."""
    return message.split(": ", 1)[1] if ": " in message else ""


def frame(f: dict) -> str:
    """One frame of the student's own code, as rustc points at a line."""
    return f"\n  --> {f.get('file')}:{f.get('line')}" + (f"\n   | {f.get('source')}" if f.get("source") else "")


# bwrap: where every build runs inside its sandbox. One path for all, so that the output of one build (the
# grading run's template) is up to date for another: cargo's fingerprints hold the paths they were made at.
FIXED_WS, FIXED_TARGET = "/ol/ws", "/ol/target"


def build(chapter, package_dir: Path, scratch: Path, mode: Mode, cache: bool = True) -> Path:
    """Compile the submission's worker in `mode`; returns the folder holding `bin/tl-worker`. With OL_RUST_TEMPLATE
    (bwrap), it starts from a copy of that build: the given crates built, the unchanged modules' incremental data."""
    tc = toolchain()
    lang = chapter.language("rust")
    template = Path(os.environ[TEMPLATE_ENV]) if mode.name == "bwrap" and os.environ.get(TEMPLATE_ENV) else None
    # uid: a cache under the judge's home is out of its reach
    cached = cache_dir(package_dir, lang) if cache and template is None and mode.name != "uid" else None
    if cached is not None:
        cached = cache_folders.entry(cached.parent, cached.name)  # a link, another user's folder: refused (harness.kernel.cache)
        os.utime(cached)  # used now: the newest, never pruned while a check may be using it
        prune_cache(cached.parent)
    ws, target = (cached or scratch) / "ws", (cached or scratch) / "target"
    if template is not None:
        shutil.copytree(template / "ws", ws, symlinks=True)  # times kept: cargo finds the template's output fresh
        shutil.copytree(template / "target", target, symlinks=True)
    assemble(lang, package_dir, ws)
    home = scratch / "build-home"
    for folder in (target, home, ws / "cargo-home"):
        folder.mkdir(parents=True, exist_ok=True)
    proc, out, err, took = _cargo(tc, mode, ws, target, home)
    binary = target / "debug" / "tl-worker"
    if proc.returncode != 0 or not binary.is_file():
        shown = (FIXED_WS + "/", str(ws) + "/")
        rendered, summary = _first_error(out, shown)
        if not rendered:
            tail = "\n".join(err.strip().splitlines()[-15:])
            for prefix in shown:
                tail = tail.replace(prefix, "")
            raise BuildFailed(f"your crate did not compile (cargo exit {proc.returncode} after {took:.1f} s):\n{tail}",
                              "cargo failed")
        raise BuildFailed(f"your crate did not compile: {summary}\n{rendered}", summary)
    out_dir = scratch / "bin"
    out_dir.mkdir(exist_ok=True)
    shutil.copyfile(binary, out_dir / "tl-worker")
    os.chmod(out_dir / "tl-worker", 0o755)
    return scratch


def _cargo(tc: Toolchain, mode: Mode, ws: Path, target: Path, home: Path):
    """`cargo build` of the workspace's worker, confined, under the build's deadline: (process, stdout, stderr, s)."""
    fixed = mode.name == "bwrap"
    at_ws, at_target = (FIXED_WS, FIXED_TARGET) if fixed else (str(ws), str(target))
    env = {"PATH": f"{tc.sysroot / 'bin'}:/usr/bin:/bin", "CARGO_HOME": f"{at_ws}/cargo-home", "RUSTC": str(tc.rustc),
           "CARGO_TARGET_DIR": at_target, "CARGO_NET_OFFLINE": "true", "CARGO_TERM_COLOR": "never",
           "CARGO_BUILD_JOBS": str(min(4, os.cpu_count() or 1)), "LANG": "C.UTF-8"}
    argv = [str(tc.cargo), "build", "--offline", "--manifest-path", f"{at_ws}/Cargo.toml", "-p", "tl-worker",
            "--message-format", "json"]
    visible = [] if str(tc.sysroot).startswith("/usr") else [tc.sysroot]
    visible += [Path(p) for p in LINKER_PATHS if Path(p).exists()]
    argv, how = confine(mode, argv, visible, env, home, BUILD_LIMITS, tmp_mb=BUILD_TMP_MB, writable=[ws, target],
                        writable_at={ws: FIXED_WS, target: FIXED_TARGET} if fixed else None)
    if not fixed:
        how["cwd"] = "/"  # no .cargo/config.toml above it that anyone but root could have written
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, **how)
    timed_out, done = threading.Event(), threading.Event()
    end = clock.now() + BUILD_DEADLINE_S  # the judge's clock: a Ctrl-Z of `ol check` is not the build's time

    def deadline() -> None:
        while not done.wait(max(0.0, end - clock.now())):
            if clock.now() >= end:
                timed_out.set()
                kill_group(proc.pid)
                proc.wait()
                return

    threading.Thread(target=deadline, name="ol-build-deadline", daemon=True).start()
    chunks: list[bytes] = []
    out = proc.stdout
    assert out is not None  # stdout=PIPE
    drain = threading.Thread(target=lambda: chunks.append(out.read()), daemon=True)
    drain.start()
    try:
        err = _follow(proc.stderr, cold=not (target / "debug").exists())
        drain.join()
        proc.wait()
    finally:
        done.set()
        reap(mode)
    if timed_out.is_set():
        raise BuildFailed(f"your crate did not finish compiling within {BUILD_DEADLINE_S:.0f} s "
                          "(a const evaluation or a macro that never ends?)")
    return proc, b"".join(chunks).decode(errors="replace"), err, time.monotonic() - started


def _follow(stream, cold: bool) -> str:
    """cargo's stderr, read as it comes: each `Compiling NAME` told to the listener (harness.kernel.stage); the whole text."""
    lines = []
    stage.say("building your crate with cargo" + (" (its first build here: the course's crates too, a minute at most)" if cold else ""))
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace")
        lines.append(line)
        words = line.split()
        if words[:1] == ["Compiling"] and len(words) > 1:
            stage.say(f"building: compiling {words[1]}")
    return "".join(lines)


def prebuild_template(chapter, dest: Path, mode: Mode) -> Path:
    """The grading run's template (bwrap), built clean into `dest` at the fixed paths, which every submission's build
    copies (OL_RUST_TEMPLATE=dest). It holds nothing a student must not have: the chapter's file is the contract's
    stub, not the reference's, beside the files `ol start` hands out; its built worker is removed. Returns dest."""
    lang = chapter.language("rust")
    try:
        with tempfile.TemporaryDirectory(prefix="ol-impl-", ignore_cleanup_errors=True) as made:
            src = lang.copy_reference(Path(made))
            for rel in lang.student_files:  # the chapter's own file: the stub, never the reference's answer
                shutil.copyfile(lang.contract, src / rel)
            build(chapter, src, dest, mode, cache=False)
        for built in (dest / "target" / "debug" / "deps").glob("tl_worker-*"):  # the binary and its hard link
            if built.is_file():
                built.unlink()
        (dest / "target" / "debug" / "tl-worker").unlink(missing_ok=True)
        shutil.rmtree(dest / "bin", ignore_errors=True)
    except BuildFailed as e:
        raise OlError(f"the Rust reference does not build here, so no Rust submission can be graded: {e}") from None
    return dest


TEMPLATES_KEPT = 3  # template builds a machine keeps (each a few tens of MB): the newest harness versions'


_template_lock = threading.Lock()


def machine_template(chapter, mode: Mode, version_digest: str) -> Path:
    """prebuild_template's build for this harness version and toolchain, made once per machine and kept in the
    grading user's cache (ol/rust/templates): every grading run of that version here starts from it. Runs that race
    build it apart and the first to finish is kept; another harness or rustc is another key (never stale). One at
    a time in this process (_template_lock): two runs' threads wait for one build."""
    with _template_lock:
        return _machine_template(chapter, mode, version_digest)


def _machine_template(chapter, mode: Mode, version_digest: str) -> Path:
    tc = toolchain()
    key = hashlib.sha256(f"{version_digest}\0{tc.rustc}\0{tc.version}\0{mode.name}".encode()).hexdigest()[:16]
    root = cache_folders.folder("rust", "templates")  # a link planted at ol, ol/rust or here: refused (harness.kernel.cache)
    final = root / key
    if cache_folders.ours(final) and (final / ".complete").is_file():
        os.utime(final)  # the newest used: kept by the pruning below
        return final
    with tempfile.TemporaryDirectory(prefix=f".{key}-", dir=root, ignore_cleanup_errors=True) as made:
        building = Path(made)
        prebuild_template(chapter, building / "t", mode)
        (building / "t" / ".complete").touch()
        cache_folders.mark(building / "t")
        try:
            os.rename(building / "t", final)
        except OSError:  # another run finished first: its build is the same (if ol made it: never a link planted there)
            if not (cache_folders.ours(final) and (final / ".complete").is_file()):
                raise cache_folders.CacheRefused(final, "is not a template ol made") from None
    cache_folders.prune(root, TEMPLATES_KEPT)  # templates ol made alone, not one being built (a `.` name)
    return final
