"""From a fresh clone, the steps ol prints and the README gives, run literally, never touch ol's own files
(issue 38, item 1): `./ol start L10.8` once wrote its workspace into ./rust, where ol kept its own crates, and
`git status` showed them deleted. A real `git clone` of this checkout (its working tree as it is now, committed in
the clone), the steps run from its root and from another folder, then `git status` read."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def git(*args, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def fresh_clone(where: Path) -> Path:
    """`git clone` of this checkout, with the working tree's tracked and new files as they are committed on top."""
    clone = where / "ol"
    git("clone", "-q", str(REPO), str(clone), cwd=where)
    files = [f for f in git("ls-files", "-z", "-co", "--exclude-standard", cwd=REPO).split("\0") if f]
    for old in git("ls-files", "-z", cwd=clone).split("\0"):
        if old and (clone / old).is_file():
            (clone / old).unlink()
    for f in files:
        if (REPO / f).is_file() and not (REPO / f).is_symlink():
            (clone / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, clone / f)
    git("add", "-A", cwd=clone)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "the working tree", cwd=clone)
    return clone


def printed_steps(clone: Path) -> list[str]:
    """The bootstrap's "Next:" commands, then the README's quick start (but `./ol selftest`: that is this suite)."""
    next_line = next(line for line in (clone / "ol").read_text().splitlines() if "Next:" in line)
    steps = re.findall(r"\\`([^`\\]+)\\`", next_line)
    block = (clone / "README.md").read_text().split("## Quick start", 1)[1].split("```")[1]
    steps += [line.strip() for line in block.splitlines() if line.strip().startswith("./ol") and "selftest" not in line]
    assert steps[:2] == ["./ol start L10.8", "./ol check L10.8"], steps
    return steps


def deletions(clone: Path) -> list[str]:
    return [line for line in git("status", "--porcelain", cwd=clone).splitlines() if "D" in line[:2] or "M" in line[:2]]


def run(step: str, cwd: Path, clone: Path) -> subprocess.CompletedProcess:
    argv = step.split()
    argv[0] = str(clone / "ol")  # `./ol` from the root; the clone's ol by its path from another folder
    env = {**os.environ, "OL_VENV": str(Path(sys.prefix))}  # this suite's environment: no install
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow(s=150)
@pytest.mark.parametrize("where", ["root", "elsewhere"])
def test_the_printed_first_steps_leave_the_clone_without_a_deletion(tmp_path, where):
    clone = fresh_clone(tmp_path)
    cwd = clone if where == "root" else tmp_path / "student"
    cwd.mkdir(exist_ok=True)
    for step in printed_steps(clone):
        r = run(step, cwd, clone)
        assert r.returncode in (0, 1), f"{step} in {cwd}: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
        assert not deletions(clone), f"after `{step}` in {cwd}: {deletions(clone)}"
    assert (cwd / "rust" / "crates" / "tl-engine" / "src" / "spec.rs").is_file()
    check = run("./ol check L10.8", cwd, clone)
    assert check.returncode == 1 and "0 of 16 passed" in check.stdout, check.stdout[-2000:] + check.stderr[-2000:]


def test_ol_start_refuses_a_folder_holding_ol_s_own_files(tmp_path):
    clone = fresh_clone(tmp_path)
    for target in ("course", ".", "chapters/L10_8"):
        r = run(f"./ol start L10.8 {target}", clone, clone)
        assert r.returncode == 2, (target, r.stdout, r.stderr)
        assert "holds files of ol itself" in r.stderr and "`ol start L10.8 " in r.stderr, r.stderr
        assert not deletions(clone), (target, deletions(clone))
