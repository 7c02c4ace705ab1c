"""L10.8's golden-case layer: the one owner of the golden case schema.

- schema: the sections in the file's order and the chapter's, each section's answer keys, the logprob tolerance,
  the sampling knobs of a verify case, and how an answer is compared with the case's `expect`;
- ask: how a case is asked (ASK, ANSWERS), recorded for the pitfall hints and worded when wrong (golden_section,
  golden_mismatch), as the chapter's tests do;
- diff: `ol diff`'s rows (diff_cases, sections_for) and its property checks (diff_properties), which the engine's
  generic diff calls.

The oracle (chapters.L10_8.oracle) reads the schema from here, and its answers' shape; it computes the answers
itself, independently of the reference implementation.
"""

from .ask import ANSWERS, ASK, filled_table, golden_mismatch, golden_section
from .diff import PROPERTY_CHECKS, diff_cases, diff_properties, sections_for
from .schema import (ANSWER_KEYS, CHAPTER_ORDER, DIFFERS, FUNCTIONS, KNOBS, LOGPROB_TOL, REFUSED, SECTIONS,
                     VERIFY_KEYS, case_inputs, comparable, label, recorded, shown_params, student_tags)

__all__ = ["ANSWERS", "ANSWER_KEYS", "ASK", "CHAPTER_ORDER", "DIFFERS", "FUNCTIONS", "KNOBS", "LOGPROB_TOL", "REFUSED",
           "SECTIONS", "VERIFY_KEYS", "case_inputs", "comparable", "diff_cases", "diff_properties", "PROPERTY_CHECKS", "filled_table", "golden_mismatch",
           "golden_section", "label", "recorded", "sections_for", "shown_params", "student_tags"]
