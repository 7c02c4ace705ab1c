//! The refcounted KV block pool of L10.1, with a prefix index; the port of `tinyllm/kv.py`.
//!
//! A block holds up to `block_tokens` positions of K/V. A sequence owns a *block table* (a list of
//! block ids); blocks can be shared between sequences through the prefix index, so every owner
//! holds one reference and a block returns to the free list only when its last reference is
//! released.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Misuse of the pool (exhausted, double release, bad fill); the message says which block and why.
#[derive(Debug, Clone, PartialEq)]
pub struct KvError(pub String);

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KvError {}

/// `num_blocks` blocks of `block_tokens` positions. `alloc` hands out the lowest free id.
///
/// With `kv_shape = (layers, kv_heads, head_dim)` the pool also owns the K/V storage the model
/// writes: two flat `Vec<f32>` laid out `[block][layer][slot][kv_head][head_dim]` (row-major, as
/// the Python reference's `k[block, layer, slot, kv_head, :]`), and likewise `v`.
#[derive(Clone)]
pub struct KvPool {
    num_blocks: usize,
    block_tokens: usize,
    free: BinaryHeap<Reverse<u32>>, // a min-heap of free ids
    refs: Vec<usize>,               // references per block; 0 = free
    fill: Vec<usize>,               // positions written per block
    index: HashMap<Vec<u32>, u32>,  // prefix key -> block
    key_of: HashMap<u32, Vec<u32>>, // block -> its prefix key
    kv_shape: Option<(usize, usize, usize)>,
    k: Vec<f32>, // empty without K/V storage
    v: Vec<f32>,
}

impl std::fmt::Debug for KvPool {
    /// The pool's bookkeeping, without the K/V numbers.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvPool")
            .field("num_blocks", &self.num_blocks)
            .field("block_tokens", &self.block_tokens)
            .field("free_blocks", &self.free.len())
            .field("refs", &self.refs)
            .field("fill", &self.fill)
            .field("registered", &self.key_of.len())
            .field("kv_shape", &self.kv_shape)
            .finish()
    }
}

impl KvPool {
    /// A pool without K/V storage (bookkeeping only). num_blocks and block_tokens must be >= 1.
    pub fn new(num_blocks: usize, block_tokens: usize) -> Result<KvPool, KvError> {
        if num_blocks < 1 || block_tokens < 1 {
            return Err(KvError(format!(
                "a pool needs num_blocks >= 1 and block_tokens >= 1, got {num_blocks}, {block_tokens}"
            )));
        }
        if u32::try_from(num_blocks - 1).is_err() {
            return Err(KvError(format!("a pool of {num_blocks} blocks is too large: block ids are u32")));
        }
        Ok(KvPool {
            num_blocks,
            block_tokens,
            free: (0..num_blocks as u32).map(Reverse).collect(),
            refs: vec![0; num_blocks],
            fill: vec![0; num_blocks],
            index: HashMap::new(),
            key_of: HashMap::new(),
            kv_shape: None,
            k: Vec::new(),
            v: Vec::new(),
        })
    }

    /// A pool that also owns zeroed K and V of shape [num_blocks][layers][block_tokens][kv_heads][head_dim].
    pub fn with_kv(num_blocks: usize, block_tokens: usize, kv_shape: (usize, usize, usize)) -> Result<KvPool, KvError> {
        let mut pool = KvPool::new(num_blocks, block_tokens)?;
        let (layers, kv_heads, head_dim) = kv_shape;
        let len = [layers, block_tokens, kv_heads, head_dim]
            .iter()
            .try_fold(num_blocks, |n, &d| n.checked_mul(d))
            .ok_or_else(|| KvError(format!("K/V of {num_blocks} blocks of {block_tokens} x {kv_shape:?} do not fit in memory")))?;
        pool.kv_shape = Some(kv_shape);
        pool.k = vec![0.0; len];
        pool.v = vec![0.0; len];
        Ok(pool)
    }

    pub fn num_blocks(&self) -> usize {
        self.num_blocks
    }

    pub fn block_tokens(&self) -> usize {
        self.block_tokens
    }

    /// The block's index, if it exists and holds at least one reference; else `op`'s KvError.
    fn owned(&self, block: u32, op: &str) -> Result<usize, KvError> {
        let b = block as usize;
        if b >= self.num_blocks {
            let last = self.num_blocks - 1;
            return Err(KvError(format!("{op}: block {block} does not exist (the pool has blocks 0..{last})")));
        }
        if self.refs[b] == 0 {
            return Err(KvError(format!("{op}: block {block} is free; only an allocated block can be used")));
        }
        Ok(b)
    }

    /// The lowest free id, with one reference and fill 0.
    pub fn alloc(&mut self) -> Result<u32, KvError> {
        let Some(Reverse(block)) = self.free.pop() else {
            return Err(KvError(format!("the pool is exhausted: all {} blocks are in use", self.num_blocks)));
        };
        self.refs[block as usize] = 1;
        self.fill[block as usize] = 0;
        Ok(block)
    }

    /// One more reference to an allocated block (another sequence shares it).
    pub fn retain(&mut self, block: u32) -> Result<(), KvError> {
        let b = self.owned(block, "retain")?;
        self.refs[b] += 1;
        Ok(())
    }

    /// Drop one reference; true when that was the last and the block is free again (its fill
    /// reset, its prefix key forgotten).
    pub fn release(&mut self, block: u32) -> Result<bool, KvError> {
        let b = self.owned(block, "release")?;
        self.refs[b] -= 1;
        if self.refs[b] > 0 {
            return Ok(false);
        }
        self.fill[b] = 0;
        if let Some(key) = self.key_of.remove(&block) {
            self.index.remove(&key);
        }
        self.free.push(Reverse(block));
        Ok(true)
    }

    /// Positions written in an allocated block.
    pub fn fill(&self, block: u32) -> Result<usize, KvError> {
        let b = self.owned(block, "fill")?;
        Ok(self.fill[b])
    }

    /// Set an allocated block's fill to n, 0 <= n <= block_tokens.
    pub fn set_fill(&mut self, block: u32, n: usize) -> Result<(), KvError> {
        let b = self.owned(block, "set_fill")?;
        if n > self.block_tokens {
            return Err(KvError(format!("set_fill: {n} positions do not fit a block of {}", self.block_tokens)));
        }
        self.fill[b] = n;
        Ok(())
    }

    /// References held on a block (0 when it is free).
    pub fn refcount(&self, block: u32) -> Result<usize, KvError> {
        if block as usize >= self.num_blocks {
            return Err(KvError(format!("refcount: block {block} does not exist")));
        }
        Ok(self.refs[block as usize])
    }

    pub fn free_blocks(&self) -> usize {
        self.free.len()
    }

    /// Enter a full block in the prefix index under `key` (a summary of its prefix). A key names
    /// one block and a block holds one key; registering the same pair again is allowed.
    pub fn register(&mut self, key: Vec<u32>, block: u32) -> Result<(), KvError> {
        let b = self.owned(block, "register")?;
        if self.fill[b] != self.block_tokens {
            return Err(KvError(format!(
                "register: block {block} holds {} of {} positions; only full blocks are indexed",
                self.fill[b], self.block_tokens
            )));
        }
        if let Some(&other) = self.index.get(&key) {
            if other != block {
                return Err(KvError(format!("register: key already names block {other}")));
            }
        }
        if let Some(old) = self.key_of.get(&block) {
            if *old != key {
                return Err(KvError(format!(
                    "register: block {block} is already indexed under another key; a block holds one prefix"
                )));
            }
        }
        self.index.insert(key.clone(), block);
        self.key_of.insert(block, key);
        Ok(())
    }

    /// The block registered under `key`, or None. The caller retains it if it keeps it.
    pub fn lookup(&self, key: &[u32]) -> Option<u32> {
        self.index.get(key).copied()
    }

    pub fn is_registered(&self, block: u32) -> bool {
        self.key_of.contains_key(&block)
    }

    /// (layers, kv_heads, head_dim) of the K/V storage; None for a pool without it.
    pub fn kv_shape(&self) -> Option<(usize, usize, usize)> {
        self.kv_shape
    }

    /// K of every block, [block][layer][slot][kv_head][head_dim]; empty without K/V storage.
    pub fn k(&self) -> &[f32] {
        &self.k
    }

    /// V of every block, laid out as `k`.
    pub fn v(&self) -> &[f32] {
        &self.v
    }

    pub fn k_mut(&mut self) -> &mut [f32] {
        &mut self.k
    }

    pub fn v_mut(&mut self) -> &mut [f32] {
        &mut self.v
    }

    /// Copy the K/V of block `from` onto block `to` (copy on write of a shared block); fills and
    /// references are untouched. Without K/V storage there is nothing to copy.
    ///
    /// Panics if either block does not exist: the signature has no error, and only the engine's
    /// own model code calls it, with blocks it allocated.
    pub fn copy_block(&mut self, from: u32, to: u32) {
        let (from, to) = (from as usize, to as usize);
        assert!(
            from < self.num_blocks && to < self.num_blocks,
            "copy_block: block {from} or {to} does not exist (the pool has blocks 0..{})",
            self.num_blocks - 1
        );
        let stride = self.k.len() / self.num_blocks; // floats per block
        let src = from * stride..(from + 1) * stride;
        self.k.copy_within(src.clone(), to * stride);
        self.v.copy_within(src, to * stride);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_hands_out_the_lowest_free_id() {
        let mut pool = KvPool::new(4, 2).unwrap();
        assert_eq!((pool.num_blocks(), pool.block_tokens(), pool.free_blocks()), (4, 2, 4));
        assert_eq!([pool.alloc().unwrap(), pool.alloc().unwrap(), pool.alloc().unwrap()], [0, 1, 2]);
        assert_eq!(pool.release(1), Ok(true));
        assert_eq!(pool.release(0), Ok(true));
        assert_eq!(pool.alloc(), Ok(0), "the min-heap gives 0 back first");
        assert_eq!(pool.alloc(), Ok(1));
        assert_eq!(pool.alloc(), Ok(3));
        assert!(pool.alloc().unwrap_err().0.contains("exhausted"));
        assert!(KvPool::new(0, 4).is_err() && KvPool::new(4, 0).is_err());
    }

    #[test]
    fn references_and_fills() {
        let mut pool = KvPool::new(3, 4).unwrap();
        let b = pool.alloc().unwrap();
        pool.set_fill(b, 3).unwrap();
        assert_eq!(pool.fill(b), Ok(3));
        assert!(pool.set_fill(b, 5).is_err());
        pool.retain(b).unwrap();
        assert_eq!(pool.refcount(b), Ok(2));
        assert_eq!(pool.release(b), Ok(false), "one reference left");
        assert_eq!(pool.fill(b), Ok(3));
        assert_eq!(pool.release(b), Ok(true));
        assert_eq!(pool.refcount(b), Ok(0));
        let e = pool.release(b).unwrap_err();
        assert_eq!(e.0, "release: block 0 is free; only an allocated block can be used");
        assert!(pool.fill(b).is_err() && pool.set_fill(b, 1).is_err() && pool.retain(b).is_err());
        let e = pool.release(7).unwrap_err();
        assert_eq!(e.0, "release: block 7 does not exist (the pool has blocks 0..2)");
        assert!(pool.refcount(3).is_err());
        assert_eq!(pool.alloc(), Ok(0));
        assert_eq!(pool.fill(0), Ok(0), "a fresh block holds nothing");
    }

    #[test]
    fn prefix_index() {
        let mut pool = KvPool::new(3, 2).unwrap();
        let (a, b) = (pool.alloc().unwrap(), pool.alloc().unwrap());
        assert!(pool.register(vec![1, 2], a).is_err(), "only full blocks are indexed");
        pool.set_fill(a, 2).unwrap();
        pool.set_fill(b, 2).unwrap();
        pool.register(vec![1, 2], a).unwrap();
        pool.register(vec![1, 2], a).unwrap(); // the same pair again is fine
        assert!(pool.register(vec![1, 2], b).is_err(), "a key names one block");
        assert!(pool.register(vec![3, 4], a).is_err(), "a block holds one prefix");
        assert_eq!(pool.lookup(&[1, 2]), Some(a));
        assert_eq!(pool.lookup(&[3, 4]), None);
        assert!(pool.is_registered(a) && !pool.is_registered(b));
        pool.retain(a).unwrap();
        pool.release(a).unwrap();
        assert_eq!(pool.lookup(&[1, 2]), Some(a), "still held once: still indexed");
        pool.release(a).unwrap();
        assert_eq!(pool.lookup(&[1, 2]), None, "freed: forgotten");
        assert!(!pool.is_registered(a));
    }

    #[test]
    fn kv_storage_layout_and_copy() {
        let mut pool = KvPool::with_kv(3, 2, (2, 1, 4)).unwrap();
        assert_eq!(pool.kv_shape(), Some((2, 1, 4)));
        let per_block = 2 * 2 * 4; // layers * slots * kv_heads * head_dim
        assert_eq!((pool.k().len(), pool.v().len()), (3 * per_block, 3 * per_block));
        let (block, layer, slot, head, dim) = (1, 1, 1, 0, 2);
        let at = (((block * 2 + layer) * 2 + slot) + head) * 4 + dim; // kv_heads = 1
        pool.k_mut()[at] = 1.5;
        pool.v_mut()[at] = -2.5;
        pool.copy_block(1, 2);
        assert_eq!((pool.k()[at + per_block], pool.v()[at + per_block]), (1.5, -2.5));
        assert_eq!((pool.k()[at], pool.v()[at]), (1.5, -2.5), "the source is untouched");
        let mut bare = KvPool::new(2, 2).unwrap();
        assert_eq!(bare.kv_shape(), None);
        assert!(bare.k().is_empty() && bare.v().is_empty());
        bare.copy_block(0, 1); // nothing to copy
    }
}
