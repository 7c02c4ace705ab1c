"""Speculative decoding on the shipped tiny llama: target calls, acceptance and tokens/s per draft.

Workloads (token ids in the model's vocabulary, built from a fixed seed, not tuned to the goal):
  quote      a 120-token document and a question; the answer starts quoting the document
  code_edit  14 "lines" of code-like tokens (a few identifiers, punctuation, two repeated lines);
             the answer is the code with one token changed near the start, then the rest as is
  json_echo  a tool call whose JSON-like arguments the answer echoes (delimiters merged into one
             token each, '{"' '":"' '","' '"}', as BPE tokenizers do)
  control    40 words of open text in the language the model was trained on (its bigram chain,
             oracle/make_tiny_llama.py); nothing to quote, the continuation is the model's own

Each workload is INSTANCES prompts (figures are sums over them, so one lucky prompt does not
decide). For each: greedy with no draft, prompt lookup and n-gram at k = 2, 4, 8, side by side in one run,
each repeated --repeats times (median wall time). Every configuration must emit the no-draft
tokens (checked). Also: the acceptance prompt lookup would get with the FIRST earlier occurrence
instead of the most recent (simulated on the greedy output, which a greedy draft cannot change;
the same simulation with the real rule is checked against the measured counts), and where the time
goes: the target's forward vs everything else (drafting, verification), and the forward's cost per
number of fed tokens.

The code measured is the judge's pristine reference (harness.subjects.reference.pristine): its spec.py,
RunnerTarget, sampler and model, on the chapter's tiny llama (chapter.data["model"]). The bench
fails (exit 1) when a configuration's tokens differ from greedy's or the replayed draft counts
differ from the measured ones.

Run: python3 bench/spec_speedup.py [--repeats 9] [--instances 3] [--out bench/out/spec_speedup.json]
     [--quick]   (smoke run: one repeat of one instance per workload, every configuration; seconds)
"""

import os

# One BLAS thread: the matrices are tiny, and on a shared 2-core machine BLAS threads spin and
# thrash (a 137-token prompt's forward took 18 ms with two threads, 7 ms with one).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
from _benchkit import add_common, out_path, write_figures  # noqa: E402  (bench/ is sys.path[0])
sys.path.insert(0, str(REPO))  # the repository root: harness/ and chapters/ (the reference comes from pristine("L10.8"))
from harness.subjects.reference import pristine  # noqa: E402
from harness.registry import load_chapter  # noqa: E402

CHAPTER = "L10.8"  # whose pack names the tiny llama (data.model)
REF = pristine("L10.8")  # the judge's pristine reference: the spec.py, runner target and model measured here
spec = REF.module("infer.spec")
RunnerTarget = REF.module("infer.runner_target").RunnerTarget
SamplingParams = REF.module("infer.sampling").SamplingParams
llama = REF.module("model")

SEED = 1234  # the workloads' generator and the forward-cost ids: the same prompts every run
BOS = 0  # the tiny llama's beginning of sequence (oracle/make_tiny_llama.py)
BLOCK_TOKENS = 16  # KV block size of the pool, a typical engine setting
POOL_BLOCKS = 64  # enough blocks for the longest prompt plus its answer (about 300 positions)
INSTANCES = 3  # prompts per workload, drawn in turn from one generator; figures are sums over them
REPEATS = 9  # runs per configuration; the median wall time is reported
CONFIGS = [("none", 1)] + [(d, k) for d in ("prompt_lookup", "ngram") for k in (2, 4, 8)]  # no draft, then both drafts at small to large k
GOAL = {"calls_ratio": 2.5, "speedup": 1.8, "control_speedup": 0.95}  # the chapter's speed-up targets for prompt lookup k 4
FORWARD_CONTEXT = 200  # cached positions before the timed extend: a mid-answer request
FORWARD_SIZES = (1, 3, 5, 9)  # fed tokens: one (no draft) and 1 + k for k 2, 4, 8
FORWARD_REPEATS = 30  # timed extends per size; the median is reported
QUICK = {"repeats": 1, "instances": 1, "forward_repeats": 3}  # the smallest real run: seconds
LOG_WIDTH = 160  # the table's width when printed to a log or a pipe: wide enough that no cell is cut


# ---- workloads ----------------------------------------------------------------------------------

def words(rng, n):
    return [int(t) for t in rng.integers(2, 256, size=n)]


def quote(rng):
    doc, question = words(rng, 120), words(rng, 12)
    return [BOS] + doc + question + doc[40:44], 64


def code_edit(rng):
    nl, indent, lpar, rpar, eq = 10, 11, 12, 13, 14
    idents = words(rng, 30)
    lines = []
    for i in range(14):
        body = [int(x) for x in rng.choice(idents, size=int(rng.integers(2, 5)))]
        lines.append([indent] * int(rng.integers(0, 3)) + body[:1] + [eq] + body[1:] + [lpar, int(rng.choice(idents)), rpar, nl])
    lines[9], lines[12] = lines[3], lines[5]  # code repeats itself
    code = [t for line in lines for t in line]
    edited = code[:12]
    edited[6] = int(rng.integers(2, 256))  # the edit
    return [BOS] + code + words(rng, 8) + edited, len(code) - 12


def json_echo(rng):
    # Delimiters as a BPE tokenizer splits them: '{"', '":"', '","', '"}' are one token each.
    open_, colon, comma, close = 20, 21, 22, 23
    args = [open_]
    for i in range(5):
        args += words(rng, int(rng.integers(1, 3))) + [colon] + words(rng, int(rng.integers(2, 7)))
        args += [comma] if i < 4 else [close]
    return [BOS] + words(rng, 3) + args + words(rng, 10) + args[:3], len(args) - 3


def _training_language():
    """The bigram language the tiny llama was trained on (oracle/make_tiny_llama.py, numpy only)."""
    path = REPO / "oracle/make_tiny_llama.py"
    mod_spec = importlib.util.spec_from_file_location("_make_tiny_llama", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod.Language(np.random.default_rng(mod.SEED)), mod


def control(rng):
    lang, _ = _LANGUAGE
    return [BOS] + lang.walk(rng, BOS, 40), 64


_LANGUAGE = _training_language()
WORKLOADS = {"quote": quote, "code_edit": code_edit, "json_echo": json_echo, "control": control}


def build_workloads(instances: int) -> dict[str, list[tuple[list[int], int]]]:
    """Every workload's (prompt, max_new) instances, drawn in turn from one generator."""
    rng = np.random.default_rng(SEED)
    return {name: [make(rng) for _ in range(instances)] for name, make in WORKLOADS.items()}


# ---- drafts simulated on a fixed greedy output --------------------------------------------------

def prompt_lookup_first(ctx, k, max_ngram=spec.DEFAULT_MAX_NGRAM, min_ngram=spec.DEFAULT_MIN_NGRAM):
    """Prompt lookup with the FIRST earlier occurrence of the suffix (the chapter's pitfall s01)."""
    t = len(ctx)
    for n in range(max_ngram, min_ngram - 1, -1):
        suffix = ctx[t - n:]
        for i in range(0, t - n):
            if ctx[i:i + n] == suffix:
                return ctx[i + n:min(i + n + k, t)]
    return []


def simulate(prompt, tokens, max_new, k, proposer, clock=None):
    """The rounds a greedy generation would run with this draft: (target calls, drafted, accepted).
    With `clock` (a one-item list), the seconds spent in `proposer` are added to clock[0]."""
    calls = drafted = accepted = 0
    out = 0
    while out < max_new:
        budget = min(k, max_new - out - 1)
        t0 = time.perf_counter()
        draft = proposer(prompt + tokens[:out], budget) if budget > 0 else []
        if clock is not None:
            clock[0] += time.perf_counter() - t0
        n = 0
        while n < len(draft) and draft[n] == tokens[out + n]:
            n += 1
        calls, drafted, accepted, out = calls + 1, drafted + len(draft), accepted + n, out + n + 1
    return calls, drafted, accepted


# ---- measurement --------------------------------------------------------------------------------

class TimedTarget:
    """A RunnerTarget that also adds up the time spent in the model (extend and truncate)."""

    def __init__(self, inner):
        self.inner, self.seconds, self.first = inner, 0.0, None

    def cached(self):
        return self.inner.cached()

    def extend(self, ids):
        t0 = time.perf_counter()
        rows = self.inner.extend(ids)
        self.seconds += time.perf_counter() - t0
        if self.first is None:
            self.first = self.seconds  # the first round's forward: the prompt (prefill)
        return rows

    def truncate(self, length):
        t0 = time.perf_counter()
        self.inner.truncate(length)
        self.seconds += time.perf_counter() - t0


def run_once(model, pool, prompt, max_new, draft, k):
    target = TimedTarget(RunnerTarget(llama.PagedRunner(model, pool), pool))
    t0 = time.perf_counter()
    g = spec.generate(target, spec.SpecConfig.parse(draft, k), prompt, SamplingParams(), seed=0, max_new=max_new, eos=[])
    wall = time.perf_counter() - t0
    target.inner.release_all()
    return g, wall, target.seconds, target.first


def forward_cost(model, pool, repeats=FORWARD_REPEATS):
    """Median seconds of one RunnerTarget.extend of n tokens after FORWARD_CONTEXT cached positions."""
    rng = np.random.default_rng(SEED)
    out = {}
    for n in FORWARD_SIZES:
        target = RunnerTarget(llama.PagedRunner(model, pool), pool)
        target.extend(words(rng, FORWARD_CONTEXT))
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            target.extend(words(rng, n))
            times.append(time.perf_counter() - t0)
            target.truncate(FORWARD_CONTEXT)
        target.release_all()
        out[n] = statistics.median(times)
    return out


def measure(model, pool, instances, draft, k):
    """One run of a configuration over a workload's instances: (runs, wall, model and prefill seconds
    summed over the instances)."""
    runs = [run_once(model, pool, prompt, max_new, draft, k) for prompt, max_new in instances]
    return (runs, *(sum(r[i] for r in runs) for i in (1, 2, 3)))


def sample_configs(model, pool, instances, repeats):
    """Every configuration's runs, `repeats` each, interleaved so drift in machine speed hits every
    configuration alike."""
    samples = {cfg: [] for cfg in CONFIGS}
    for _ in range(repeats):
        for cfg in CONFIGS:
            samples[cfg].append(measure(model, pool, instances, *cfg))
    return samples


def drafting_seconds(instances, gens, draft, k, repeats):
    """Median seconds of the drafting alone (the same rounds replayed), and problems: the replay's
    counts must equal what the generation measured."""
    cfg = spec.SpecConfig.parse(draft, k)
    clocks, problems = [], []
    for _ in range(repeats):
        clocks.append([0.0])
        for (prompt, max_new), g in zip(instances, gens):
            sim = simulate(prompt, g.tokens, max_new, k, lambda ctx, kk: spec.propose(cfg, ctx, kk), clocks[-1])
            measured = (g.stats.target_calls, g.stats.drafted, g.stats.accepted)
            if sim != measured:
                problems.append(f"{draft} k={k}: replayed rounds {sim} differ from the measured {measured}")
    return statistics.median(c[0] for c in clocks), problems


def first_occurrence(instances, gens, k) -> dict:
    """What prompt lookup with the first earlier occurrence would accept on the same greedy output."""
    first = [simulate(p, g.tokens, m, k, prompt_lookup_first) for (p, m), g in zip(instances, gens)]
    calls, drafted, accepted = (sum(x[i] for x in first) for i in range(3))
    return {"first_occurrence_accept_rate": round(accepted / drafted, 4) if drafted else 0.0,
            "first_occurrence_target_calls": calls}


def config_row(name, instances, cfg, reps, base, repeats) -> tuple[dict, list[str]]:
    """The figures of one configuration on one workload beside the no-draft baseline, and problems."""
    draft, k = cfg
    gens = [g for g, *_ in reps[0][0]]
    base_tokens = [g.tokens for g, *_ in base[0][0]]
    problems = [f"{name} {draft} k={k}: speculative output differs from greedy"
                for runs, *_ in reps if [g.tokens for g, *_ in runs] != base_tokens][:1]
    base_calls = sum(g.stats.target_calls for g, *_ in base[0][0])
    base_wall = statistics.median(s[1] for s in base)
    base_decode = statistics.median(s[1] - s[3] for s in base)
    wall = statistics.median(r[1] for r in reps)
    model_s = statistics.median(r[2] for r in reps)
    decode_s = statistics.median(r[1] - r[3] for r in reps)
    calls = sum(g.stats.target_calls for g in gens)
    drafted = sum(g.stats.drafted for g in gens)
    accepted = sum(g.stats.accepted for g in gens)
    new = sum(len(g.tokens) for g in gens)
    draft_s, replay_problems = drafting_seconds(instances, gens, draft, k, repeats)
    row = {"workload": name, "draft": draft, "k": k, "instances": len(instances),
           "prompt_tokens": sum(len(p) for p, _ in instances), "new_tokens": new,
           "target_calls": calls, "drafted": drafted, "accepted": accepted,
           "accept_rate": round(accepted / drafted, 4) if drafted else 0.0,
           "calls_ratio": round(base_calls / calls, 3),
           "tokens_per_s": round(new / wall, 1), "speedup": round(base_wall / wall, 3),
           "decode_tokens_per_s": round(new / decode_s, 1), "decode_speedup": round(base_decode / decode_s, 3),
           "wall_s": round(wall, 5), "prefill_s": round(wall - decode_s, 5), "model_s": round(model_s, 5),
           "draft_s": round(draft_s, 5), "model_share": round(model_s / wall, 3),
           "draft_share": round(draft_s / wall, 3), "verify_loop_share": round(1 - (model_s + draft_s) / wall, 3)}
    if draft == "prompt_lookup":
        row.update(first_occurrence(instances, gens, k))
    return row, problems + [f"{name} {p}" for p in replay_problems]


def workload_rows(model, pool, name, instances, repeats) -> tuple[list[dict], list[str]]:
    samples = sample_configs(model, pool, instances, repeats)
    rows, problems = [], []
    for cfg, reps in samples.items():
        row, found = config_row(name, instances, cfg, reps, samples[("none", 1)], repeats)
        rows.append(row)
        problems += found
    return rows, problems


# ---- main ---------------------------------------------------------------------------------------

def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="speculative decoding speed on the tiny llama")
    ap.add_argument("--repeats", type=int, default=REPEATS, help=f"runs per configuration (default {REPEATS})")
    ap.add_argument("--instances", type=int, default=INSTANCES, help=f"prompts per workload (default {INSTANCES})")
    ap.add_argument("--model", type=Path, default=None, help="the model folder (default: the chapter's tiny llama)")
    add_common(ap, "spec_speedup", ", ".join(f"{k} {v}" for k, v in QUICK.items()))
    a = ap.parse_args()
    a.forward_repeats = FORWARD_REPEATS
    if a.quick:
        for k, v in QUICK.items():
            setattr(a, k, v)
    if a.repeats < 1 or a.instances < 1:
        ap.error("--repeats and --instances must be >= 1")
    a.model = a.model or load_chapter(CHAPTER).data["model"]
    a.out = out_path(a, "spec_speedup")
    return a


def main():
    args = parse_args()
    model = llama.load_llama(args.model)
    pool = llama.make_pool(model, POOL_BLOCKS, BLOCK_TOKENS)
    built = build_workloads(args.instances)
    measure(model, pool, built["control"], "none", 1)  # warm up
    rows, problems = [], []
    for name, instances in built.items():
        found_rows, found = workload_rows(model, pool, name, instances, args.repeats)
        rows += found_rows
        problems += found
    costs = forward_cost(model, pool, args.forward_repeats)
    report(rows, costs)
    write_figures(args.out, {
        "model": str(args.model.relative_to(REPO) if args.model.is_relative_to(REPO) else args.model),
        "seed": SEED, "repeats": args.repeats, "instances": args.instances, "block_tokens": BLOCK_TOKENS, "quick": args.quick,
        "python": platform.python_version(), "numpy": np.__version__, "machine": platform.machine(), "goal": GOAL,
        "workloads": {n: [{"prompt": p, "max_new": m} for p, m in inst] for n, inst in built.items()}, "rows": rows,
        "problems": problems,
        "extend_seconds_by_tokens_at_200_cached": {str(n): round(s, 6) for n, s in costs.items()}}, indent=1)
    print(f"figures written to {args.out}")
    for p in problems:
        print(f"BROKEN: {p}", file=sys.stderr)
    return 1 if problems else 0


def print_table(heads, table):
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(h), *(len(line[i]) for line in table)) for i, h in enumerate(heads)]
        print("  ".join(h.ljust(w) for h, w in zip(heads, widths)))
        for line in table:
            print("  ".join(v.ljust(w) for v, w in zip(line, widths)))
        return
    t = Table(title="speculative decoding, tiny llama, greedy")
    for h in heads:
        t.add_column(h, justify="left" if h in ("workload", "draft") else "right")
    for line in table:
        t.add_row(*line)
    Console(width=None if sys.stdout.isatty() else LOG_WIDTH).print(t)


def goal_line(r) -> str | None:
    """The goal verdict of a prompt lookup k 4 row, or None when the row has no goal."""
    if r["draft"] != "prompt_lookup" or r["k"] != 4:
        return None
    if r["workload"] in ("quote", "code_edit"):
        ok = r["calls_ratio"] >= GOAL["calls_ratio"] and r["speedup"] >= GOAL["speedup"]
        want = f">= {GOAL['calls_ratio']}x fewer calls, >= {GOAL['speedup']}x tokens/s"
    elif r["workload"] == "control":
        ok, want = r["speedup"] >= GOAL["control_speedup"], f">= {GOAL['control_speedup']}x tokens/s"
    else:
        return None
    return (f"goal {r['workload']} prompt_lookup k=4 ({want}): calls {r['calls_ratio']}x, "
            f"tokens/s {r['speedup']}x end to end ({r['decode_speedup']}x excluding the prompt's forward) "
            f"-> {'met' if ok else 'SHORT'} end to end")


def report(rows, costs):
    cols = ["workload", "draft", "k", "target_calls", "calls_ratio", "accept_rate", "tokens_per_s", "speedup",
            "decode_speedup", "model_share", "draft_share", "verify_loop_share", "first_occurrence_accept_rate"]
    heads = ["workload", "draft", "k", "calls", "calls x", "accept", "tok/s", "speedup", "decode x", "model %",
             "draft %", "verify %", "accept 1st occ."]
    shares = ("model_share", "draft_share", "verify_loop_share")
    cell = lambda r, c: "" if c not in r else f"{100 * r[c]:.0f}" if c in shares else str(r[c])
    print_table(heads, [[cell(r, c) for c in cols] for r in rows])
    print("extend cost at 200 cached positions: " + ", ".join(f"{n} tokens {1e3 * s:.2f} ms" for n, s in costs.items()))
    for r in rows:
        line = goal_line(r)
        if line:
            print(line)


if __name__ == "__main__":
    sys.exit(main())
