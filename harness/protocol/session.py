"""One implementation under test as the chapter's ops see it: a package, live handles, callbacks.

Both transports run the chapter's ops (the pack's ops module) through a Session: in the judge
process for trusted code, in the worker process for a submission. Objects that live between calls
(a pool, a runner target) are held in `handles` and named by an integer; calls back into the judge
(the judge's target, a token listener) go through `call_judge(method, args)`.

`load_module` is ol's one way to load a module by its path: the chapter's ops (here and in the worker), the
reference package (harness.subjects.reference), a language plugged in (harness.languages).
"""

import copy
import importlib
import importlib.util
import linecache
import marshal
import os
from pathlib import Path
import sys
import traceback
from types import ModuleType
from typing import Callable

from .wire import to_wire

PROTOCOL_VERSION = 1
TRACEBACK_CAP = 4000  # characters of a traceback sent back: the student's own frames are at the end


FRAMES_SHOWN = 3  # the innermost frames of the student's own files a failure shows


def load_module(path: Path, name: str, package: bool = False) -> ModuleType:
    """The module at `path` (with `package`: the package whose `__init__.py` it is, its relative imports found beside
    it), executed under the name `name` and left in sys.modules (a package's submodules and a dataclass's annotations
    find it there); removed again when it fails. ImportError when `path` is no module the interpreter loads."""
    location = [str(Path(path).parent)] if package else None
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=location)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be loaded as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


class ArgumentChanged(Exception):
    """The implementation's function changed an argument its caller gave it (a list, a dict, a row of a list of
    rows): the contract's functions leave their arguments as given. Raised by Session.dispatch after the call."""

    def __init__(self, name: str, before, after) -> None:
        self.name, self.before, self.after = name, before, after
        super().__init__(f"changed its argument {name}")


_SCALARS = frozenset({int, float, bool, str, type(None)})  # exactly these types: marshal's plain data


def _content(x):
    """What a value holds, to compare before and after a call: plain data (_plain) as marshal's version 0 writes it,
    other lists, tuples and dicts item by item, numpy arrays by dtype, shape and bytes, an object by its attributes,
    anything else by repr. Version 0 writes a float as its 17 significant digits (-0.0 apart from 0.0, every NaN
    alike, as repr), keeps no references between equal objects and marks no string interned, so equal content gives
    equal bytes, and it is C: a check's calls spent a fifth of their time here when every float went through repr
    one by one (measured: cProfile of `ol check --submission reference`). marshal is given only those exact types:
    it would write any buffer (a numpy array) as its bare bytes, without dtype or shape."""
    if _plain(x):
        return marshal.dumps(x, 0)
    if isinstance(x, (list, tuple)):
        return type(x).__name__, tuple(_content(v) for v in x)
    if isinstance(x, dict):
        return "dict", tuple((repr(k), _content(v)) for k, v in x.items())
    if hasattr(x, "dtype") and hasattr(x, "tobytes"):
        return "array", str(x.dtype), tuple(getattr(x, "shape", ())), x.tobytes()
    if hasattr(x, "__dict__") and not isinstance(x, type):  # an object (SamplingParams): its attributes, never its address
        return type(x).__qualname__, _content(vars(x))
    return repr(x)


def _plain(x) -> bool:
    """Whether `x` is a scalar, or lists, tuples and dicts (string keys) of those alone, all of exactly those types."""
    t = type(x)
    if t in _SCALARS:
        return True
    if t is list or t is tuple:
        return all(type(v) in _SCALARS or _plain(v) for v in x)
    return t is dict and all(type(k) is str and _plain(v) for k, v in x.items())


def _held(x) -> tuple[object, Callable[[], object]]:
    """What `x` holds before a call (its _content) and how to show that afterwards: plain data is rebuilt from its
    bytes, anything else was copied."""
    held = _content(x)
    if isinstance(held, bytes):  # plain data
        return held, lambda: marshal.loads(held)
    before = copy.deepcopy(x)
    return held, lambda: before


def _shown(x):
    """A value as plain wire data for the failure's message (a dataclass by its repr)."""
    if x is None or isinstance(x, (bool, int, float, str, list, tuple, dict)) or hasattr(x, "tolist"):
        return to_wire(x)
    return repr(x)


class Session:
    def __init__(self, package: str, call_judge: Callable[[str, dict], object], ops, package_dir: str | None = None,
                 own_files: tuple[str, ...] = ()) -> None:
        self.package = package  # "tinyllm" in the worker; an alias such as "ol_mutant_s06" in-process
        self.call_judge = call_judge
        self.ops = ops  # the chapter's ops module: OPS, CONTRACT_ERROR and LOAD
        self.handles: dict[object, object] = {}
        self.package_dir = os.path.realpath(package_dir) if package_dir else None  # where the submission's files are
        self.own_files = own_files  # the student's own files, relative to package_dir: the frames a failure shows
        self._own_cache: dict[str, str | None] = {}  # a frame's file name -> its path among own_files, or None
        self._lent: list[tuple[str, object, object, Callable[[], object]]] = []  # (argument, object passed, its
        # content, its former self) of the current op

    def module(self, name: str):
        return importlib.import_module(f"{self.package}.{name}")

    def hold(self, obj) -> int:
        handle = sum(isinstance(h, int) for h in self.handles) + 1
        self.handles[handle] = obj
        return handle

    def handle(self, h: int, kind: str):
        obj = self.handles.get(h)
        if obj is None:
            raise LookupError(f"no live {kind} with handle {h} (the worker may have been restarted)")
        return obj

    def dispatch(self, op: str, args: dict):
        """Run one operation; raises whatever the implementation raised (the transport makes it data).
        `load` (every chapter's) imports the chapter's own modules, so a submission that cannot be imported
        says so once, before any test."""
        if op == "load":
            for name in getattr(self.ops, "LOAD", ()):
                self.module(name)
            return None
        fn = self.ops.OPS.get(op)
        if fn is None:
            raise KeyError(f"unknown operation {op!r}; the protocol has {sorted(self.ops.OPS)}")
        self._lent = [(name, value, *_held(value)) for name, value in args.items()]
        try:
            out = fn(self, args)
        except Exception as e:  # a refusal after changing an argument is a change too
            self._unchanged(e)
            raise
        self._unchanged()
        return out

    def lend(self, name: str, value):
        """`value` as the op passes it to the implementation under the contract's argument `name` (a conversion of
        an argument: rows as float32 arrays, SamplingParams): checked after the call like the arguments themselves.
        Returns `value`."""
        self._lent.insert(0, (name, value, *_held(value)))
        return value

    def _unchanged(self, cause: BaseException | None = None) -> None:
        """Raise ArgumentChanged naming the first argument the call changed (what the op lent first, then the op's
        own arguments); nothing when every one holds what it held before."""
        lent, self._lent = self._lent, []
        for name, value, held, before in lent:
            if _content(value) != held:
                raise ArgumentChanged(name, _shown(before()), _shown(value)) from cause

    def is_contract_error(self, e: BaseException) -> bool:
        """Whether `e` is the chapter's contract error (its ops module's CONTRACT_ERROR) of this package."""
        module, name = self.ops.CONTRACT_ERROR
        try:
            return isinstance(e, getattr(self.module(module), name))
        except Exception:  # noqa: BLE001 -- the module itself may be what failed to import
            return False

    def error_data(self, e: BaseException) -> dict:
        """An exception as plain data: type, message, whether it is the contract error, a short traceback,
        and the innermost frames in the student's own files (file relative to the submission, line, source)."""
        refused = self.is_contract_error(e)  # a refusal is an answer: no traceback to format (the property checks
        # draw thousands of them); its frames still say where the student's code refused
        tb = "" if refused else "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-8))
        data = {"type": type(e).__name__, "message": str(e), "spec_error": refused,
                "traceback": tb[-TRACEBACK_CAP:], "frames": self.own_frames(e)}
        if isinstance(e, ArgumentChanged):
            data.update(traceback="", changed={"argument": e.name, "before": e.before, "after": e.after})
        return data

    def own_frames(self, e: BaseException) -> list[dict]:
        if self.package_dir is None:
            return []
        # (file, line, function, source) of each frame; a frame's source line is read only when the frame is the
        # student's: every refusal comes here, and reading each frame's file anew cost a refused call 20 times an
        # answered one
        frames: list[tuple[str, int, str, str | None]] = [(f.f_code.co_filename, line, f.f_code.co_name, None)
                                                          for f, line in traceback.walk_tb(e.__traceback__)]
        if isinstance(e, SyntaxError) and e.filename:  # the line that does not parse is no frame of the stack
            frames.append((e.filename, e.lineno or 0, "<module>", e.text or ""))
        out = []
        for filename, line, function, source in frames:
            rel = self._own_file(filename)
            if rel is None:
                continue
            if source is None:
                source = linecache.getline(filename, line)
            out.append({"file": rel, "line": line, "function": function, "source": source.strip()})
        return out[-FRAMES_SHOWN:]

    def _own_file(self, filename: str) -> str | None:
        """`filename` relative to the submission when it is one of the student's own files, else None (cached:
        a worker's files do not move under it)."""
        if filename not in self._own_cache:
            path, base = os.path.realpath(filename), self.package_dir or ""  # own_frames asks only with a package_dir
            rel = os.path.relpath(path, base) if base and path.startswith(base + os.sep) else None
            self._own_cache[filename] = None if rel is None or self.own_files and rel not in self.own_files else rel
        return self._own_cache[filename]
