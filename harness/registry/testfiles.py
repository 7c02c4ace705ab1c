"""A chapter's tests files, read as the registry needs them: their test functions and imports, from one parse
per file and process, safe across the threads of one process."""

from dataclasses import dataclass
import ast
from pathlib import Path
import threading

from ..kernel.errors import RegistryError

# Shared by the threads of one process (`ol grade --jobs`'s, a Dask worker's): CPython 3.11's ast.parse is not
# thread-safe (the AST module's recursion counter is one per interpreter: two parses at once raise "SystemError:
# AST constructor recursion depth mismatch"), so every parse here holds PARSE_LOCK, and a tests file is parsed
# once per process (again only when its stat changes): _tests_files, written under the lock.
PARSE_LOCK = threading.RLock()
PARSE_ATTEMPTS = 3  # a parse upset by one outside the harness (see parse) is made again, this many times in all
_tests_files: dict[str, tuple[tuple, "ParsedTests"]] = {}  # path -> (its stat signature, what it defines)


@dataclass(frozen=True)
class ParsedTests:
    """What a chapter's tests file holds at its top, from one parse."""
    functions: tuple[str, ...]  # its test functions (`def test_<name>`), prefix dropped
    imports: tuple[str, ...]  # the modules it imports absolutely (`import a.b`, `from a.b import c`: a.b)


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """ast.parse, one at a time in this process (PARSE_LOCK: 3.11's is not thread-safe). A parse outside
    the harness at the same moment (3.11 parses a line of each traceback it formats, for its ^^^ marks: Dask's
    log of a failed task, in another thread) can still upset it; the parse is pure, so it is made again."""
    with PARSE_LOCK:
        for _ in range(PARSE_ATTEMPTS - 1):
            try:
                return ast.parse(source, filename)
            except SystemError as e:
                if "AST constructor recursion depth mismatch" not in str(e):
                    raise
        return ast.parse(source, filename)  # the last attempt: whatever it raises stands


def parsed_tests(path: Path) -> ParsedTests:
    """A tests file's test functions and imports, parsed once per process (and again when its stat changes)."""
    path = Path(path)
    with PARSE_LOCK:
        try:
            st = path.stat()
            signature = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            known = _tests_files.get(str(path))
            if known is not None and known[0] == signature:
                return known[1]
            tree = parse(path.read_text(), str(path))
        except (OSError, SyntaxError, ValueError) as e:
            raise RegistryError(f"{path}: cannot read the chapter's tests: {e}") from e
        functions = tuple(n.name.removeprefix("test_") for n in tree.body
                          if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test_"))
        imports = tuple(name for node in tree.body for name in
                        ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []))
        parsed = ParsedTests(functions, imports)
        _tests_files[str(path)] = (signature, parsed)
        return parsed


def test_functions(path: Path) -> list[str]:
    """The test names a tests file defines (top-level `def test_<name>`, prefix dropped)."""
    return list(parsed_tests(path).functions)
