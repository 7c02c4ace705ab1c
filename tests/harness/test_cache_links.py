"""No link followed and nothing removed that ol did not make, in ol's cache (issue 36, item 3; harness.kernel.cache): a link
planted at $XDG_CACHE_HOME/ol, ol/rust, ol/rust/templates, ol/draws or ol/fresh, another user's folder, one open to
others: `ol check` and `ol grade` refuse it (exit 2, its path named) before anything runs, nothing is written through
it and nothing of its target removed; pruning removes only entries ol marked."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.kernel import cache, memo
from harness.languages import rust

REPO = Path(__file__).resolve().parents[2]
PLANTED = ("ol", "ol/rust", "ol/rust/templates", "ol/draws", "ol/fresh")


def target_with_folders(tmp_path: Path) -> tuple[Path, list[str]]:
    """A folder of someone's (the link's target) holding folders a pruner would remove."""
    target = tmp_path / "target"
    for name in [f"{i:016x}" for i in range(30)] + ["templates", "keep"]:
        (target / name).mkdir(parents=True)
        (target / name / "data").write_text("theirs")
    return target, sorted(p.name for p in target.rglob("*"))


def plant(tmp_path: Path, where: str) -> tuple[Path, Path, list[str]]:
    home = tmp_path / "cache"
    link = home / where
    link.parent.mkdir(parents=True, exist_ok=True)
    target, before = target_with_folders(tmp_path)
    link.symlink_to(target)
    return home, link, before


@pytest.mark.parametrize("where", PLANTED)
def test_a_planted_link_is_refused_naming_it_and_its_target_is_untouched(tmp_path, monkeypatch, where):
    home, link, before = plant(tmp_path, where)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    with pytest.raises(cache.CacheRefused) as e:
        cache.ready()
    assert str(link) in str(e.value) and "symbolic link" in str(e.value) and "Remove" in str(e.value)
    assert e.value.exit_code == 2
    memo.forget()
    assert memo.remembered(where.rsplit("/", 1)[-1], "k", lambda: ("made",)) == ("made",)  # made, not kept through it
    assert rust.prune_cache(link, kept=0, grace_s=0) == []  # nothing of the target is ol's
    assert sorted(p.name for p in (tmp_path / "target").rglob("*")) == before


def test_another_users_folder_or_one_open_to_others_is_refused(tmp_path, monkeypatch):
    home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    (home / "ol" / "rust").mkdir(parents=True, mode=0o700)
    (home / "ol").chmod(0o700)
    assert cache.ready() == home / "ol"
    (home / "ol" / "rust").chmod(0o777)
    with pytest.raises(cache.CacheRefused, match="rust is open to others"):
        cache.ready()
    (home / "ol" / "rust").chmod(0o700)
    if os.geteuid() == 0:
        os.chown(home / "ol" / "rust", 65534, 65534)
        with pytest.raises(cache.CacheRefused, match="belongs to uid 65534"):
            cache.folder("rust")
    with pytest.raises(cache.CacheRefused, match="draws is open to others"):  # what holds answers: 0700 alone
        (home / "ol" / "draws").mkdir(mode=0o755)
        (home / "ol" / "draws").chmod(0o755)
        cache.folder("draws", private=True)


def test_pruning_removes_only_the_entries_ol_marked(tmp_path):
    parent = tmp_path / "rust"
    parent.mkdir()
    old = time.time() - 10 * 86400
    made = [cache.entry(parent, f"{i:016x}") for i in range(5)]
    theirs = parent / "unmarked"
    theirs.mkdir()
    target, before = target_with_folders(tmp_path)
    (parent / "a-link").symlink_to(target)
    for p in [*made, theirs]:
        os.utime(p, (old, old))
    gone = cache.prune(parent, kept=1, grace_s=0)
    assert len(gone) == 4 and set(gone) <= set(made)
    assert theirs.is_dir() and (parent / "a-link").is_symlink()
    assert sorted(p.name for p in target.rglob("*")) == before
    with pytest.raises(cache.CacheRefused, match="symbolic link"):  # an entry that is a link is never used
        cache.entry(parent, "a-link")


def ol(args, env):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(REPO), **env})


@pytest.mark.slow(s=10)
@pytest.mark.parametrize("where", ("ol", "ol/rust/templates", "ol/draws"))
def test_ol_check_and_ol_grade_refuse_a_planted_cache_link_before_anything_runs(tmp_path, where):
    home, link, before = plant(tmp_path, where)
    env = {"XDG_CACHE_HOME": str(home)}
    r = ol(["check", "L10.8", "--submission", "reference", "-k", "hand_example_prompt_lookup"], env)
    assert r.returncode == 2 and str(link) in r.stderr and "symbolic link" in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "passed" not in r.stdout
    (tmp_path / "class" / "spec.py").parent.mkdir()
    (tmp_path / "class" / "spec.py").write_text((REPO / "reference/tinyllm/infer/spec.py").read_text())
    r = ol(["grade", "L10.8", str(tmp_path / "class"), "--no-sandbox", "--out", str(tmp_path / "out" / "g.csv")], env)
    assert r.returncode == 2 and str(link) in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "out" / "g.csv").exists()
    assert sorted(p.name for p in (tmp_path / "target").rglob("*")) == before
