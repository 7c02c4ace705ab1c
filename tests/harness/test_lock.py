"""The lock is the one source of what gets installed (issue 39): uv.lock agrees with pyproject.toml, each role's
export (locks/ROLE.txt) is uv.lock's resolution with its hashes for Linux x86_64 and aarch64, the roles nest, and
this environment is exactly its role's lock (`pip freeze`); a staff command where only the student set is
installed asks for its extra by name.

uv is not needed here: uv.lock records the requirements it was resolved from (`[package.metadata]` of the
project), so comparing them with pyproject.toml's says whether `locks/update` must run again, offline.
"""

import os
from pathlib import Path
import subprocess
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
import pytest

from harness.kernel import roles
from harness.kernel.paths import REPO

MACHINES = ("x86_64", "aarch64")  # Linux, both: the course's graders, Gradescope's images, the Dask workers


def _key(name: str, specifier: str, extras, extra: str | None) -> tuple:
    return roles.canonical(name), SpecifierSet(specifier or ""), frozenset(extras), extra


def pyproject_requirements(project: dict) -> set[tuple]:
    """(name, specifier, extras, the extra it belongs to or None) of every requirement pyproject.toml names."""
    out = {_key(r.name, str(r.specifier), r.extras, None) for r in map(Requirement, project["dependencies"])}
    for extra, lines in project.get("optional-dependencies", {}).items():
        out |= {_key(r.name, str(r.specifier), r.extras, extra) for r in map(Requirement, lines)}
    return out


def locked_requirements(lock: dict) -> set[tuple]:
    """The same, as uv.lock recorded them when it was made (the project's `requires-dist`)."""
    ol = next(p for p in lock["package"] if p["name"] == "ol")
    out = set()
    for r in ol["metadata"]["requires-dist"]:
        marker = r.get("marker", "")
        extra = marker.split("==")[1].strip(" '\"") if marker.startswith("extra ==") else None
        out.add(_key(r["name"], r.get("specifier", ""), r.get("extras", ()), extra))
    return out


def disagreements(project: dict, lock: dict) -> list[str]:
    """What pyproject.toml asks for and uv.lock was not made from, and the reverse."""
    want, have = pyproject_requirements(project), locked_requirements(lock)
    show = lambda k: f"{k[0]}{k[1]}" + (f" (extra {k[3]})" if k[3] else "")  # noqa: E731
    return ([f"pyproject.toml asks for {show(k)}, uv.lock was made without it" for k in sorted(want - have, key=str)]
            + [f"uv.lock was made from {show(k)}, no longer in pyproject.toml" for k in sorted(have - want, key=str)])


def load_lock() -> dict:
    return tomllib.loads((REPO / "uv.lock").read_text())


def load_project(text: str | None = None) -> dict:
    return tomllib.loads(text or (REPO / "pyproject.toml").read_text())["project"]


def test_uv_lock_was_made_from_this_pyproject_toml():
    assert disagreements(load_project(), load_lock()) == [], "run locks/update and commit uv.lock and locks/*.txt"


def test_a_changed_floor_or_a_new_requirement_is_a_disagreement():
    text = (REPO / "pyproject.toml").read_text()
    assert '"numpy>=1.26"' in text
    edited = load_project(text.replace('"numpy>=1.26"', '"numpy>=2.5"').replace('"jinja2>=3.1"', '"jinja2>=3.1", "pyte>=0.8"'))
    assert disagreements(edited, load_lock()) == [
        "pyproject.toml asks for numpy>=2.5, uv.lock was made without it",
        "pyproject.toml asks for pyte>=0.8, uv.lock was made without it",
        "uv.lock was made from numpy>=1.26, no longer in pyproject.toml"]
    moved = load_project(text.replace('    "copydetect>=0.5",', '').replace('"jinja2>=3.1",', '"jinja2>=3.1", "copydetect>=0.5",'))
    assert "pyproject.toml asks for copydetect>=0.5, uv.lock was made without it" in disagreements(moved, load_lock())


def _hashes(package: dict) -> set[str]:
    files = [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
    return {f["hash"] for f in files}


def _export(role: str) -> dict[tuple[str, str], set[str]]:
    """{(name, version): hashes} of a role's export."""
    out, current = {}, None
    for line in roles.lock_file(role).read_text().splitlines():
        if line[:1].isalnum():
            r = Requirement(line.split(" \\")[0])
            current = out.setdefault((roles.canonical(r.name), str(r.specifier).removeprefix("==")), set())
        elif line.strip().startswith("--hash=") and current is not None:
            current.add(line.strip().removeprefix("--hash=").rstrip(" \\"))
    return out


@pytest.mark.parametrize("role", roles.ROLES)
def test_each_role_s_export_is_uv_lock_s_resolution_with_its_hashes(role):
    lock = {(roles.canonical(p["name"]), p["version"]): p for p in load_lock()["package"] if p["name"] != "ol"}
    export = _export(role)
    assert export, f"locks/{role}.txt pins nothing"
    for pin, hashes in export.items():
        assert pin in lock, f"locks/{role}.txt pins {pin[0]}=={pin[1]}, which uv.lock does not hold: run locks/update"
        assert hashes and hashes == _hashes(lock[pin]), f"{pin}: the export's hashes are not uv.lock's: run locks/update"
    project = load_project()
    direct = [Requirement(line) for line in project["dependencies"]]
    if role != "student":
        direct += roles.extra_requirements(role, project)
    names = {name for name, _ in export}
    assert {roles.canonical(r.name) for r in direct} <= names, f"locks/{role}.txt lacks a requirement of its role"


def test_the_roles_nest_and_every_pin_installs_on_both_machines():
    pinned = {role: set(_export(role)) for role in roles.ROLES}
    assert pinned["student"] < pinned["staff"] < pinned["dev"], "a staff install holds the student's, the dev's the staff's"
    assert {"distributed", "matplotlib", "copydetect", "mutmut"}.isdisjoint(roles.locked_names("student"))
    lock = {(roles.canonical(p["name"]), p["version"]): p for p in load_lock()["package"]}
    for pin in pinned["dev"]:
        wheels = [w["url"].rsplit("/", 1)[1] for w in lock[pin].get("wheels", [])]
        for machine in MACHINES:
            ok = any(w.endswith("-none-any.whl") or ("manylinux" in w and machine in w) for w in wheels)
            assert ok or "sdist" in lock[pin], f"{pin[0]}=={pin[1]}: no wheel for Linux {machine} in uv.lock"


def _installed_role() -> str:
    stamp = Path(sys.prefix) / ".ol-installed"
    if not stamp.is_file() or stamp.read_text().split()[0] not in roles.ROLES:
        pytest.skip(f"{sys.prefix} was not made by ./ol (no .ol-installed naming its role)")
    return stamp.read_text().split()[0]


def pip_freeze() -> dict[str, str]:
    r = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable", "--disable-pip-version-check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    pins = [line.split("==") for line in r.stdout.splitlines() if "==" in line and not line.startswith("#")]
    return {roles.canonical(name): version for name, version in pins}


@pytest.mark.slow(s=2)
def test_pip_freeze_of_this_environment_is_its_role_s_lock():
    role = _installed_role()
    frozen = pip_freeze()
    assert roles.drift(role, frozen) == [], f"{sys.prefix} is not locks/{role}.txt: run ./ol --help to install it again"
    assert roles.drift(role) == [], "importlib.metadata sees what pip freeze sees"


def test_drift_names_a_package_of_another_version_a_missing_one_and_a_stray():
    have = roles.pins("student")
    have["numpy"] = "1.26.0"
    del have["hypothesis"]
    have["leftpad"] = "1.0"
    want = roles.pins("student")
    assert roles.drift("student", have) == [
        f"hypothesis missing (locks/student.txt pins {want['hypothesis']})",
        "leftpad 1.0 installed, not in locks/student.txt",
        f"numpy 1.26.0 installed, locks/student.txt pins {want['numpy']}"]


# A process in which the named distributions are not installed (importlib.metadata says so), then the ol CLI:
# an environment made from a smaller role, as it is seen by the check that asks for an extra.
ABSENT = """import sys
from importlib import metadata
gone, real = set(sys.argv[1].split(",")), metadata.version
def version(name):
    if name in gone:
        raise metadata.PackageNotFoundError(name)
    return real(name)
metadata.version = version
sys.argv = ["ol", *sys.argv[2:]]
from harness.cli import main
main()
"""


def ol_without(absent: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", ABSENT, absent, *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.mark.slow(s=8)
@pytest.mark.parametrize("command, extra", [
    (["grade", "L10.8", "examples/submissions", "--ref-deps"], "staff"),
    (["report", "L10.8", "grades-results"], "staff"),
    (["similar", "L10.8", "examples/submissions"], "staff"),
    (["mutmut", "L10.8"], "staff"),
    (["selftest", "tests/harness/test_lock.py"], "dev")])
def test_a_staff_command_without_its_extra_asks_for_it_by_name(command, extra):
    absent = "matplotlib" if extra == "staff" else "pytest-xdist"
    r = ol_without(absent, *command)
    assert r.returncode == 2, r.stdout[-1000:] + r.stderr[-2000:]
    assert r.stderr.startswith(f"ol: `ol {command[0]}` needs the {extra} extra ({absent} not installed here): run "
                               f"`OL_EXTRAS={extra} ./ol --help` once"), r.stderr
    assert "Traceback" not in r.stderr and r.stdout == "", r.stdout


@pytest.mark.slow(s=3)
def test_a_student_command_needs_no_extra():
    r = ol_without("distributed,matplotlib,copydetect,mutmut,dask-jobqueue,pytest-xdist,safetensors", "tests", "L10.8")
    assert r.returncode == 0 and "hand_example_prompt_lookup" in r.stdout, r.stderr
