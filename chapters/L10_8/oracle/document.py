"""The golden document of L10.8: its cases for one master seed, its canonical bytes, reading it back,
and the byte-for-byte check (the generic pieces are harness.pack.oracle_kit's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.pack import oracle_kit as kit

from chapters.L10_8.cases import SECTIONS, comparable
from .common import ANSWER_KEYS, KNOBS, MASTER_SEED, MUST_SHOW, bind, shown
from .draft_cases import ngram_case, ngram_plan, prompt_lookup_case, prompt_lookup_plan
from .generate_cases import generate_cases
from .rollback_cases import rollback_cases
from .verify_cases import verify_case
from .verify_plan import verify_plan

CHAPTER = "L10.8"
GENERATOR = "chapters/L10_8/oracle"  # recorded in the file: where it comes from (the repository path of this package)
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "fixtures" / "spec_golden.json"  # the chapter pack's fixture
NEG_INF = "-inf"  # how a -inf logit is written (JSON has no infinity)


# ---- the cases ------------------------------------------------------------------------------------

def build(ref, master_seed: int = MASTER_SEED) -> dict:
    """The whole golden document for one master seed (ids and kinds stable per position).

    `ref` is the reference (a harness.subjects.reference.Reference) whose answers the cases record.
    """
    if not isinstance(master_seed, int) or isinstance(master_seed, bool) or not 0 <= master_seed <= kit.MASK64:
        raise ValueError(f"master_seed must be a 64-bit unsigned integer, got {master_seed!r}")
    lib = bind(ref)
    verify = [{"id": f"v{i:03d}", **verify_case(lib, master_seed, i, plan)} for i, plan in enumerate(verify_plan())]
    prompt_lookup = [{"id": f"pl{i:03d}", **prompt_lookup_case(lib, master_seed, i, kind)}
                     for i, kind in enumerate(prompt_lookup_plan())]
    ngram = [{"id": f"ng{i:03d}", **ngram_case(lib, master_seed, i, kind)} for i, kind in enumerate(ngram_plan())]
    doc = {"chapter": CHAPTER, "master_seed": master_seed, "generator": GENERATOR,
           "verify": verify, "prompt_lookup": prompt_lookup, "ngram": ngram,
           "generate": generate_cases(lib), "rollback": rollback_cases(lib, master_seed)}
    _assert_tags_name_the_pitfalls(doc)
    _assert_pitfalls_show(doc)
    return doc


def _assert_tags_name_the_pitfalls(doc: dict) -> None:
    """Every case's `shows:sNN` tags are exactly the keys of its `pitfalls`, none equal to `expect`."""
    for section in SECTIONS:
        for c in doc[section]:
            if shown(c["tags"]) != set(c["pitfalls"]):
                raise AssertionError(f"case {c['id']}: tags show {sorted(shown(c['tags']))}, pitfalls {sorted(c['pitfalls'])}")
            want = comparable(section, c)
            same = [b for b, a in c["pitfalls"].items() if a == want]
            if same:
                raise AssertionError(f"case {c['id']}: pitfalls {same} record the expected answer")


def _assert_pitfalls_show(doc: dict) -> None:
    counts = tag_counts(doc)
    for bug, least in MUST_SHOW.items():
        got = counts.get(f"shows:{bug}", 0)
        if got < least:
            raise AssertionError(f"pitfall {bug} shows on {got} cases, the design needs >= {least}")


def tag_counts(doc: dict, sections: tuple[str, ...] = SECTIONS) -> dict[str, int]:
    """How many cases carry each tag, over `sections` (all, by default; a section the doc lacks counts nothing)."""
    out: dict[str, int] = {}
    for section in sections:
        for c in doc.get(section, []):
            for t in c["tags"]:
                out[t] = out.get(t, 0) + 1
    return out


# ---- canonical JSON ---------------------------------------------------------------------------------

def _logit(x: float) -> Any:
    if x == float("-inf"):
        return NEG_INF
    assert kit.f32(x) == x and x == x and x != float("inf"), x
    return x


def _answer(section: str, a: Any) -> Any:
    """A recorded pitfall answer in canonical key order ("refused" and draft lists as they are)."""
    order = ANSWER_KEYS.get(section)
    if order is None or not isinstance(a, dict):
        return a
    assert set(a) == set(order), (section, sorted(a))
    return {k: a[k] for k in order}


def _prepare(section: str, key: str, value: Any) -> Any:
    """A case field as its JSON value: verify rows are float32 numbers or "-inf"; pitfalls by id."""
    if section == "verify" and key == "rows":
        return [[_logit(x) for x in row] for row in value]
    if key == "pitfalls":
        return {b: _answer(section, value[b]) for b in sorted(value)}
    return value


LAYOUT = kit.Layout(
    top_keys=("chapter", "master_seed", "generator", *SECTIONS),
    case_keys={
        "verify": ("id", "tags", "rows", "draft", "draft_probs", "params", "prompt", "output", "seed", "expect",
                   "pitfalls"),
        "prompt_lookup": ("id", "tags", "ctx", "k", "max_ngram", "min_ngram", "expect", "pitfalls"),
        "ngram": ("id", "tags", "ctx", "k", "n", "expect", "pitfalls"),
        "generate": ("id", "tags", "prompt", "cfg", "max_new", "seed", "vocab", "budget", "expect", "pitfalls"),
        "rollback": ("id", "tags", "num_blocks", "block_tokens", "fills", "keep", "expect", "pitfalls"),
    },
    sub_keys={"verify": {"params": KNOBS, "expect": ("tokens", "logprobs", "n_accepted", "next_u32")},
              "generate": {"cfg": ("draft", "k"), "expect": ANSWER_KEYS["generate"]},
              "rollback": {"expect": ANSWER_KEYS["rollback"]}},
    prepare=_prepare,
)  # the file's key order (fixtures/README.md, "Layout")


def dumps(doc: dict) -> bytes:
    """Canonical bytes: fixed key order, no spaces, one case per line, a trailing newline."""
    return kit.dumps(LAYOUT, doc)


def decode_logit(x: Any) -> float:
    """A logit as written in the file: a number, or the string "-inf"."""
    return float("-inf") if x == NEG_INF else float(x)


def load(path: str | Path) -> dict:
    """Read a golden file; verify rows come back as float lists with -inf restored."""
    doc = json.loads(Path(path).read_bytes())
    for c in doc["verify"]:
        c["rows"] = [[decode_logit(x) for x in row] for row in c["rows"]]
    return doc


def write(path: str | Path, ref, master_seed: int = MASTER_SEED) -> bytes:
    """Build the document for `master_seed`, write its canonical bytes to `path`, and return them."""
    data = dumps(build(ref, master_seed))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def check(path: str | Path, ref, master_seed: int | None = None) -> str | None:
    """Regenerate in memory and compare bytes: None when equal, else where the first difference is.

    The master seed is the file's own when it can be read (else MASTER_SEED), so a fresh-seed
    file checks against its own seed.
    """
    path = Path(path)
    try:
        have = path.read_bytes()
    except OSError as e:
        return f"{path}: cannot read: {e}"
    if master_seed is None:
        master_seed = kit.recorded_seed(have, MASTER_SEED)
    return kit.describe_difference(LAYOUT, build(ref, master_seed), have, str(path))
