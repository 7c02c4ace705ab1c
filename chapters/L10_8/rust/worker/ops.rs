//! Chapter L10.8's 18 operations (spec/protocol.md part 2), as `chapters/L10_8/ops.py` runs them:
//! the same fields read in the same order, the same calls, the answers of its `ANSWERS` shapes.
//!
//! The chapter's part of the course's worker crate (course/crates/tl-worker: the protocol loop, the wire and the
//! conversions): chapter.toml's `course_sources` puts this file at tl-worker's `src/ops.rs` in every workspace ol
//! assembles (the judge's build, `ol start`'s workspace). What `main.rs` needs of it: `State` (Default),
//! `dispatch(op, args, state, wire)` and `unknown_op(op)`.

mod engine;

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use tl_engine::kv::{KvError, KvPool};
use tl_engine::model::{load_llama, make_pool, Llama, ModelError, PagedRunner};
use tl_engine::rng::Pcg32;
use tl_engine::runner_target::{RunnerError, RunnerTarget};
use tl_engine::sampling::{SamplingError, SamplingParams};
use tl_engine::spec::{self, Draft, Generated, SpecConfig, Target};
use tl_json::{f64_json, Json};

use crate::conv::*;
use crate::wire::Wire;

use self::engine::JudgeTarget;

/// The protocol's op table, sorted (the unknown op's message lists it).
pub const OPS: [&str; 20] = [
    "blocks_for", "dense_distribution", "generate", "ngram_draft", "pool_call", "pool_new", "pool_state", "pool_write", "prompt_lookup", "propose",
    "residual", "rng_u32s", "rollback", "runner_target_call", "runner_target_new", "sample_dense", "spec_config_parse",
    "speculative_step", "verify_draft", "verify_first_tokens",
];

/// A live object of this worker, named by a handle (section 10.4).
pub enum Held {
    Pool(KvPool),
    Runner(RunnerTarget),
}

impl Held {
    fn class(&self) -> &'static str {
        match self {
            Held::Pool(_) => "KvPool",
            Held::Runner(_) => "RunnerTarget",
        }
    }
}

fn no_attribute(held: &Held, attr: &str) -> Failure {
    Failure::new("AttributeError", format!("'{}' object has no attribute '{attr}'", held.class()))
}

#[derive(Default)]
pub struct State {
    handles: HashMap<u64, Held>,
    issued: u64,
    models: HashMap<String, Rc<Llama>>,
}

impl State {
    fn hold(&mut self, obj: Held) -> Json {
        self.issued += 1;
        self.handles.insert(self.issued, obj);
        Json::Int(self.issued as i128)
    }

    fn handle(&mut self, h: &Json, kind: &str) -> Res<&mut Held> {
        let found = match h.as_i128() {
            Some(i) if i > 0 && i <= u64::MAX as i128 => self.handles.get_mut(&(i as u64)),
            _ => None,
        };
        let shown = match h {
            Json::Str(s) => s.clone(), // Python's f-string shows str(h)
            other => show(other),
        };
        found.ok_or_else(|| Failure::new("LookupError", format!("no live {kind} with handle {shown} (the worker may have been restarted)")))
    }
}

pub fn dispatch(op: &str, a: &Json, st: &mut State, wire: &RefCell<Wire>) -> Res<Json> {
    match op {
        "spec_config_parse" => spec_config_parse(a),
        "prompt_lookup" => prompt_lookup(a),
        "ngram_draft" => ngram_draft(a),
        "propose" => propose(a),
        "residual" => residual(a),
        "sample_dense" => sample_dense(a),
        "speculative_step" => speculative_step(a),
        "dense_distribution" => dense_distribution(a),
        "verify_draft" => verify_draft(a),
        "verify_first_tokens" => verify_first_tokens(a),
        "rng_u32s" => rng_u32s(a),
        "blocks_for" => blocks_for(a),
        "pool_new" => pool_new(a, st),
        "pool_call" => pool_call(a, st),
        "pool_write" => pool_write(a, st),
        "pool_state" => pool_state(a, st),
        "rollback" => rollback(a, st),
        "generate" => generate(a, st, wire),
        "runner_target_new" => runner_target_new(a, st),
        "runner_target_call" => runner_target_call(a, st),
        _ => Err(unknown_op(&Json::Str(op.into()))),
    }
}

/// Python's `KeyError(f"unknown operation {op!r}; the protocol has [...]")`, rendered as `str()` renders it.
pub fn unknown_op(op: &Json) -> Failure {
    let table: Vec<String> = OPS.iter().map(|o| py_repr(o)).collect();
    let text = format!("unknown operation {}; the protocol has [{}]", show(op), table.join(", "));
    Failure::new("KeyError", py_repr(&text))
}

// ---- shared conversions (section 10.1) -----------------------------------------------------------

fn spec_arg<T>(r: Result<T, String>) -> Res<T> {
    r.map_err(Failure::spec)
}

const FLOAT_FIELDS: [&str; 6] = ["temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"];

/// `SamplingParams(**fields)`: absent fields take their default, others are ignored; a value the
/// type cannot hold, and every bad value, is the sampler's SamplingError (as Python's constructor).
fn params(d: &Json) -> Res<SamplingParams> {
    if d.as_object().is_none() {
        return Err(Failure::new("TypeError", format!("params must be an object, got {}", describe(d))));
    }
    let mut p = SamplingParams::default();
    for name in FLOAT_FIELDS {
        if let Some(v) = d.get(name) {
            let x = v.as_f64().ok_or_else(|| SamplingError(format!("SamplingParams.{name} = {} is not a number", show(v))))?;
            match name {
                "temperature" => p.temperature = x,
                "top_p" => p.top_p = x,
                "min_p" => p.min_p = x,
                "repetition_penalty" => p.repetition_penalty = x,
                "presence_penalty" => p.presence_penalty = x,
                _ => p.frequency_penalty = x,
            }
        }
    }
    if let Some(v) = d.get("top_k") {
        p.top_k = to_usize(v, "top_k").map_err(|_| {
            SamplingError(format!("SamplingParams.top_k = {} is out of range: allowed an integer >= 0 (0 = off)", show(v)))
        })?;
    }
    p.validate()?;
    Ok(p)
}

/// `SpecConfig.parse(d["draft"], d["k"], **{max_ngram, min_ngram when named})`, or with `raw` true the
/// struct built as given, without parse (its bounds unchecked: propose's to refuse).
fn cfg(d: &Json) -> Res<SpecConfig> {
    if d.as_object().is_none() {
        return Err(Failure::new("TypeError", format!("cfg must be an object, got {}", describe(d))));
    }
    if d.get("raw").and_then(Json::as_bool) == Some(true) {
        return raw_cfg(d);
    }
    let draft = req(d, "draft")?;
    let k = req(d, "k")?;
    let draft = spec_arg(to_str(draft, "draft"))?;
    let k = spec_arg(to_i64(k, "k"))?;
    let (max, min) = (d.get("max_ngram"), d.get("min_ngram"));
    if max.is_none() && min.is_none() {
        return Ok(SpecConfig::parse(draft, k)?);
    }
    let max = max.map_or(Ok(spec::DEFAULT_MAX_NGRAM as i64), |v| to_i64(v, "max_ngram"));
    let min = min.map_or(Ok(spec::DEFAULT_MIN_NGRAM as i64), |v| to_i64(v, "min_ngram"));
    Ok(SpecConfig::parse_with(draft, k, spec_arg(max)?, spec_arg(min)?)?)
}

/// `SpecConfig(Draft(d["draft"]), d["k"], d["max_ngram"], d["min_ngram"])`: Python's dataclass, unchecked.
fn raw_cfg(d: &Json) -> Res<SpecConfig> {
    let name = spec_arg(to_str(req(d, "draft")?, "draft"))?;
    let draft = [Draft::None, Draft::Ngram, Draft::PromptLookup]
        .into_iter()
        .find(|x| x.name() == name)
        .ok_or_else(|| Failure::new("ValueError", format!("{} is not a valid Draft", py_repr(name))))?;
    let (k, max, min) = (req(d, "k")?, req(d, "max_ngram")?, req(d, "min_ngram")?);
    let (k, max, min) = (spec_arg(to_usize(k, "k"))?, spec_arg(to_usize(max, "max_ngram"))?, spec_arg(to_usize(min, "min_ngram"))?);
    Ok(SpecConfig { draft, k, max_ngram: max, min_ngram: min })
}

/// A generator seed for `Pcg32.from_seed`, whose own refusal is a ValueError (section 10.3).
fn seed(v: &Json) -> Res<u64> {
    to_u64(v, "seed").map_err(|m| Failure::new("ValueError", m))
}

// ---- the drafts and the step ---------------------------------------------------------------------

fn spec_config_parse(a: &Json) -> Res<Json> {
    let c = cfg(a)?;
    Ok(obj(vec![("draft", Json::Str(c.draft.name().into())), ("k", uint(c.k)), ("max_ngram", uint(c.max_ngram)),
                ("min_ngram", uint(c.min_ngram))]))
}

fn prompt_lookup(a: &Json) -> Res<Json> {
    let (ctx, k, max, min) = (req(a, "ctx")?, req(a, "k")?, req(a, "max_ngram")?, req(a, "min_ngram")?);
    let ctx = spec_arg(to_u32s(ctx, "ctx"))?;
    let (k, max, min) = (spec_arg(to_usize(k, "k"))?, spec_arg(to_usize(max, "max_ngram"))?, spec_arg(to_usize(min, "min_ngram"))?);
    Ok(ids(&spec::prompt_lookup(&ctx, k, max, min)?))
}

fn ngram_draft(a: &Json) -> Res<Json> {
    let (ctx, k, n) = (req(a, "ctx")?, req(a, "k")?, req(a, "n")?);
    let ctx = spec_arg(to_u32s(ctx, "ctx"))?;
    let (k, n) = (spec_arg(to_usize(k, "k"))?, spec_arg(to_usize(n, "n"))?);
    Ok(ids(&spec::ngram_draft(&ctx, k, n)?))
}

fn propose(a: &Json) -> Res<Json> {
    let c = cfg(req(a, "cfg")?)?;
    let (ctx, k) = (req(a, "ctx")?, req(a, "k")?);
    let ctx = spec_arg(to_u32s(ctx, "ctx"))?;
    let k = spec_arg(to_usize(k, "k"))?;
    Ok(ids(&spec::propose(&c, &ctx, k)?))
}

fn residual(a: &Json) -> Res<Json> {
    let (p, q) = (req(a, "p")?, req(a, "q")?);
    let (p, q) = (spec_arg(to_f64s(p, "p"))?, spec_arg(to_f64s(q, "q"))?);
    Ok(f64s(&spec::residual(&p, &q)?))
}

fn sample_dense(a: &Json) -> Res<Json> {
    let (p, u) = (req(a, "p")?, req(a, "u")?);
    let (p, u) = (spec_arg(to_f64s(p, "p"))?, spec_arg(to_f64(u, "u"))?);
    Ok(uint(spec::sample_dense(&p, u)?))
}

fn speculative_step(a: &Json) -> Res<Json> {
    let (p, q, x) = (req(a, "p")?, req(a, "q")?, req(a, "x")?);
    let (ua, ur) = (req(a, "u_accept")?, req(a, "u_resample")?);
    let (p, q, x) = (spec_arg(to_f64s(p, "p"))?, spec_arg(to_f64s(q, "q"))?, spec_arg(to_usize(x, "x"))?);
    let (ua, ur) = (spec_arg(to_f64(ua, "u_accept"))?, spec_arg(to_f64(ur, "u_resample"))?);
    let (t, accepted) = spec::speculative_step(&p, &q, x, ua, ur)?;
    Ok(Json::Arr(vec![uint(t), Json::Bool(accepted)]))
}

fn dense_distribution(a: &Json) -> Res<Json> {
    let logits = req(a, "logits")?;
    let params = params(req(a, "params")?)?;
    let (prompt, output) = (req(a, "prompt")?, req(a, "output")?);
    let logits = spec_arg(to_f32s(logits, "logits"))?;
    let (prompt, output) = (spec_arg(to_u32s(prompt, "prompt"))?, spec_arg(to_u32s(output, "output"))?);
    Ok(f64s(&spec::dense_distribution(&logits, &params, &prompt, &output)?))
}

/// The inputs verify_draft and verify_first_tokens share, converted once.
struct VerifyInputs {
    rows: Vec<Vec<f32>>,
    draft: Vec<u32>,
    probs: Option<Vec<Vec<f64>>>,
    params: SamplingParams,
    prompt: Vec<u32>,
    output: Vec<u32>,
}

impl VerifyInputs {
    fn new(rows: &Json, draft: &Json, probs: Option<&Json>, params: SamplingParams, prompt: &Json, output: &Json) -> Res<VerifyInputs> {
        Ok(VerifyInputs {
            rows: spec_arg(to_f32_rows(rows, "rows"))?,
            draft: spec_arg(to_u32s(draft, "draft"))?,
            probs: match probs {
                None | Some(Json::Null) => None,
                Some(v) => Some(spec_arg(to_f64_rows(v, "draft_probs"))?),
            },
            params,
            prompt: spec_arg(to_u32s(prompt, "prompt"))?,
            output: spec_arg(to_u32s(output, "output"))?,
        })
    }

    fn run(&self, rng: &mut Pcg32) -> Res<spec::Verified> {
        Ok(spec::verify_draft(&self.rows, &self.draft, self.probs.as_deref(), &self.params, &self.prompt, &self.output, rng)?)
    }
}

fn verify_draft(a: &Json) -> Res<Json> {
    let mut rng = Pcg32::from_seed(seed(req(a, "seed")?)?);
    let rows = req(a, "rows")?;
    let draft = req(a, "draft")?;
    let params = params(req(a, "params")?)?;
    let (prompt, output) = (req(a, "prompt")?, req(a, "output")?);
    let v = VerifyInputs::new(rows, draft, a.get("draft_probs"), params, prompt, output)?.run(&mut rng)?;
    let next = rng.next_u32();
    Ok(obj(vec![("tokens", ids(&v.tokens)), ("logprobs", f64s(&v.logprobs)), ("n_accepted", uint(v.n_accepted)),
                ("next_u32", int(next))]))
}

fn verify_first_tokens(a: &Json) -> Res<Json> {
    let rows = req(a, "rows")?;
    let params = params(req(a, "params")?)?;
    let seeds = req(a, "seeds")?;
    let seeds = seeds.as_array().ok_or_else(|| Failure::new("TypeError", format!("seeds is {}, not a list", describe(seeds))))?;
    if seeds.is_empty() {
        return Ok(Json::Arr(Vec::new()));
    }
    let (draft, prompt, output) = (req(a, "draft")?, req(a, "prompt")?, req(a, "output")?);
    let inputs = VerifyInputs::new(rows, draft, a.get("draft_probs"), params, prompt, output)?;
    let mut out = Vec::with_capacity(seeds.len());
    for s in seeds {
        let v = inputs.run(&mut Pcg32::from_seed(seed(s)?))?;
        let first = v.tokens.first().ok_or_else(|| Failure::new("IndexError", "list index out of range"))?;
        out.push(int(*first));
    }
    Ok(Json::Arr(out))
}

fn rng_u32s(a: &Json) -> Res<Json> {
    let mut rng = Pcg32::from_seed(seed(req(a, "seed")?)?);
    let n = req(a, "n")?;
    let n = match n.as_i128() {
        Some(i) => i.clamp(0, usize::MAX as i128) as usize, // range(-1) is empty
        None => return Err(Failure::new("TypeError", format!("n is {}, expected an integer", describe(n)))),
    };
    Ok(Json::Arr((0..n).map(|_| int(rng.next_u32())).collect()))
}

// ---- the pool and rollback -----------------------------------------------------------------------

fn blocks_for(a: &Json) -> Res<Json> {
    let (tokens, b) = (req(a, "tokens")?, req(a, "block_tokens")?);
    let (tokens, b) = (spec_arg(to_usize(tokens, "tokens"))?, spec_arg(to_usize(b, "block_tokens"))?);
    Ok(uint(spec::blocks_for(tokens, b)?))
}

/// Pool sizes: a value a usize cannot hold is the pool's own refusal (KvError), as in Python.
fn sizes(a: &Json) -> Res<(usize, usize)> {
    let (n, b) = (req(a, "num_blocks")?, req(a, "block_tokens")?);
    match (to_usize(n, "num_blocks"), to_usize(b, "block_tokens")) {
        (Ok(n), Ok(b)) => Ok((n, b)),
        _ => Err(KvError(format!("a pool needs num_blocks >= 1 and block_tokens >= 1, got {}, {}", show(n), show(b))).into()),
    }
}

fn pool_new(a: &Json, st: &mut State) -> Res<Json> {
    let (n, b) = sizes(a)?;
    let pool = KvPool::new(n, b)?;
    Ok(st.hold(Held::Pool(pool)))
}

const POOL_METHODS: [(&str, usize); 7] =
    [("alloc", 0), ("retain", 1), ("release", 1), ("fill", 1), ("set_fill", 2), ("refcount", 1), ("free_blocks", 0)];

fn pool_call(a: &Json, st: &mut State) -> Res<Json> {
    let method = req(a, "method")?;
    let arity = POOL_METHODS.iter().find(|(m, _)| Some(*m) == method.as_str()).map(|&(_, n)| n);
    let arity = arity.ok_or_else(|| Failure::new("ValueError", format!("pool method {} is not in the protocol", show(method))))?;
    let method = method.as_str().unwrap_or_default();
    let held = st.handle(req(a, "pool")?, "pool")?;
    let pool = match held {
        Held::Pool(p) => p,
        other => return Err(no_attribute(other, method)),
    };
    let empty = Json::Arr(Vec::new());
    let args = a.get("args").unwrap_or(&empty);
    let args = args.as_array().ok_or_else(|| Failure::new("TypeError", format!("pool_call's args is {}, not a list", describe(args))))?;
    if args.len() != arity {
        return Err(Failure::new("TypeError", format!("KvPool.{method}() takes {arity} argument(s), {} given", args.len())));
    }
    let n_blocks = pool.num_blocks();
    let block = || -> Res<u32> {
        to_u32(&args[0], "block").map_err(|_| {
            KvError(format!("{method}: block {} does not exist (the pool has blocks 0..{})", show(&args[0]), n_blocks as i128 - 1)).into()
        })
    };
    Ok(match method {
        "alloc" => int(pool.alloc()?),
        "retain" => {
            pool.retain(block()?)?;
            Json::Null
        }
        "release" => Json::Bool(pool.release(block()?)?),
        "fill" => uint(pool.fill(block()?)?),
        "set_fill" => {
            let b = block()?;
            let n = to_usize(&args[1], "n").map_err(|_| {
                KvError(format!("set_fill: {} positions do not fit a block of {}", show(&args[1]), pool.block_tokens()))
            })?;
            pool.set_fill(b, n)?;
            Json::Null
        }
        "refcount" => uint(pool.refcount(block()?)?),
        _ => uint(pool.free_blocks()),
    })
}

/// `pool_write` (section 12.19): positions [start, start + count) written as one forward pass writes them, a
/// block allocated at each block boundary and appended to a copy of `table`, each position's fill set, in order.
fn pool_write(a: &Json, st: &mut State) -> Res<Json> {
    let arg = |key: &str| -> Res<usize> {
        to_usize(req(a, key)?, key).map_err(|e| Failure::new("TypeError", format!("pool_write's {key}: {e}")))
    };
    let (start, count, block_tokens) = (arg("start")?, arg("count")?, arg("block_tokens")?);
    let mut table = to_u32s(req(a, "table")?, "table").map_err(|e| Failure::new("TypeError", format!("pool_write's table: {e}")))?;
    if block_tokens == 0 {
        return Err(Failure::new("ZeroDivisionError", "integer modulo by zero"));
    }
    let pool = match st.handle(req(a, "pool")?, "pool")? {
        Held::Pool(p) => p,
        other => return Err(no_attribute(other, "alloc")),
    };
    for pos in start..start + count {
        if pos % block_tokens == 0 {
            table.push(pool.alloc()?);
        }
        let last = *table.last().ok_or_else(|| Failure::new("IndexError", "list index out of range"))?;
        pool.set_fill(last, pos % block_tokens + 1)?;
    }
    Ok(ids(&table))
}

/// `pool_state` (section 12.20): every block's reference count and fill (0 for a free block), and the free count.
fn pool_state(a: &Json, st: &mut State) -> Res<Json> {
    let pool = match st.handle(req(a, "pool")?, "pool")? {
        Held::Pool(p) => p,
        other => return Err(no_attribute(other, "refcount")),
    };
    let (mut refs, mut fills) = (Vec::new(), Vec::new());
    for b in 0..pool.num_blocks() as u32 {
        let r = pool.refcount(b)?;
        refs.push(uint(r));
        fills.push(uint(if r > 0 { pool.fill(b)? } else { 0 }));
    }
    Ok(obj(vec![("refcounts", Json::Arr(refs)), ("fills", Json::Arr(fills)), ("free", uint(pool.free_blocks()))]))
}

fn rollback(a: &Json, st: &mut State) -> Res<Json> {
    let table = req(a, "table")?;
    let held = st.handle(req(a, "pool")?, "pool")?;
    let keep = req(a, "keep")?;
    let pool = match held {
        Held::Pool(p) => p,
        other => return Err(no_attribute(other, "block_tokens")),
    };
    let mut table = spec_arg(to_u32s(table, "table"))?;
    let keep = spec_arg(to_usize(keep, "keep"))?;
    let released = spec::rollback(pool, &mut table, keep)?;
    Ok(obj(vec![("released", uint(released)), ("table", ids(&table))]))
}

// ---- generation and the runner target ------------------------------------------------------------

fn generated(g: &Generated) -> Json {
    let st = &g.stats;
    obj(vec![
        ("tokens", ids(&g.tokens)),
        ("logprobs", f64s(&g.logprobs)),
        ("finish_reason", Json::Str(g.finish_reason.name().into())),
        ("stats", obj(vec![("drafted", uint(st.drafted)), ("accepted", uint(st.accepted)), ("target_calls", uint(st.target_calls)),
                           ("accept_rate", f64_json(st.accept_rate()))])),
    ])
}

fn generate(a: &Json, st: &mut State, wire: &RefCell<Wire>) -> Res<Json> {
    let which = req(a, "target")?;
    let mut judge = JudgeTarget::new(wire);
    let mut runner: Option<&mut RunnerTarget> = None;
    if which.as_str() != Some("judge") {
        match st.handle(which, "target")? {
            Held::Runner(r) => runner = Some(r),
            other => return Err(no_attribute(other, "cached")),
        }
    }
    let c = cfg(req(a, "cfg")?)?;
    let prompt = req(a, "prompt")?;
    let params = params(req(a, "params")?)?;
    let (seed, max_new, eos) = (req(a, "seed")?, req(a, "max_new")?, req(a, "eos")?);
    let prompt = spec_arg(to_u32s(prompt, "prompt"))?;
    let seed = spec_arg(to_u64(seed, "seed"))?; // here a bad seed is the contract's refusal
    let max_new = spec_arg(to_usize(max_new, "max_new"))?;
    let eos = spec_arg(to_u32s(eos, "eos"))?;
    if let Some(r) = runner.as_deref_mut() {
        r.take_failure(); // a failure of an earlier request is not this one's
    }
    let target: &mut dyn Target = match runner.as_deref_mut() {
        Some(r) => r,
        None => &mut judge,
    };
    let outcome = if !a.get("stream").is_some_and(truthy) {
        spec::generate(target, &c, &prompt, &params, seed, max_new, &eos)
    } else {
        let listener_refused = std::cell::Cell::new(false);
        let mut on_token = |token: u32, logprob: f64| -> bool {
            match wire.borrow_mut().call("on_token", obj(vec![("token", int(token)), ("logprob", f64_json(logprob))])) {
                Ok(v) => truthy(&v),
                Err(_) => {
                    listener_refused.set(true); // raised inside on_token in Python: the op fails whatever follows
                    false
                }
            }
        };
        let g = spec::generate_stream(target, &c, &prompt, &params, seed, max_new, &eos, &mut on_token);
        if listener_refused.get() {
            return Err(Failure::new("JudgeRefused", wire.borrow().refused.clone().unwrap_or_default()));
        }
        g
    };
    match (outcome, runner) {
        (Ok(g), _) => Ok(generated(&g)),
        (Err(e), Some(r)) => Err(failed_through_trait(r, e)),
        (Err(e), None) => Err(e.into()),
    }
}

/// A runner target's call through the Target trait failed with `e`: the failure the target kept,
/// when it is the runner's ModelError or the pool's KvError, is answered under its own name
/// (`spec_error` false), as Python's RunnerTarget lets it through; otherwise `e` itself.
fn failed_through_trait(t: &mut RunnerTarget, e: spec::SpecError) -> Failure {
    match t.take_failure() {
        Some(kept @ (RunnerError::Model(_) | RunnerError::Kv(_))) => kept.into(),
        _ => e.into(),
    }
}

/// `target.extend(ids)` of the protocol: the runner's rows, or its failure under its own name. Python's
/// runner refuses an id below 0 or past the vocabulary alike, so an integer a u32 cannot hold (-1, 2^32)
/// goes in as u32::MAX, which the runner refuses as outside the vocabulary at the same point of its
/// checks (after the target took the blocks, as in Python); when that id is the one refused, the
/// message names the id sent.
fn runner_extend(t: &mut RunnerTarget, ids: &Json) -> Res<Json> {
    let sent = spec_arg(to_ints(ids, "ids"))?;
    let fed: Vec<u32> = sent.iter().map(|&i| u32::try_from(i).unwrap_or(u32::MAX)).collect();
    let start = t.tokens().len();
    match t.extend_ids(&fed) {
        Ok(rows) => Ok(Json::Arr(rows.iter().map(|r| f32s(r)).collect())),
        Err(RunnerError::Model(e)) => {
            let Some(k) = sent.iter().position(|&i| u32::try_from(i).is_err()) else { return Err(e.into()) };
            // the runner checks each sequence in order (its token, then its position) and stops at the first refused
            let c = &t.runner().model().cfg;
            let limit = c.max_position_embeddings.min(t.table().len() * t.pool().block_tokens());
            let earlier = fed[..k].iter().enumerate().any(|(i, &id)| id as usize >= c.vocab_size || start + i >= limit);
            if earlier {
                return Err(e.into());
            }
            Err(ModelError(format!("forward: token {} is outside the vocabulary [0, {})", sent[k], c.vocab_size)).into())
        }
        Err(other) => Err(other.into()),
    }
}

fn runner_target_new(a: &Json, st: &mut State) -> Res<Json> {
    let dir = req(a, "model_dir")?;
    let dir = to_str(dir, "model_dir").map_err(|m| Failure::new("TypeError", m))?.to_string();
    let model = match st.models.get(&dir) {
        Some(m) => Rc::clone(m),
        None => {
            let m = Rc::new(load_llama(Path::new(&dir))?);
            st.models.insert(dir, Rc::clone(&m));
            m
        }
    };
    let (n, b) = sizes(a)?;
    let pool = make_pool(&model, n, b)?;
    let runner = PagedRunner::new(model, pool)?;
    Ok(st.hold(Held::Runner(RunnerTarget::new(runner))))
}

fn runner_target_call(a: &Json, st: &mut State) -> Res<Json> {
    let held = st.handle(req(a, "target")?, "target")?;
    let method = req(a, "method")?;
    let name = method.as_str().unwrap_or_default();
    let attr = match name {
        "blocks" => "table",
        "pool_free" => "pool",
        m => m,
    };
    let known = ["extend", "truncate", "cached", "blocks", "pool_free", "close"].contains(&name);
    let t = match held {
        Held::Runner(t) => t,
        other if known => return Err(no_attribute(other, attr)),
        _ => return Err(Failure::new("ValueError", format!("runner target method {} is not in the protocol", show(method)))),
    };
    Ok(match name {
        "extend" => runner_extend(t, req(a, "ids")?)?,
        "truncate" => {
            let len = spec_arg(to_usize(req(a, "length")?, "length"))?;
            t.take_failure();
            t.truncate(len).map_err(|e| failed_through_trait(t, e))?;
            Json::Null
        }
        "cached" => uint(t.cached()?),
        "blocks" => ids(t.table()),
        "pool_free" => uint(t.pool().free_blocks()),
        "close" => {
            t.close()?;
            Json::Null
        }
        _ => return Err(Failure::new("ValueError", format!("runner target method {} is not in the protocol", show(method)))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_op_message_is_pythons() {
        let f = unknown_op(&Json::Str("nope".into()));
        assert_eq!(f.ty, "KeyError");
        assert_eq!(f.message, "\"unknown operation 'nope'; the protocol has ['blocks_for', 'dense_distribution', 'generate', \
'ngram_draft', 'pool_call', 'pool_new', 'pool_write', 'prompt_lookup', 'propose', 'residual', 'rng_u32s', 'rollback', 'runner_target_call', \
'runner_target_new', 'sample_dense', 'spec_config_parse', 'speculative_step', 'verify_draft', 'verify_first_tokens']\"");
    }
}
