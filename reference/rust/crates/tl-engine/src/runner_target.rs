//! RunnerTarget: the production `Target` of spec.rs, one request over a paged runner and its pool.
//! A port of the Python reference's `tinyllm/infer/runner_target.py` (given: the course's).
//!
//! The runner returns one logits row per sequence, so `extend(ids)` feeds every id as its own
//! one-token sequence over the request's block table, at its own position, in ONE forward.
//! `truncate(len)` is spec::rollback. The prefix index only ever sees verified tokens: a full block
//! is registered when `truncate` (or `commit`) confirms that all its positions are kept, never at
//! `extend` time, so a block that a rejected draft filled is never registered.
//!
//! Errors, as Python's RunnerTarget raises them: the target's own refusals (a pool too small for
//! the positions, a truncate past the cache) are SpecError; the runner's ModelError (a token
//! outside the vocabulary, a position past max_position_embeddings) and the pool's other KvErrors
//! are not the target's and keep their type: `RunnerError`, which `extend_ids` answers. The Target
//! trait answers SpecError only, so through it every failure comes out as a SpecError of the same
//! message, and the target keeps the failure itself for `take_failure`: a worker reads it after a
//! failed `generate` to answer the underlying error under its own name, as Python does.

use std::fmt;

use crate::kv::{KvError, KvPool};
use crate::model::{ModelError, PagedRunner, Seq};
use crate::spec::{blocks_for, rollback, SpecError, Target};

/// Why a RunnerTarget call failed: the runner's error, the pool's, or the target's own refusal.
#[derive(Debug)]
pub enum RunnerError {
    Model(ModelError),
    Kv(KvError),
    Spec(SpecError),
}

impl fmt::Display for RunnerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RunnerError::Model(e) => &e.0,
            RunnerError::Kv(e) => &e.0,
            RunnerError::Spec(e) => &e.0,
        })
    }
}

impl std::error::Error for RunnerError {}

impl From<ModelError> for RunnerError {
    fn from(e: ModelError) -> RunnerError {
        RunnerError::Model(e)
    }
}

impl From<KvError> for RunnerError {
    fn from(e: KvError) -> RunnerError {
        RunnerError::Kv(e)
    }
}

impl From<SpecError> for RunnerError {
    fn from(e: SpecError) -> RunnerError {
        RunnerError::Spec(e)
    }
}

/// What the Target trait answers for a failure: a SpecError with the same message.
impl From<RunnerError> for SpecError {
    fn from(e: RunnerError) -> SpecError {
        match e {
            RunnerError::Spec(e) => e,
            other => SpecError(other.to_string()),
        }
    }
}

/// One request's cache: `tokens` (what position i holds) and `table` (its blocks, in order).
pub struct RunnerTarget {
    runner: PagedRunner,
    tokens: Vec<u32>,
    table: Vec<u32>,
    checked: usize, // leading full blocks already registered (or found indexed under another block)
    failure: Option<RunnerError>, // the last failure of a call through the Target trait, until taken
}

impl RunnerTarget {
    /// An empty request over the runner's pool.
    pub fn new(runner: PagedRunner) -> RunnerTarget {
        RunnerTarget { runner, tokens: Vec::new(), table: Vec::new(), checked: 0, failure: None }
    }

    /// The request's blocks, in position order.
    pub fn table(&self) -> &[u32] {
        &self.table
    }

    /// The ids of the cached positions.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    pub fn pool(&self) -> &KvPool {
        self.runner.pool()
    }

    pub fn runner(&self) -> &PagedRunner {
        &self.runner
    }

    /// The last failure of a Target call (`cached`, `extend`, `truncate`) since the last
    /// take, with its own type (the trait answered it as a SpecError of the same message); it is
    /// forgotten once taken.
    pub fn take_failure(&mut self) -> Option<RunnerError> {
        self.failure.take()
    }

    /// A result for the Target trait: a failure is kept for `take_failure`, and answered as a
    /// SpecError of the same message.
    fn through_trait<T>(&mut self, r: Result<T, RunnerError>) -> Result<T, SpecError> {
        r.map_err(|e| {
            let answered = SpecError(e.to_string());
            self.failure = Some(e);
            answered
        })
    }

    /// Logits rows (f32 [V]), one per id, row i scoring the position after ids[i]; what
    /// `Target::extend` answers, with each failure of its own type: the pool too small for the
    /// positions is a SpecError (the request is left as it was), the runner's refusal a ModelError
    /// (the blocks taken for the positions stay in the table, as in Python), the pool's a KvError.
    pub fn extend_ids(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, RunnerError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let b = self.runner.pool().block_tokens();
        let (start, end) = (self.tokens.len(), self.tokens.len() + ids.len());
        let mut fresh = 0;
        while self.table.len() < blocks_for(end, b)? {
            match self.runner.pool_mut().alloc() {
                Ok(block) => {
                    self.table.push(block);
                    fresh += 1;
                }
                Err(e) => {
                    for block in self.table.split_off(self.table.len() - fresh) {
                        self.runner.pool_mut().release(block)?; // leave the request as it was
                    }
                    return Err(SpecError(format!("extend: the KV pool cannot hold {end} positions: {e}")).into());
                }
            }
        }
        if start % b != 0 {
            self.own_block(start / b)?; // the partial last block is about to be written
        }
        let table = &self.table;
        let batch: Vec<Seq> = ids.iter().enumerate().map(|(i, &token)| Seq { token, pos: start + i, table }).collect();
        let logits = self.runner.forward(&batch)?; // [N][V]
        for i in start / b..blocks_for(end, b)? {
            self.runner.pool_mut().set_fill(self.table[i], b.min(end - i * b))?;
        }
        self.tokens.extend_from_slice(ids);
        Ok(logits)
    }

    /// Every cached position is verified: register the full blocks not yet in the index, under the
    /// key of all token ids up to the block's end. A block whose key already names another block
    /// (the same prefix computed by another request) stays private.
    pub fn commit(&mut self) -> Result<(), SpecError> {
        let r = self.register_verified();
        self.through_trait(r)
    }

    fn register_verified(&mut self) -> Result<(), RunnerError> {
        let b = self.runner.pool().block_tokens();
        for i in self.checked..self.tokens.len() / b {
            let key = &self.tokens[..(i + 1) * b];
            let pool = self.runner.pool_mut();
            if pool.lookup(key).is_none() && !pool.is_registered(self.table[i]) {
                pool.register(key.to_vec(), self.table[i])?;
            }
            self.checked = i + 1;
        }
        Ok(())
    }

    /// Copy on write: before positions of block i are written or cut, a block that is shared (a
    /// prefix-cache hit held by another request too) or indexed becomes a private copy. No block
    /// for the copy is the target's refusal (SpecError); the pool's other errors are KvErrors.
    fn own_block(&mut self, i: usize) -> Result<(), RunnerError> {
        let pool = self.runner.pool_mut();
        let old = self.table[i];
        if pool.refcount(old)? == 1 && !pool.is_registered(old) {
            return Ok(());
        }
        let new = pool.alloc().map_err(|e| SpecError(format!("copy on write of block {old}: {e}")))?;
        if pool.kv_shape().is_some() {
            pool.copy_block(old, new);
        }
        let fill = pool.fill(old)?;
        pool.set_fill(new, fill)?;
        pool.release(old)?;
        self.table[i] = new;
        Ok(())
    }

    /// Keep positions 0..len-1 (`Target::truncate`, with each failure of its own type).
    fn cut(&mut self, len: usize) -> Result<(), RunnerError> {
        let held = self.tokens.len();
        if len > held {
            return Err(SpecError(format!("truncate({len}): the target holds {held} positions; allowed 0 <= length <= {held}")).into());
        }
        let b = self.runner.pool().block_tokens();
        if len % b != 0 && len < held && len / b < self.table.len() {
            self.own_block(len / b)?; // cutting into a shared or indexed block: keep the original whole
        }
        rollback(self.runner.pool_mut(), &mut self.table, len)?;
        self.tokens.truncate(len);
        self.checked = self.checked.min(len / b);
        self.register_verified()
    }

    /// Give every block back (one reference each) and forget the cache.
    pub fn close(&mut self) -> Result<(), SpecError> {
        while let Some(block) = self.table.pop() {
            self.runner.pool_mut().release(block).map_err(|e| SpecError(format!("close: {e}")))?;
        }
        self.tokens.clear();
        self.checked = 0;
        Ok(())
    }
}

impl Target for RunnerTarget {
    fn cached(&mut self) -> Result<usize, SpecError> {
        Ok(self.tokens.len())
    }

    /// Logits rows (f32 [V]), one per id, row i scoring the position after ids[i] (`extend_ids`).
    fn extend(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, SpecError> {
        let r = self.extend_ids(ids);
        self.through_trait(r)
    }

    /// Keep positions 0..len-1; they are confirmed, so their full blocks enter the prefix index.
    fn truncate(&mut self, len: usize) -> Result<(), SpecError> {
        let r = self.cut(len);
        self.through_trait(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests::{close, model_dir};
    use crate::model::{load_llama, make_pool, Llama};
    use std::rc::Rc;

    fn target(model: &Rc<Llama>, blocks: usize, b: usize) -> RunnerTarget {
        RunnerTarget::new(PagedRunner::new(model.clone(), make_pool(model, blocks, b).unwrap()).unwrap())
    }

    fn ids(n: usize, seed: u64) -> Vec<u32> {
        let mut s = seed;
        (0..n).map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % 256) as u32
        }).collect()
    }

    /// rows equal a fresh full forward of `prefix`, from position `from` on.
    fn same_as_fresh(model: &Llama, prefix: &[u32], from: usize, rows: &[Vec<f32>]) -> f32 {
        let fresh = model.forward_full(prefix).unwrap();
        assert_eq!(rows.len(), prefix.len() - from, "one row per fed id");
        let mut worst = 0.0f32;
        for (i, row) in rows.iter().enumerate() {
            let e = close(row, &fresh[from + i]).unwrap_or_else(|e| panic!("position {}: {e}", from + i));
            worst = worst.max(e);
        }
        worst
    }

    #[test]
    fn runner_target_scores_every_fed_position() {
        let Some(dir) = model_dir("runner_target_scores_every_fed_position") else { return };
        let model = Rc::new(load_llama(&dir).unwrap());
        let mut rt = target(&model, 64, 4);
        let all = ids(24, 108);
        let (mut fed, mut worst) = (0, 0.0f32);
        for n in [5, 1, 3, 6, 2, 7] {
            let rows = rt.extend(&all[fed..fed + n]).unwrap();
            worst = worst.max(same_as_fresh(&model, &all[..fed + n], fed, &rows));
            fed += n;
            assert_eq!(rt.cached().unwrap(), fed);
            assert_eq!(rt.table().len(), blocks_for(fed, 4).unwrap());
        }
        let keep = fed - 5; // a rejected draft: cut, then feed other ids over the same positions
        rt.truncate(keep).unwrap();
        assert_eq!((rt.cached().unwrap(), rt.table().len()), (keep, blocks_for(keep, 4).unwrap()));
        let other: Vec<u32> = (0..4).map(|i| (i * 7 + 3) % 256).collect();
        let rows = rt.extend(&other).unwrap();
        let prefix: Vec<u32> = all[..keep].iter().chain(&other).copied().collect();
        worst = worst.max(same_as_fresh(&model, &prefix, keep, &rows));
        rt.close().unwrap();
        assert_eq!((rt.pool().free_blocks(), rt.cached().unwrap(), rt.table().len()), (64, 0, 0), "close gives every block back");
        println!("RunnerTarget rows vs fresh forward_full: max abs difference {worst:.3e}");
    }

    #[test]
    fn extend_gives_back_what_it_took_when_the_pool_runs_out() {
        let Some(dir) = model_dir("extend_gives_back_what_it_took_when_the_pool_runs_out") else { return };
        let model = Rc::new(load_llama(&dir).unwrap());
        let mut rt = target(&model, 3, 4);
        rt.extend(&ids(6, 1)).unwrap();
        assert_eq!((rt.table().len(), rt.pool().free_blocks()), (2, 1));
        let e = rt.extend(&ids(8, 2)).unwrap_err(); // 14 positions need 4 blocks
        assert!(e.0.contains("cannot hold 14 positions"), "{e}");
        assert_eq!((rt.cached().unwrap(), rt.table().len(), rt.pool().free_blocks()), (6, 2, 1), "the request as it was");
        let e = rt.extend(&[256]).unwrap_err();
        assert!(e.0.contains("vocabulary"), "the runner's refusal comes out as a SpecError: {e}");
        assert_eq!((rt.cached().unwrap(), rt.table().len()), (6, 2));
        let rows = rt.extend(&ids(6, 3)).unwrap(); // 12 positions fit exactly
        let prefix: Vec<u32> = ids(6, 1).into_iter().chain(ids(6, 3)).collect();
        same_as_fresh(&model, &prefix, 6, &rows);
        assert!(rt.truncate(13).is_err(), "truncate past the cache");
        rt.truncate(0).unwrap();
        assert_eq!(rt.pool().free_blocks(), 3, "truncate(0) gives every block back");
    }

    #[test]
    fn a_failure_keeps_its_own_type_beside_the_traits_spec_error() {
        let Some(dir) = model_dir("a_failure_keeps_its_own_type_beside_the_traits_spec_error") else { return };
        let model = Rc::new(load_llama(&dir).unwrap());
        let mut rt = target(&model, 3, 4);
        match rt.extend_ids(&[256]) {
            Err(RunnerError::Model(e)) => assert_eq!(e.0, "forward: token 256 is outside the vocabulary [0, 256)"),
            other => panic!("the runner's refusal is a ModelError, got {other:?}"),
        }
        assert!(rt.take_failure().is_none(), "extend_ids answers its failure, it keeps none");
        assert_eq!((rt.cached().unwrap(), rt.table().len()), (0, 1), "as in Python, the block taken for it stays");
        let e = rt.extend(&[1, 300]).unwrap_err(); // through the trait: a SpecError of the same message
        match rt.take_failure() {
            Some(RunnerError::Model(m)) => assert_eq!(m.0, e.0),
            other => panic!("the trait's extend keeps the ModelError, got {other:?}"),
        }
        assert!(rt.take_failure().is_none(), "taken once");
        assert!(matches!(rt.extend_ids(&ids(13, 1)), Err(RunnerError::Spec(_))), "a pool too small: the target's own refusal");
        assert!(rt.truncate(1).is_err());
        assert!(matches!(rt.take_failure(), Some(RunnerError::Spec(_))), "truncate past the cache: the target's own refusal");
        let rows = rt.extend(&ids(5, 2)).unwrap();
        same_as_fresh(&model, &ids(5, 2), 0, &rows);
        assert!(rt.take_failure().is_none(), "a success keeps nothing");
    }

    #[test]
    fn truncate_registers_verified_blocks_and_copies_on_write() {
        let Some(dir) = model_dir("truncate_registers_verified_blocks_and_copies_on_write") else { return };
        let model = Rc::new(load_llama(&dir).unwrap());
        let mut rt = target(&model, 16, 4);
        let a = ids(13, 5);
        rt.extend(&a[..10]).unwrap();
        assert!(rt.table().iter().all(|&blk| !rt.pool().is_registered(blk)), "extend registers nothing");
        rt.truncate(10).unwrap();
        assert_eq!((rt.pool().lookup(&a[..4]), rt.pool().lookup(&a[..8])), (Some(rt.table()[0]), Some(rt.table()[1])));
        assert!(!rt.pool().is_registered(rt.table()[2]), "a partial block is never registered");
        rt.extend(&a[10..13]).unwrap(); // a draft of 3: fills block 2, opens block 3
        rt.truncate(11).unwrap(); // 2 of 3 rejected
        assert_eq!((rt.table().len(), rt.pool().fill(rt.table()[2]).unwrap()), (3, 3));
        assert!(!rt.pool().is_registered(rt.table()[2]), "a block a rejected draft filled is never registered");
        // cutting into a registered block copies it first; the copy carries the right K/V
        let indexed = rt.table()[1];
        rt.truncate(6).unwrap();
        assert_ne!(rt.table()[1], indexed, "block 1 was indexed: the target cut a private copy");
        assert_eq!(rt.pool().lookup(&a[..8]), None, "the original held its last reference and is gone from the index");
        assert_eq!(rt.pool().lookup(&a[..4]), Some(rt.table()[0]));
        let b = ids(5, 6);
        let rows = rt.extend(&b).unwrap();
        let prefix: Vec<u32> = a[..6].iter().chain(&b).copied().collect();
        same_as_fresh(&model, &prefix, 6, &rows);
        // a block shared with another owner: extend writes into a private copy, the other keeps its own
        rt.truncate(10).unwrap();
        let shared = rt.table()[2];
        rt.runner.pool_mut().retain(shared).unwrap();
        let before: Vec<f32> = rt.pool().k().to_vec();
        let c = ids(3, 7);
        let rows = rt.extend(&c).unwrap();
        assert_ne!(rt.table()[2], shared);
        assert_eq!((rt.pool().refcount(shared).unwrap(), rt.pool().fill(shared).unwrap()), (1, 2), "the other owner's block is untouched");
        let span = rt.pool().k().len() / rt.pool().num_blocks();
        let s = shared as usize * span;
        assert_eq!(rt.pool().k()[s..s + span], before[s..s + span], "its K/V too");
        let prefix: Vec<u32> = prefix[..10].iter().chain(&c).copied().collect();
        same_as_fresh(&model, &prefix, 10, &rows);
        rt.close().unwrap();
        rt.runner.pool_mut().release(shared).unwrap();
        assert_eq!(rt.pool().free_blocks(), 16, "nothing leaked");
    }
}
