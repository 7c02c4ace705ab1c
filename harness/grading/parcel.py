"""One submission as bytes that can travel: what `ol grade` ships to wherever a submission is graded.

`pack` makes a zip of a class folder's entry (a folder, a bare chapter file or a zip; its top-level name inside),
the same way every time, and its content digest; `unpack` lays it out again under a fresh folder, where the judge
grades it as the original. The local default and a Dask cluster both grade from the parcel: the same bytes.

What is walked, and refused, is harness.subjects.upload's rule: a link, a special file, past ENTRY_CAP or
DEPTH_CAP is a ParcelError naming it (the submission is rejected, with the reason); the folders it skips are not
shipped. A parcel holds at most SHIP_CAP bytes of files (source code is kilobytes).

A name need not be UTF-8: the zip names each entry by its bytes, percent-encoded, and `unpack` makes them again.
The digest covers each shipped path, whether it is executable, and its bytes (not timestamps, nor the zip's
compression): the same files have the same digest on every machine (the ledger's key).
"""

from dataclasses import dataclass
import hashlib
import io
import os
import zipfile
from pathlib import Path, PurePosixPath
from urllib.parse import quote, unquote_to_bytes

from ..kernel.errors import BadSubmission
from ..subjects import upload
from ..subjects.layout import ZIP_CAP as SHIP_CAP  # bytes of files one submission may ship: as much as its zip may hold
_EPOCH = (1980, 1, 1, 0, 0, 0)  # every entry's timestamp: the zip of the same files is the same bytes


class ParcelError(Exception):
    """The submission cannot be shipped (a link, too large, unreadable): it is rejected with this reason."""


@dataclass(frozen=True)
class Parcel:
    name: str  # the entry's name in the class folder (the report's `submission`)
    data: bytes  # a zip holding the entry under its own name
    digest: str  # sha256 of the shipped content (harness.grading.ledger keys a grade by it)


def _walk(entry: Path) -> list[tuple[str, Path | None, bool]]:
    """(posix path relative to the entry's parent, file or None for a folder, executable) of what is shipped."""
    if entry.is_symlink():
        raise ParcelError(upload.link_reason(entry, entry.name))
    try:
        with upload.reading(entry.name, "make it readable"):  # any failure listing the upload is its rejection
            return [(rel + "/" if folder else rel, None if folder else path, executable)
                    for rel, path, folder, executable in upload.walk(entry, entry.name)]
    except BadSubmission as e:
        raise ParcelError(str(e)) from None


def _read(entry: Path):
    """Each shipped (path, bytes or None, executable), capped at SHIP_CAP bytes in all."""
    total = 0
    for rel, path, executable in _walk(entry):
        data = None
        if path is not None:
            try:
                with upload.reading(rel, "make it readable, or leave it out"), open(path, "rb") as f:
                    data = f.read(SHIP_CAP - total + 1)  # never more than the cap: a huge file is refused, not read
            except BadSubmission as e:  # any failure reading the upload's bytes is its rejection
                raise ParcelError(str(e)) from None  # its path names the entry
            total += len(data)
            upload.tick(nbytes=len(data))
            if total > SHIP_CAP:
                raise ParcelError(f"{entry.name} holds more than {SHIP_CAP >> 20} MiB of files (build outputs and "
                                  "__pycache__ left out): source code is kilobytes; remove what is not source")
        yield rel, data, executable


def digest(entry: Path) -> str:
    """The content digest `pack` would give, without making the zip (the ledger's quick look)."""
    h = hashlib.sha256(b"ol-parcel-1\n")
    for rel, data, executable in _read(entry):
        _feed(h, rel, data, executable, entry.name)
    return h.hexdigest()


def _feed(h, rel: str, data: bytes | None, executable: bool, name: str) -> None:
    inner = rel[len(name):]  # the path below the entry: its name in the class folder is not content
    if data is None:
        h.update(b"d %s\n" % os.fsencode(inner))
    else:
        h.update(b"f %s %s %d\n" % (os.fsencode(inner), b"x" if executable else b"-", len(data)))
        h.update(data)


def pack(entry: Path) -> Parcel:
    """The entry as a parcel; a ParcelError when it cannot be shipped."""
    h = hashlib.sha256(b"ol-parcel-1\n")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for rel, data, executable in _read(entry):
            _feed(h, rel, data, executable, entry.name)
            info = zipfile.ZipInfo(_zip_name(rel), _EPOCH)
            info.external_attr = ((0o40755 if data is None else 0o100755 if executable else 0o100644) << 16)
            info.compress_type = zipfile.ZIP_STORED if data is None else zipfile.ZIP_DEFLATED
            z.writestr(info, b"" if data is None else data)
    return Parcel(entry.name, buf.getvalue(), h.hexdigest())


def _zip_name(rel: str) -> str:
    """A shipped path's zip name: its bytes percent-encoded (ASCII whatever its encoding; a folder's / kept)."""
    return quote(os.fsencode(rel), safe="/")


def unpack(parcel: Parcel, into: Path) -> Path:
    """Lay the parcel out in the empty folder `into`; returns the submission's path there (into / name)."""
    into.mkdir(parents=True, exist_ok=True)
    total = 0
    with zipfile.ZipFile(io.BytesIO(parcel.data)) as z:
        for info in z.infolist():
            upload.tick(entries=1, nbytes=info.file_size)
            rel = PurePosixPath(os.fsdecode(unquote_to_bytes(info.filename)))
            if rel.is_absolute() or ".." in rel.parts or not rel.parts or rel.parts[0] != parcel.name:
                raise ParcelError(f"the parcel of {parcel.name} names {info.filename!r}, outside the submission")
            target = into.joinpath(*rel.parts)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            total += info.file_size
            if total > SHIP_CAP:
                raise ParcelError(f"the parcel of {parcel.name} unpacks to more than {SHIP_CAP >> 20} MiB")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(info))
            target.chmod(0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
    return into / parcel.name
