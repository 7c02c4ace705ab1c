"""Which language a submission is in and where its files are: the one layout function.

`ol check`, `ol diff`, `ol grade` and the Gradescope bundle all call `detect`. For a language whose package is
`pkg` and whose chapter file is `pkg/sub/file.ext` (chapter.toml's `package` and `student_files`), it accepts:

    DIR/pkg/...                  a course workspace (its `default_workspace`), or an upload of the package folder
    DIR (DIR named pkg)          the package folder itself
    DIR/file.ext, or file.ext    the chapter's file alone (a bare upload): the rest comes from the reference
    DIR/.../pkg/sub/file.ext     the package one or more folders down (an archive's top folder)
    a .zip of any of these       extracted into a scratch folder first (no absolute names, no `..`, no link
                                 entries; bounded size, count and depth; an encrypted or corrupt one refused)

A package one folder deep in its workspace (`libs/eng`) is also accepted as its own last folder: DIR named eng,
or DIR/.../eng/sub/file.ext, copied into libs/eng of a scratch folder.

Nothing of the upload is read before harness.subjects.upload.walk accepted it. Anything else is a BadSubmission
that says what to hand in.
"""

from dataclasses import dataclass, field
import os
import shutil
import stat
import tempfile
import zipfile
from pathlib import Path

from ..kernel.errors import BadSubmission
from ..registry import Chapter, LanguageSpec
from . import upload

ZIP_CAP = 64 * 1024**2  # uncompressed bytes a submission archive may hold: source code is kilobytes


@dataclass
class Submission:
    language: str
    origin: Path  # what was named
    root: Path  # the folder holding the package
    layout: str  # workspace | package | bare | nested (with " (zip)" when it came as an archive)
    bare: bool = False  # only the chapter's own file: everything else must come from the reference
    missing_deps: list[str] = field(default_factory=list)
    scratch: Path | None = None  # made for a bare file or an archive; close() removes it

    def close(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def _what_to_hand_in(chapter: Chapter) -> str:
    ways = []
    for lang in chapter.languages.values():
        ways.append(f"a folder holding {lang.package}/ (with {lang.student_file})")
        if len(Path(lang.package).parts) > 1:  # the crate folder on its own: tl-engine/
            ways.append(f"the folder {Path(lang.package).name}/ alone")
        ways += [f"the file {name} alone" for name in lang.uploads]
    return "; ".join(ways) + ", or a .zip of one of these"


NAME_PART_CAP = 255  # bytes of one part of a name: what a Linux filesystem holds


def _unzipping(archive: Path):
    """Reading the archive's bytes (its directory, an entry's header and stream): any failure is the upload's
    rejection, whatever its type (a corrupt deflate, bzip2 or LZMA stream, a bad CRC, a truncated file...)."""
    return upload.reading(str(archive), "make it again with zip or your file manager, or upload the files themselves",
                          how="is not a readable zip archive")


def _zip_problem(info: zipfile.ZipInfo) -> str | None:
    """Why this archive entry is refused, or None."""
    name = Path(info.filename)
    if name.is_absolute() or ".." in name.parts or not name.parts:
        return f"holds the unsafe name {info.filename!r}"
    if any(len(os.fsencode(part)) > NAME_PART_CAP for part in name.parts) or "\0" in info.filename:
        return f"holds a name no filesystem holds ({info.filename[:200]!r}: a part over {NAME_PART_CAP} bytes, or a NUL)"
    kind = stat.S_IFMT(info.external_attr >> 16)
    if kind == stat.S_IFLNK:
        return (f"holds {info.filename!r} as a symbolic link: no link in an upload is followed; zip the files "
                "themselves (zip without -y)")
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        return f"holds {info.filename!r}, which is neither a file nor a folder: zip only your source files"
    if info.flag_bits & 0x1:
        return f"is encrypted ({info.filename!r} needs a password): upload a zip made without a password"
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        return (f"uses a compression method ol cannot read (method {info.compress_type}, for {info.filename!r}): "
                "make the zip with zip or your file manager")
    if len(name.parts) > upload.DEPTH_CAP + 1:
        return f"holds {info.filename[:200]!r}..., more than {upload.DEPTH_CAP} folders deep: zip your package only"
    return None


def _extract(archive: Path, into: Path) -> Path:
    """The archive's checked entries extracted into `into`: a failure reading its bytes is its rejection
    (_unzipping), one writing ol's copy ol's own (harness.subjects.upload.writing)."""
    with _unzipping(archive):
        z = zipfile.ZipFile(archive)
    with z:
        infos = z.infolist()
        if len(infos) > upload.ENTRY_CAP:
            raise BadSubmission(f"{archive}: the archive holds more than {upload.ENTRY_CAP} entries; upload only your source")
        total = 0
        for info in infos:
            if (problem := _zip_problem(info)) is not None:
                raise BadSubmission(f"{archive}: the archive {problem}")
            total += info.file_size
            if total > ZIP_CAP:
                raise BadSubmission(f"{archive}: the archive unpacks to more than {ZIP_CAP >> 20} MiB; upload only your source")
        for info in infos:
            _extract_one(z, info, into, archive)
    return into


def _extract_one(z: zipfile.ZipFile, info: zipfile.ZipInfo, into: Path, archive: Path, chunk: int = 1 << 20) -> None:
    """One checked entry (_zip_problem: no absolute name, no `..`) extracted, a chunk at a time, each counted
    against the work's deadline (harness.subjects.upload.tick): a slow archive is stopped inside an entry, not after it."""
    upload.tick(entries=1)
    target = into.joinpath(*Path(info.filename).parts)
    shown = f"{archive}: the archive's {info.filename!r}"
    if info.is_dir():
        with upload.writing(shown):
            target.mkdir(parents=True, exist_ok=True)
        return
    with _unzipping(archive):
        src = z.open(info)
    with src, upload.writing(shown):
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as dst:
            while True:
                with _unzipping(archive):
                    data = src.read(chunk)
                if not data:
                    break
                upload.tick(nbytes=len(data))
                dst.write(data)


def _copy_in(src: Path, dst: Path, shown: str) -> None:
    """The upload's file or tree `src` (walked: no link, bounded, caches left out) copied to ol's scratch `dst`:
    reading its bytes is the upload's (harness.subjects.upload.reading), writing them ol's (writing)."""
    with upload.reading(shown):
        entries = list(upload.walk(src))
    for rel, path, folder, _ in entries:
        target = dst.joinpath(*Path(rel).parts) if rel else dst
        if folder:
            with upload.writing(shown):
                target.mkdir(parents=True, exist_ok=True)
            continue
        with upload.reading(f"{shown}/{rel}" if rel else shown):
            data = path.read_bytes()
        upload.tick(nbytes=len(data))
        with upload.writing(shown):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def _bare(lang: LanguageSpec, file: Path, scratch: Path) -> Path:
    _copy_in(file, scratch / lang.uploads[file.name], file.name)
    return scratch


def _walked(found: Path, top: Path) -> bool:
    """Is `found` (from an rglob below `top`) a path harness.subjects.upload.walk checked, not one in a folder it skips
    (.git/, __pycache__/, a build's output), where a link may be?"""
    here = top
    for part in found.relative_to(top).parts[:-1]:
        here = here / part
        if upload.skipped(here, part):
            return False
    return not found.is_symlink()


def _locate(lang: LanguageSpec, path: Path) -> tuple[Path, str] | None:
    """(root, layout) of a folder in this language's package layout, or None."""
    if (path / lang.package).is_dir():
        return path, "workspace"
    if path.name == lang.package and (path.parent / lang.student_file).is_file():
        return path.parent, "package"
    found = sorted((p for p in path.rglob(lang.student_file) if _walked(p, path)), key=lambda p: len(p.parts))
    if found:
        return Path(*found[0].parts[:len(found[0].parts) - len(Path(lang.student_file).parts)]), "nested"
    return None


def _package_folder(lang: LanguageSpec, path: Path) -> Path | None:
    """The package folder of a nested package name (`eng/` whose place in the workspace is
    `libs/eng`) holding the chapter's file: `path` itself, or the shallowest one below it (the folder an
    upload lands in, /autograder/submission/eng, or an archive of it); else None."""
    pkg = Path(lang.package)
    if len(pkg.parts) < 2:
        return None
    inside = Path(lang.student_file).relative_to(pkg)  # src/spec.rs
    if path.name == pkg.name and (path / inside).is_file():
        return path
    found = sorted((p for p in path.rglob(str(Path(pkg.name) / inside)) if _walked(p, path) and p.is_file()),
                   key=lambda p: len(p.parts))
    return Path(*found[0].parts[:len(found[0].parts) - len(inside.parts)]) if found else None


def _detect_language(lang: LanguageSpec, path: Path, scratch_box: list) -> Submission | None:
    def scratch() -> Path:
        if not scratch_box:
            scratch_box.append(Path(tempfile.mkdtemp(prefix="ol-submission-")))
        return scratch_box[0]

    if path.is_file() and path.name in lang.uploads:
        return Submission(lang.name, path, _bare(lang, path, scratch()), "bare", bare=True)
    if path.is_dir():
        with upload.reading(path.name):  # looking into the upload: any failure is its rejection
            bare = [path / name for name in lang.uploads if (path / name).is_file()]
            located = _locate(lang, path)
            folder = _package_folder(lang, path) if located is None else None
        if folder is not None:  # e.g. tl-engine/ (or a folder holding it), for crates/tl-engine
            _copy_in(folder, scratch() / lang.package, folder.name)
            return Submission(lang.name, path, scratch(), "package")
        if located is not None:
            root, layout = located
            return Submission(lang.name, path, root, layout)
        if bare:
            return Submission(lang.name, path, _bare(lang, bare[0], scratch()), "bare", bare=True)
    return None


def detect(chapter: Chapter, path: Path | str, language: str | None = None) -> Submission:
    """The submission at `path` (resolved against the caller's working directory)."""
    origin = Path(path).expanduser().resolve()  # the user's own path: a link to it is theirs to follow, once
    if not origin.exists():
        raise BadSubmission(f"no submission at {path}: expected {_what_to_hand_in(chapter)}")
    langs = [chapter.language(language)] if language else list(chapter.languages.values())
    with upload.reading(str(path)):  # looking into the upload: any failure is its rejection
        try:
            upload.check(origin)  # nothing below it is read before: no link, no special file, bounded
        except BadSubmission as e:
            raise BadSubmission(f"{path}: {e}") from None
        look_at = origin
        zipped = origin.is_file() and origin.suffix == ".zip"
        if not zipped and origin.is_dir():
            archives = sorted(origin.glob("*.zip"))
            zipped = len(archives) == 1 and not any(p for p in origin.iterdir() if p.suffix != ".zip" and not p.name.startswith("."))
            look_at = archives[0] if zipped else origin
    scratch_box: list[Path] = []  # made for a bare file or an archive: removed unless a submission is returned in it
    try:
        if zipped:
            scratch_box.append(Path(tempfile.mkdtemp(prefix="ol-submission-")))
            look_at = _extract(look_at, scratch_box[0] / "unzipped")
            with upload.reading(f"{path}: in its archive, what it unpacked to"):
                try:
                    upload.check(look_at)
                except BadSubmission as e:
                    raise BadSubmission(f"{path}: in its archive, {e}") from None
        for lang in langs:
            sub = _detect_language(lang, look_at, scratch_box)
            if sub is None:
                continue
            sub.origin, sub.scratch = origin, scratch_box[0] if scratch_box else None
            sub.layout += " (zip)" if zipped else ""
            own = sub.root / lang.student_file
            if not own.is_file():
                raise BadSubmission(f"{path} holds {lang.package}/ but not {lang.student_file}, the chapter's file")
            with upload.reading(str(path)):
                sub.missing_deps = [d for d in lang.deps if not (sub.root / d).is_file()]
            return sub
        raise BadSubmission(f"{path} is not a submission of {chapter.chapter}: expected {_what_to_hand_in(chapter)}")
    except BaseException:
        for s in scratch_box:
            shutil.rmtree(s, ignore_errors=True)
        raise
