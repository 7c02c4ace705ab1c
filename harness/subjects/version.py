"""The harness version a grade is made with, as data: what a judge reads and runs on, and its digest.

Two machines grade alike when they hold the same harness, pack, references and fixtures and run the same
interpreter (major.minor) and versions of the student lock's packages (what a judge imports: numpy's bits,
Hypothesis's draws, pytest's collection). `version_of(chapter)` lists these; its `digest` keys the ledger, and a
Dask worker compares its components with the client's before it grades, naming those that differ.

The files' part hashes every file under FILE_ROOTS and the pack (paths and bytes, in order), caches and build
outputs left out, recomputed when a file's size or mtime changed: an edit changes the version at once.
"""

from functools import lru_cache
import hashlib
import os
from pathlib import Path

from ..languages import INTERPRETER, SOURCE_ROOTS, interpreter_version
from ..kernel.paths import REPO
from ..kernel.roles import locked_names, package_version

FILE_ROOTS = ("harness", "reference", *SOURCE_ROOTS, "fixtures", "config", "spec", "pyproject.toml")  # and the pack
SKIPPED = {"__pycache__", "target", ".git", ".pytest_cache", ".ruff_cache"}


def _files(roots: list[Path]) -> list[Path]:
    out = []
    for root in roots:
        if root.is_file():
            out.append(root)
            continue
        for top, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not d.startswith("."))
            out += [Path(top) / f for f in sorted(files) if not f.endswith((".pyc", ".pyo")) and not f.startswith(".")]
    return out


def files_digest(chapter) -> str:
    """sha256 over the paths (relative to the project) and bytes of every file a judge may read."""
    files = _files([REPO / r for r in FILE_ROOTS] + [Path(chapter.pack_dir)])
    return _digest(tuple((str(f), s.st_size, s.st_mtime_ns) for f in files for s in [f.stat()]), Path(chapter.pack_dir))


@lru_cache(maxsize=1)
def _digest(signature: tuple, pack_dir: Path) -> str:
    """The files' digest, made again only when the files' stat signature (path, size, mtime of each) changed."""
    h = hashlib.sha256()
    for name, _, _ in signature:
        f = Path(name)
        rel = f.relative_to(REPO).as_posix() if f.is_relative_to(REPO) else f"pack/{f.relative_to(pack_dir).as_posix()}"
        data = f.read_bytes()
        h.update(b"%s %d\n" % (rel.encode(), len(data)))
        h.update(data)
    return h.hexdigest()


@lru_cache(maxsize=1)
def _tools() -> dict:
    packages = {name: package_version(name) for name in locked_names("student")}  # the judge's: a staff machine's extras decide no grade
    return {INTERPRETER: interpreter_version(), "packages": packages}


def version_of(chapter) -> dict:
    """{"chapter", "files", INTERPRETER, "packages", "digest"}: the digest is the short key of the rest."""
    v = {"chapter": chapter.chapter, "files": files_digest(chapter), **_tools()}
    body = repr(sorted((k, repr(v[k])) for k in v)).encode()
    return {**v, "digest": hashlib.sha256(body).hexdigest()[:16]}


def differences(mine: dict, theirs: dict) -> list[str]:
    """What differs between two versions, in words ('numpy 2.1.0 here, 1.26.4 on the client'); [] when none."""
    out = []
    if mine.get("chapter") != theirs.get("chapter"):
        out.append(f"chapter {mine.get('chapter')} here, {theirs.get('chapter')} on the client")
    if mine.get("files") != theirs.get("files"):
        out.append(f"the harness, chapter pack, references or fixtures differ (files {str(mine.get('files'))[:12]} here, "
                   f"{str(theirs.get('files'))[:12]} on the client: another checkout, or edited files)")
    if mine.get(INTERPRETER) != theirs.get(INTERPRETER):
        out.append(f"{INTERPRETER.capitalize()} {mine.get(INTERPRETER)} here, {theirs.get(INTERPRETER)} on the client")
    for name in sorted(set(mine.get("packages", {})) | set(theirs.get("packages", {}))):
        a, b = mine.get("packages", {}).get(name), theirs.get("packages", {}).get(name)
        if a != b:
            out.append(f"{name} {a or 'missing'} here, {b or 'missing'} on the client")
    return out
