"""The languages ol grades, as the engine sees them: how a submission's worker is started.

A language is a worker launcher and, for compiled languages, a build step. The launcher is given the chapter, the
submission's (built) folder and an empty folder of the worker's own, copies what the worker needs there
world-readable (harness.sandbox.confine.readable_copy: a confined worker reads copies, never the originals), and
returns a WorkerLaunch: the argv (given the protocol's pipe pair), the read-only paths it may see, its environment.
What a student writes in a language is the chapter's data (`[language.<name>]` in chapter.toml). A language kept
outside the project is one entry of OL_LANGUAGES (`NAME=FILE`, os.pathsep-separated: FILE a module whose LANGUAGE
is its Language), found by `language(NAME)` as the built-in ones are.
"""

from dataclasses import dataclass, field
import functools
import os
from pathlib import Path
from typing import Any, Callable

from ..kernel.errors import UsageError, Words
from ..kernel.paths import REPO, isolated_argv
from ..protocol.session import load_module
from ..sandbox.confine import readable_copy, readable_file
from . import python, rust, rust_image, stub
from .python import INTERPRETER, INTERPRETER_FILE, OL_RUNTIME, RUN_MODULE, interpreter_version  # ol's own interpreter (version, staff commands, autograder image)

# What the Python worker imports of ol: the protocol loop, the session and the wire format; nothing else
# of the harness (not the registry, not the reference's location), no fixture, test or oracle.
PYTHON_WORKER_KIT = ("harness/__init__.py", "harness/protocol/__init__.py", "harness/protocol/session.py",
                     "harness/protocol/wire.py", "harness/protocol/worker.py")  # harness/protocol/, whole


@dataclass(frozen=True)
class WorkerLaunch:
    argv: Callable[[int, int], list[str]]         # (fd_in, fd_out) -> the worker's argv
    visible: tuple[Path, ...] = ()                # read-only paths it may see, besides the interpreter
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ImageSteps:
    """What an autograder image does for a language, as bash ("{chapter}": the chapter's name): `setup` after ol's
    environment is made, `after_private` once the answers are the grader's alone, `run_env` before each `ol check`;
    `summary`: what `ol gradescope` says setup.sh installs, the middle of its sentence."""

    setup: str = ""
    after_private: str = ""
    run_env: str = ""
    summary: str = ""


@dataclass(frozen=True)
class Language:
    name: str
    worker: Callable[["object", Path, Path], WorkerLaunch]  # (chapter, package dir, worker's own folder)
    # (chapter, submission's folder, an empty scratch folder, the sandbox mode) -> the folder the worker
    # command is given (what the build made there), the build confined like the worker; None: the source
    # runs as it is, as Python's does
    build: Callable[[Any, Path, Path, Any], Path] | None = None
    # A class's grading run: (chapter, sandbox mode, harness version digest) -> what the environment of each judge
    # of a submission in this language adds, made once per run and shared (Rust: the given crates' build)
    run_env: Callable[["object", "object", str], dict[str, str]] | None = None
    judge_env: dict[str, str] = field(default_factory=dict)  # what every judge of a class's run holds, for this language
    image: ImageSteps = ImageSteps()
    words: Words = Words()  # how its failures read (the stub's function, a frame of the student's code)
    tools: tuple[str, ...] = ()  # the words naming its tools and units, which the engine never says (tests/harness/test_imports.py)
    in_process: bool = False  # ol's own language: a trusted subject (the reference, a mutant) can run in ol's process
    # `ol start`: (chapter, language name, workspace, force, the `ol check` flags for it, the student map's path) ->
    # the workspace written, and the lines `ol start` prints of it
    start: Callable[[Any, str, Path, bool, str, str], list[str]] | None = None


def _python_worker(chapter, package_dir: Path, home: Path) -> WorkerLaunch:
    lang = chapter.language("python")
    kit = home / "kit"
    for rel in PYTHON_WORKER_KIT:
        readable_file(REPO / rel, kit / rel)
    readable_file(chapter.ops_file, kit / "ol_chapter_ops.py")
    sub = home / "sub"
    sub.mkdir(mode=0o755)
    readable_copy(Path(package_dir) / lang.package, sub / lang.package)

    def argv(fd_in: int, fd_out: int) -> list[str]:
        own = [a for f in lang.student_files for a in ("--own", f)]
        return isolated_argv("harness.protocol.worker", "--ops", str(kit / "ol_chapter_ops.py"), "--package", lang.package,
                         "--package-dir", str(sub), *own, "--in", str(fd_in), "--out", str(fd_out))
    return WorkerLaunch(argv, (kit, sub, *chapter.worker_data), {"PYTHONPATH": str(kit), "PYTHONDONTWRITEBYTECODE": "1"})


def _rust_worker(chapter, built: Path, home: Path) -> WorkerLaunch:
    binary = readable_file(Path(built) / "bin" / "tl-worker", home / "kit" / "tl-worker")  # the build's, in its folder
    os.chmod(binary, 0o755)
    return WorkerLaunch(lambda fd_in, fd_out: [str(binary), "--in", str(fd_in), "--out", str(fd_out)],
                        (binary.parent, *chapter.worker_data), {"RUST_BACKTRACE": "0"})


def _rust_run_env(chapter, mode, version_digest: str) -> dict[str, str]:
    """bwrap: the given crates' build this machine keeps for the harness version (rust.machine_template), which every
    Rust submission's build of the run starts from; nothing in other modes (a build starts clean there)."""
    if mode.name != "bwrap":
        return {}
    return {rust.TEMPLATE_ENV: str(rust.machine_template(chapter, mode, version_digest))}


LANGUAGES = {"python": Language("python", _python_worker, words=python.WORDS, in_process=True, start=stub.start_python),  # from source: no build
             "rust": Language("rust", _rust_worker, rust.build, _rust_run_env,
                              {"OL_RUST_CACHE": "0"},  # every Rust submission of a class builds clean: no output shared
                              ImageSteps(rust_image.SETUP, rust_image.AFTER_PRIVATE, rust_image.RUN_ENV, rust_image.SUMMARY),
                              Words(rust.stub_hit, rust.frame, rerun=" (or `cargo test -- {failed}` in the workspace)",
                                    case="a #[test] for {file}", case_short="a #[test]", label="Rust"),
                              tools=rust.TOOLS,
                              start=stub.start_rust)}


PLUGINS_ENV = "OL_LANGUAGES"  # languages outside the project: NAME=FILE entries (see the module's docstring)


def language(name: str) -> Language:
    known = {**plugged_in(os.environ.get(PLUGINS_ENV, "")), **LANGUAGES}  # a built-in name is never replaced
    if name not in known:
        raise UsageError(f"ol does not grade {name!r}; it grades {', '.join(known)}")
    return known[name]


@functools.lru_cache(maxsize=4)
def plugged_in(entries: str) -> dict[str, Language]:
    """The languages OL_LANGUAGES names (`entries`, its value): each FILE loaded once, its LANGUAGE checked."""
    found: dict[str, Language] = {}
    for entry in filter(None, entries.split(os.pathsep)):
        name, _, file = entry.partition("=")
        fix = f"{PLUGINS_ENV} holds {entry!r}: each entry is NAME=FILE, FILE a Python module defining LANGUAGE, a Language named NAME"
        if not name.isidentifier() or not Path(file).is_file():
            raise UsageError(fix)
        try:
            module = load_module(Path(file), f"ol_language_{name}")
        except ImportError as e:
            raise UsageError(f"{fix} ({e})") from e
        lang = getattr(module, "LANGUAGE", None)
        if not isinstance(lang, Language) or lang.name != name:
            raise UsageError(fix)
        found[name] = lang
    return found


SOURCE_ROOTS = (rust.COURSE_CRATES.parent.name,)  # the repository's folders a language's build reads (the harness version)


def in_process() -> Language:
    """The language ol itself runs in: its trusted subjects (the reference, a mutant) run inside ol's own process, and
    a subject no language was asked for is in it."""
    return next(lang for lang in LANGUAGES.values() if lang.in_process)
