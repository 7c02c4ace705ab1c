"""One implementation under test as the chapter's ops see it: a package, live handles, callbacks.

Both transports run the chapter's ops (the pack's ops module) through a Session: in the judge
process for trusted code, in the worker process for a submission. Objects that live between calls
(a pool, a runner target) are held in `handles` and named by an integer; calls back into the judge
(the judge's target, a token listener) go through `call_judge(method, args)`.
"""

import importlib
import traceback
from typing import Callable

PROTOCOL_VERSION = 1
TRACEBACK_CAP = 4000  # characters of a traceback sent back: the student's own frames are at the end


class Session:
    def __init__(self, package: str, call_judge: Callable[[str, dict], object], ops) -> None:
        self.package = package  # "tinyllm" in the worker; an alias such as "ol_mutant_s06" in-process
        self.call_judge = call_judge
        self.ops = ops  # the chapter's ops module: OPS and CONTRACT_ERROR
        self.handles: dict[object, object] = {}

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
        """Run one operation; raises whatever the implementation raised (the transport makes it data)."""
        fn = self.ops.OPS.get(op)
        if fn is None:
            raise KeyError(f"unknown operation {op!r}; the protocol has {sorted(self.ops.OPS)}")
        return fn(self, args)

    def is_contract_error(self, e: BaseException) -> bool:
        """Whether `e` is the chapter's contract error (e.g. infer.spec.SpecError) of this package."""
        module, name = self.ops.CONTRACT_ERROR
        try:
            return isinstance(e, getattr(self.module(module), name))
        except Exception:  # noqa: BLE001 -- the module itself may be what failed to import
            return False

    def error_data(self, e: BaseException) -> dict:
        """An exception as plain data: type, message, whether it is the contract error, a short traceback."""
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-8))
        return {"type": type(e).__name__, "message": str(e), "spec_error": self.is_contract_error(e),
                "traceback": tb[-TRACEBACK_CAP:]}
