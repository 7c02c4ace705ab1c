"""The two workers answer alike, and the Rust codec keeps every float.

1. The same requests go to the Python reference through the Python worker and to the Rust reference through the
   Rust worker (course/crates/tl-worker), a fresh worker each: REQUESTS (every op of spec/protocol.md part 2, with
   good and bad arguments, handles, callbacks into the judge's fake target, the tiny llama) and every golden case
   of the verifier and the drafts. The answers are compared pairwise (`differences`):
   - ints, bools, strings, null, ids: equal, and of the same type (1 is not 1.0, nor true);
   - floats: bit-exact, except
     - logprobs (`logprobs`, and an `on_token` callback's `logprob`): LOGPROB_ATOL absolute, the chapter's own
       tolerance (a port may sum a log-softmax in another order);
     - what the tiny llama computes (every float of a `runner_target_call`, and of a `generate` over a runner
       target): MODEL_ATOL + MODEL_RTOL * |x|, the tolerance of the chapter's runner test;
   - errors: the same `type` and the same `spec_error`; messages may differ;
   - a timeout or a crash is never an answer: it is a disagreement even when both workers fail that way;
   - for a `generate` on the judge's target, the callbacks each worker made (method and args, in order) and what
     the fake target saw are compared too; on a refusal, only up to the shorter of the two (see `differences`).
2. Every float of the golden file (and a few specials, and float32 values widened) goes through tl-json, the
   worker's codec, in a probe binary of its own, and must come back bit for bit.
"""

import json
import math
import os
import shutil
import struct
import subprocess
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from harness.languages import rust

from chapters.L10_8.client import JudgeObjects
from chapters.L10_8.judge.fake_target import FakeTarget
from harness.kernel.errors import Raised, SubmissionFailure, Timeout
from harness.kernel.paths import REPO
from harness.subjects.reference import pristine
from harness.registry import load_chapter
from harness.subjects.open import open_impl

CARGO = None if rust.missing() else str(rust.toolchain().cargo)  # the toolchain the judge builds with
needs_cargo = pytest.mark.skipif(CARGO is None, reason="needs cargo and rustc")
pytestmark = [pytest.mark.slow]

CH = load_chapter("L10.8")
GOLDEN_PATH = REPO / "chapters/L10_8/fixtures/spec_golden.json"
MODEL_DIR = str((REPO / "fixtures/models/tiny-llama").resolve())

LOGPROB_ATOL = 1e-9  # chapters/L10_8/cases LOGPROB_TOL
MODEL_ATOL = MODEL_RTOL = 1e-4  # chapters/L10_8/judge/tiny_llama.py RTOL, ATOL
VOCAB = 16  # the fake target's vocabulary (the generation tests')
LISTENER_STOPS_AT = 5  # the token listener of a streamed generate answers false to the 5th token it hears

U64 = 2**64 - 1
HIGH = 2**63 + 0x5DEECE66D  # a seed >= 2^63
SEEDS_50 = [(i * 0x9E3779B97F4A7C15) % 2**64 for i in range(1, 51)]  # spread over all 64 bits: about half >= 2^63
HAND_ROWS = [[0, 1, 3, 0.5], [0, 1, 0.5, 2], [5, 0, 0, 0]]  # the chapter's greedy hand example
ROWS3 = [[0.5, 1.25, -0.75, 2.0], [1.5, 0.25, 0.0, -1.0], [0.0, 0.0, 3.0, "-inf"]]
Q_ROWS = [[0.1, 0.6, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]]
GREEDY = {"temperature": 0.0}
T1 = {"temperature": 1.0}
KNOBS = {"temperature": 0.8, "top_k": 3, "top_p": 0.9, "min_p": 0.05, "repetition_penalty": 1.3,
         "presence_penalty": 0.2, "frequency_penalty": 0.1}
PL4 = {"draft": "prompt_lookup", "k": 4}
PROMPT = [1, 2, 3, 4, 5]  # its greedy continuation on the fake target starts 3, 8, 5, 15 (golden g000)


def cfg_(draft, k, **ngrams):
    return {"draft": draft, "k": k, **ngrams}


def parse(draft, k, **ngrams):
    return ("spec_config_parse", cfg_(draft, k, **ngrams))


def verify(rows, draft, draft_probs=None, params=GREEDY, prompt=(), output=(), seed=12345, op="verify_draft"):
    args = dict(rows=rows, draft=list(draft), draft_probs=draft_probs, params=params, prompt=list(prompt), output=list(output))
    return (op, {**args, "seeds": seed} if op == "verify_first_tokens" else {**args, "seed": seed})


def gen(prompt=PROMPT, cfg=PL4, params=GREEDY, seed=7, max_new=12, eos=(), stream=False, target="judge"):
    return ("generate", dict(target=target, cfg=cfg, prompt=list(prompt), params=params, seed=seed, max_new=max_new,
                             eos=list(eos), stream=stream))


def pool(handle, method, *args):
    return ("pool_call", dict(pool=handle, method=method, args=list(args)))


def runner(handle, method, **args):
    return ("runner_target_call", dict(target=handle, method=method, **args))


# Handles: both workers number them 1, 2, ... in creation order (pools and runner targets share the counter):
# pool 1 (8 blocks of 4), pool 2 (1 block), runner targets 3 to 6. A request that might create a handle in one
# worker only comes after every request that names one.
REQUESTS = [
    # ---- spec_config_parse (12.1) ----
    parse("prompt_lookup", 4), parse("ngram", 16), parse("none", 1),
    parse("prompt_lookup", 4, max_ngram=5, min_ngram=2), parse("ngram", 3, max_ngram=2), parse("ngram", 3, min_ngram=3),
    parse("prompt-lookup", 4), parse("ngarm", 4), parse("", 4), parse(3, 4),
    parse("ngram", 0), parse("ngram", 17), parse("ngram", -1), parse("ngram", 4.0), parse("ngram", True), parse("ngram", "4"),
    parse("ngram", 2**64), parse("ngram", None),
    parse("ngram", 4, max_ngram=2, min_ngram=3), parse("ngram", 4, min_ngram=4), parse("ngram", 4, min_ngram=0),
    parse("ngram", 4, max_ngram=0), parse("ngram", 4, max_ngram=3.0), parse("ngram", 4, min_ngram=True),
    ("spec_config_parse", {"draft": "ngram"}),
    # ---- prompt_lookup (12.2) ----
    ("prompt_lookup", dict(ctx=[5, 6, 7, 8, 5, 6], k=3, max_ngram=3, min_ngram=1)),
    ("prompt_lookup", dict(ctx=[1, 2, 3, 4], k=3, max_ngram=3, min_ngram=1)),
    ("prompt_lookup", dict(ctx=[], k=3, max_ngram=3, min_ngram=1)),
    ("prompt_lookup", dict(ctx=[7, 7, 7, 7], k=0, max_ngram=3, min_ngram=1)),
    ("prompt_lookup", dict(ctx=[1, 2, 1, 2, 1], k=16, max_ngram=2, min_ngram=2)),
    ("prompt_lookup", dict(ctx=[1, -2, 1], k=3, max_ngram=3, min_ngram=1)),
    ("prompt_lookup", dict(ctx=[1, 2, 1], k=-1, max_ngram=3, min_ngram=1)),
    ("prompt_lookup", dict(ctx=[1, 2, 1], k=3, max_ngram=1, min_ngram=2)),
    ("prompt_lookup", dict(ctx=[1, 2, 1], k=3, max_ngram=3)),
    # ---- ngram_draft (12.3) ----
    ("ngram_draft", dict(ctx=[1, 2, 3, 1, 2, 3, 1, 2], k=4, n=3)),
    ("ngram_draft", dict(ctx=[1, 2, 1, 3, 1, 2, 1], k=5, n=2)),
    ("ngram_draft", dict(ctx=[4, 4, 4], k=3, n=1)),
    ("ngram_draft", dict(ctx=[1, 2, 3], k=3, n=0)),
    ("ngram_draft", dict(ctx=[1, 2, 3], k=3, n=-1)),
    ("ngram_draft", dict(ctx=[1, 2, 3], k=3, n=True)),
    ("ngram_draft", dict(ctx=[1, 2, 1, 2], k=0, n=3)),
    ("ngram_draft", dict(ctx=[1, 2.0, 1], k=2, n=2)),
    # ---- propose (12.4) ----
    ("propose", dict(cfg=cfg_("prompt_lookup", 4), ctx=[5, 6, 7, 8, 5, 6], k=2)),
    ("propose", dict(cfg=cfg_("ngram", 4, max_ngram=2), ctx=[1, 2, 1, 3, 1, 2, 1], k=4)),
    ("propose", dict(cfg=cfg_("none", 4), ctx=[1, 1, 1], k=4)),
    ("propose", dict(cfg=cfg_("prompt_lookup", 4), ctx=[1, 1, 1], k=0)),
    ("propose", dict(cfg=cfg_("prompt_lookup", 0), ctx=[1, 1, 1], k=2)),
    ("propose", dict(cfg=cfg_("ngram", 4, max_ngram=1, min_ngram=2), ctx=[1, 1, 1], k=2)),
    # ---- residual (12.5) ----
    ("residual", dict(p=[0.5, 0.5], q=[0.25, 0.75])),
    ("residual", dict(p=[0.1, 0.2, 0.7], q=[0.3, 0.3, 0.4])),
    ("residual", dict(p=[0.1, 0.2, 0.3, 0.4], q=[0.0, 0.0, 0.0, 0.0])),
    ("residual", dict(p=[1 / 3, 1 / 3, 1 / 3], q=[0.2, 0.3, 0.5])),
    ("residual", dict(p=[0.25, 0.75], q=[0.25, 0.75])),  # p <= q everywhere: p itself
    ("residual", dict(p=[0.1, 0.2], q=[0.3, 0.4])),  # p <= q, p unnormalized: p / sum(p)
    ("residual", dict(p=[0.2, 0.3, 0.5], q=[0.5, 0.5])),  # length mismatch
    ("residual", dict(p=[0.5, 0.5], q=[0.25, 0.25, 0.5])),
    ("residual", dict(p=[[0.5, 0.5]], q=[[0.5, 0.5]])),
    ("residual", dict(p=[], q=[])),
    ("residual", dict(p=[0.5, -0.5], q=[0.5, 0.5])),
    ("residual", dict(p=[0.5, "nan"], q=[0.5, 0.5])),
    ("residual", dict(p=[0.5, 0.5], q=["inf", 0.5])),
    ("residual", dict(p=[1, 3], q=[2, 0])),
    # ---- sample_dense (12.6) ----
    ("sample_dense", dict(p=[0.2, 0.3, 0.5], u=0.0)),
    ("sample_dense", dict(p=[0.2, 0.3, 0.5], u=0.2)),
    ("sample_dense", dict(p=[0.2, 0.3, 0.5], u=0.49999999999999994)),
    ("sample_dense", dict(p=[0.2, 0.3, 0.5], u=0.9999999999999999)),
    ("sample_dense", dict(p=[0.0, 0.0, 1.0], u=0.0)),
    ("sample_dense", dict(p=[2.0, 6.0], u=0.3)),  # unnormalized
    ("sample_dense", dict(p=[0.2, 0.3, 0.5], u=-0.1)),
    ("sample_dense", dict(p=[0.2, 0.3, 0.5], u=1.0)),
    ("sample_dense", dict(p=[0.2, 0.3, 0.5], u="nan")),
    ("sample_dense", dict(p=[0.0, 0.0], u=0.5)),
    ("sample_dense", dict(p=[0.5, "-inf"], u=0.5)),
    # ---- speculative_step (12.7) ----
    ("speculative_step", dict(p=[0.5, 0.3, 0.2], q=[0.2, 0.6, 0.2], x=0, u_accept=0.9, u_resample=0.5)),
    ("speculative_step", dict(p=[0.5, 0.3, 0.2], q=[0.2, 0.6, 0.2], x=1, u_accept=0.4, u_resample=0.5)),
    ("speculative_step", dict(p=[0.5, 0.3, 0.2], q=[0.2, 0.6, 0.2], x=1, u_accept=0.6, u_resample=0.1)),
    ("speculative_step", dict(p=[0.5, 0.3, 0.2], q=[0.2, 0.6, 0.2], x=1, u_accept=0.6, u_resample=0.99)),
    ("speculative_step", dict(p=[0.5, 0.3, 0.2], q=[0.5, 0.5, 0.0], x=2, u_accept=0.1, u_resample=0.1)),
    ("speculative_step", dict(p=[0.5, 0.3, 0.2], q=[0.2, 0.6, 0.2], x=3, u_accept=0.1, u_resample=0.1)),
    ("speculative_step", dict(p=[0.5, 0.3, 0.2], q=[0.2, 0.6, 0.2], x=-1, u_accept=0.1, u_resample=0.1)),
    ("speculative_step", dict(p=[0.5, 0.3, 0.2], q=[0.2, 0.6, 0.2], x=0, u_accept=1.0, u_resample=0.1)),
    ("speculative_step", dict(p=[0.5, 0.3, 0.2], q=[0.2, 0.6], x=0, u_accept=0.1, u_resample=0.1)),
    # ---- dense_distribution (12.8) ----
    ("dense_distribution", dict(logits=[1.0, 2.0, 0.5], params=GREEDY, prompt=[], output=[])),
    ("dense_distribution", dict(logits=[1.0, 2.0, 0.5, -1.5], params=T1, prompt=[], output=[])),
    ("dense_distribution", dict(logits=[0.1, 0.2, 0.30000001192092896, 0.4], params=KNOBS, prompt=[0, 1], output=[1, 1, 3])),
    ("dense_distribution", dict(logits=[1.0, "-inf", 0.5], params=T1, prompt=[], output=[])),
    ("dense_distribution", dict(logits=[1.0, "nan", 0.5], params=T1, prompt=[], output=[])),
    ("dense_distribution", dict(logits=[1.0, "inf", 0.5], params=T1, prompt=[], output=[])),
    ("dense_distribution", dict(logits=[[1.0, 2.0], [3.0, 4.0]], params=T1, prompt=[], output=[])),
    ("dense_distribution", dict(logits=[], params=T1, prompt=[], output=[])),
    ("dense_distribution", dict(logits=["-inf", "-inf"], params=T1, prompt=[], output=[])),
    ("dense_distribution", dict(logits=[1.0, 2.0], params=T1, prompt=[2], output=[])),
    ("dense_distribution", dict(logits=[1.0, 2.0], params={"temperature": -1.0}, prompt=[], output=[])),
    ("dense_distribution", dict(logits=[1.0, 2.0], params={"top_k": -1}, prompt=[], output=[])),
    ("dense_distribution", dict(logits=[1.0, 2.0], params={"top_p": 0.0}, prompt=[], output=[])),
    ("dense_distribution", dict(logits=[1.0, 2.0], params={"temperature": 1.0, "unknown_knob": 3}, prompt=[], output=[])),
    # ---- verify_draft (12.9): greedy, sampled without and with draft_probs, high seeds, refusals ----
    verify(HAND_ROWS, [2, 1]),
    verify(HAND_ROWS, [2, 3]),
    verify([[0.5, 2.5, 1.0]], []),
    verify(ROWS3, [1, 0], params=GREEDY, seed=U64),
    verify(ROWS3, [1, 0], params=T1, seed=U64),
    verify(ROWS3, [1, 0], params=T1, seed=HIGH),
    verify(ROWS3, [1, 0], params=T1, seed=0),
    verify(ROWS3, [1, 0], draft_probs=Q_ROWS, params=T1, seed=U64),
    verify(ROWS3, [1, 0], draft_probs=Q_ROWS, params=T1, seed=HIGH),
    verify(ROWS3, [1, 0], draft_probs=Q_ROWS, params=KNOBS, prompt=[0, 1], output=[2], seed=2**63),
    verify(ROWS3, [1, 0], params=KNOBS, prompt=[3], output=[1, 1], seed=2**63 - 1),
    verify(ROWS3, [1, -1]),
    verify(ROWS3, [1, 4]),
    verify(ROWS3, [1]),
    verify([[[0.5, 0.5], [0.5, 0.5]], [0.5, 0.5]], [1]),
    verify([[0.5, 0.5], [[0.5, 0.5], [0.5, 0.5]]], [1]),
    verify([[0.5, 0.5], [0.5, 0.5, 0.5]], [1]),
    verify(ROWS3, [1, 0], draft_probs=[[0.5, 0.0, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25]], params=T1),
    verify(ROWS3, [1, 0], draft_probs=[[0.25, 0.25, 0.25, 0.25]], params=T1),
    verify([[1.0, "nan"]], [], params=T1),
    verify([["-inf", "-inf"]], [], params=T1),
    verify(ROWS3, [1, 0], params={"temperature": -1.0}),
    verify(ROWS3, [1, 0], params=T1, seed=-1),
    verify(ROWS3, [1, 0], params=T1, seed=2**64),
    # ---- verify_first_tokens (12.10) ----
    verify(ROWS3, [1, 0], params=T1, seed=SEEDS_50, op="verify_first_tokens"),
    verify(ROWS3, [1, 0], draft_probs=Q_ROWS, params=T1, seed=SEEDS_50, op="verify_first_tokens"),
    verify(ROWS3, [1, 0], params=KNOBS, prompt=[0], output=[2], seed=SEEDS_50, op="verify_first_tokens"),
    verify(HAND_ROWS, [2, 1], seed=SEEDS_50[:5], op="verify_first_tokens"),
    verify(ROWS3, [1, 0], params=T1, seed=[], op="verify_first_tokens"),
    verify(ROWS3, [1, 9], params=T1, seed=SEEDS_50[:3], op="verify_first_tokens"),
    # ---- rng_u32s (12.11) ----
    ("rng_u32s", dict(seed=0, n=5)), ("rng_u32s", dict(seed=12345, n=3)), ("rng_u32s", dict(seed=U64, n=4)),
    ("rng_u32s", dict(seed=2**63, n=4)), ("rng_u32s", dict(seed=7, n=0)), ("rng_u32s", dict(seed=7, n=-1)),
    ("rng_u32s", dict(seed=-1, n=2)), ("rng_u32s", dict(seed=2**64, n=2)), ("rng_u32s", dict(seed=7, n=2.0)),
    # ---- blocks_for (12.12) ----
    ("blocks_for", dict(tokens=0, block_tokens=4)), ("blocks_for", dict(tokens=5, block_tokens=4)),
    ("blocks_for", dict(tokens=8, block_tokens=4)), ("blocks_for", dict(tokens=9, block_tokens=1)),
    ("blocks_for", dict(tokens=3, block_tokens=0)), ("blocks_for", dict(tokens=-1, block_tokens=4)),
    ("blocks_for", dict(tokens=3, block_tokens=True)), ("blocks_for", dict(tokens=3)),
    # ---- pool_new and every pool method (12.13, 12.14) ----
    ("pool_new", dict(num_blocks=8, block_tokens=4)),  # handle 1
    ("pool_new", dict(num_blocks=1, block_tokens=4)),  # handle 2
    ("pool_new", dict(num_blocks=0, block_tokens=4)), ("pool_new", dict(num_blocks=4, block_tokens=0)),
    ("pool_new", dict(num_blocks=-1, block_tokens=4)),
    pool(1, "alloc"), pool(1, "alloc"), pool(1, "alloc"),  # blocks 0, 1, 2
    pool(1, "set_fill", 0, 4), pool(1, "set_fill", 1, 4), pool(1, "set_fill", 2, 2),
    pool(1, "fill", 0), pool(1, "fill", 2), pool(1, "refcount", 0), pool(1, "free_blocks"),
    pool(1, "alloc"),  # block 3: retained and released below
    pool(1, "retain", 3), pool(1, "refcount", 3), pool(1, "release", 3), pool(1, "release", 3), pool(1, "refcount", 3),
    pool(1, "release", 3), pool(1, "retain", 3), pool(1, "fill", 3), pool(1, "set_fill", 3, 1),  # misuse: block 3 is free
    pool(1, "fill", 99), pool(1, "fill", -1), pool(1, "refcount", 99), pool(1, "set_fill", 0, 5), pool(1, "set_fill", 0, -1),
    pool(1, "alloc", 1), pool(1, "fill"), pool(1, "nope"), ("pool_call", dict(pool=1, method="free_blocks")),
    pool(99, "alloc"), pool(2, "alloc"), pool(2, "alloc"),  # pool 2 is exhausted
    # ---- rollback (12.15) ----
    ("rollback", dict(pool=1, table=[0, 1, 2], keep=9)),  # fits the 3 blocks: nothing released, block 2 filled 1
    ("rollback", dict(pool=1, table=[0, 1, 2], keep=13)),  # past the table
    ("rollback", dict(pool=1, table=[0, 1, 2], keep=-1)),
    ("rollback", dict(pool=1, table=[0, 1, 2], keep=5)),  # the hand example: releases block 2, block 1 filled 1
    pool(1, "fill", 1), pool(1, "free_blocks"),
    ("rollback", dict(pool=1, table=[0, 1], keep=8)),  # nothing to release
    ("rollback", dict(pool=1, table=[0, 1], keep=0)),  # releases both
    ("rollback", dict(pool=1, table=[0], keep=0)),  # block 0 is free now: the pool refuses
    ("rollback", dict(pool=1, table=[], keep=0)),
    ("rollback", dict(pool=99, table=[0], keep=0)),
    ("rollback", dict(pool=1, table=[0, -1], keep=0)),
    pool(1, "free_blocks"),
    # ---- pool_write (12.19): a forward's writes, then the pool as rollback sees it ----
    ("pool_write", dict(pool=1, table=[], start=0, count=6, block_tokens=4)),  # blocks 0, 1: fills 4, 2
    ("pool_write", dict(pool=1, table=[0, 1], start=6, count=3, block_tokens=4)),  # fills block 1 to 4, block 2 filled 1
    pool(1, "fill", 1), pool(1, "fill", 2), pool(1, "free_blocks"),
    ("rollback", dict(pool=1, table=[0, 1, 2], keep=5)),
    ("pool_write", dict(pool=1, table=[0, 1], start=5, count=0, block_tokens=4)),  # nothing written
    ("pool_write", dict(pool=1, table=[0, 1], start=5, count=40, block_tokens=4)),  # runs out of blocks: KvError
    ("pool_write", dict(pool=1, table=[], start=3, count=1, block_tokens=4)),  # no block to fill
    ("pool_write", dict(pool=1, table=[], start=0, count=1, block_tokens=0)),
    ("pool_write", dict(pool=99, table=[], start=0, count=1, block_tokens=4)),
    ("pool_write", dict(pool=1, table=[], start=0)),
    # ---- pool_state (12.20): the whole pool in one answer ----
    ("pool_state", dict(pool=1)), ("pool_state", dict(pool=2)), ("pool_state", dict(pool=99)), ("pool_state", dict()),
    # ---- generate on the judge's fake target (12.16) ----
    gen(), gen(cfg=cfg_("none", 4)), gen(cfg=cfg_("ngram", 3)), gen(cfg=cfg_("prompt_lookup", 16, max_ngram=2, min_ngram=2)),
    gen(prompt=[3, 3, 3, 3], max_new=17), gen(prompt=[9, 1, 9, 1, 9, 2], max_new=40),
    gen(params=T1, seed=U64, max_new=16), gen(params=T1, seed=HIGH, max_new=16, cfg=cfg_("ngram", 4)),
    gen(params=KNOBS, seed=2**63, max_new=16), gen(eos=[15]), gen(eos=[3], cfg=cfg_("none", 1)),
    gen(max_new=1), gen(max_new=0), gen(stream=True, max_new=4), gen(stream=True, max_new=12),
    gen(stream=True, params=T1, seed=U64, max_new=12),
    gen(prompt=[]), gen(seed=-1), gen(seed=2**64), gen(seed=4.0), gen(cfg=cfg_("ngram", 0)), gen(cfg=cfg_("ngarm", 4)),
    gen(prompt=[1, 20]), gen(params={"temperature": "hot"}), gen(max_new=-1),
    # ---- runner targets over the tiny llama (12.17, 12.18) ----
    ("runner_target_new", dict(model_dir=MODEL_DIR, num_blocks=64, block_tokens=4)),  # handle 3
    runner(3, "extend", ids=[1, 2, 3, 4, 5]), runner(3, "extend", ids=[6]), runner(3, "cached"), runner(3, "blocks"),
    runner(3, "pool_free"), runner(3, "truncate", length=3), runner(3, "cached"), runner(3, "blocks"),
    runner(3, "extend", ids=[7, 8, 9, 10, 11, 12, 13]), runner(3, "truncate", length=99), runner(3, "truncate", length=-1),
    runner(3, "extend", ids=[]), runner(3, "cached"), runner(3, "blocks"), runner(3, "pool_free"),
    runner(3, "extend", ids=list(range(250))), runner(3, "cached"), runner(3, "blocks"), runner(3, "pool_free"),  # past the pool
    runner(3, "nope"), runner(3, "close"), runner(3, "pool_free"), runner(3, "cached"),
    runner(1, "cached"), runner(99, "cached"),
    ("runner_target_new", dict(model_dir=MODEL_DIR, num_blocks=64, block_tokens=4)),  # handle 4: the same model, reused
    gen(target=4, prompt=[10, 20, 30, 40, 50, 60] * 3, max_new=16),
    runner(4, "cached"), runner(4, "blocks"), runner(4, "close"), runner(4, "pool_free"),
    gen(target=4, prompt=[10, 20, 30], max_new=6, params=T1, seed=HIGH, cfg=cfg_("ngram", 3)),
    gen(target=1, prompt=[1, 2], max_new=2), gen(target=99, prompt=[1, 2], max_new=2),
    # the tiny llama refusing a token id or a position: the runner's ModelError, under its own name (spec_error
    # false), from extend and through generate; an id below 0 too (Rust: no u32, yet the runner's refusal)
    ("runner_target_new", dict(model_dir=MODEL_DIR, num_blocks=160, block_tokens=4)),  # handle 5: 640 positions
    runner(5, "extend", ids=[256]),  # outside the vocabulary [0, 256)
    runner(5, "cached"), runner(5, "blocks"), runner(5, "pool_free"),  # what a failed forward leaves: its block
    runner(5, "extend", ids=[-1]), runner(5, "extend", ids=[3, 2**32]), runner(5, "extend", ids=[256, -1]),
    runner(5, "close"),
    runner(5, "extend", ids=[5] * 513),  # position 512: past max_position_embeddings
    runner(5, "cached"), runner(5, "blocks"), runner(5, "close"),
    runner(5, "extend", ids=[5] * 512 + [-1]), runner(5, "close"),  # at position 512 the id is checked first
    runner(5, "extend", ids=[5] * 513 + [-1]), runner(5, "close"),  # position 512 is refused before the id after it
    gen(target=5, prompt=[1, 300], max_new=2),  # the same refusal reaching generate through RunnerTarget.extend
    gen(target=5, prompt=[], max_new=2),  # the contract's own refusal: the failure of the request before is not this one's
    runner(5, "cached"), runner(5, "blocks"), runner(5, "close"), gen(target=5, prompt=[1, 2], max_new=2),
    ("runner_target_new", dict(model_dir=MODEL_DIR, num_blocks=3, block_tokens=4)),  # handle 6: 12 positions
    runner(6, "extend", ids=[1] * 10), runner(6, "extend", ids=[1, 1, -1]),  # the pool refuses first: a SpecError
    runner(6, "cached"), runner(6, "blocks"), runner(6, "pool_free"),
    runner(6, "extend", ids=[-1]), runner(6, "cached"), runner(6, "blocks"),  # fits: the runner's refusal
    runner(6, "close"), gen(target=6, prompt=list(range(1, 12)), max_new=4),  # past the pool in generate: a SpecError
    # ---- the rest ----
    ("load", {}), ("nope", {}), ("blocks_for", dict(tokens=3, block_tokens=4, extra="ignored")),
]


def golden_requests() -> list[tuple[str, dict]]:
    """Every golden case of the verifier and the drafts, as a request (the oracle's inputs)."""
    golden = json.loads(GOLDEN_PATH.read_text())
    out = []
    for c in golden["verify"]:
        out.append(("verify_draft", {k: c[k] for k in ("rows", "draft", "draft_probs", "params", "prompt", "output", "seed")}))
    for c in golden["prompt_lookup"]:
        out.append(("prompt_lookup", {k: c[k] for k in ("ctx", "k", "max_ngram", "min_ngram")}))
    for c in golden["ngram"]:
        out.append(("ngram_draft", {k: c[k] for k in ("ctx", "k", "n")}))
    return out


# ---- running the requests ------------------------------------------------------------------------

class Judge(JudgeObjects):
    """What the judge lends one `generate` on target "judge": a fresh fake target and a listener that stops
    at LISTENER_STOPS_AT; every callback is logged."""

    def __init__(self) -> None:
        super().__init__(FakeTarget(pristine("L10.8"), VOCAB), self.listen)
        self.heard = 0
        self.log: list[dict] = []

    def listen(self, token, logprob) -> bool:
        self.heard += 1
        return self.heard < LISTENER_STOPS_AT

    def __call__(self, method: str, args: dict):
        self.log.append({"call": method, "args": args})
        return super().__call__(method, args)


def answer(impl, op: str, args: dict) -> dict:
    """One request's outcome as data: {"ok": value} or {"error": {...}}; for the judge's target, the callbacks."""
    judge = Judge() if op == "generate" and args.get("target") == "judge" else None
    try:
        out = {"ok": impl.call(op, args, judge)}
        if op == "generate":  # the Python worker's notes beside the answer (ops.WORKER_NOTES): no answer to compare
            out["ok"] = {k: v for k, v in out["ok"].items() if k not in CH.module("ops").WORKER_NOTES}
    except Raised as e:
        out = {"error": {"type": e.type, "spec_error": e.spec_error, "message": e.message}}
    except SubmissionFailure as e:  # a timeout or a crash: never an answer
        out = {"failed": f"{type(e).__name__}: {e}"}
    if judge is not None:
        out["callbacks"] = judge.log
        out["fake_target"] = {"cached": judge.target.cached(), "misuse": judge.target.misuse}
    return out


def answers(subject: dict, requests) -> list[dict]:
    """Every request's outcome, in order, from one fresh Impl of the reference (`subject`: open_impl's options)."""
    impl = open_impl(CH, "reference", **subject)
    try:
        return [answer(impl, op, args) for op, args in requests]
    finally:
        impl.close()


# ---- comparing two answers -----------------------------------------------------------------------

def bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def tolerance(op: str, args: dict):
    """(atol, rtol) for every float of the answer, or None: bit-exact (logprobs get theirs by name)."""
    if op == "runner_target_call" or (op == "generate" and args.get("target") != "judge"):
        return (MODEL_ATOL, MODEL_RTOL)  # computed by the tiny llama: float32 forwards summed in another order
    return None


LOGPROB_KEYS = ("logprobs", "logprob")


def differences(a, b, tol=None, path: str = "") -> list[str]:
    """Where a and b differ, by the rules of the module's docstring; [] when they agree. tol: (atol, rtol) for
    every float below, or None: bit-exact, except under a key of LOGPROB_KEYS."""
    if isinstance(a, dict) and "error" in a and isinstance(b, dict) and "error" in b and not path:
        ea, eb = a["error"], b["error"]
        out = [f"error.{k}: {ea[k]!r} != {eb[k]!r}" for k in ("type", "spec_error") if ea[k] != eb[k]]
        rest_a, rest_b = ({k: v for k, v in x.items() if k != "error"} for x in (a, b))
        if ea["spec_error"] and eb["spec_error"] and "callbacks" in a and "callbacks" in b:
            # A typed worker refuses an argument it cannot hold (a seed of -1, 2^64, 4.0) before the contract runs
            # (spec/protocol.md 10.3), so the callbacks the contract makes before its own check (target.cached) may
            # be missing: on a refusal, one worker's callbacks must be the start of the other's.
            n = min(len(a["callbacks"]), len(b["callbacks"]))
            rest_a["callbacks"], rest_b["callbacks"] = a["callbacks"][:n], b["callbacks"][:n]
        return out + differences(rest_a, rest_b, tol)
    if type(a) is not type(b):
        return [f"{path or 'answer'}: {a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"]
    if isinstance(a, dict):
        if "failed" in a and not path:
            return [f"a worker failed: {a['failed']}"]
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a)} != {sorted(b)}"]
        out = []
        for k in a:
            sub = (LOGPROB_ATOL, 0.0) if k in LOGPROB_KEYS and tol is None else tol
            out += differences(a[k], b[k], sub, f"{path}.{k}" if path else k)
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, tol, f"{path}[{i}]")]
    if isinstance(a, float):
        if tol is None or not (math.isfinite(a) and math.isfinite(b)):
            return [] if bits(a) == bits(b) or (math.isnan(a) and math.isnan(b)) else [f"{path}: {a!r} != {b!r} (bits differ)"]
        atol, rtol = tol
        if abs(a - b) <= atol + rtol * abs(b):
            return []
        return [f"{path}: {a!r} != {b!r} (|diff| {abs(a - b):.3g} > {atol} + {rtol}*|x|)"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def short(x, cap: int = 300) -> str:
    r = repr(x)
    return r if len(r) <= cap else r[:cap] + f"... ({len(r)} chars)"


def disagreements(requests, python: list[dict], rust: list[dict]) -> dict[int, str]:
    """Request index -> the request, where its answers differ, and both answers."""
    out = {}
    for i, ((op, args), a, b) in enumerate(zip(requests, python, rust)):
        diff = differences(a, b, tolerance(op, args))
        if diff:
            out[i] = (f"request {i}: {op}({short(args, 200)})\n    " + "\n    ".join(diff[:5]) +
                      f"\n    python: {short(a)}\n    rust:   {short(b)}")
    return out


# ---- the tests -----------------------------------------------------------------------------------

def both(requests) -> tuple[dict[int, str], set[str]]:
    """The disagreements of the two workers (a fresh one each) over `requests`, and the kinds of outcome seen."""
    python = answers(dict(transport="worker"), requests)
    rust = answers(dict(language_name="rust"), requests)
    assert len(python) == len(rust) == len(requests)
    outcomes = {("refusal" if r["error"]["spec_error"] else "error") if "error" in r else "ok" for r in python}
    return disagreements(requests, python, rust), outcomes


@needs_cargo
def test_the_python_and_the_rust_worker_answer_every_request_alike():
    requests = REQUESTS + golden_requests()
    ops = CH.module("ops")
    assert {op for op, _ in REQUESTS} >= set(ops.OPS) - set(ops.WORKER_NOTES), "the request list misses an op of the protocol"
    wrong, outcomes = both(requests)
    assert not wrong, f"{len(wrong)} of {len(requests)} requests got different answers:\n" + "\n".join(wrong.values())
    assert outcomes == {"ok", "refusal", "error"}  # the list exercises what it says: values, refusals, other errors


WORKERS = {"python": dict(transport="worker"), "rust": dict(language_name="rust")}


def batched_answers(subject: dict, requests) -> tuple[list[dict], list[str]]:
    """Every request's outcome from one fresh Impl of the reference, the requests sent as one batch (spec/protocol.md
    section 3, through Impl.batched); and the ops of the calls that went alone instead."""
    impl = open_impl(CH, "reference", **subject)
    alone: list[str] = []
    run = impl.transport.run
    impl.transport.run = lambda op, *a: alone.append(op) or run(op, *a)
    try:
        with impl.batched([lambda op=op, args=args: impl.call(op, args) for op, args in requests]):
            return [answer(impl, op, args) for op, args in requests], alone
    finally:
        impl.close()


@needs_cargo
@pytest.mark.parametrize("worker", WORKERS)
def test_each_worker_answers_a_batch_as_it_answers_each_request_alone(worker):
    """Every request but those calling back into the judge's target, in one batch: each answer (a value, a refusal,
    another error; handles made and used in the batch) is the one the same worker gives the request alone."""
    requests = [(op, args) for op, args in REQUESTS + golden_requests() if not (op == "generate" and args["target"] == "judge")]
    batched, alone = batched_answers(WORKERS[worker], requests)
    assert alone == [], f"sent alone instead of in the batch: {alone[:5]}"
    wrong = disagreements(requests, answers(WORKERS[worker], requests), batched)
    assert not wrong, f"{len(wrong)} of {len(requests)} requests answered otherwise in a batch:\n" + "\n".join(wrong.values())


@needs_cargo
@pytest.mark.parametrize("worker", WORKERS)
def test_each_worker_answers_each_call_of_a_batch_as_soon_as_it_is_done(worker):
    """The second call of three outlives its deadline (20,000 verifications in 0.05 s: about 0.5 s in Rust, 20 s in
    Python): the first is answered, the second is a timeout naming it and that deadline, the third is unanswered, and
    the next call gets a fresh worker. A worker that held its answers until the batch's end would have the first
    answered late (Python: a timeout on the first) or the second in time (Rust)."""
    slow = verify(ROWS3, [1, 0], params=T1, seed=list(range(20_000)), op="verify_first_tokens")
    impl = open_impl(CH, "reference", **WORKERS[worker])
    try:
        calls = [("blocks_for", {"tokens": 5, "block_tokens": 4}, 5.0), (*slow, 0.05), ("blocks_for", {"tokens": 9, "block_tokens": 4}, 5.0)]
        infos = impl.transport.run_batch(calls, JudgeObjects(), float("inf"))
        assert len(infos) == 2 and (infos[0].value, infos[0].error) == (2, None), infos
        assert isinstance(infos[1].error, Timeout) and "with a deadline of 0.05 s: no answer" in str(infos[1].error), infos
        assert str(infos[1].error).startswith("verify_first_tokens("), infos
        assert impl.transport.restarts == 1 and impl.blocks_for(9, 4) == 3
    finally:
        impl.close()


def test_the_comparison_catches_what_it_must():
    """The comparer itself, on injected disagreements (no worker needed)."""
    ok = lambda v: {"ok": v}
    err = lambda t, s, m="m": {"error": {"type": t, "spec_error": s, "message": m}}
    assert differences(ok([1, 2]), ok([1, 2])) == []
    assert differences(ok(1), ok(1.0)) and differences(ok(1), ok(True)) and differences(ok("1"), ok(1))
    assert differences(ok([0.1]), ok([np.nextafter(0.1, 1.0)]))  # one ulp apart: bits differ
    assert differences(ok(0.0), ok(-0.0))
    assert differences(ok([float("nan")]), ok([float("nan")])) == []
    assert differences(ok({"logprobs": [-0.5]}), ok({"logprobs": [-0.5 + 5e-10]})) == []
    assert differences(ok({"logprobs": [-0.5]}), ok({"logprobs": [-0.5 + 2e-9]}))
    assert differences(ok({"tokens": [1], "logprobs": [-0.5]}), ok({"tokens": [1]}))
    assert differences(ok([[2.0]]), ok([[2.0003]]), (MODEL_ATOL, MODEL_RTOL)) == []
    assert differences(ok([[2.0]]), ok([[2.0004]]), (MODEL_ATOL, MODEL_RTOL))
    assert differences(err("SpecError", True, "a"), err("SpecError", True, "b")) == []
    assert differences(err("SpecError", True), err("SpecError", False))
    assert differences(err("KvError", False), err("ValueError", False))
    assert differences(err("KvError", False), ok(None))
    assert differences({"failed": "Crashed: x"}, {"failed": "Crashed: x"})
    assert differences({"ok": None, "callbacks": [{"call": "on_token", "args": {"token": 1, "logprob": -0.5}}]},
                       {"ok": None, "callbacks": [{"call": "on_token", "args": {"token": 1, "logprob": -0.5 + 1e-12}}]}) == []
    assert differences({"ok": None, "callbacks": [{"call": "target.extend", "args": {"ids": [1]}}]},
                       {"ok": None, "callbacks": [{"call": "target.extend", "args": {"ids": [1, 2]}}]})
    assert tolerance("runner_target_call", {"method": "extend"}) == tolerance("generate", {"target": 4}) == (MODEL_ATOL, MODEL_RTOL)
    assert tolerance("generate", {"target": "judge"}) is None and tolerance("residual", {}) is None
    shown = disagreements([("blocks_for", {"tokens": 5, "block_tokens": 4})], [ok(2)], [ok(3)])
    assert len(shown) == 1 and "blocks_for" in shown[0] and "python: {'ok': 2}" in shown[0] and "rust:   {'ok': 3}" in shown[0]


# ---- the float round trip through tl-json ----------------------------------------------------------

PROBE_MAIN = r'''
//! Echoes JSON lines through tl-json, the worker's codec: "dump <json>" -> parse(json).dump();
//! "f64 <list>" -> each number as the worker reads a float and writes it (as_f64, f64_json);
//! "f32 <list>" -> as the worker reads a logit and writes one (narrowed to f32, widened back).
use std::io::{BufRead, Write};
use tl_json::{f64_json, parse, Json};

fn main() {
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout());
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        let (mode, text) = line.split_once(' ').unwrap();
        let v = parse(text).unwrap();
        let echoed = match mode {
            "dump" => v,
            "f64" => Json::Arr(v.as_array().unwrap().iter().map(|x| f64_json(x.as_f64().unwrap())).collect()),
            _ => Json::Arr(v.as_array().unwrap().iter().map(|x| f64_json(x.as_f64().unwrap() as f32 as f64)).collect()),
        };
        writeln!(out, "{}", echoed.dump()).unwrap();
    }
}
'''


def exact(x):
    """x with every float replaced by its bits (and its type kept): equal exactly when bit-exact."""
    if isinstance(x, float):
        return ("nan",) if math.isnan(x) else ("float", bits(x))
    if isinstance(x, dict):
        return {k: exact(v) for k, v in x.items()}
    if isinstance(x, list):
        return [exact(v) for v in x]
    return (type(x).__name__, x)


def digits(text: str) -> int:
    """The significant digits of a decimal number's text."""
    return len(Decimal(text).normalize().as_tuple().digits)


def every_float(x) -> list[float]:
    if isinstance(x, float):
        return [x]
    if isinstance(x, dict):
        x = list(x.values())
    return [f for v in x for f in every_float(v)] if isinstance(x, list) else []


F32_MAX = float(np.finfo(np.float32).max)
F32_SPECIALS = [float(np.float32(v)) for v in (0.1, 1 / 3, -2.5, 1e-7, F32_MAX, -F32_MAX, 1.401298464324817e-45,  # min subnormal
                                                1.1754943508222875e-38, 16777216.0, -0.0)] + [  # min normal, 2^24
    float(np.nextafter(np.float32(1), np.float32(2)))]
F64_SPECIALS = [5e-324, -5e-324, -0.0, 0.0, 1.7976931348623157e308, -1.7976931348623157e308, 2.2250738585072014e-308,
                2.225073858507201e-308, 1e16, 1e-7, 123456789012345680.0, 9007199254740993.0, 0.1 + 0.2, 1 / 3, 2.0**-1074 * 3]


def probe(tmp_path: Path, lines: list[str], crate: Path = REPO / "course/crates/tl-json") -> list[str]:
    """lines through the probe binary (a cargo project of its own in tmp_path, tl-json by path)."""
    (tmp_path / "probe/src").mkdir(parents=True)
    (tmp_path / "probe/Cargo.toml").write_text(f'[package]\nname = "probe"\nversion = "0.1.0"\nedition = "2021"\n\n'
                                               f'[dependencies]\ntl-json = {{ path = "{crate}" }}\n\n[workspace]\n')
    (tmp_path / "probe/src/main.rs").write_text(PROBE_MAIN)
    env = {**os.environ, "CARGO_TARGET_DIR": str(tmp_path / "target"), "CARGO_TERM_COLOR": "never"}
    r = subprocess.run([CARGO, "run", "--offline", "-q", "--manifest-path", str(tmp_path / "probe/Cargo.toml")],
                       input="\n".join(lines) + "\n", capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.splitlines()


def float_round_trip_failures(tmp_path: Path, crate: Path = REPO / "course/crates/tl-json") -> tuple[int, list[str]]:
    """(how many floats were sent, what came back wrong)."""
    golden = json.loads(GOLDEN_PATH.read_text())
    xs = every_float(golden) + F64_SPECIALS + F32_SPECIALS
    f32s = [x for x in xs if abs(x) <= F32_MAX and float(np.float32(x)) == x]  # exactly float32: the rows, the specials
    lines = [f"dump {json.dumps(x)}" for x in xs]  # each float alone, as Python writes it (repr)
    lines.append(f"dump {json.dumps(golden, separators=(',', ':'))}")  # the whole file as one message
    lines += [f"f64 {json.dumps(xs + ['inf', '-inf', 'nan'])}", f"f32 {json.dumps(f32s + ['inf', '-inf'])}"]
    out = probe(tmp_path, lines, crate)
    assert len(out) == len(lines)
    bad = []
    for x, text in zip(xs, out):
        y = json.loads(text)
        if not isinstance(y, float) or bits(y) != bits(x):
            bad.append(f"{x!r} ({x.hex()}) came back as {text}")
        elif digits(text) > digits(repr(x)):  # the same count: on a tie Rust may round the last digit up, Python to even
            bad.append(f"{x!r} came back as {text}: the same double, in more digits than Python's shortest repr")
    if exact(json.loads(out[len(xs)])) != exact(golden):
        bad.append("the whole file, dumped as one message, reads back as another value")
    for name, sent, text in (("f64", xs + ["inf", "-inf", "nan"], out[-2]), ("f32", f32s + ["inf", "-inf"], out[-1])):
        back = json.loads(text)
        want = [float(s) if isinstance(s, str) else s for s in sent]
        got = [float(s) if isinstance(s, str) else s for s in back]
        bad += [f"{name}: {w!r} came back as {g!r}" for w, g in zip(want, got) if exact(g) != exact(w)]
        bad += [f"{name}: non-finite {s!r} came back as {b!r}" for s, b in zip(sent, back) if isinstance(s, str) and s != b]
        bad += [f"{name}: {len(sent)} sent, {len(back)} back"] if len(sent) != len(back) else []
    return len(xs), bad


@needs_cargo
def test_every_golden_float_survives_the_rust_codec_bit_exact(tmp_path):
    n, bad = float_round_trip_failures(tmp_path)
    assert n > 20000
    assert not bad, f"{len(bad)} floats of {n} did not survive tl-json:\n" + "\n".join(bad[:20])
