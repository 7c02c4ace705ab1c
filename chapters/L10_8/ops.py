"""The operations of L10.8's worker protocol (spec/protocol.md), run against one `tinyllm` package.

Both transports run these same functions through a harness.protocol.session.Session: in the judge
process for the reference and mutants, in the worker process for a submission (which loads this
file by path: it imports nothing of the judge but harness.protocol.wire). Arguments and results are plain
data; objects that live between calls (a KvPool, a RunnerTarget) are held in `Session.handles` and
named by an integer handle. Callbacks into the judge (the judge's target, the on_token listener) go
through `session.call_judge(method, args)`.
"""

from contextlib import contextmanager
import inspect
import operator

import numpy as np

from harness.protocol.wire import floats

CONTRACT_ERROR = ("infer.spec", "SpecError")  # the contract's refusal: `spec_error` in an error answer
LOAD = ("infer.spec",)  # imported by the `load` op before any test (it imports the sampler, pool and generator)
SAMPLING_FIELDS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty")


# ---- conversions --------------------------------------------------------------------------------

def _params(s, d: dict):
    return s.lend("params", s.module("infer.sampling").SamplingParams(**{k: d[k] for k in SAMPLING_FIELDS if k in d}))


def _cfg(s, d: dict):
    spec = s.module("infer.spec")
    if d.get("raw"):  # built without parse, as an engine may build one: its bounds unchecked (propose's to refuse)
        return spec.SpecConfig(spec.Draft(d["draft"]), d["k"], d["max_ngram"], d["min_ngram"])
    extra = {k: d[k] for k in ("max_ngram", "min_ngram") if k in d}  # only when the test names them
    return spec.SpecConfig.parse(d["draft"], d["k"], **extra)


def _cfg_data(cfg) -> dict:
    draft = cfg.draft.value if hasattr(cfg.draft, "value") else str(cfg.draft)
    return {"draft": draft, "k": cfg.k, "max_ngram": cfg.max_ngram, "min_ngram": cfg.min_ngram}


def _ids(xs, what: str = "the result") -> list[int]:
    """A list of token ids, strictly: a string, floats or nested lists are a wrong answer, not ids."""
    if isinstance(xs, (str, bytes)) or not hasattr(xs, "__iter__"):
        raise TypeError(f"{what} is a {type(xs).__name__}, expected a list of integer token ids")
    try:
        return [operator.index(x) for x in xs]
    except TypeError:
        bad = next(x for x in xs if not _is_index(x))
        raise TypeError(f"{what} holds {bad!r} ({type(bad).__name__}), expected integer token ids") from None


def _is_index(x) -> bool:
    try:
        operator.index(x)
        return True
    except TypeError:
        return False


def _f64s(xs, what: str = "the result") -> list[float]:
    if isinstance(xs, (str, bytes)) or not hasattr(xs, "__iter__"):
        raise TypeError(f"{what} is a {type(xs).__name__}, expected a list of numbers")
    return [float(x) for x in xs]


# ---- the operations -------------------------------------------------------------------------------

def op_spec_config_parse(s, a):
    return _cfg_data(_cfg(s, a))


def op_prompt_lookup(s, a):
    return _ids(s.module("infer.spec").prompt_lookup(a["ctx"], a["k"], a["max_ngram"], a["min_ngram"]), "prompt_lookup's result")


def op_ngram_draft(s, a):
    return _ids(s.module("infer.spec").ngram_draft(a["ctx"], a["k"], a["n"]), "ngram_draft's result")


def op_propose(s, a):
    return _ids(s.module("infer.spec").propose(_cfg(s, a["cfg"]), a["ctx"], a["k"]), "propose's result")


def op_residual(s, a):
    return _f64s(s.module("infer.spec").residual(floats(a["p"]), floats(a["q"])))


def op_sample_dense(s, a):
    return int(s.module("infer.spec").sample_dense(floats(a["p"]), floats(a["u"])))


def op_speculative_step(s, a):
    x, accepted = s.module("infer.spec").speculative_step(floats(a["p"]), floats(a["q"]), a["x"], floats(a["u_accept"]),
                                                                floats(a["u_resample"]))
    return [int(x), bool(accepted)]


def op_dense_distribution(s, a):
    logits = s.lend("logits", np.asarray(floats(a["logits"]), dtype=np.float32))
    return _f64s(s.module("infer.spec").dense_distribution(logits, _params(s, a["params"]), a["prompt"], a["output"]))


def _rows(rows):
    """Rows as float32 vectors when they are rectangular; otherwise as given (the shape check is the
    implementation's job, so a ragged input must reach it)."""
    rows = floats(rows)
    if isinstance(rows, list) and all(isinstance(r, list) for r in rows):
        return [np.asarray(r, dtype=np.float32) if all(isinstance(v, (int, float)) for v in r) else r for r in rows]
    return rows


def op_verify_draft(s, a):
    rng = s.module("rng").Pcg32.from_seed(a["seed"])
    probs = None if a.get("draft_probs") is None else s.lend("draft_probs", floats(a["draft_probs"]))
    v = s.module("infer.spec").verify_draft(s.lend("rows", _rows(a["rows"])), a["draft"], probs, _params(s, a["params"]), a["prompt"], a["output"], rng)
    return {"tokens": _ids(v.tokens, "Verified.tokens"), "logprobs": _f64s(v.logprobs, "Verified.logprobs"),
            "n_accepted": operator.index(v.n_accepted), "next_u32": int(rng.next_u32())}


def op_verify_first_tokens(s, a):
    """verify_draft once per seed on the same inputs; the first emitted token of each (a batch, so a
    statistical test of thousands of seeds costs one round trip)."""
    spec, Pcg32 = s.module("infer.spec"), s.module("rng").Pcg32
    rows, params = s.lend("rows", _rows(a["rows"])), _params(s, a["params"])
    probs = None if a.get("draft_probs") is None else s.lend("draft_probs", floats(a["draft_probs"]))
    out = []
    for seed in a["seeds"]:
        v = spec.verify_draft(rows, a["draft"], probs, params, a["prompt"], a["output"], Pcg32.from_seed(seed))
        out.append(_ids(v.tokens, "Verified.tokens")[0])
    return out


def op_rng_u32s(s, a):
    rng = s.module("rng").Pcg32.from_seed(a["seed"])
    return [int(rng.next_u32()) for _ in range(a["n"])]


def op_blocks_for(s, a):
    return int(s.module("infer.spec").blocks_for(a["tokens"], a["block_tokens"]))


POOL_METHODS = {"alloc", "retain", "release", "fill", "set_fill", "refcount", "free_blocks"}


def op_pool_new(s, a):
    return s.hold(s.module("kv").KvPool(a["num_blocks"], a["block_tokens"]))


def op_pool_call(s, a):
    if a["method"] not in POOL_METHODS:
        raise ValueError(f"pool method {a['method']!r} is not in the protocol")
    out = getattr(s.handle(a["pool"], "pool"), a["method"])(*a.get("args", []))
    return out if out is None or isinstance(out, bool) else int(out)


def op_pool_write(s, a):
    """Positions [start, start + count) written to the pool as one forward pass writes them: a block
    allocated from the pool at each block boundary and appended to the table, each position's fill set,
    in order (a batch of pool calls, so a property test of thousands of writes costs one round trip a
    forward). Returns the table."""
    pool, table, b = s.handle(a["pool"], "pool"), list(a["table"]), a["block_tokens"]
    for pos in range(a["start"], a["start"] + a["count"]):
        if pos % b == 0:
            table.append(pool.alloc())
        pool.set_fill(table[-1], pos % b + 1)
    return _ids(table, "the table")


def op_pool_state(s, a):
    """The pool's whole state in one round trip: every block's reference count and fill (0 for a free block) and
    the free count (the stateful rollback check compares it with the reference's after every step)."""
    pool = s.handle(a["pool"], "pool")
    refs = [int(pool.refcount(b)) for b in range(pool.num_blocks)]
    return {"refcounts": refs, "fills": [int(pool.fill(b)) if r else 0 for b, r in enumerate(refs)],
            "free": int(pool.free_blocks())}


def op_rollback(s, a):
    table = list(a["table"])
    released = s.module("infer.spec").rollback(s.handle(a["pool"], "pool"), table, a["keep"])
    return {"released": int(released), "table": _ids(table)}


class JudgeTarget:
    """The Target protocol, answered by the judge (the fake target lives there, where it can't be fooled).
    `cached` is asked of the judge once and then counted here from the calls the judge accepted (an extend of
    n ids adds n, a truncate sets the length): what the judge's target holds, without a round trip a round
    (spec/protocol.md section 11). A refused extend or truncate makes it ask again."""

    def __init__(self, call_judge) -> None:
        self.call_judge = call_judge
        self._cached: int | None = None

    def _call(self, method: str, args: dict):
        try:
            return self.call_judge(method, args)
        except BaseException:
            self._cached = None
            raise

    def cached(self) -> int:
        if self._cached is None:
            self._cached = int(self._call("target.cached", {}))
        return self._cached

    def extend(self, ids):
        ids = _ids(ids)
        rows = self._call("target.extend", {"ids": ids})
        if self._cached is not None:  # the judge accepted: its target holds them now, whatever the rows hold
            self._cached += len(ids)
        return [np.asarray(r, dtype=np.float32) for r in floats(rows)]

    def truncate(self, length: int) -> None:
        self._call("target.truncate", {"length": int(length)})
        self._cached = int(length)


def _generated(g) -> dict:
    st = g.stats
    return {"tokens": _ids(g.tokens, "Generated.tokens"), "logprobs": _f64s(g.logprobs, "Generated.logprobs"), "finish_reason": str(g.finish_reason),
            "stats": {"drafted": int(st.drafted), "accepted": int(st.accepted), "target_calls": int(st.target_calls),
                      "accept_rate": float(st.accept_rate())}}


MAX_NOTED = 1024  # propose's calls noted per generate: a request has at most max_new rounds (the tests' under 300)


SEQUENCES = (list, tuple, np.ndarray)  # a context or a draft noted only as one of these: an iterator is never consumed


class _Noted:
    """A submission's propose as one generate sees it: called, it answers and raises exactly as propose does and notes
    the call (`note(args, kwargs, draft)`); every attribute read is propose's own (a callable object's methods, a
    cache's cache_clear)."""

    def __init__(self, real, note) -> None:
        self._real, self._note = real, note

    def __call__(self, *args, **kwargs):
        before = self._note(args, kwargs, None)  # the context as it was asked, before propose can change it
        draft = self._real(*args, **kwargs)
        self._note(args, kwargs, (before, draft))
        return draft

    def __getattr__(self, name):
        return getattr(self._real, name)


@contextmanager
def _noting(spec, request_cfg, asked: list):
    """While the block runs, spec.propose wrapped (_Noted) to note each call made with the request's configuration,
    [ctx, k, draft], in `asked`: the loop's own drafts, which the judge composes its expected generation from
    (judge/replay.py `proposed`), whatever state propose keeps. Unnoted: a call with another configuration, one whose
    three arguments (positional or by propose's own names) or draft are not sequences of ids (SEQUENCES), one that
    changed its context, every call after the first MAX_NOTED. A submission without a propose of its own gets nothing
    wrapped."""
    real = getattr(spec, "propose", None)
    if not callable(real):
        yield
        return
    try:
        want, names = _cfg_data(request_cfg), inspect.signature(real)
    except (TypeError, AttributeError, ValueError):  # a configuration or a propose the judge cannot read: no notes
        want, names = None, None

    def note(args, kwargs, answered):
        try:
            cfg, ctx, k = names.bind(*args, **kwargs).arguments.values()
            if not isinstance(ctx, SEQUENCES) or len(asked) >= MAX_NOTED or _cfg_data(cfg) != want:
                return None
            if answered is None:
                return _ids(ctx)
            before, draft = answered
            if before is not None and isinstance(draft, SEQUENCES) and _ids(ctx) == before:
                asked.append([before, operator.index(k), _ids(draft)])
        except (TypeError, AttributeError, ValueError):  # not three arguments, not ids: unnoted
            pass
        return None

    spec.propose = _Noted(real, note)
    try:
        yield
    finally:
        spec.propose = real


def op_generate(s, a):
    asked: list = []
    s.handles[_PROPOSED] = asked  # kept for op_proposed: the judge asks it when this generate fails
    spec = s.module("infer.spec")
    target = JudgeTarget(s.call_judge) if a["target"] == "judge" else s.handle(a["target"], "target")
    cfg = _cfg(s, a["cfg"])
    args = (target, cfg, a["prompt"], _params(s, a["params"]), a["seed"], a["max_new"], a["eos"])
    with _noting(spec, cfg, asked):
        if not a.get("stream"):
            g = spec.generate(*args)
        else:  # the listener's answer as it gave it (None, 0, "" included): its truth value is the implementation's to read
            g = spec.generate_stream(*args, lambda t, lp: s.call_judge("on_token", {"token": int(t), "logprob": float(lp)}))
    return _generated(g) | {"proposed": asked}


_PROPOSED = ("proposed",)  # the session's record of propose's calls during the last generate
# The Python worker's notes of the implementation's own calls (op proposed; generate's "proposed" key): no answer of
# the contract, so no other language's worker gives them (spec/protocol.md 12.16a), and the workers' conformance
# test compares the rest.
WORKER_NOTES = ("proposed",)


def op_proposed(s, a):
    """propose's calls noted during the last generate, [ctx, k, draft] each (op_generate): what the judge asks when
    that generate failed, to tell a draft no propose may answer (its slip) from the loop's own."""
    return s.handles.get(_PROPOSED, [])


def op_runner_target_new(s, a):
    """A RunnerTarget over the model at model_dir with a pool of its own, built the way the engine does:
    load_llama -> make_pool -> PagedRunner -> RunnerTarget (the model is loaded once per worker)."""
    m = s.module("model")
    key = ("model", a["model_dir"])
    if key not in s.handles:
        s.handles[key] = m.load_llama(a["model_dir"])
    model = s.handles[key]
    pool = m.make_pool(model, a["num_blocks"], a["block_tokens"])
    return s.hold(s.module("infer.runner_target").RunnerTarget(m.PagedRunner(model, pool), pool))


def op_runner_target_call(s, a):
    target = s.handle(a["target"], "target")
    method = a["method"]
    if method == "extend":
        return [[float(v) for v in np.asarray(r, dtype=np.float32)] for r in target.extend(a["ids"])]
    if method == "truncate":
        return target.truncate(a["length"])
    if method == "cached":
        return int(target.cached())
    if method == "blocks":
        return _ids(target.table)
    if method == "pool_free":
        return int(target.pool.free_blocks())
    if method == "close":
        return target.close()
    raise ValueError(f"runner target method {method!r} is not in the protocol")


OPS = {name[3:]: fn for name, fn in globals().items() if name.startswith("op_")}  # the protocol's op table


# ---- the shape of every op's answer (harness.transport.shapes), checked by the judge ---------------------------

IDS, FLOATS = ["int"], ["float"]
_POOL_ANSWERS = {"alloc": "int", "retain": "null", "release": "bool", "fill": "int", "set_fill": "null",
                 "refcount": "int", "free_blocks": "int"}
_RUNNER_ANSWERS = {"extend": [FLOATS], "truncate": "null", "cached": "int", "blocks": IDS, "pool_free": "int", "close": "null"}
_GENERATED = {"tokens": IDS, "logprobs": FLOATS, "finish_reason": "str",
              "stats": {"drafted": "int", "accepted": "int", "target_calls": "int", "accept_rate": "float"}}
_RECORDED = _GENERATED | {"proposed": [("tuple", IDS, "int", IDS)]}  # the Python worker's: propose's calls as well
ANSWERS = {
    "load": "null",
    "spec_config_parse": {"draft": "str", "k": "int", "max_ngram": "int", "min_ngram": "int"},
    "prompt_lookup": IDS, "ngram_draft": IDS, "propose": IDS,
    "residual": FLOATS, "sample_dense": "int", "speculative_step": ("tuple", "int", "bool"), "dense_distribution": FLOATS,
    "verify_draft": {"tokens": IDS, "logprobs": FLOATS, "n_accepted": "int", "next_u32": "int"},
    "verify_first_tokens": IDS, "rng_u32s": IDS, "blocks_for": "int",
    "pool_new": "int", "pool_call": lambda a: _POOL_ANSWERS.get(a.get("method"), "null"),
    "pool_write": IDS, "pool_state": {"refcounts": IDS, "fills": IDS, "free": "int"}, "rollback": {"released": "int", "table": IDS},
    "generate": ("any", _RECORDED, _GENERATED), "proposed": _RECORDED["proposed"],
    "runner_target_new": "int", "runner_target_call": lambda a: _RUNNER_ANSWERS.get(a.get("method"), "null"),
}
