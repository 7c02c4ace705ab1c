"""Chapter packs: a chapter is one folder of data, ops, judge helpers, tests, oracle and mutants.

A pack is a folder `<dir>/<Name>/` holding `chapter.toml` (the declarative table; its paths relative to the pack)
and an `__init__.py`; its modules are imported as `chapters.<Name>.<module>`. Packs are found in the project's
`chapters/` and in every folder of OL_CHAPTERS_PATH (os.pathsep-separated): a new chapter needs no engine edit.

Loading checks the pack before any test runs: every key present and of the right kind, no duplicate test or
mutant, every mutant's named test a test of the chapter, and the tests files and the table agreeing both ways.

Mutants come in sets. The default set (`mutants = "..."`, MutantSpec rows) holds the named pitfalls, each caught
by its named test. Further sets (`mutant_sets = { name = "<manifest>" }`, RuleMutantSpec rows) each break one rule
and are killed by any failing test; `expected_by` names the tests meant to catch each. Ids are unique across sets.
"""

from dataclasses import dataclass, field, replace
import importlib
import os
from pathlib import Path
import shutil
import threading
import tomllib

from ..kernel.errors import RegistryError, UnknownChapter, UsageError
from .mutant_manifest import DEFAULT_SET, MutantSpec, RuleMutantSpec, read_mutants, read_rule_mutants, unique_names  # noqa: F401  (re-exported)
from ..kernel.paths import CHAPTERS_DIR
from .testfiles import PARSE_ATTEMPTS, PARSE_LOCK, ParsedTests, parse, parsed_tests, test_functions  # noqa: F401  (re-exported)

DEFAULT_TIMEOUT_S = 60.0  # a whole test's budget across its calls; generous for a slow but correct submission
KINDS = {"unit", "differential", "boundary", "statistical", "fault", "property", "conformance"}
PACKAGE = "chapters"  # the Python package every pack is imported under

# `chapters.__path__` is extended under _importable_lock (a tests file's parse: harness.registry.testfiles, under its
# PARSE_LOCK). Everything else load_chapter makes is new and frozen per call.
_importable_lock = threading.Lock()


@dataclass(frozen=True)
class TestSpec:
    name: str
    kind: str
    checks: str
    why: str
    points: float = 1.0
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class LanguageSpec:
    """What a student of this chapter writes in one language, and where the rest comes from."""

    name: str
    reference: Path  # the folder holding the reference package (the course's own implementation)
    package: str  # the package a submission holds, e.g. "tinyllm"
    student_files: tuple[str, ...]  # the chapter's own files, paths inside a submission
    contract: Path  # the file `ol start` makes the stub from
    deps: tuple[str, ...]  # earlier chapters' files the chapter needs (--ref-deps supplies them)
    default_workspace: str  # where `ol start` writes and `ol check` looks by default
    uploads: dict[str, str]  # a bare uploaded file name -> its place in the package
    mutmut: tuple[str, ...] = ()  # reference files mutmut mutates
    given: tuple[str, ...] = ()  # the course's files in a submission's tree: a build always takes the reference's
    # the pack's own files of the course's code around a submission (a worker's op table): a path in a workspace ->
    # the pack's file, copied there by whatever assembles a workspace in this language
    course_sources: dict[str, Path] = field(default_factory=dict)
    # a file of `deps` that an earlier chapter's student writes -> that chapter (`ol start` marks the reference's copy
    # as standing in for it); the other deps are the course's, given
    earlier: dict[str, str] = field(default_factory=dict)

    @property
    def student_file(self) -> str:
        return self.student_files[0]

    def copy_reference(self, into: Path) -> Path:
        """This language's reference package copied to `into/<package>`; returns `into`."""
        shutil.copytree(self.reference / self.package, into / self.package, ignore=shutil.ignore_patterns("__pycache__"))
        return into


@dataclass(frozen=True)
class Chapter:
    chapter: str
    title: str
    pack_dir: Path
    tests_files: tuple[Path, ...]  # the graded tests: one function per [[test]] row, across these files
    golden: Path
    golden_schema: Path | None
    modules: dict[str, str]  # role -> module of the pack: ops, client, cases, oracle
    client_class: str
    tests: tuple[TestSpec, ...]
    languages: dict[str, LanguageSpec]
    mutants_manifest: Path
    mutants: tuple[MutantSpec, ...] = field(default=())
    demo: Path | None = None
    data: dict[str, Path] = field(default_factory=dict)  # named data paths the judge helpers use
    worker_sees: dict[str, tuple[str, ...]] = field(default_factory=dict)  # data name -> the files in it a worker may read
    default_language: str = ""  # graded when a folder holds workspaces of several languages (the first listed, unsaid)
    mutant_language: str = ""  # the language of a mutant's plain `patch` (<id>.patch): `mutant_language`, else the first
    mutant_sets: dict[str, tuple[RuleMutantSpec, ...]] = field(default_factory=dict)  # further sets, by name
    mutant_set_manifests: dict[str, Path] = field(default_factory=dict)  # a further set's name -> its manifest
    student_map: dict[str, str] = field(default_factory=dict)  # a path the chapter's text names -> where it is in ol

    def mutant(self, mid: str) -> "MutantSpec | RuleMutantSpec":
        """The mutant `mid` of any set (ids are unique across sets)."""
        every: list[MutantSpec | RuleMutantSpec] = [*self.mutants, *(x for s in self.mutant_sets.values() for x in s)]
        for m in every:
            if m.id == mid:
                return m
        have = ", ".join(m.id for m in self.mutants) or "none"
        have += "".join(f"; set {name}: {', '.join(m.id for m in s)}" for name, s in self.mutant_sets.items())
        raise UsageError(f"chapter {self.chapter} has no mutant {mid!r}: it has {have}")

    def mutant_set(self, name: str = DEFAULT_SET) -> tuple:
        """The mutants of a set: DEFAULT_SET's named pitfalls, or a set chapter.toml's `mutant_sets` names."""
        if name == DEFAULT_SET:
            return self.mutants
        try:
            return self.mutant_sets[name]
        except KeyError:
            sets = ", ".join([DEFAULT_SET, *self.mutant_sets])
            raise UsageError(f"chapter {self.chapter} has no mutant set {name!r}: it has {sets}") from None

    def patch_of(self, mutant, lang: str) -> Path | None:
        """The mutant's patch in `lang`: its plain patch in the mutant language, else its `<lang>_patch` port."""
        return mutant.patch if lang == self.mutant_language else mutant.patches.get(lang)

    def language(self, name: str) -> LanguageSpec:
        try:
            return self.languages[name]
        except KeyError:
            raise UsageError(f"chapter {self.chapter} is not graded in {name!r}: it has {', '.join(self.languages)}") from None

    def module(self, role: str):
        """The pack's module playing `role` (ops, client, cases, oracle), imported on first use."""
        if not self.modules.get(role):
            raise RegistryError(f"chapter {self.chapter} names no `{role}` module in {self.pack_dir / 'chapter.toml'}")
        return importlib.import_module(f"{PACKAGE}.{self.pack_dir.name}.{self.modules[role]}")

    @property
    def worker_data(self) -> tuple[Path, ...]:
        """The files a worker may read (read-only, at the same paths): those [worker_sees] names."""
        return tuple(self.data[name] / f for name, files in self.worker_sees.items() for f in files)

    @property
    def ops_file(self) -> Path:
        return self.pack_dir / (self.modules["ops"].replace(".", "/") + ".py")

    @property
    def max_points(self) -> float:
        return sum(t.points for t in self.tests)


def search_dirs() -> list[Path]:
    extra = [Path(p).resolve() for p in os.environ.get("OL_CHAPTERS_PATH", "").split(os.pathsep) if p]
    return [CHAPTERS_DIR, *extra]


def _packs(strict: bool = True) -> dict[str, tuple[Path, dict]]:
    """chapter name -> (pack folder, its chapter.toml), over every search folder. Not `strict` (the help texts at
    start-up), a pack that does not parse, names no chapter or repeats one is left out (the command that loads it
    says what is wrong; `ol --help` and every other chapter still work); `strict`, that is a RegistryError."""
    found: dict[str, tuple[Path, dict]] = {}
    for d in search_dirs():
        for toml in sorted(d.glob("*/chapter.toml")):
            try:
                table = tomllib.loads(toml.read_text())
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
                if strict and isinstance(e, tomllib.TOMLDecodeError):
                    raise RegistryError(f"{toml}: not valid TOML: {e}") from e
                if strict:
                    raise
                continue
            name = table.get("chapter")
            if not isinstance(name, str) or (name in found and found[name][0] != toml.parent):
                if strict:
                    raise RegistryError(f"{toml}: has no `chapter = \"...\"` name" if not isinstance(name, str) else
                                        f"chapter {name} is defined twice: {found[name][0]} and {toml.parent}; "
                                        "remove one")
                continue
            found.setdefault(name, (toml.parent, table))
    return found


def known_chapters() -> list[str]:
    return sorted(_packs())


def courses() -> list[str]:
    """The courses the known chapters belong to (each chapter.toml's `course`), as `ol --help` names them."""
    return sorted({c for _, t in _packs(strict=False).values() if isinstance(c := t.get("course"), str) and c})


def defaults() -> dict[str, tuple[str, dict[str, str]]]:
    """chapter -> (its own language, {language: its default workspace}), read from the tables alone (for --help)."""
    found = {}
    for name, (_, d) in sorted(_packs(strict=False).items()):
        languages = d.get("language", {})
        if not isinstance(languages, dict):
            continue
        spaces = {lang: spec.get("default_workspace", "") for lang, spec in languages.items() if isinstance(spec, dict)}
        found[name] = (d.get("default_language", next(iter(spaces), "")), spaces)
    return found


def check_agreement(tests: tuple[TestSpec, ...], tests_files: tuple[Path, ...], toml: Path) -> None:
    rows = [t.name for t in tests]
    where: dict[str, Path] = {}  # test name -> the file defining it
    for f in tests_files:
        for name in test_functions(f):
            if name in where:
                raise RegistryError(f"test_{name} is defined twice, in {where[name]} and {f}; one function per test")
            where[name] = f
    no_row = [f for f in where if f not in rows]
    no_function = [r for r in rows if r not in where]
    if no_row or no_function:
        files = ", ".join(str(f) for f in tests_files)
        parts = [f"test_{f} in {where[f]} has no row in {toml}" for f in no_row]
        parts += [f"the row {r!r} in {toml} has no function test_{r} in {files}" for r in no_function]
        raise RegistryError("the chapter's table and its tests disagree: " + "; ".join(parts) +
                            ". Add the missing [[test]] row or function (or remove the stray one).")


def _mutant_sets(ch: Chapter, declared: dict, tests: tuple[TestSpec, ...]) -> dict[str, tuple[RuleMutantSpec, ...]]:
    sets = {name: read_rule_mutants(path, tests, ch.chapter, ch.mutant_language) for name, path in declared.items()}
    seen = {m.id: DEFAULT_SET for m in ch.mutants}
    for name, mutants in sets.items():
        for m in mutants:
            if m.id in seen:
                raise RegistryError(f"{ch.mutant_set_manifests[name]}: mutant id {m.id!r} is also in set {seen[m.id]}; "
                                    "ids are unique across a chapter's mutant sets")
            seen[m.id] = name
    return sets


def _set_paths(declared) -> dict[str, str]:
    """chapter.toml's `mutant_sets`, checked: a table of set name (an identifier, not DEFAULT_SET) -> manifest path."""
    if not isinstance(declared, dict) or not all(
            isinstance(k, str) and k.isidentifier() and k != DEFAULT_SET and isinstance(v, str) for k, v in declared.items()):
        raise ValueError(f"mutant_sets must be a table of set names (identifiers, not {DEFAULT_SET!r}) to manifest paths, "
                         f"got {declared!r}")
    return declared


def _language(name: str, d: dict, pack: Path) -> LanguageSpec:
    return LanguageSpec(name=name, reference=(pack / d["reference"]).resolve(), package=d["package"],
                        student_files=tuple(d["student_files"]), contract=(pack / d["contract"]).resolve(),
                        deps=tuple(d.get("deps", ())), default_workspace=d["default_workspace"],
                        uploads=dict(d.get("uploads", {})), mutmut=tuple(d.get("mutmut", ())),
                        given=tuple(d.get("given", ())), earlier=dict(d.get("earlier", {})), course_sources=_course_sources(d.get("course_sources", {}), pack, d["package"]))


def _course_sources(table: dict, pack: Path, package: str) -> dict[str, Path]:
    """`course_sources` (the pack's file -> a path in a workspace) as {workspace path: pack file}; a missing file, or a
    place outside the workspace or inside the submission's package (those are `given`), is a ValueError."""
    out: dict[str, Path] = {}
    for source, place in table.items():
        path = (pack / source).resolve()
        if not path.is_file() or not path.is_relative_to(pack.resolve()):
            raise ValueError(f"course_sources names {source!r}, which is not a file of the pack")
        if Path(place).is_absolute() or ".." in Path(place).parts or place in out or Path(place).is_relative_to(package):
            raise ValueError(f"course_sources puts {source!r} at {place!r}: a place must be a relative path inside "
                             f"the workspace, without '..', outside the submission's {package}, and named once")
        out[place] = path
    return out


def make_importable() -> None:
    """Let `chapters.<Name>` find the packs of every search folder (OL_CHAPTERS_PATH too)."""
    package = importlib.import_module(PACKAGE)
    with _importable_lock:  # two threads would both find a folder missing, and add it twice
        for d in search_dirs():
            if str(d) not in package.__path__:
                package.__path__.append(str(d))


def load_chapter(chapter: str) -> Chapter:
    packs = _packs()
    if chapter not in packs:
        raise UnknownChapter(chapter, sorted(packs))
    pack, d = packs[chapter]
    toml = pack / "chapter.toml"
    if not pack.name.isidentifier() or not (pack / "__init__.py").is_file():
        raise RegistryError(f"{pack}: a chapter pack's folder name must be an identifier and hold an __init__.py")
    try:
        tests = tuple(TestSpec(**t) for t in d["test"])
        client_module, client_class = d["client"].split(":")
        modules = {"ops": d["ops"], "client": client_module, "cases": d.get("cases", ""), "oracle": d.get("oracle", ""),
                   "literals": d.get("literals", "")}
        languages = {name: _language(name, spec, pack) for name, spec in d["language"].items()}
        files = [d["tests"]] if isinstance(d["tests"], str) else list(d["tests"])
        ch = Chapter(chapter=d["chapter"], title=d["title"], pack_dir=pack, tests_files=tuple(pack / f for f in files),
                     golden=pack / d["golden"], golden_schema=pack / d["golden_schema"] if "golden_schema" in d else None,
                     modules=modules, client_class=client_class, tests=tests, languages=languages,
                     mutants_manifest=pack / d.get("mutants", "mutants/manifest.toml"),
                     demo=(pack / d["demo"]).resolve() if "demo" in d else None,
                     data={k: (pack / v).resolve() for k, v in d.get("data", {}).items()},
                     worker_sees={k: tuple(v) for k, v in d.get("worker_sees", {}).items()},
                     default_language=d.get("default_language", next(iter(languages))),
                     mutant_language=d.get("mutant_language", next(iter(languages))),
                     mutant_set_manifests={name: pack / path for name, path in _set_paths(d.get("mutant_sets", {})).items()},
                     student_map={str(k): str(v) for k, v in d.get("student_map", {}).items()})
        unknown = [n for n in ch.worker_sees if n not in ch.data]
        if unknown:
            raise ValueError(f"worker_sees names {unknown}, which [data] does not define")
        missing = [str(f) for f in ch.worker_data if not f.is_file()]
        if missing:
            raise ValueError(f"worker_sees lists files that do not exist: {missing}")
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as e:
        raise RegistryError(f"{toml}: malformed chapter table ({type(e).__name__}: {e})") from e
    unique_names([t.name for t in tests], "test", toml)
    for t in tests:
        if t.kind not in KINDS:
            raise RegistryError(f"{toml}: test {t.name} has kind {t.kind!r}; allowed {sorted(KINDS)}")
    check_agreement(tests, ch.tests_files, toml)
    make_importable()
    ch = replace(ch, mutants=read_mutants(ch.mutants_manifest, tests, chapter))
    return replace(ch, mutant_sets=_mutant_sets(ch, ch.mutant_set_manifests, tests))
