"""`ol start`: the student's stub, made from the chapter's contract (.pyi).

Every function whose body is only its docstring gets `raise NotImplementedError(...)` after it;
everything else (imports, classes, dataclass fields, comments) is kept as written, so the stub
reads exactly like the contract. Protocol classes are left alone: they are never called.
"""

import ast
import shutil
from pathlib import Path

from ..kernel.errors import BadSubmission
from ..kernel.paths import REPO
from ..registry import Chapter
from .rust_workspace import COURSE_CRATES, ENGINE_MANIFEST

HEADER = "# Written by `ol start {chapter}` from {contract}. Replace each NotImplementedError with your code.\n"


def _stub_lines(source: str) -> list[str]:
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    inserts: list[tuple[int, str]] = []  # (after line number, text)
    protocols = {n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                 and any(getattr(b, "id", getattr(b, "attr", "")) == "Protocol" for b in n.bases)}
    skip = {id(f) for c in protocols for f in ast.walk(c)}
    owner = {id(f): c.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or id(node) in skip:
            continue
        body = node.body
        if len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            indent = " " * body[0].col_offset
            name = f"{owner[id(node)]}.{node.name}" if id(node) in owner else node.name  # SpecConfig.parse
            inserts.append((body[0].end_lineno or body[0].lineno, f'{indent}raise NotImplementedError("{name}: not implemented yet")\n'))
    for after, text in sorted(inserts, reverse=True):
        lines.insert(after, text)
    return lines


def make_stub(chapter: Chapter, lang: str = "python") -> str:
    contract = chapter.language(lang).contract
    rel = contract.relative_to(contract.parents[3]) if len(contract.parents) > 3 else contract.name
    text = HEADER.format(chapter=chapter.chapter, contract=rel) + "".join(_stub_lines(contract.read_text()))
    ast.parse(text)  # the stub must itself be valid Python
    return text


def write_stub(chapter: Chapter, workspace: Path, force: bool = False, lang: str = "python") -> tuple[Path, list[str]]:
    """Write the stub into workspace/<student file>; returns its path and the earlier chapters' files
    the workspace still lacks (the student needs --ref-deps until they exist)."""
    spec = chapter.language(lang)
    target = workspace / spec.student_file
    if target.exists() and not force:
        raise BadSubmission(f"{target} already exists; ol start does not overwrite your work. Pass --force to replace it.")
    target.parent.mkdir(parents=True, exist_ok=True)
    for pkg in target.relative_to(workspace).parents:
        if str(pkg) != "." and not (workspace / pkg / "__init__.py").exists():
            (workspace / pkg / "__init__.py").write_text("")
    target.write_text(make_stub(chapter, lang))
    return target, [d for d in spec.deps if not (workspace / d).exists()]


RUST_HEADER = ("// Written by `ol start {chapter} --lang rust` from the Rust reference ({what}). It stands in for your\n"
               "// own until you write it: replace it with yours whenever you like.\n")
RUST_WORKSPACE = """\
# Written by `ol start {chapter}`. `cargo build` needs no registry; `cargo test` runs the judge (crates/tl-check),
# which builds your crate itself (sandboxed, incrementally, kept between checks): cargo test compiles nothing of yours.
# `cargo build` here builds the front end only: `cargo build -p tl-engine` (or `cargo build` in crates/tl-engine)
# compiles your crate.
[workspace]
members = ["crates/tl-engine", "crates/tl-json", "crates/tl-worker", "crates/tl-check"]
default-members = ["crates/tl-check"]
resolver = "2"
"""
# The student's copy of the engine's manifest: the judge's (harness.languages.rust_workspace.ENGINE_MANIFEST, which the grading build
# writes itself), with the library's tests left to the front end (it runs your own #[test]s when you have some).
STUDENT_LIB = ('[lib]\npath = "src/lib.rs"\ntest = false      # `cargo test` runs the judge, then your own #[test]s '
               '(crates/tl-check)\ndoctest = false\n')
# `cargo test` in crates/tl-engine: cargo picks this package, whose library's tests are the judge's to run; this target
# runs the workspace's `cargo test` (the judge) instead of a silent "ok" (the pack's course source, when it has it)
FROM_ENGINE = "crates/tl-check/src/from_engine.rs"
STUDENT_JUDGE = ('\n[[test]]\nname = "judge"   # `cargo test` here runs the judge (crates/tl-check/src/from_engine.rs)\n'
                 'path = "../tl-check/src/from_engine.rs"\nharness = false\n')


def write_rust_workspace(chapter: Chapter, workspace: Path, force: bool = False) -> tuple[Path, list[str]]:
    """`ol start --lang rust`: a cargo workspace (spec/rust.md section 1) with the stub, the given files, the course's
    crates, and the earlier chapters' modules from the reference where it has none (marked so). Returns the stub's
    path and the files written from the reference in place of the student's own."""
    lang = chapter.language("rust")
    target = workspace / lang.student_file
    if target.exists() and not force:
        raise BadSubmission(f"{target} already exists; ol start does not overwrite your work. Pass --force to replace it.")
    engine = workspace / lang.package
    (engine / "src").mkdir(parents=True, exist_ok=True)
    if not (workspace / "Cargo.toml").exists():
        (workspace / "Cargo.toml").write_text(RUST_WORKSPACE.format(chapter=chapter.chapter))
    if not (engine / "Cargo.toml").exists():
        (engine / "Cargo.toml").write_text(ENGINE_MANIFEST.replace("Written by the judge (ol)", f"Written by `ol start {chapter.chapter}`")
                                           .replace('[lib]\npath = "src/lib.rs"\n', STUDENT_LIB) +
                                           (STUDENT_JUDGE if FROM_ENGINE in lang.course_sources else ""))
    (workspace / ".ol-command").write_text(f"{REPO / 'ol'}\n")  # cargo test's front end runs this ol
    if not (workspace / ".gitignore").exists():
        (workspace / ".gitignore").write_text("target/\n")
    for crate in ("tl-json", "tl-worker", "tl-check"):  # the course's: always the current copy
        dst = workspace / "crates" / crate
        shutil.rmtree(dst, ignore_errors=True)
        if (COURSE_CRATES / crate).is_dir():  # tl-check is all the pack's (cargo test's front end names the chapter)
            shutil.copytree(COURSE_CRATES / crate, dst, ignore=shutil.ignore_patterns("target"))
    for place, source in lang.course_sources.items():  # the pack's part of them: the op table, the front end
        (workspace / place).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, workspace / place)
    standing_in = []
    for rel in lang.deps:
        dst, src = workspace / rel, lang.reference / rel
        if dst.exists():
            continue
        text = src.read_text()
        if rel in lang.earlier:  # an earlier chapter's file, not yet the student's; the others are given
            text = RUST_HEADER.format(chapter=chapter.chapter, what=f"{lang.earlier[rel]}, not yet yours") + text
            standing_in.append(rel)
        dst.write_text(text)
    target.write_text(lang.contract.read_text())
    return target, standing_in


def start_python(chapter: Chapter, lang: str, workspace: Path, force: bool, flags: str, student_map: str) -> list[str]:
    """Python's `ol start`: the stub written, and what `ol start` says of it (the lines, in order)."""
    path, missing = write_stub(chapter, workspace, force, lang)
    lines = [f"wrote {path} ({lang.capitalize()}): every function raises NotImplementedError; its docstring is the rule."]
    if missing:
        lines.append(f"your workspace has no {', '.join(missing)} yet (earlier chapters), so take them from the reference:")
        flags += " --ref-deps"
    if chapter.default_language != lang and "--submission" not in flags:
        flags += f" --lang {lang}"  # a folder holding both workspaces grades the chapter's own language first
    return lines + [f"where the chapter's files are in ol: {student_map}", f"next ({lang.capitalize()}): `ol check {chapter.chapter}{flags}`"]


def start_rust(chapter: Chapter, lang: str, workspace: Path, force: bool, flags: str, student_map: str) -> list[str]:
    """Rust's `ol start`: the cargo workspace written, and what `ol start` says of it (the lines, in order)."""
    path, standing_in = write_rust_workspace(chapter, workspace, force)
    lines = [f"wrote the cargo workspace {workspace} (Rust): {path} has every item of the contract (spec/rust.md), "
             "each body todo!(); its doc comment is the rule."]
    if standing_in:
        earlier = sorted({chapter.language("rust").earlier[p] for p in standing_in})
        lines.append(f"{', '.join(Path(p).name for p in standing_in)} came from the Rust reference ({' and '.join(earlier)} "
                     f"{'is' if len(earlier) == 1 else 'are'} not yours yet; each file says so at its top): no --ref-deps needed.")
    first = chapter.tests[0].name  # one test to run alone: the chapter's first
    return lines + [f"where the chapter's files are in ol: {student_map}",
                    f"next (Rust): `ol check {chapter.chapter}{flags}` here, or `cargo test` in {workspace} "
                    f"(one test: `cargo test -- {first}`, or `ol check {chapter.chapter}{flags} -k {first}`)"]
