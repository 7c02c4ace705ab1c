"""Installs by role, from the one lock: what each of ol's users installs, and what a command needs beyond it.

pyproject.toml names the requirements of three roles; uv resolves them together into `uv.lock` and `locks/update`
exports one hashed requirements file a role: what `./ol`, the Gradescope setup.sh and the Docker recipe install
(`pip install --require-hashes --no-deps -r locks/ROLE.txt`, then ol itself, editable, with no dependencies):

* student (the default, pyproject's `dependencies`): `ol check`, `start`, `diff`, `tests`, a language's test front
  end, and so the Gradescope image;
* staff (the `staff` extra): + grading a class (`ol grade`, `report`, `similar`: Dask, matplotlib, copydetect),
  `ol mutmut`, dask-jobqueue: the staff's machines and every Dask worker;
* dev (the `dev` extra): + what ol's own suite needs (`ol selftest`: pytest-xdist, safetensors).

A command above the student's role asks for its extra by name when a package of it is missing (`require`).
`drift` says how this environment differs from a role's lock (tests/harness/test_lock.py; harness.subjects.version
compares the judge's packages between a Dask worker and its client).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import metadata
from pathlib import Path
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canonical  # a name as the lock and pip compare it (PEP 503)

from .errors import UsageError
from .paths import REPO

ROLES = ("student", "staff", "dev")  # each holds the one before it
LOCKS = REPO / "locks"
UNLOCKED = {"ol", "pip", "setuptools", "wheel"}  # ol itself (editable) and the venv's own installer: not in the lock
HOW = {"staff": "OL_EXTRAS=staff ./ol --help", "dev": "OL_EXTRAS=dev ./ol --help"}  # installs the role into .venv


class ExtraMissing(UsageError):
    """A command of the staff's (or ol's own suite) run where only a smaller role is installed (exit 2)."""


def lock_file(role: str) -> Path:
    return LOCKS / f"{role}.txt"


@lru_cache(maxsize=None)
def locked(role: str) -> tuple[Requirement, ...]:
    """Every pin of the role's lock, whatever its marker (one package may be pinned twice, per interpreter version)."""
    # each requirement of a uv export: its first line (`name==version ; marker \\`), hashes and comments aside
    return tuple(Requirement(line.split(" \\")[0].strip()) for line in lock_file(role).read_text().splitlines()
                 if line[:1].isalnum())


def locked_names(role: str) -> tuple[str, ...]:
    return tuple(sorted({canonical(r.name) for r in locked(role)}))


def pins(role: str) -> dict[str, str]:
    """{name: version} the role's lock installs on this interpreter and machine (its markers evaluated)."""
    return {canonical(r.name): str(r.specifier).removeprefix("==") for r in locked(role)
            if r.marker is None or r.marker.evaluate()}


def installed() -> dict[str, str]:
    """{name: version} of every distribution this interpreter's environment holds, ol and the installer aside."""
    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = canonical(dist.metadata["Name"] or "")
        if name and name not in UNLOCKED:
            found.setdefault(name, dist.version)  # the first on the path is the one imported
    return found


def drift(role: str, have: dict[str, str] | None = None) -> list[str]:
    """How this environment (or `have`) differs from the role's lock, in words; [] when `pip freeze` is the lock."""
    want = pins(role)
    have = {name: version for name, version in (installed() if have is None else have).items() if name not in UNLOCKED}
    out = []
    for name in sorted(set(want) | set(have)):
        if name not in have:
            out.append(f"{name} missing (locks/{role}.txt pins {want[name]})")
        elif name not in want:
            out.append(f"{name} {have[name]} installed, not in locks/{role}.txt")
        elif have[name] != want[name]:
            out.append(f"{name} {have[name]} installed, locks/{role}.txt pins {want[name]}")
    return out


def extra_requirements(extra: str, project: dict | None = None) -> list[Requirement]:
    """The extra's own requirements in pyproject.toml, with those of the extras it names (`ol[staff]`)."""
    project = project or tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    out = []
    for line in project.get("optional-dependencies", {}).get(extra, []):
        r = Requirement(line)
        out += [q for e in sorted(r.extras) for q in extra_requirements(e, project)] if canonical(r.name) == "ol" else [r]
    return out


def package_version(name: str) -> str | None:
    """The installed version of the distribution `name`, None when it is not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def require(extra: str, command: str) -> None:
    """Refuse (ExtraMissing, exit 2) to run `ol COMMAND` where a package of its extra is missing, saying how to get it."""
    lacking = [r.name for r in extra_requirements(extra) if package_version(r.name) is None]  # not installed here
    if lacking:
        raise ExtraMissing(f"`ol {command}` needs the {extra} extra ({', '.join(lacking)} not installed here): run "
                           f"`{HOW[extra]}` once, which installs locks/{extra}.txt into .venv, then run the command again "
                           f"(or `pip install --require-hashes --no-deps -r locks/{extra}.txt` into your own environment)")
