"""Plain data on the wire (spec/protocol.md): JSON, with non-finite floats as strings.

JSON has no infinities, and logits may be -inf; so a non-finite float travels as the string
"inf", "-inf" or "nan", in both directions. Everything else is plain JSON: ints (64-bit seeds
included, ol and serde both read them exactly), floats written as the shortest repr of
their float64 value, lists, objects, booleans and null.
"""

import json
import math
import os
import select
import time

import numpy as np

NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _float(x: float):
    if x - x == 0.0:  # finite (inf - inf and nan - nan are nan)
        return x
    return "nan" if x != x else ("inf" if x > 0 else "-inf")


def to_wire(x):
    """Numpy values to lists and plain scalars (int, float, bool); non-finite floats to strings."""
    t = type(x)
    if t is int or t is str or t is bool or x is None:
        return x
    if t is float:
        return _float(x)
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            return to_wire(x.astype(np.float64).tolist())
        return x.tolist()  # exact: a float32 becomes the float64 it equals
    if t is list or t is tuple:
        return [to_wire(v) for v in x]
    if t is dict:
        return {str(k): to_wire(v) for k, v in x.items()}
    if isinstance(x, np.floating):
        return _float(float(x))
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def floats(x):
    """The inverse of to_wire for numbers: strings "inf", "-inf", "nan" back to floats, recursively."""
    if type(x) is str:
        return NON_FINITE.get(x, x)
    if type(x) is list:
        if x and type(x[0]) is not list and not any(type(v) is str for v in x):
            return x  # a flat row of numbers: nothing to convert
        return [floats(v) for v in x]
    return x


def _plain(x):
    """json's hook for what it cannot write itself: numpy arrays and scalars (a non-finite value then makes
    json raise ValueError, and dumps takes the slow path)."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    raise TypeError(f"{type(x).__name__} is not plain data")


def dumps(msg) -> bytes:
    """One protocol line. Most messages hold only finite numbers: json writes them as they are, without
    a copy through to_wire (a judge sends thousands a check); one holding inf or nan is spelled by to_wire."""
    try:
        text = json.dumps(msg, allow_nan=False, separators=(",", ":"), default=_plain)
    except ValueError:
        text = json.dumps(to_wire(msg), allow_nan=False, separators=(",", ":"))
    return (text + "\n").encode()


def loads(line: bytes):
    return json.loads(line)


def spin_from_env() -> float:
    """OL_SPIN_S in seconds (default 0.0002); a value that is no number: the default."""
    try:
        return max(0.0, float(os.environ.get("OL_SPIN_S", "0.0002")))
    except ValueError:
        return 0.0002


# How long a side polls for the other's next message before it sleeps in select. A lone check gains by it
# (one alone: 3.3-3.6 s polling, 3.8-3.9 s not); where judges share the cores, a polling side steals the
# core its peer needs (two at once: 8.0 s each polling, 4.1-5.0 s not), so `ol grade`'s judges and their
# workers run with OL_SPIN_S=0.
SPIN_S = spin_from_env()


def reread_spin() -> None:
    """SPIN_S read again from OL_SPIN_S (a caller that set it after this module was imported: ol selftest)."""
    global SPIN_S
    SPIN_S = spin_from_env()


def read_some(fd: int, timeout: float | None = None) -> bytes | None:
    """The next bytes from the non-blocking descriptor `fd` (b"" at its end), or None when `timeout` seconds
    pass first (None: wait as long as it takes). Both sides of the protocol read this way: a message usually
    comes within microseconds, so they poll for SPIN_S before sleeping (a sleeping process takes tens of
    microseconds to wake, and a check exchanges thousands of messages)."""
    spin_end = time.perf_counter() + (SPIN_S if timeout is None else min(SPIN_S, timeout))
    while True:
        try:
            return os.read(fd, 1 << 20)
        except BlockingIOError:
            if time.perf_counter() >= spin_end:
                break
    ready, _, _ = select.select([fd], [], [], timeout)
    return os.read(fd, 1 << 20) if ready else None
