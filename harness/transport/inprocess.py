"""The in-process transport: trusted code (the reference, a mutant) called directly in the judge."""

import time
from typing import Callable

from ..kernel.errors import Raised
from ..protocol.session import Session
from ..protocol.wire import to_wire
from .impl import CallInfo, no_callbacks


class InProcess:
    """Transport (harness.transport.impl): the calls run here, in ol's own language, unconfined."""

    language = ""
    mode = None

    def __init__(self, package: str, ops) -> None:
        self.callbacks: Callable[[str, dict], object] = no_callbacks  # the current call's (run sets them)
        self.session = Session(package, lambda method, args: self.callbacks(method, args), ops)

    def run(self, op: str, args: dict, callbacks, deadline_s: float) -> CallInfo:
        self.callbacks = callbacks
        start = time.perf_counter()
        try:
            value = to_wire(self.session.dispatch(op, to_wire(args)))
            return CallInfo(op, value=value, duration_s=time.perf_counter() - start)
        except Exception as e:  # noqa: BLE001 -- every exception of the implementation becomes data
            return CallInfo(op, error=Raised(op, self.session.error_data(e)), duration_s=time.perf_counter() - start)

    def spawn(self) -> None:
        pass  # nothing to start

    def close(self) -> None:
        pass

    def restart(self) -> None:
        pass  # trusted code keeps no protocol state to distrust
