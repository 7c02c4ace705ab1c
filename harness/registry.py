"""Chapter registries: which tests a chapter has, their points, and its mutants (data, not code).

A second chapter is a new `harness/chapters/<chapter>.toml`, its tests and fixtures: no new runner.
"""

from dataclasses import dataclass, field
from pathlib import Path
import tomllib

from .errors import RegistryError, UnknownChapter
from .paths import REPO

CHAPTERS_DIR = Path(__file__).resolve().parent / "chapters"
DEFAULT_TIMEOUT_S = 60.0  # a whole test's budget across its calls; generous for a slow but correct submission
KINDS = {"unit", "differential", "boundary", "statistical", "fault", "property", "conformance"}


@dataclass(frozen=True)
class TestSpec:
    name: str
    kind: str
    checks: str
    why: str
    points: float = 1.0
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class MutantSpec:
    id: str
    pitfall: str
    symptom: str
    must_fail: str
    patch: Path


@dataclass(frozen=True)
class Chapter:
    chapter: str
    title: str
    tests_file: Path
    golden: Path
    oracle: Path
    contract: Path
    student_file: str
    default_submission: str
    tests: tuple[TestSpec, ...]
    mutants_manifest: Path
    mutants: tuple[MutantSpec, ...] = field(default=())

    def test(self, name: str) -> TestSpec:
        for t in self.tests:
            if t.name == name:
                return t
        raise KeyError(name)

    def pitfalls_for(self, test_name: str) -> list[MutantSpec]:
        return [m for m in self.mutants if m.must_fail == test_name]

    def mutant(self, mid: str) -> MutantSpec:
        for m in self.mutants:
            if m.id == mid:
                return m
        raise RegistryError(f"chapter {self.chapter} has no mutant {mid!r}: it has {', '.join(m.id for m in self.mutants)}")

    @property
    def max_points(self) -> float:
        return sum(t.points for t in self.tests)


def known_chapters() -> list[str]:
    return sorted(p.stem for p in CHAPTERS_DIR.glob("*.toml"))


def _unique(names, what: str, where: Path) -> None:
    seen = set()
    for n in names:
        if n in seen:
            raise RegistryError(f"{where}: the {what} {n!r} is listed twice; names must be unique")
        seen.add(n)


def load_chapter(chapter: str) -> Chapter:
    path = CHAPTERS_DIR / f"{chapter}.toml"
    if not path.is_file():
        raise UnknownChapter(chapter, known_chapters())
    try:
        d = tomllib.loads(path.read_text())
        tests = tuple(TestSpec(**t) for t in d["test"])
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise RegistryError(f"{path}: malformed registry: {e}") from e
    _unique([t.name for t in tests], "test", path)
    for t in tests:
        if t.kind not in KINDS:
            raise RegistryError(f"{path}: test {t.name} has kind {t.kind!r}; allowed {sorted(KINDS)}")
    manifest = REPO / d["mutants"]
    mutants: tuple[MutantSpec, ...] = ()
    if manifest.is_file():
        m = tomllib.loads(manifest.read_text())
        mutants = tuple(MutantSpec(id=x["id"], pitfall=x["pitfall"], symptom=x["symptom"], must_fail=x["must_fail"],
                                   patch=manifest.parent / x.get("patch", f"{x['id']}.patch")) for x in m["mutant"])
        _unique([x.id for x in mutants], "mutant", manifest)
        names = {t.name for t in tests}
        for x in mutants:
            if x.must_fail not in names:
                raise RegistryError(f"{manifest}: mutant {x.id} must fail {x.must_fail!r}, which is not a test of {chapter}")
    return Chapter(chapter=d["chapter"], title=d["title"], tests_file=REPO / d["tests"], golden=REPO / d["golden"],
                   oracle=REPO / d["oracle"], contract=REPO / d["contract"], student_file=d["student_file"],
                   default_submission=d["default_submission"], tests=tests, mutants_manifest=manifest, mutants=mutants)
