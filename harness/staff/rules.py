"""A chapter's rule table: every rule its contract states, the test that checks it and the input that would
fail if the rule were broken (or why the rule is free, or where else it is graded).

The table is data, `<pack>/tests/rules.toml` ([[rule]] rows); `<pack>/tests/RULES.md` is rendered from it:

    RUN_MODULE harness.staff.rules CHAPTER            # rewrite RULES.md from rules.toml (RUN_MODULE: ol's interpreter -m)
    RUN_MODULE harness.staff.rules CHAPTER --check    # exit 1 if RULES.md is stale or a row is malformed

`problems` is what tests/harness/test_rules.py asserts empty: ids unique and well formed; each row of exactly one
kind (tested: `test` and `input`; `free`; `elsewhere`); tests and golden cases that exist, the cases read by the
row's test; every test named by some row. [[domain]] rows (`domain_problems`) state each contract function's
domain: what it admits, what it refuses and how, what is free, and the test whose property check draws from it.
"""

import ast
import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..languages import RUN_MODULE
from ..kernel.paths import shown
from ..registry import Chapter, load_chapter

ID = re.compile(r"^R-[A-Z]{2}-\d{2}$")
KINDS = ("test", "free", "elsewhere")


@dataclass(frozen=True)
class Rule:
    id: str
    rule: str
    source: str
    test: str = ""
    input: str = ""
    golden: tuple[str, ...] = ()
    free: str = ""
    elsewhere: str = ""

    @property
    def kind(self) -> str:
        present = [k for k in KINDS if getattr(self, k)]
        return present[0] if len(present) == 1 else "malformed"


@dataclass(frozen=True)
class Domain:
    function: str  # the contract function, as spec.pyi names it
    admits: str  # every input it answers, edges included
    refuses: str  # what it refuses, and with what (SpecError unless said)
    test: str  # the chapter test whose property check draws from this domain
    drawn: str  # how the property check draws it (the edges it always tries)
    free: str = ""  # inputs whose answer the contract leaves free (never compared)


def rules_path(ch: Chapter) -> Path:
    return ch.pack_dir / "tests" / "rules.toml"


def markdown_path(ch: Chapter) -> Path:
    return ch.pack_dir / "tests" / "RULES.md"


def load_rules(ch: Chapter) -> list[Rule]:
    rows = tomllib.loads(rules_path(ch).read_text()).get("rule", [])
    for i, row in enumerate(rows):
        if extra := set(row) - set(Rule.__dataclass_fields__):
            raise ValueError(f"{rules_path(ch)}: row {i + 1} ({row.get('id')}) has unknown keys {sorted(extra)}")
    return [Rule(**{**row, "golden": tuple(row.get("golden", ()))}) for row in rows]


def load_domains(ch: Chapter) -> list[Domain]:
    rows = tomllib.loads(rules_path(ch).read_text()).get("domain", [])
    for i, row in enumerate(rows):
        extra = set(row) - set(Domain.__dataclass_fields__)
        missing = {"function", "admits", "refuses", "test", "drawn"} - set(row)
        if extra or missing:
            raise ValueError(f"{rules_path(ch)}: domain row {i + 1} ({row.get('function')}) has unknown keys "
                             f"{sorted(extra)} or lacks {sorted(missing)}")
    return [Domain(**row) for row in rows]


def domain_problems(ch: Chapter, domains: list[Domain], functions: tuple[str, ...] = ()) -> list[str]:
    """Each function once, each row's texts present, its test a test of the chapter; every one of `functions`
    has a row."""
    out, seen = [], set()
    tests = {t.name for t in ch.tests}
    for d in domains:
        if d.function in seen:
            out.append(f"domain {d.function}: the function has two rows")
        seen.add(d.function)
        if d.test not in tests:
            out.append(f"domain {d.function}: names the test {d.test!r}, which is not a test of {ch.chapter}")
        for f in ("admits", "refuses", "drawn"):
            if len(getattr(d, f).strip()) < 4:
                out.append(f"domain {d.function}: says nothing under {f!r}")
    out += [f"the contract function {f} has no domain row" for f in functions if f not in seen]
    return out


READS = (re.compile(r'golden\[\s*"(\w+)"\s*\]'), re.compile(r'golden_section\([^)]*?"(\w+)"\s*\)'))


def golden_readers(ch: Chapter) -> dict[str, set[str]]:
    """test name -> the golden sections its function reads: golden["x"] or golden_section(..., "x") in its source."""
    readers: dict[str, set[str]] = {}
    for f in ch.tests_files:
        source = f.read_text()
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                text = ast.get_source_segment(source, node) or ""
                readers[node.name.removeprefix("test_")] = {m for pattern in READS for m in pattern.findall(text)}
    return readers


def problems(ch: Chapter, rules: list[Rule]) -> list[str]:
    out = []
    seen: set[str] = set()
    tests = {t.name for t in ch.tests}
    golden = json.loads(ch.golden.read_text())
    case_section = {c["id"]: s for s, cases in golden.items() if isinstance(cases, list) for c in cases if "id" in c}
    readers = golden_readers(ch)
    for r in rules:
        if not ID.match(r.id):
            out.append(f"{r.id!r}: a rule id is R-<two capitals>-<two digits>, e.g. R-PL-03")
        if r.id in seen:
            out.append(f"{r.id}: the id repeats")
        seen.add(r.id)
        if not r.rule.strip() or not r.source.strip():
            out.append(f"{r.id}: every row states its rule and its source")
        if r.kind == "malformed":
            out.append(f"{r.id}: a row has exactly one of test (with input), free or elsewhere; it has "
                       f"{[k for k in KINDS if getattr(r, k)] or 'none'}")
            continue
        if r.kind != "test":
            if r.input or r.golden:
                out.append(f"{r.id}: a {r.kind} rule has no test, so no distinguishing input or golden cases")
            continue
        if r.test not in tests:
            out.append(f"{r.id}: names the test {r.test!r}, which is not a test of {ch.chapter}")
        if len(r.input.strip()) < 10:
            out.append(f"{r.id}: a tested rule needs its distinguishing input (what would fail if the rule were broken)")
        for cid in r.golden:
            section = case_section.get(cid)
            if section is None:
                out.append(f"{r.id}: golden case {cid!r} is not in {ch.golden.name}")
            elif section not in readers.get(r.test, set()):
                out.append(f"{r.id}: golden case {cid} is in section {section!r}, which {r.test} does not read")
    named = {r.test for r in rules if r.kind == "test"}
    out += [f"test {t} is named by no rule: which rule does it check?" for t in sorted(tests - named)]
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(ch: Chapter, rules: list[Rule]) -> str:
    counts = {k: sum(r.kind == k for r in rules) for k in KINDS}
    # what states the rules (the table's `sources`, the chapter's documents): RULES.md's opening names them
    sources = tomllib.loads(rules_path(ch).read_text()).get("sources", "the contract and the chapter")
    lines = [
        f"# The rules of {ch.chapter}, and the test that checks each",
        "",
        f"Rendered from `rules.toml` beside this file by `{RUN_MODULE} harness.staff.rules {ch.chapter}`; do not edit by hand",
        "(`tests/harness/test_rules.py` fails when this file is stale). One row per rule that "
        f"{sources} state. **Input** is the distinguishing",
        "input: what the named test sends that would fail if the rule were broken. A **free** rule is one the",
        "contract leaves free (any answer passes); **elsewhere** names where a rule outside this chapter's",
        f"interface is graded. The chapter's tests live in `{shown(rules_path(ch).parent)}/`.",
        "",
        f"{len(rules)} rules: {counts['test']} tested, {counts['free']} free, {counts['elsewhere']} graded elsewhere.",
        "",
        "| id | rule | source | test | distinguishing input (or why free / where) |",
        "|---|---|---|---|---|",
    ]
    for r in rules:
        if r.kind == "test":
            how = _cell(r.input) + (f" (golden: {', '.join(r.golden)})" if r.golden else "")
            test = f"`{r.test}`"
        else:
            how = f"**{r.kind}**: " + _cell(getattr(r, r.kind))
            test = "—"
        lines.append(f"| {r.id} | {_cell(r.rule)} | {_cell(r.source)} | {test} | {how} |")
    domains = load_domains(ch)
    if domains:
        lines += ["", "## Domains", "", "What each contract function admits (and answers as the reference does, compared by "
                  "the property check inside the named test on inputs drawn from all of it), what it refuses, and what is free.",
                  "", "| function | admits | refuses | free | test | drawn |", "|---|---|---|---|---|---|"]
        lines += [f"| `{d.function}` | {_cell(d.admits)} | {_cell(d.refuses)} | {_cell(d.free) or '—'} | `{d.test}` | {_cell(d.drawn)} |"
                  for d in domains]
    by_test: dict[str, list[str]] = {}
    for r in rules:
        if r.kind == "test":
            by_test.setdefault(r.test, []).append(r.id)
    lines += ["", "## By test", "", "| test | rules |", "|---|---|"]
    lines += [f"| `{t.name}` | {', '.join(by_test.get(t.name, []))} |" for t in ch.tests]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        print(f"usage: {RUN_MODULE} harness.staff.rules CHAPTER [--check]", file=sys.stderr)
        return 2
    ch = load_chapter(args[0])
    rules = load_rules(ch)
    bad = problems(ch, rules) + domain_problems(ch, load_domains(ch))
    for p in bad:
        print(f"rules: {p}", file=sys.stderr)
    text = render_markdown(ch, rules)
    if "--check" in argv:
        stale = not markdown_path(ch).is_file() or markdown_path(ch).read_text() != text
        if stale:
            print(f"rules: {markdown_path(ch)} is stale: run {RUN_MODULE} harness.staff.rules {ch.chapter}", file=sys.stderr)
        return 1 if bad or stale else 0
    markdown_path(ch).write_text(text)
    print(f"wrote {markdown_path(ch)}: {len(rules)} rules")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
