"""harness.kernel.memo: a value made once, read back the same (types and all), kept only where this user alone
writes, and anything it cannot trust made again."""

import math
import os

import pytest

from harness.kernel import memo

VALUE = [(1, [2, 3]), (-0.0, float("nan"), float("inf")), {"b": 1, "a": (None, True, "é\x00")}, 2**70, -(2**64)]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    memo.forget()
    yield tmp_path / "xdg" / "ol" / "t"
    memo.forget()


class Maker:
    def __init__(self, value=VALUE):
        self.value, self.calls = value, 0

    def __call__(self):
        self.calls += 1
        return self.value


def same(a, b) -> bool:
    return repr(a) == repr(b) and type(a) is type(b)


def test_a_value_is_made_once_and_read_back_whole_by_the_next_process(cache):
    make = Maker()
    assert memo.remembered("t", "k", make) is VALUE and make.calls == 1
    assert memo.remembered("t", "k", make) is VALUE and make.calls == 1, "this process's memory"
    memo.forget()  # the next process: only the disk
    back = memo.remembered("t", "k", make)
    assert make.calls == 1 and same(back, VALUE), back
    assert math.copysign(1, back[1][0]) == -1 and math.isnan(back[1][1]) and list(back[2]) == ["b", "a"]
    assert [p.name for p in cache.iterdir()] == [f.name for f in cache.glob("*.marshal")], "no file left half-written"
    assert oct(cache.stat().st_mode & 0o777) == oct(0o700)


def test_another_key_is_made_anew():
    memo.remembered("t", "k1", Maker())
    other = Maker([1])
    assert memo.remembered("t", "k2", other) == [1] and other.calls == 1


@pytest.mark.parametrize("spoil", ["damaged", "empty", "another key", "writable by others", "a link"])
def test_a_file_it_cannot_trust_is_a_miss_made_again_and_rewritten(cache, tmp_path, spoil):
    memo.remembered("t", "k", Maker())
    memo.forget()
    (path,) = cache.glob("*.marshal")
    if spoil == "damaged":
        path.write_bytes(path.read_bytes()[:-7])
    elif spoil == "empty":
        path.write_bytes(b"")
    elif spoil == "another key":
        memo.remembered("t", "other", Maker(["planted"]))
        memo.forget()
        (planted,) = set(cache.glob("*.marshal")) - {path}
        os.replace(planted, path)
    elif spoil == "writable by others":
        path.chmod(0o666)
    else:
        target = tmp_path / "elsewhere.marshal"
        os.replace(path, target)
        path.symlink_to(target)
    make = Maker()
    assert same(memo.remembered("t", "k", make), VALUE) and make.calls == 1, f"{spoil}: made again"
    memo.forget()
    again = Maker()
    assert same(memo.remembered("t", "k", again), VALUE) and again.calls == 0, f"{spoil}: rewritten, then read back"
    assert not path.is_symlink()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to give a file to another user")
def test_a_file_of_another_user_is_a_miss(cache):
    memo.remembered("t", "k", Maker())
    memo.forget()
    (path,) = cache.glob("*.marshal")
    os.chown(path, 64999, 64999)
    make = Maker()
    assert same(memo.remembered("t", "k", make), VALUE) and make.calls == 1


def test_a_value_marshal_cannot_hold_is_made_each_time(cache):
    odd = Maker([object()])
    memo.remembered("t", "k", odd)
    memo.forget()
    memo.remembered("t", "k", odd)
    assert odd.calls == 2 and not list(cache.glob("*"))


def test_a_cache_that_cannot_be_written_still_gives_the_value(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    make = Maker()
    assert memo.remembered("t", "k", make) is VALUE and make.calls == 1


@pytest.mark.parametrize("folder", ["a link elsewhere", "open to others"])
def test_a_kind_folder_that_is_a_link_or_open_to_others_is_never_written_into(cache, tmp_path, folder):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache.parent.mkdir(parents=True)
    if folder == "a link elsewhere":
        cache.symlink_to(elsewhere)
    else:
        cache.mkdir(mode=0o755)
        cache.chmod(0o755)
    make = Maker()
    assert memo.remembered("t", "k", make) is VALUE and make.calls == 1
    assert not list(elsewhere.iterdir()) and not list(cache.glob("*.marshal"))


def test_a_user_without_a_home_still_gets_the_value(monkeypatch):
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setattr(memo.Path, "home", classmethod(lambda cls: (_ for _ in ()).throw(RuntimeError("no home"))))
    make = Maker()
    assert memo.remembered("t", "k", make) is VALUE and make.calls == 1


def test_only_the_newest_files_are_kept(cache, monkeypatch):
    monkeypatch.setattr(memo, "KEPT", 3)
    for i in range(5):
        memo.remembered("t", f"k{i}", Maker([i]))
        for p in cache.glob("*.marshal"):  # each older than the next
            os.utime(p, (p.stat().st_mtime - 10, p.stat().st_mtime - 10))
    assert len(list(cache.glob("*.marshal"))) == 3
    memo.forget()
    newest = Maker([4])
    assert memo.remembered("t", "k4", newest) == [4] and newest.calls == 0
    oldest = Maker([0])
    assert memo.remembered("t", "k0", oldest) == [0] and oldest.calls == 1


def test_fresh_cases_are_built_once_per_seed_and_read_back_byte_for_byte(tmp_path, monkeypatch):
    """harness.check.golden.fresh_golden: the second check of a seed (another process: memory forgotten) reads
    the case set the first built, the same bytes, and builds nothing; another seed builds its own."""
    from harness.check import golden
    from harness.registry import load_chapter

    ch = load_chapter("L10.8")
    oracle = golden.oracle_of(ch)
    built = []
    for into in "abc":
        (tmp_path / into).mkdir()
    real = oracle.build
    monkeypatch.setattr(oracle, "build", lambda ref, seed: built.append(seed) or real(ref, seed))
    first = golden.fresh_golden(ch, 11, tmp_path / "a").read_bytes()
    memo.forget()
    second = golden.fresh_golden(ch, 11, tmp_path / "b").read_bytes()
    assert built == [11] and second == first
    memo.forget()
    assert golden.fresh_golden(ch, 12, tmp_path / "c").read_bytes() != first and built == [11, 12]
    assert oct((tmp_path / "b" / f"{ch.golden.stem}.fresh-11.json").stat().st_mode & 0o777) == oct(0o600)


def test_a_fresh_case_sets_key_names_every_file_of_the_pack_and_the_reference(tmp_path, monkeypatch):
    """The key's harness version (harness.subjects.version) changes with any byte of the oracle, the pack's other
    files (its case design, the shipped golden file) or the reference: a case set built by other code is never read."""
    import shutil
    from types import SimpleNamespace

    from harness.registry import load_chapter
    from harness.subjects import version

    ch = load_chapter("L10.8")
    pack = tmp_path / "pack"
    shutil.copytree(ch.pack_dir, pack, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(version.REPO / "reference", tmp_path / "reference", ignore=shutil.ignore_patterns("__pycache__", "target"))
    monkeypatch.setattr(version, "REPO", tmp_path)
    monkeypatch.setattr(version, "FILE_ROOTS", ("reference",))
    copy = SimpleNamespace(chapter=ch.chapter, pack_dir=pack)
    keys = {version.files_digest(copy)}
    for edited in (pack / "oracle" / "__init__.py", pack / "fixtures" / "spec_golden.json",
                   tmp_path / "reference" / "tinyllm" / "infer" / "spec.py"):
        edited.write_bytes(edited.read_bytes() + b" ")
        keys.add(version.files_digest(copy))
    assert len(keys) == 4, "each edit gives a new key"


def test_a_fresh_case_set_of_another_harness_version_is_built_again(tmp_path, monkeypatch):
    from harness.check import golden
    from harness.registry import load_chapter

    ch = load_chapter("L10.8")
    oracle = golden.oracle_of(ch)
    built = []
    real = oracle.build
    monkeypatch.setattr(oracle, "build", lambda ref, seed: built.append(seed) or real(ref, seed))
    golden.fresh_golden(ch, 11, tmp_path)
    memo.forget()
    other = {**golden.version_of(ch), "digest": "another-version"}
    monkeypatch.setattr(golden, "version_of", lambda chapter: other)
    golden.fresh_golden(ch, 11, tmp_path)
    assert built == [11, 11], "the same seed under another harness version is built, not read back"


def test_the_block_of_a_grading_seed_is_found_once_and_read_back(tmp_path, monkeypatch):
    """block_of walks from the grading seed's block to the first the reference passes: the reference's SEEDS verify
    calls each time, so it is kept on disk by seed and harness version; a second judge process reads it back (here:
    this process's memory forgotten, and any further chi-square a failure) and gets the same block."""
    from chapters.L10_8.judge import properties, stats
    from harness.pack import pristine

    ref = pristine("L10.8")
    reference, seed = properties.judge_reference(), 90210
    walked = 1 + stats.splitmix64(seed) % 2**40
    while stats.first_token_chi_square(reference, ref, walked).p_value <= stats.ALPHA:
        walked += 1
    assert stats.block_of(seed, reference, ref) == walked
    assert len(list((tmp_path / "xdg" / "ol" / "chi-square-block").iterdir())) == 1, "kept on disk, one file"
    memo.forget()
    monkeypatch.setattr(stats, "first_token_chi_square", lambda *a: pytest.fail("the block was walked again"))
    assert stats.block_of(seed, reference, ref) == walked
    assert stats.block_of(stats.MASTER_SEED, reference, ref) == 0, "the shipped cases' seed: block 0, nothing kept"
    memo.forget()
