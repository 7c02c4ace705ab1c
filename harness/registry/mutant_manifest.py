"""A chapter's mutant manifests (mutants/manifest.toml and each further set's), read and checked for the registry:
MutantSpec rows of the default set (the named pitfalls), RuleMutantSpec rows of a further set."""

from dataclasses import dataclass, field
from pathlib import Path
import tomllib

from ..kernel.errors import RegistryError

DEFAULT_SET = "default"  # the mutant set of chapter.toml's `mutants` key: the named pitfalls


@dataclass(frozen=True)
class MutantSpec:
    id: str
    pitfall: str
    symptom: str
    must_fail: str
    patch: Path  # the patch of the chapter's mutant language (Chapter.mutant_language)
    patches: dict[str, Path] = field(default_factory=dict)  # another language -> its port's patch (`<lang>_patch`)


@dataclass(frozen=True)
class RuleMutantSpec:
    """A mutant of a further set (chapter.toml's `mutant_sets`): the reference with one rule of the contract
    broken. It is killed when any test fails; `expected_by` names the tests whose `checks` text names the rule."""

    id: str
    rule: str  # the rule it breaks, worded as the contract states it
    misconception: str  # what the student believed
    expected_by: tuple[str, ...]  # the tests meant to catch it (each a test of the chapter)
    patch: Path | None  # the mutant language's patch (Chapter.mutant_language); None: ported to other languages only
    differs_on: str = ""  # an input on which its answer differs from the reference's (it is not equivalent)
    patches: dict[str, Path] = field(default_factory=dict)  # another language -> its port's patch (`<lang>_patch`)
    # a language -> why the mistake cannot be made there (`<lang>_none = "..."`): left out of that language's count
    not_applicable: dict[str, str] = field(default_factory=dict)


def unique_names(names, what: str, where: Path) -> None:
    seen = set()
    for n in names:
        if n in seen:
            raise RegistryError(f"{where}: the {what} {n!r} is listed twice; names must be unique")
        seen.add(n)


def read_mutants(manifest: Path, tests: tuple, chapter: str) -> tuple[MutantSpec, ...]:
    if not manifest.is_file():
        return ()
    try:
        m = tomllib.loads(manifest.read_text())
        mutants = tuple(MutantSpec(id=x["id"], pitfall=x["pitfall"], symptom=x["symptom"], must_fail=x["must_fail"],
                                   patch=manifest.parent / x.get("patch", f"{x['id']}.patch"),
                                   patches={k.removesuffix("_patch"): manifest.parent / v for k, v in x.items()
                                            if k.endswith("_patch")}) for x in m.get("mutant", []))
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise RegistryError(f"{manifest}: malformed mutant manifest: {e}") from e
    return _checked(manifest, mutants, tests, chapter)


def read_rule_mutants(manifest: Path, tests: tuple, chapter: str, plain: str) -> tuple[RuleMutantSpec, ...]:
    """A further set's manifest: [[mutant]] rows of id, rule, misconception, expected_by (a test or a list), optional
    patch (default <id>.patch), differs_on, <lang>_patch and <lang>_none (why the slip cannot be made there: left out
    of its count). A row with neither patch nor <id>.patch has no port in `plain`, the chapter's mutant language. A
    missing manifest is an empty set, as for the default set; `ol mutants` says so."""
    if not manifest.is_file():
        return ()
    try:
        rows = tomllib.loads(manifest.read_text()).get("mutant", [])
        mutants = []
        for x in rows:
            expected = x["expected_by"]
            expected = (expected,) if isinstance(expected, str) else tuple(expected)
            if not expected or not all(isinstance(t, str) for t in expected):
                raise TypeError(f"mutant {x['id']}: expected_by must name at least one test")
            for key in ("id", "rule", "misconception", "differs_on"):
                if not isinstance(x.get(key, ""), str):
                    raise TypeError(f"mutant {x.get('id')}: {key} must be a string")
            ports = {k.removesuffix("_patch"): manifest.parent / v for k, v in x.items() if k.endswith("_patch")}
            default = manifest.parent / f"{x['id']}.patch"  # only <lang>_patch and no <id>.patch: no port in `plain`
            patch = (manifest.parent / x["patch"] if "patch" in x else None if f"{plain}_none" in x
                     else default if default.is_file() or not ports else None)
            mutants.append(RuleMutantSpec(id=x["id"], rule=x["rule"], misconception=x["misconception"], expected_by=expected,
                                          patch=patch, differs_on=x.get("differs_on", ""), patches=ports,
                                          not_applicable={k.removesuffix("_none"): str(v) for k, v in x.items()
                                                          if k.endswith("_none")}))
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as e:
        raise RegistryError(f"{manifest}: malformed mutant manifest: {e}") from e
    return _checked(manifest, tuple(mutants), tests, chapter)


def _checked(manifest: Path, mutants: tuple, tests: tuple, chapter: str) -> tuple:
    """`mutants`, once their ids are unique and the tests each names (must_fail, or expected_by) are the chapter's."""
    unique_names([x.id for x in mutants], "mutant", manifest)
    names = {t.name for t in tests}
    for x in mutants:
        if isinstance(x, MutantSpec) and x.must_fail not in names:
            raise RegistryError(f"{manifest}: mutant {x.id} must fail {x.must_fail!r}, "
                                f"which is not a test of {chapter}")
        if unknown := [t for t in getattr(x, "expected_by", ()) if t not in names]:
            raise RegistryError(f"{manifest}: mutant {x.id} is expected_by {unknown}, which are not tests of {chapter}")
    return mutants
