"""`ol start`: the student's stub, made from the chapter's contract (.pyi).

Every function whose body is only its docstring gets `raise NotImplementedError(...)` after it;
everything else (imports, classes, dataclass fields, comments) is kept as written, so the stub
reads exactly like the contract. Protocol classes are left alone: they are never called.
"""

import ast
from pathlib import Path

from .errors import BadSubmission
from .registry import Chapter

HEADER = "# Written by `ol start {chapter}` from {contract}. Replace each NotImplementedError with your code.\n"


def _stub_lines(source: str) -> list[str]:
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    inserts: list[tuple[int, str]] = []  # (after line number, text)
    protocols = {n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                 and any(getattr(b, "id", getattr(b, "attr", "")) == "Protocol" for b in n.bases)}
    skip = {id(f) for c in protocols for f in ast.walk(c)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef) or id(node) in skip:
            continue
        body = node.body
        if len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            indent = " " * body[0].col_offset
            inserts.append((body[0].end_lineno, f'{indent}raise NotImplementedError("{node.name}: not implemented yet")\n'))
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
