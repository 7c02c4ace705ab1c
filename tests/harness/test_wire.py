"""The protocol's values on the wire (harness.protocol.wire): numpy scalars of every width become plain numbers."""

import json

import numpy as np
import pytest

from harness.protocol.wire import dumps, to_wire


@pytest.mark.parametrize("scalar, plain", [
    (np.float16(1.5), 1.5), (np.float32(0.1), float(np.float32(0.1))), (np.float64(2.5), 2.5),
    (np.longdouble(1.5), 1.5), (np.int8(-3), -3), (np.uint64(2**64 - 1), 2**64 - 1), (np.bool_(True), True),
])
def test_every_numpy_scalar_is_its_plain_value(scalar, plain):
    """A submission may answer with any numpy scalar (a longdouble's .item() is a longdouble again: a conversion
    through .item() would recurse without end on it)."""
    assert to_wire(scalar) == plain and type(to_wire(scalar)) is type(plain)
    assert json.loads(dumps({"v": scalar})) == {"v": plain}
    assert json.loads(dumps({"v": [scalar, float("inf")]})) == {"v": [plain, "inf"]}


def test_a_non_finite_longdouble_is_spelled_as_every_non_finite_float():
    assert to_wire(np.longdouble("inf")) == "inf" and to_wire(np.float32("nan")) == "nan"
