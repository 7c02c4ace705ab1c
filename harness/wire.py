"""Plain data on the wire (spec/protocol.md): JSON, with non-finite floats as strings.

JSON has no infinities, and logits may be -inf; so a non-finite float travels as the string
"inf", "-inf" or "nan", in both directions. Everything else is plain JSON: ints (64-bit seeds
included, Python and serde both read them exactly), floats written as the shortest repr of
their float64 value, lists, objects, booleans and null.
"""

import json
import math

import numpy as np

NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def to_wire(x):
    """Numpy values to lists and Python scalars; non-finite floats to strings."""
    if isinstance(x, np.ndarray):
        return to_wire(x.tolist())
    if isinstance(x, (np.floating, float)):
        x = float(x)
        if math.isfinite(x):
            return x
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, dict):
        return {str(k): to_wire(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_wire(v) for v in x]
    return x


def floats(x):
    """The inverse of to_wire for numbers: strings "inf", "-inf", "nan" back to floats, recursively."""
    if isinstance(x, str) and x in NON_FINITE:
        return NON_FINITE[x]
    if isinstance(x, list):
        return [floats(v) for v in x]
    return x


def dumps(msg) -> bytes:
    return (json.dumps(to_wire(msg), allow_nan=False, separators=(",", ":")) + "\n").encode()


def loads(line: bytes):
    return json.loads(line)
