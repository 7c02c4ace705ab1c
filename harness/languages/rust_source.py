"""The given modules of a Rust submission are the course's: what its sources may not say, checked before a build.

The grading build (harness.languages.rust_workspace.assemble) copies the course's given modules (chapter.toml
`given`) over the submission's. Rust could still point a given module's name at the student's code; each way is
refused, naming the file, the line and what it says (a BadSubmission, as `ol check` refuses it):

* a `#[path = "…"]` attribute, anywhere (or a `path` inside `cfg_attr(…)`): `#[path = "mine.rs"] pub mod
  runner_target;` compiles the student's file as the course's module. Every module is its own file, as `ol start`
  writes them; no legitimate submission needs one.
* a `src/lib.rs` that does not declare each given module plainly at its top level (`pub mod runner_target;`, no
  `#[cfg…]`, not inline): with it there, any other definition of that name at the crate's root is a compile error.

Comments (nested ones too), strings (raw and byte strings too) and character literals are blanked first, as
Rust's lexer reads them, so no text inside them counts.
"""

from __future__ import annotations

import re
from pathlib import Path

_RAW = re.compile(r'b?r(#*)"')
_IDENT = re.compile(r"[A-Za-z0-9_]")


def cleaned(text: str) -> str:
    """`text` with every comment, string and character literal replaced by spaces (its newlines kept: lines stay)."""
    out = list(text)
    n, i = len(text), 0

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        after_ident = i > 0 and _IDENT.match(text[i - 1]) is not None
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                step = text[j:j + 2]
                depth += 1 if step == "/*" else -1 if step == "*/" else 0
                j += 2 if step in ("/*", "*/") else 1
        elif not after_ident and (m := _RAW.match(text, i)):
            end = text.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
        elif c == "'" and text.startswith("\\", i + 1):  # '\n', '\'', '\u{..}'
            end = text.find("'", i + 3)
            j = n if end < 0 else end + 1
        elif c == "'" and i + 2 < n and text[i + 2] == "'":  # 'x'
            j = i + 3
        else:  # code, a lifetime's quote included
            i += 1
            continue
        blank(i, j)
        i = j
    return "".join(out)


def _attributes(clean: str):
    """(start, end, inner, content) of every attribute `#[…]` / `#![…]` of cleaned source."""
    for m in re.finditer(r"#\s*(!?)\s*\[", clean):
        depth, j = 1, m.end()
        while j < len(clean) and depth:
            depth += {"[": 1, "]": -1}.get(clean[j], 0)
            j += 1
        yield m.start(), j, bool(m.group(1)), clean[m.end():j - 1]


def _plain_declaration(clean: str, attrs: list, name: str) -> bool:
    """Does the cleaned lib.rs declare `[pub] mod name;` at its top level with no outer `cfg`/`cfg_attr`/`path` on it?"""
    for m in re.finditer(rf"(?<![A-Za-z0-9_])(pub(\s*\([^)]*\))?\s+)?mod\s+{name}\s*;", clean):
        if clean[:m.start()].count("{") != clean[:m.start()].count("}"):
            continue  # inside another module or item
        before, ok = m.start(), True
        while (prev := clean[:before].rstrip()).endswith("]"):
            attr = next((a for a in attrs if a[1] == len(prev)), None)
            if attr is None or attr[2]:  # an inner attribute: the crate's, not this item's
                break
            if re.search(r"\b(cfg|cfg_attr|path)\b|\$", attr[3]):
                ok = False
            before = attr[0]
        if ok:
            return True
    return False


def refusal(src: Path, given: list[str]) -> str | None:
    """Why the crate source folder `src` (its .rs files) may not be built with the given modules `given` (their
    names: `model`, `runner_target`) as the course's; None when it may."""
    for path in sorted(src.rglob("*.rs")):
        if path.is_symlink() or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        clean = cleaned(text)
        rel = path.relative_to(src.parent.parent).as_posix()
        for start, end, _inner, content in _attributes(clean):
            if re.search(r"(?<![A-Za-z0-9_$])path(?![A-Za-z0-9_])", content):
                line = text.count("\n", 0, start) + 1
                said = " ".join(text[start:end].split())
                said = said if len(said) <= 120 else said[:117] + "..."
                return (f"{rel}:{line}: the attribute {said!r} is refused: a #[path] "
                        f"attribute can make the build compile another file as a module, and the given modules "
                        f"({', '.join(given)}) are always the course's; keep each module in its own file (src/NAME.rs) "
                        "and remove the attribute")
    lib = src / "lib.rs"
    text = lib.read_text(encoding="utf-8", errors="replace")
    clean = cleaned(text)
    attrs = list(_attributes(clean))
    for name in given:
        if not _plain_declaration(clean, attrs, name):
            return (f"{src.parent.name}/src/lib.rs does not declare `pub mod {name};` plainly at its top level: {name} "
                    f"is a given module, always the course's file; declare it as ol start writes it (no #[cfg] on it, "
                    "not inline, not renamed from another module)")
    return None
