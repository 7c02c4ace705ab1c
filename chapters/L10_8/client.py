"""The judge's side of L10.8: the chapter's interface as methods of the Impl, over plain data.

Each method is one op of the chapter's protocol (spec/protocol.md). Objects that live in the
implementation (a KvPool, a RunnerTarget) are proxies holding a handle; the judge's own objects lent
to a call (the fake target, a token listener) answer the worker's callbacks through `JudgeObjects`.
"""

from harness.pack import Bare, Impl, brief, to_wire

from .ops import ANSWERS, POOL_METHODS
from .spelling import Seeds, spelling


MAX_EXTEND = 4096  # ids one callback may feed the judge's target: a round feeds k + 1 <= 17; more is a runaway worker


class JudgeObjects:
    """What the judge lends the implementation for one call: a target and a token listener."""

    def __init__(self, target=None, on_token=None) -> None:
        self.target = target
        self.on_token = on_token

    def __call__(self, method: str, args: dict):
        if method == "target.cached":
            return self.target.cached()
        if method == "target.extend":
            if not isinstance(args.get("ids"), list) or len(args["ids"]) > MAX_EXTEND:
                raise ValueError(f"target.extend takes a list of at most {MAX_EXTEND} token ids")
            return to_wire(self.target.extend(args["ids"]))
        if method == "target.truncate":
            return self.target.truncate(args["length"])
        if method == "on_token":
            said = self.on_token(args["token"], args["logprob"])  # as said: None, 0 or "" is the implementation's to read
            return said if said is None or type(said) in (bool, int, str) else bool(said)
        raise ValueError(f"unknown callback {method!r}")


class Client(Impl):
    # Per-call deadlines (seconds) beyond the default 5 s. A generation on the fake target takes well
    # under a second; a batch of 4000 verifications or the tiny llama's load takes seconds. A hanging
    # submission costs at most one deadline per test, since the test's first failure ends it.
    DEADLINES_S = {"verify_first_tokens": 60.0, "generate": 15.0, "runner_target_new": 60.0, "runner_target_call": 30.0}
    ANSWERS = ANSWERS  # the shape of each op's answer (ops.ANSWERS), checked before a test sees it
    @classmethod
    def called(cls, op: str, args: dict, language: str) -> str:
        return spelling(language).name(op, args)

    @classmethod
    def call_words(cls, op: str, args: dict, language: str) -> str:
        """The call as the student's language writes it (chapters.L10_8.spelling): `blocks_for(5, 0)` in Rust."""
        spell = spelling(language)
        return spell.call(spell.name(op, args), cls.shown_args(op, args))

    def value_words(self, language: str):
        spell = spelling(language)
        return lambda v: brief(spell.value(v))

    @staticmethod
    def shown_args(op: str, args: dict) -> dict:
        """The contract's arguments of the call, as an error shows them: handles and the judge's objects by
        name, the protocol's flags left out (a verifier's seed as its generator `rng`, which the spelling writes)."""
        a = dict(args)
        if op == "generate":
            a["target"] = Bare("target") if a["target"] == "judge" else Bare("RunnerTarget")
            if a.pop("stream", False):
                a["on_token"] = Bare("listener")
        elif op in ("runner_target_call", "pool_call", "pool_write", "pool_state"):
            a.pop("target", None), a.pop("pool", None), a.pop("method", None)
            if op == "pool_call":
                a = dict(enumerate(a.get("args") or []))
        elif op == "rollback":
            a["pool"] = Bare("pool")
        elif op == "verify_draft":
            a["rng"] = a.pop("seed")  # the spelling writes the generator the contract takes
        elif op == "verify_first_tokens":  # one verify_draft per seed
            a["rng"] = Seeds(a.pop("seeds"))
        return a

    def prompt_lookup(self, ctx, k, max_ngram, min_ngram):
        return self.call("prompt_lookup", dict(ctx=ctx, k=k, max_ngram=max_ngram, min_ngram=min_ngram))

    def ngram_draft(self, ctx, k, n):
        return self.call("ngram_draft", dict(ctx=ctx, k=k, n=n))

    def parse_config(self, draft, k, **extra):
        return self.call("spec_config_parse", dict(draft=draft, k=k, **extra))

    def propose(self, cfg: dict, ctx, k):
        return self.call("propose", dict(cfg=cfg, ctx=ctx, k=k))

    def residual(self, p, q):
        return self.call("residual", dict(p=p, q=q))

    def sample_dense(self, p, u):
        return self.call("sample_dense", dict(p=p, u=u))

    def speculative_step(self, p, q, x, u_accept, u_resample):
        return tuple(self.call("speculative_step", dict(p=p, q=q, x=x, u_accept=u_accept, u_resample=u_resample)))

    def dense_distribution(self, logits, params: dict, prompt, output):
        return self.call("dense_distribution", dict(logits=logits, params=params, prompt=prompt, output=output))

    def verify_draft(self, rows, draft, draft_probs, params: dict, prompt, output, seed):
        return self.call("verify_draft", dict(rows=rows, draft=draft, draft_probs=draft_probs, params=params,
                                              prompt=prompt, output=output, seed=seed))

    def verify_first_tokens(self, rows, draft, draft_probs, params: dict, prompt, output, seeds):
        return self.call("verify_first_tokens", dict(rows=rows, draft=draft, draft_probs=draft_probs, params=params,
                                                     prompt=prompt, output=output, seeds=list(seeds)))

    def blocks_for(self, tokens, block_tokens):
        return self.call("blocks_for", dict(tokens=tokens, block_tokens=block_tokens))

    def new_pool(self, num_blocks, block_tokens) -> "PoolProxy":
        return PoolProxy(self, self.call("pool_new", dict(num_blocks=num_blocks, block_tokens=block_tokens)))

    def rollback(self, pool: "PoolProxy", table, keep):
        return self.call("rollback", dict(pool=pool.handle, table=list(table), keep=keep))

    def generate(self, target, cfg: dict, prompt, params: dict, seed, max_new, eos, on_token=None, deadline_s=None):
        """Generation against a judge-held target (the fake), or a RunnerProxy living in the implementation."""
        remote = isinstance(target, RunnerProxy)
        args = dict(target=target.handle if remote else "judge", cfg=cfg, prompt=prompt, params=params, seed=seed,
                    max_new=max_new, eos=eos, stream=on_token is not None)
        return self.call("generate", args, JudgeObjects(None if remote else target, on_token), deadline_s)

    def proposed(self) -> list:
        """propose's calls during the last generate, [ctx, k, draft] each: the Python worker notes them (ops.op_proposed);
        a compiled port's worker has no such op, and a worker that cannot answer now (it hung, it died) notes nothing."""
        try:
            return self.call("proposed", {})
        except Exception:  # noqa: BLE001 -- no record is no verdict: the caller's own failure stands
            return []

    def runner_target(self, model_dir, num_blocks, block_tokens) -> "RunnerProxy":
        return RunnerProxy(self, self.call("runner_target_new", dict(
            model_dir=str(model_dir), num_blocks=num_blocks, block_tokens=block_tokens)))


class PoolProxy:
    """A KvPool living in the implementation, driven method by method."""

    def __init__(self, impl: Impl, handle: int) -> None:
        self.impl, self.handle = impl, handle

    def __getattr__(self, method: str):
        if method not in POOL_METHODS:
            raise AttributeError(method)
        return lambda *args: self.impl.call("pool_call", dict(pool=self.handle, method=method, args=list(args)))

    def state(self) -> dict:
        """Every block's reference count and fill (0 when free) and the free count, in one call (ops.op_pool_state)."""
        return self.impl.call("pool_state", dict(pool=self.handle))

    def write(self, table, start: int, count: int, block_tokens: int) -> list[int]:
        """Positions [start, start + count) written as one forward writes them (ops.op_pool_write): the table after."""
        return self.impl.call("pool_write", dict(pool=self.handle, table=list(table), start=start, count=count,
                                                 block_tokens=block_tokens))


class RunnerProxy:
    """A RunnerTarget living in the implementation."""

    def __init__(self, impl: Impl, handle: int) -> None:
        self.impl, self.handle = impl, handle

    def _call(self, method: str, **args):
        return self.impl.call("runner_target_call", dict(target=self.handle, method=method, **args))

    def extend(self, ids):
        return self._call("extend", ids=list(ids))

    def truncate(self, length):
        return self._call("truncate", length=length)

    def cached(self):
        return self._call("cached")

    def blocks(self):
        return self._call("blocks")

    def pool_free(self):
        return self._call("pool_free")

    def close(self):
        return self._call("close")
