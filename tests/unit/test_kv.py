"""KvPool: unit cases, and a stateful property against a model of who holds which block."""
import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tinyllm.kv import KvError, KvPool


def test_alloc_hands_out_lowest_free_id():
    pool = KvPool(4, 2)
    assert [pool.alloc(), pool.alloc(), pool.alloc()] == [0, 1, 2]
    assert pool.release(1) is True
    assert pool.alloc() == 1
    assert pool.free_blocks() == 1


def test_exhausted_pool_raises():
    pool = KvPool(2, 2)
    pool.alloc(), pool.alloc()
    with pytest.raises(KvError, match="exhausted"):
        pool.alloc()


def test_refcounts_and_last_release():
    pool = KvPool(2, 4)
    b = pool.alloc()
    pool.retain(b)
    assert pool.refcount(b) == 2
    assert pool.release(b) is False
    assert pool.refcount(b) == 1 and pool.free_blocks() == 1
    assert pool.release(b) is True
    assert pool.refcount(b) == 0 and pool.free_blocks() == 2


def test_double_release_raises():
    pool = KvPool(2, 4)
    b = pool.alloc()
    pool.release(b)
    with pytest.raises(KvError, match="free"):
        pool.release(b)
    assert pool.free_blocks() == 2 and pool.refcount(b) == 0


@pytest.mark.parametrize("op", ["retain", "release", "fill"])
def test_free_or_missing_block_refused(op):
    pool = KvPool(2, 4)
    with pytest.raises(KvError):
        getattr(pool, op)(0)
    with pytest.raises(KvError, match="does not exist"):
        getattr(pool, op)(2)


def test_set_fill_bounds():
    pool = KvPool(1, 4)
    b = pool.alloc()
    pool.set_fill(b, 4)
    assert pool.fill(b) == 4
    pool.set_fill(b, 0)
    assert pool.fill(b) == 0
    with pytest.raises(KvError, match="do not fit"):
        pool.set_fill(b, 5)
    with pytest.raises(KvError):
        pool.set_fill(b, -1)
    assert pool.fill(b) == 0


def test_fill_resets_on_reuse():
    pool = KvPool(1, 4)
    b = pool.alloc()
    pool.set_fill(b, 3)
    pool.release(b)
    assert pool.alloc() == b and pool.fill(b) == 0


def test_refcount_of_missing_block():
    with pytest.raises(KvError):
        KvPool(2, 2).refcount(2)


@pytest.mark.parametrize("n,b", [(0, 4), (4, 0)])
def test_bad_pool_shape(n, b):
    with pytest.raises(KvError):
        KvPool(n, b)


def test_kv_storage_shape():
    pool = KvPool(3, 4, kv_shape=(2, 1, 8))
    assert pool.k.shape == pool.v.shape == (3, 2, 4, 1, 8)
    assert KvPool(3, 4).k is None


def test_only_full_blocks_register():
    pool = KvPool(2, 4)
    b = pool.alloc()
    pool.set_fill(b, 3)
    with pytest.raises(KvError, match="only full blocks"):
        pool.register("p", b)
    assert pool.lookup("p") is None and not pool.is_registered(b)
    pool.set_fill(b, 4)
    pool.register("p", b)
    assert pool.lookup("p") == b and pool.is_registered(b)


def test_registered_block_leaves_the_index_when_freed():
    pool = KvPool(2, 2)
    b = pool.alloc()
    pool.set_fill(b, 2)
    pool.register(("a", 1), b)
    pool.retain(b)  # a second sequence shares it
    pool.release(b)
    assert pool.lookup(("a", 1)) == b  # still owned: still indexed
    pool.release(b)
    assert pool.lookup(("a", 1)) is None and not pool.is_registered(b)
    again = pool.alloc()
    assert again == b and not pool.is_registered(again)


def test_register_conflicts():
    pool = KvPool(2, 1)
    a, b = pool.alloc(), pool.alloc()
    pool.set_fill(a, 1), pool.set_fill(b, 1)
    pool.register("k", a)
    pool.register("k", a)  # idempotent
    with pytest.raises(KvError, match="already names block 0"):
        pool.register("k", b)
    with pytest.raises(KvError, match="another key"):
        pool.register("k2", a)  # would leave "k" pointing at a block after it is freed
    pool.release(a)
    assert pool.lookup("k") is None and pool.lookup("k2") is None


def test_register_free_block_refused():
    pool = KvPool(1, 1)
    with pytest.raises(KvError):
        pool.register("k", 0)


class PoolMachine(RuleBasedStateMachine):
    """The model: `held` is a list of references (block ids, one per retain/alloc), `keys` key -> block."""

    def __init__(self):
        super().__init__()
        self.pool = KvPool(5, 3)
        self.held: list[int] = []
        self.keys: dict = {}
        self.next_key = 0
        self.ever_keys: list = []

    @rule()
    def alloc(self):
        if len(set(self.held)) == self.pool.num_blocks:
            with pytest.raises(KvError):
                self.pool.alloc()
            return
        free = [b for b in range(self.pool.num_blocks) if b not in self.held]
        b = self.pool.alloc()
        assert b == min(free)
        self.held.append(b)

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 10**6))
    def retain(self, i):
        b = self.held[i % len(self.held)]
        self.pool.retain(b)
        self.held.append(b)

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 10**6))
    def release(self, i):
        b = self.held.pop(i % len(self.held))
        last = self.pool.release(b)
        assert last == (b not in self.held)
        if last:
            self.keys = {k: v for k, v in self.keys.items() if v != b}

    @rule(b=st.integers(0, 4))
    def release_free_raises(self, b):
        if b not in self.held:
            with pytest.raises(KvError):
                self.pool.release(b)

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 10**6), n=st.integers(-1, 4))
    def set_fill(self, i, n):
        b = self.held[i % len(self.held)]
        if 0 <= n <= 3:
            self.pool.set_fill(b, n)
            assert self.pool.fill(b) == n
        else:
            before = self.pool.fill(b)
            with pytest.raises(KvError):
                self.pool.set_fill(b, n)
            assert self.pool.fill(b) == before

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 10**6))
    def register(self, i):
        b = self.held[i % len(self.held)]
        key = ("prefix", self.next_key)
        self.next_key += 1
        if self.pool.fill(b) == 3 and b not in self.keys.values():
            self.pool.register(key, b)
            self.keys[key] = b
            self.ever_keys.append(key)
        else:
            with pytest.raises(KvError):
                self.pool.register(key, b)

    @invariant()
    def refcounts_match_the_model(self):
        for b in range(self.pool.num_blocks):
            assert self.pool.refcount(b) == self.held.count(b) >= 0

    @invariant()
    def free_xor_owned(self):
        free = list(self.pool._free)
        assert len(free) == len(set(free))  # nothing on the free list twice
        for b in range(self.pool.num_blocks):
            assert (b in free) != (self.pool.refcount(b) > 0)
        owned = len(set(self.held))
        assert self.pool.free_blocks() + owned == self.pool.num_blocks

    @invariant()
    def index_names_only_owned_blocks(self):
        for key in self.ever_keys:
            assert self.pool.lookup(key) == self.keys.get(key)
        for b in range(self.pool.num_blocks):
            assert self.pool.is_registered(b) == (b in self.keys.values())

    def teardown(self):
        for b in list(self.held):
            self.pool.release(b)
        assert self.pool.free_blocks() == self.pool.num_blocks
        assert all(self.pool.refcount(b) == 0 for b in range(self.pool.num_blocks))
        assert all(self.pool.lookup(k) is None for k in self.ever_keys)


PoolMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestPoolMachine = PoolMachine.TestCase
