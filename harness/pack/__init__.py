"""What a chapter pack may import of the engine, in one place (the facade a pack is written against).

A pack's judge helpers, client, cases and oracle import from here; its `ops.py` alone imports
`harness.protocol.wire` (it runs inside the worker, whose kit is `harness/protocol/` and nothing else).
Anything a pack needs that is not here is a change to this list, not an import of an engine module.
"""

from ..kernel.errors import Raised, SubmissionFailure, Timeout
from ..kernel.memo import remembered
from ..kernel.paths import REPO
from ..protocol.wire import to_wire
from ..registry import load_chapter
from ..subjects.open import open_impl
from ..subjects.reference import pristine
from ..subjects.version import version_of
from ..transport.feedback import Bare, brief, expected_got, where_differ
from ..transport.impl import Impl
from ..transport.inprocess import InProcess
from .differential import ALL, ANSWERS, REFUSALS, Explicit, Property, check, close, reach
from .frames import Domain, Param, drawn
from .oracle_kit import MASK64, Rand, exact_logprob, f32, splitmix64

__all__ = ["ALL", "ANSWERS", "Bare", "Domain", "Explicit", "Impl", "InProcess", "MASK64", "Param", "Property",
           "REFUSALS", "REPO", "Raised", "Rand", "SubmissionFailure", "Timeout", "brief", "check", "close", "drawn",
           "exact_logprob", "expected_got", "f32", "load_chapter", "open_impl", "pristine", "reach", "remembered",
           "splitmix64", "to_wire", "version_of", "where_differ"]
