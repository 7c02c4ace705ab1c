"""Any failure while reading an upload is that upload's rejection, whatever the exception type (issue 36, item 2):
mutated zips and tars (tests/harness/upload_fuzz_kit.py; thousands in bench/upload_fuzz.py) each get an accepted
layout or a rejection with its reason, never an internal error; the similarity names every one of them; and a
failure writing ol's own copy (a full disk) stays ol's, never the student's rejection."""

import errno
import zipfile
from pathlib import Path

import pytest

from harness.kernel.errors import BadSubmission
from harness.registry import load_chapter
from harness.staff.similar import sources
from harness.subjects import layout, upload
from tests.harness.upload_fuzz_kit import BASES, case, verdict

CH = load_chapter("L10.8")
SEED = 36  # the mutations are drawn from it: the same uploads on every run


@pytest.mark.slow(s=4)
def test_every_mutated_zip_and_tar_is_accepted_or_rejected_with_its_reason_never_an_internal_error(tmp_path):
    kinds, internal = {}, []
    for i in range(300):
        what, name, data = case(SEED, i)
        path = tmp_path / name
        path.write_bytes(data)
        kind, text = verdict(CH, path)
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "internal":
            internal.append(f"{name} ({what}): {text.strip().splitlines()[-1]}")
        elif kind == "rejected":
            assert name in text and len(text) > len(str(path)) + 10, (what, text)  # names the upload, says why
        path.unlink()
    assert not internal, internal[:10]
    assert kinds.get("rejected", 0) > 200, kinds  # the mutations do break the archives


@pytest.mark.slow(s=2)
def test_the_similarity_compares_the_honest_entries_and_names_every_mutated_one(tmp_path):
    for i in range(40):
        _what, name, data = case(SEED + 1, i)
        (tmp_path / name).write_bytes(data)
    (tmp_path / "honest.zip").write_bytes(BASES["zip-lzma"])
    docs, skipped = sources(CH, tmp_path)
    named = {d["name"] for d in docs} | {s["name"] for s in skipped}
    assert named == {p.name for p in tmp_path.iterdir() if p.suffix == ".zip"}, named
    assert "honest.zip" in {d["name"] for d in docs}
    assert all(s["why"].strip() for s in skipped), skipped


@pytest.mark.parametrize("method", [zipfile.ZIP_LZMA, zipfile.ZIP_BZIP2, zipfile.ZIP_DEFLATED])
def test_a_corrupt_stream_of_any_method_is_a_rejection_naming_its_error(tmp_path, method):
    good = zipfile.ZipFile(tmp_path / "good.zip", "w", method)
    good.writestr("spec.py", (Path(layout.__file__).read_bytes()))  # any text: the stream is what is broken
    good.close()
    data = bytearray((tmp_path / "good.zip").read_bytes())
    at = data.index(b"PK\x03\x04") + 30 + len("spec.py") + 24
    data[at:at + 32] = bytes(b ^ 0x55 for b in data[at:at + 32])
    (tmp_path / "bad.zip").write_bytes(bytes(data))
    with pytest.raises(BadSubmission, match=r"bad\.zip is not a readable zip archive \(\w+"):
        layout.detect(CH, tmp_path / "bad.zip")


def _zip(at: Path) -> Path:
    at.write_bytes(BASES["zip-deflate"])
    return at


def _failing_open(err: int):
    def fake(path, mode="r", *a, **k):
        if "w" in mode:
            raise OSError(err, f"fake {errno.errorcode[err]}")
        return open(path, mode, *a, **k)
    return fake


def test_a_full_disk_under_ol_s_scratch_is_ol_s_failure_not_the_upload_s(tmp_path, monkeypatch):
    monkeypatch.setattr(layout, "open", _failing_open(errno.ENOSPC), raising=False)
    with pytest.raises(upload.MachineFailure, match="ENOSPC"):
        layout.detect(CH, _zip(tmp_path / "a.zip"))


def test_a_name_the_filesystem_refuses_is_the_upload_s_rejection(tmp_path, monkeypatch):
    monkeypatch.setattr(layout, "open", _failing_open(errno.ENAMETOOLONG), raising=False)
    with pytest.raises(BadSubmission, match="cannot be laid out"):
        layout.detect(CH, _zip(tmp_path / "a.zip"))


def test_no_descriptor_left_while_reading_is_the_machine_s_not_the_upload_s(tmp_path, monkeypatch):
    def no_descriptors(*_a, **_k):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(zipfile, "ZipFile", no_descriptors)
    with pytest.raises(upload.MachineFailure, match="Too many open files"):
        layout.detect(CH, _zip(tmp_path / "a.zip"))


def test_any_exception_reading_is_a_rejection_but_a_refusal_and_the_deadline_pass_as_they_are():
    class Odd(Exception):
        pass

    with pytest.raises(BadSubmission, match=r"x\.zip cannot be read \(Odd: odd\): upload"):
        with upload.reading("x.zip"):
            raise Odd("odd")
    with pytest.raises(BadSubmission, match="^as it was$"):
        with upload.reading("x.zip"):
            raise BadSubmission("as it was")
    with pytest.raises(KeyboardInterrupt):
        with upload.reading("x.zip"):
            raise KeyboardInterrupt
