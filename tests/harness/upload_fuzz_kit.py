"""Mutated archives for the upload fuzz (tests/harness/test_upload_fuzz.py, a few hundred; bench/upload_fuzz.py,
thousands): each a valid upload of an honest package (a zip stored, deflated, bzip2'd or LZMA'd; a tar, plain,
gzip, bzip2 or xz) with one to three mutations drawn from a seed: bit flips, a truncation, a wrong compression
method in a header (LZMA and bzip2 over another method's stream included), bad header bytes, huge declared
sizes, an entry turned into a link or a device, a name turned into `../` or an absolute path, a splice of
random bytes. Each is named `.zip` (what the layout reads), a tar most often so too (a tar is no zip), else
`.tar` (no submission). `verdict` puts one through the one layout function, as every command does: an
accepted layout, a rejection with its reason, or an internal error (any other exception: what must never be).
"""

from __future__ import annotations

import io
import random
import stat
import tarfile
import traceback
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SPEC = (REPO / "examples" / "submissions" / "correct" / "tinyllm" / "infer" / "spec.py").read_bytes()
FILES = {"tinyllm/__init__.py": b"", "tinyllm/infer/__init__.py": b"", "tinyllm/infer/spec.py": SPEC}
ZIP_METHODS = {"stored": zipfile.ZIP_STORED, "deflate": zipfile.ZIP_DEFLATED, "bzip2": zipfile.ZIP_BZIP2,
               "lzma": zipfile.ZIP_LZMA}
TAR_MODES = {"tar": "w", "tar-gz": "w:gz", "tar-bz2": "w:bz2", "tar-xz": "w:xz"}
LOCAL, CENTRAL = b"PK\x03\x04", b"PK\x01\x02"


def zip_of(method: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        for name, data in FILES.items():
            z.writestr(name, data)
    return buf.getvalue()


def tar_of(mode: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as t:
        for name, data in FILES.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


BASES = {**{f"zip-{k}": zip_of(m) for k, m in ZIP_METHODS.items()}, **{k: tar_of(m) for k, m in TAR_MODES.items()}}


def _headers(data: bytearray) -> list[tuple[int, bool]]:
    """(offset, is central) of every zip header signature in `data`."""
    found, at = [], 0
    while (at := data.find(b"PK", at)) >= 0:
        if data[at:at + 4] in (LOCAL, CENTRAL):
            found.append((at, data[at:at + 4] == CENTRAL))
        at += 2
    return found


def _put(data: bytearray, at: int, value: int, width: int) -> None:
    if 0 <= at and at + width <= len(data):
        data[at:at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")


def flip(data: bytearray, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return "bit flips"


def truncate(data: bytearray, rng: random.Random) -> str:
    del data[rng.randrange(len(data)):]
    return "truncated"


def method(data: bytearray, rng: random.Random) -> str:
    """A header's compression method replaced: LZMA or bzip2 over another's stream, an unknown one, ..."""
    m = rng.choice([0, 8, 12, 14, 1, 6, 9, 93, 95, 98, 99, 0xFFFF])
    for at, central in _headers(data):
        if rng.random() < 0.7:
            _put(data, at + (10 if central else 8), m, 2)
    return f"method {m}"


def header(data: bytearray, rng: random.Random) -> str:
    """Random bytes over a header (a zip's local or central one; a tar's 512-byte block)."""
    heads = _headers(data) or [(rng.randrange(0, max(1, len(data) - 512), 512), False)]
    at, _ = rng.choice(heads)
    for _ in range(rng.randint(1, 6)):
        i = at + rng.randrange(46)
        if i < len(data):
            data[i] = rng.randrange(256)
    return "bad header"


def sizes(data: bytearray, rng: random.Random) -> str:
    """Declared sizes (compressed, uncompressed; a tar's size field) made huge, zero or off by a little."""
    value = rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 1 << 31, 0, 1, 64 << 20, 1 << 30])
    for at, central in _headers(data):
        if rng.random() < 0.7:
            _put(data, at + (20 if central else 18) + 4 * rng.randrange(2), value, 4)
    if not _headers(data) and len(data) >= 512:  # a tar: the size field, octal
        data[124:136] = b"77777777777\0"
    return "huge sizes"


def link(data: bytearray, rng: random.Random) -> str:
    """An entry made a link, a FIFO or a device (a zip's external attributes; a tar's type flag)."""
    kind = rng.choice([stat.S_IFLNK, stat.S_IFIFO, stat.S_IFCHR, stat.S_IFBLK, stat.S_IFSOCK])
    for at, central in _headers(data):
        if central and rng.random() < 0.7:
            _put(data, at + 38, (kind | 0o777) << 16, 4)
    if not _headers(data) and len(data) >= 512:
        data[156:157] = rng.choice([b"1", b"2", b"3", b"4", b"6"])
    return "link or device"


def dotdot(data: bytearray, rng: random.Random) -> str:
    """A name rewritten, its length kept: `../` parts, an absolute path, a NUL."""
    def bad(n: int) -> bytes:
        return rng.choice([b"../" * n, b"/" + b"a" * n, b"a/../../" * n, b"..\\" * n, b"\0" * n])[:n]

    for at, central in _headers(data):
        start = at + (46 if central else 30)
        n = int.from_bytes(data[at + (28 if central else 26):at + (30 if central else 28)], "little")
        if 0 < n <= 512 and start + n <= len(data) and rng.random() < 0.7:
            data[start:start + n] = bad(n)
    if not _headers(data) and len(data) >= 512:
        data[0:100] = bad(100)
    return "unsafe name"


def splice(data: bytearray, rng: random.Random) -> str:
    at = rng.randrange(len(data) + 1)
    data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    return "splice"


MUTATIONS = (flip, truncate, method, header, sizes, link, dotdot, splice)


def case(seed: int, i: int) -> tuple[str, str, bytes]:
    """The i-th mutated upload of `seed`: (what it is, its file name, its bytes)."""
    rng = random.Random(seed * 1_000_003 + i)
    base = list(BASES)[i % len(BASES)]
    data = bytearray(BASES[base])
    done = [m(data, rng) for m in rng.sample(MUTATIONS, rng.randint(1, 3)) if data]
    suffix = ".zip" if base.startswith("zip") or rng.random() < 0.75 else ".tar"
    return f"{base}: {', '.join(done)}", f"u{i:05d}{suffix}", bytes(data)


def verdict(chapter, path: Path) -> tuple[str, str]:
    """("accepted", layout), ("rejected", reason) or ("internal", traceback) of the upload at `path`, through the
    one layout function (harness.subjects.layout.detect)."""
    from harness.kernel.errors import BadSubmission
    from harness.subjects.layout import detect

    try:
        sub = detect(chapter, path)
    except BadSubmission as e:
        return "rejected", str(e)
    except Exception:  # noqa: BLE001 -- what the fuzz looks for: an exception that is no verdict
        return "internal", traceback.format_exc()
    sub.close()
    return "accepted", sub.layout
