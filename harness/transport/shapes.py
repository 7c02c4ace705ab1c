"""The shape of a worker's answer, checked by the judge before any test looks at it.

A worker's answer is JSON from a process the judge does not trust (a compiled worker, or an in-interpreter
submission writing raw bytes on the protocol's descriptor). The interpreter's `==` would take `7.0` or `true`
for the token id 7 or 1, so each op of a chapter declares the shape of its answer (`ANSWERS` in the
pack's ops module) and `conform` checks it, decoding non-finite floats ("inf", "-inf", "nan") where a
float is due, at any depth. A mismatch is a ShapeError naming the path and what was found; the
transport makes it a crashed test, never a judge crash and never a pass.

Shapes:
    "int"    an integer, not a boolean        "float"  a number (not a boolean) or "inf"/"-inf"/"nan"
    "bool"   true or false                    "str"    a string
    "null"   null
    [S]            a list whose every item has shape S
    ("tuple", S1, S2, ...)   a list of exactly these items
    ("any", S1, S2, ...)     the first of these shapes the value has
    {"k": S, ...}  an object with exactly these keys
    a callable     args -> the shape (when the answer's shape depends on the call, e.g. a pool method)
Checking walks the shape, not the value, so it recurses no deeper than the shape, whatever is nested.
"""

import reprlib

from ..protocol.wire import NON_FINITE

_SHOWN = reprlib.Repr()  # bounded, whatever the nesting (Python 3.11's Repr takes no keywords)
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict, _SHOWN.maxstring, _SHOWN.maxother = 3, 6, 4, 40, 40


class ShapeError(ValueError):
    pass


def _found(value) -> str:
    return f"{_SHOWN.repr(value)} ({'boolean' if type(value) is bool else type(value).__name__})"


def conform(shape, value, where: str = "the answer"):
    """`value` checked against `shape`, with non-finite floats decoded; raises ShapeError."""
    t = type(value)
    if shape == "int":
        if t is not int:
            raise ShapeError(f"{where} is {_found(value)}, expected an integer")
        return value
    if shape == "float":
        if t is float or t is int:
            return float(value)
        if t is str and value in NON_FINITE:
            return NON_FINITE[value]
        raise ShapeError(f"{where} is {_found(value)}, expected a number")
    if shape == "bool":
        if t is not bool:
            raise ShapeError(f"{where} is {_found(value)}, expected true or false")
        return value
    if shape == "str":
        if t is not str:
            raise ShapeError(f"{where} is {_found(value)}, expected a string")
        return value
    if shape == "null":
        if value is not None:
            raise ShapeError(f"{where} is {_found(value)}, expected null")
        return None
    if type(shape) is list:
        if t is not list:
            raise ShapeError(f"{where} is {_found(value)}, expected a list")
        (item,) = shape
        if item == "int":  # the common case, kept fast: token ids, tens of thousands per test
            bad = next((i for i, v in enumerate(value) if type(v) is not int), None)
            if bad is not None:
                raise ShapeError(f"{where}[{bad}] is {_found(value[bad])}, expected an integer")
            return value
        if item == "float" and all(type(v) is float for v in value):  # a row of finite floats: nothing to decode
            return value
        return [conform(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if type(shape) is tuple and shape[0] == "tuple":
        items = shape[1:]
        if t is not list or len(value) != len(items):
            raise ShapeError(f"{where} is {_found(value)}, expected a list of {len(items)} items")
        return [conform(s, v, f"{where}[{i}]") for i, (s, v) in enumerate(zip(items, value))]
    if type(shape) is tuple and shape[0] == "any":
        errors = []
        for s in shape[1:]:
            try:
                return conform(s, value, where)
            except ShapeError as e:
                errors.append(str(e))
        raise ShapeError(" or ".join(errors))
    if type(shape) is dict:
        if t is not dict:
            raise ShapeError(f"{where} is {_found(value)}, expected an object with {sorted(shape)}")
        if set(value) != set(shape):
            raise ShapeError(f"{where} has the keys {sorted(value)[:10]}, expected {sorted(shape)}")
        return {k: conform(s, value[k], f"{where}.{k}") for k, s in shape.items()}
    raise TypeError(f"not a shape: {shape!r}")  # the pack's declaration is wrong: a harness bug
