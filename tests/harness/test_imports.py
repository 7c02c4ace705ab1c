"""harness/'s import graph, read from the code (ast): no cycle, and no private name used across modules.

Every import of a harness module counts, at a module's top or inside a function (a function-level import
hides a cycle from Python, not from the design). A private name (a leading underscore, not a dunder) of one
module is neither imported by another (`from .grade import _judge`) nor reached through a module it imported
(`wire._spin_s()`): what crosses a module boundary is public.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
import re
import tokenize

import harness.pack
from harness.languages import LANGUAGES
from harness.kernel.paths import REPO
from harness.registry import known_chapters, load_chapter

HARNESS = REPO / "harness"


@dataclass(frozen=True)
class Edge:
    source: str  # the importing module
    target: str  # the imported harness module
    line: int
    names: tuple[str, ...]  # the names taken from it (empty for `import harness.x`)


def module_name(path: Path, root: Path = HARNESS) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = HARNESS) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _absolute(source: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module an ImportFrom names, its dots resolved against `source`."""
    if node.level == 0:
        return node.module or ""
    package = source.split(".") if is_package else source.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def edges_of(source: str, path: Path, known: set[str]) -> list[Edge]:
    """The imports of harness modules in `path`, wherever in the file they are."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Edge(source, a.name, node.lineno, ()) for a in node.names if a.name in known]
        elif isinstance(node, ast.ImportFrom):
            target = _absolute(source, path.name == "__init__.py", node)
            if target not in known:
                continue
            taken = []
            for a in node.names:
                if f"{target}.{a.name}" in known:  # `from . import upload`: the submodule itself
                    found.append(Edge(source, f"{target}.{a.name}", node.lineno, ()))
                else:
                    taken.append(a.name)
            if taken or target != "harness":
                found.append(Edge(source, target, node.lineno, tuple(taken)))
    return [e for e in found if e.target != source]


def graph(root: Path = HARNESS) -> list[Edge]:
    mods = modules(root)
    return [e for name, path in mods.items() for e in edges_of(name, path, set(mods))]


def cycles(edges: list[Edge]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), each as a sorted list."""
    succ: dict[str, set[str]] = {}
    for e in edges:
        succ.setdefault(e.source, set()).add(e.target)
        succ.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(root: Path = HARNESS) -> list[str]:
    """Each private name one harness module takes from another: imported by name, or an attribute of a module
    it imported (`import harness.protocol.wire as wire` or `from . import wire`, then `wire._spin_s`)."""
    mods = modules(root)
    found = []
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        aliases: dict[str, str] = {}  # a local name bound to a harness module
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _absolute(name, path.name == "__init__.py", node)
                for a in node.names:
                    if f"{target}.{a.name}" in mods:
                        aliases[a.asname or a.name] = f"{target}.{a.name}"
                    elif target in mods and target != name and _private(a.name):
                        found.append(f"{name}:{node.lineno} imports {target}.{a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in mods and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                target = _dotted(node.value, aliases, mods)
                if target is not None and target != name:
                    found.append(f"{name}:{node.lineno} uses {target}.{node.attr}")
    return sorted(set(found))


def _dotted(node: ast.expr, aliases: dict[str, str], mods: dict[str, Path]) -> str | None:
    """The harness module an expression names (`wire`, `harness.protocol.wire`), or None."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            dotted = ".".join([node.id, *reversed(parts)])
            return dotted if dotted in mods else None
    return None


def function_level_imports(root: Path = HARNESS) -> list[str]:
    """Each import statement inside a function or method of a harness module (what the count reports)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [f"{module_name(path, root)}:{n.lineno}" for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return sorted(set(found))


# ---- the checks ---------------------------------------------------------------------------------------------

def test_the_graph_is_read_from_the_code():
    """The reader sees the imports it must: top-level, function-level, relative and absolute, and submodules."""
    edges = graph()
    pairs = {(e.source, e.target) for e in edges}
    assert ("harness.grading.grade", "harness.subjects.upload") in pairs  # `from ..subjects import upload`
    assert ("harness.grading.grade", "harness.kernel.report") in pairs  # `from ..kernel.report import Report`
    assert ("harness.cli.grade", "harness.grading.grade") in pairs  # inside a function
    assert len(modules()) > 30 and len(edges) > 100


def test_the_checks_see_a_cycle_and_a_private_name(tmp_path):
    """The two checks below fail on what they forbid: a toy package with both, named."""
    pkg = tmp_path / "harness"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import _hidden\n")
    (pkg / "b.py").write_text("def f():\n    from .sub import c\n    return c._x\n")
    (pkg / "sub" / "c.py").write_text("from ..a import thing\n")
    assert cycles(graph(pkg)) == [["harness.a", "harness.b", "harness.sub.c"]]
    assert private_uses(pkg) == ["harness.a:1 imports harness.b._hidden", "harness.b:3 uses harness.sub.c._x"]
    assert function_level_imports(pkg) == ["harness.b:2"]


# The packages of harness/ by floor (README, "Layout"): a module imports only its own package and lower floors.
# harness/ holds packages only (and its __init__ and __main__, the entry): no module stands loose beside them.
FLOORS = {"kernel": 0, "protocol": 0, "registry": 1, "sandbox": 1, "render": 2, "transport": 2, "languages": 2, "subjects": 3,
          "check": 4, "pack": 4, "grading": 5, "staff": 6, "cli": 7, "entry": 8}  # entry: `python -m harness`


def package_of(module: str) -> str:
    if module == "harness.__main__":
        return "entry"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "kernel"  # `harness` itself, an empty __init__: the kernel's floor


def upward(edges: list[Edge]) -> list[str]:
    """Each import from one package of harness/ into another on the same floor or a higher one."""
    found = []
    for e in edges:
        a, b = package_of(e.source), package_of(e.target)
        if a != b and FLOORS[b] >= FLOORS[a]:
            found.append(f"{e.source}:{e.line} imports {e.target} ({a} is floor {FLOORS[a]}, {b} floor {FLOORS[b]})")
    return sorted(set(found))


def test_every_package_has_a_floor_and_nothing_imports_upward():
    packages = {package_of(m) for m in modules()}
    assert packages == set(FLOORS), f"packages without a floor, or floors without a package: {packages ^ set(FLOORS)}"
    found = upward(graph())
    assert not found, "imports that go up or sideways between harness/'s packages:\n" + "\n".join(found)


def test_the_floor_check_sees_an_upward_import():
    edges = [Edge("harness.sandbox.confine", "harness.grading.task", 3, ("run",)),
             Edge("harness.grading.task", "harness.sandbox.confine", 4, ("choose",)),
             Edge("harness.render.console", "harness.transport.impl", 5, ("Impl",))]
    assert upward(edges) == [
        "harness.render.console:5 imports harness.transport.impl (render is floor 2, transport floor 2)",
        "harness.sandbox.confine:3 imports harness.grading.task (sandbox is floor 1, grading floor 5)"]


def test_no_import_cycle_in_harness():
    found = cycles(graph())
    assert not found, "harness/ has import cycles (each a set of modules that import each other, directly or not):\n" + \
        "\n".join(" <-> ".join(c) for c in found)


def test_no_private_name_crosses_a_module():
    found = private_uses()
    assert not found, "private names used across harness/ modules (make them public where they belong):\n" + "\n".join(found)


# ---- the engine names no chapter and no language ------------------------------------------------------------
# Every module of harness/ outside harness/languages/ is tokenized; a NAME, a STRING or an f-string token (a
# docstring, a message, an f-string whole: its text and its fields, on every Python ol supports) that names a
# chapter or a language fails the check:
# - a chapter: `L10` (any of its chapters: L10.8, L10_8, L10.1) or a registered chapter's name, its pack's folder
#   name or a package its languages write (`tinyllm`); the names its pack defines of more than one word (its tests,
#   its ops, its contract's functions and classes: `hand_example_prompt_lookup`, `verify_draft`, `SpecConfig`) and
#   each run of two or more of their words that starts or ends one (`hand_example`, `prompt_lookup`); the file names
#   of its contract and student files (`spec.pyi`) and of the course's documents the engine does not speak (spec/
#   but its protocol.md: `sampling.md`); the words of its title longer than eight letters (`speculative`), anywhere
#   in the token, in any case;
# - a language: a name in harness.languages.LANGUAGES (`python`, `rust`), in any case, as a word or a part of an
#   identifier between underscores or a change of case (`rust_image`, `python_none`, `RustBuild`); a word that
#   merely contains one (`trusted`, `PYTHONPATH`) is not the language's name; and a word naming one of its tools or
#   its units (its Language.tools: `cargo`, `rustc`, `crate`), as a word or a plural of one.
# Exempt, and why:
# - comments (`#` to the end of the line). They are read by a person and never change what the engine does or
#   says; a comment that cites the chapter as an example (`# e.g. L10.8's verify`) is documentation of the pack
#   an engine module was first written for, not knowledge the engine acts on. Docstrings are NOT exempt: `ol`
#   shows some (click's --help), and a docstring that describes a chapter's files is the engine knowing them.
# - harness/languages/ (each language's hooks are where a language is named) and data files (schemas, templates:
#   not Python; what they say is the renderer's and the report's, checked by their own tests).
# - nothing else: not `sys.executable` (the engine's own interpreter names no language), not a requirement such as
#   "Python 3.11" (there is none in harness/ outside languages/; were one needed it would be the language's words).
# Python 3.12 tokenizes an f-string into FSTRING_START, its parts and FSTRING_END (3.11: one STRING); each f-string is
# checked as one text, its source from its start to its end, on both, so neither skips a part of one.
LANGUAGE_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")  # the words of an identifier or a text
IDENTIFIER_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
ENGINE_DOCUMENTS = {"protocol.md"}  # spec/'s documents the engine speaks (the worker protocol); the others are the course's
TITLE_WORD = 9  # a title's word of at least this many letters is the chapter's (`speculative`; `decoding`, `engine` are not)
FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+
FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def _defined_names(ch) -> set[str]:
    """The names a pack defines: its tests, its ops (the ops module's `op_` functions), its contract's top-level
    functions and classes (the contract in ol's own language is a stub module, read with ast)."""
    names = {t.name for t in ch.tests}
    names |= {n.name.removeprefix("op_") for n in ast.parse(ch.ops_file.read_text()).body
              if isinstance(n, ast.FunctionDef) and n.name.startswith("op_")}
    for lang in ch.languages.values():
        if lang.contract.suffix in (".py", ".pyi"):
            names |= {n.name for n in ast.parse(lang.contract.read_text()).body
                      if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return names


def _runs(name: str) -> set[str]:
    """A name of more than one word, and each run of two or more of its words that starts or ends it (snake_case
    joined by `_`, CamelCase by nothing), lower-cased; nothing for a one-word name (`propose`: a word, not a name)."""
    words = [w.lower() for w in IDENTIFIER_WORD.findall(name)]
    if len(words) < 2:
        return set()
    sep = "_" if "_" in name else ""
    return {sep.join(words[:i]) for i in range(2, len(words) + 1)} | {sep.join(words[-i:]) for i in range(2, len(words) + 1)}


def _chapter_words() -> tuple[str, ...]:
    """The substrings that name a chapter (see above)."""
    words = {"l10", "tinyllm"}
    words |= {p.name.lower() for p in (REPO / "spec").rglob("*") if p.is_file() and p.name not in ENGINE_DOCUMENTS}
    for name in known_chapters():
        ch = load_chapter(name)
        words |= {name.lower(), ch.pack_dir.name.lower(), *(lang.package.lower() for lang in ch.languages.values())}
        words |= {r for n in _defined_names(ch) for r in _runs(n)}
        words |= {Path(f).name.lower() for lang in ch.languages.values() for f in (lang.contract, *lang.student_files)}
        words |= {w.lower() for w in re.findall(r"[A-Za-z]+", ch.title) if len(w) >= TITLE_WORD}
    return tuple(sorted(words))


def _language_words() -> tuple[str, ...]:
    """The words that name a language: its name and its tools' (Language.tools)."""
    return tuple(sorted({w.lower() for name, lang in LANGUAGES.items() for w in (name, *lang.tools)}))


def names_in(text: str, chapters: tuple[str, ...], languages: tuple[str, ...]) -> list[str]:
    """What `text` names of `chapters` (as substrings) and `languages` (as words, or their plurals), lower-cased."""
    low = text.lower()
    found = [c for c in chapters if c in low]
    words = {w.lower() for w in LANGUAGE_WORD.findall(text)}
    words |= {w[:-1] for w in words if w.endswith("s")}
    return found + [lang for lang in languages if lang in words]


def text_tokens(path: Path) -> list[tuple[int, str]]:
    """Each NAME and STRING token of `path` and each f-string whole (its source text, fields included), as
    (line, text): the same on Python 3.11, where an f-string is one STRING, and 3.12+, where it is many tokens."""
    source = path.read_text()
    lines = source.splitlines(keepends=True)
    with tokenize.open(path) as f:
        tokens = list(tokenize.generate_tokens(f.readline))
    found, depth, opened = [], 0, (0, 0)
    for tok in tokens:
        if FSTRING_START is not None and tok.type == FSTRING_START:
            depth += 1
            if depth == 1:
                opened = tok.start
        elif FSTRING_END is not None and tok.type == FSTRING_END:
            depth -= 1
            if depth == 0:
                (r0, c0), (r1, c1) = opened, tok.end
                text = lines[r0 - 1][c0:] if r0 == r1 else lines[r0 - 1][c0:] + "".join(lines[r0:r1 - 1]) + lines[r1 - 1][:c1]
                found.append((r0, text[: c1 - c0] if r0 == r1 else text))
        elif depth == 0 and tok.type in (tokenize.NAME, tokenize.STRING):
            found.append((tok.start[0], tok.string))
    return found


def engine_names(root: Path = HARNESS, chapters: tuple[str, ...] | None = None,
                 languages: tuple[str, ...] | None = None) -> list[str]:
    """Each NAME, STRING or f-string token of a module of `root` outside its languages/ that names a chapter or a
    language, as `module:line: token (names)`."""
    chapters = _chapter_words() if chapters is None else chapters
    languages = _language_words() if languages is None else languages
    found = []
    for path in sorted(root.rglob("*.py")):
        if (root / "languages") in path.parents:
            continue
        for line, text in text_tokens(path):
            hit = names_in(text, chapters, languages)
            if hit:
                shown = text if len(text) <= 60 else text[:57] + "..."
                found.append(f"{module_name(path, root)}:{line}: {shown!r} ({', '.join(hit)})")
    return found


def test_the_name_check_sees_a_chapter_and_a_language(tmp_path):
    """A name, a string, a docstring, an identifier part and an f-string's text (after a field, across lines, nested)
    are caught; a comment and a word that merely contains a language's name (`trusted`, `PYTHONPATH`) are not;
    languages/ is the languages' own."""
    pkg = tmp_path / "harness"
    (pkg / "languages").mkdir(parents=True)
    (pkg / "a.py").write_text('"""Grades tinyllm."""\n# L10.8 in a comment\nrust_image = "Python" + "trusted"\n'
                              'env = {"PYTHONPATH": "x"}\ndef f(n="L10_8", RustBuild=1): return n\n'
                              'm = f"{env!r} see L10.8"\nq = f"""{m}\n{f"{m} for Rust"}"""\nok = f"{m} {{plain}}"\n'
                              'c = f"your {m} crates: {q}" + "run cargo"  # cargo in a comment\n')
    (pkg / "languages" / "rust.py").write_text('RUST = "rust"\n')
    assert engine_names(pkg, ("l10", "tinyllm"), ("cargo", "crate", "python", "rust")) == [
        "harness.a:1: '\"\"\"Grades tinyllm.\"\"\"' (tinyllm)", "harness.a:3: 'rust_image' (rust)",
        "harness.a:3: '\"Python\"' (python)", "harness.a:5: '\"L10_8\"' (l10)", "harness.a:5: 'RustBuild' (rust)",
        "harness.a:6: 'f\"{env!r} see L10.8\"' (l10)", "harness.a:7: 'f\"\"\"{m}\\n{f\"{m} for Rust\"}\"\"\"' (rust)",
        "harness.a:10: 'f\"your {m} crates: {q}\"' (crate)", "harness.a:10: '\"run cargo\"' (cargo)"]


def test_each_language_names_its_tools():
    """The words of a language's tools are its module's (Language.tools), and the check reads them."""
    assert {"cargo", "rustc", "crate"} <= set(LANGUAGES["rust"].tools)
    assert {"cargo", "rustc", "crate", "python", "rust"} <= set(_language_words())


def test_a_pack_names_its_own_words():
    """The chapter's words come from its pack: a test's name and its leading and trailing words, an op, the
    contract's names, its files, its title's long words, the course's documents."""
    words = _chapter_words()
    for w in ("hand_example", "prompt_lookup", "verify_draft", "specconfig", "spec.pyi", "sampling.md", "speculative"):
        assert w in words
    assert not {"protocol.md", "propose", "engine", "decoding"} & set(words)


def test_the_engine_names_no_chapter_and_no_language():
    found = engine_names()
    assert not found, (f"{len(found)} names of a chapter or a language in harness/ outside languages/ (a language's "
                       "behaviour is a hook of harness/languages/<name>.py, a chapter's data is in its pack):\n"
                       + "\n".join(found))


# A pack's modules import of the engine its facade, harness.pack, and nothing else. Its ops module alone runs inside
# the worker, whose kit is harness/protocol/ (languages.python's PYTHON_WORKER_KIT), so it may import that and only that.
WORKER_SIDE = {"ops"}  # chapter.toml's role whose module runs in the worker


def pack_imports(pack: Path, worker_side: set[Path]) -> list[str]:
    """Each import of a harness module by a module of `pack` that is not harness.pack (or, for a worker-side module,
    harness.protocol), wherever in the file it is."""
    found = []
    for path in sorted(pack.rglob("*.py")):
        allowed = ("harness.protocol",) if path in worker_side else ("harness.pack",)
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                if (name == "harness" or name.startswith("harness.")) and not any(
                        name == a or name.startswith(a + ".") for a in allowed):
                    found.append(f"{path.relative_to(pack.parent)}:{node.lineno} imports {name}")
    return found


def test_a_pack_imports_only_the_engines_facade():
    found = []
    for name in known_chapters():
        ch = load_chapter(name)
        worker_side = {ch.pack_dir / (ch.modules[role].replace(".", "/") + ".py") for role in WORKER_SIDE}
        found += pack_imports(ch.pack_dir, worker_side)
    assert not found, "a pack imports engine modules other than harness.pack (add what it needs to the facade):\n" + \
        "\n".join(found)


def facade_names(pack: Path) -> set[str]:
    """The names the modules of `pack` take from the facade (`from harness.pack import X`), wherever in a file."""
    found = set()
    for path in sorted(pack.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "harness.pack":
                found |= {a.name for a in node.names}
    return found


def test_the_facade_exports_only_what_a_pack_imports():
    """harness.pack's __all__ is what the packs take from it, no more: a name no pack imports is an engine module's
    business, not a pack author's (add it back when a pack needs it)."""
    used = set().union(*(facade_names(load_chapter(name).pack_dir) for name in known_chapters()))
    unused = sorted(set(harness.pack.__all__) - used)
    assert not unused, f"harness.pack exports names no pack imports: {unused}"


def test_the_pack_check_sees_an_engine_import(tmp_path):
    pack = tmp_path / "P"
    (pack / "judge").mkdir(parents=True)
    (pack / "ops.py").write_text("from harness.protocol.wire import floats\nimport harness.registry\n")
    (pack / "judge" / "a.py").write_text("from harness.pack import Rand\ndef f():\n    from harness.kernel.errors import Raised\n")
    assert pack_imports(pack, {pack / "ops.py"}) == ["P/judge/a.py:3 imports harness.kernel.errors",
                                                     "P/ops.py:2 imports harness.registry"]


MODULE_LINES = 400  # the project's style: a module a reader holds in mind (README, Layout)


def test_no_module_of_the_engine_is_over_400_lines():
    long = {module_name(p): n for p in sorted(HARNESS.rglob("*.py")) if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    assert not long, f"modules over {MODULE_LINES} lines (split each by concern): {long}"
