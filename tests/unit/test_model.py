"""The numpy llama, its loader, the paged runner and RunnerTarget (reference/tinyllm/model, infer/runner_target.py).

Tolerance: a row the paged runner returns and the row of a fresh `forward_full` of the same prefix
are the same float32 computation in a different order (padded, masked keys; other matmul shapes), so
they agree to ATOL = 1e-4 on logits of magnitude ~10 (observed ~1e-5). The shipped model's greedy
margins on the prompts below are asserted to exceed MARGIN = 1e-2, far above that noise, so greedy
token sequences compare exactly.
"""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from tinyllm.infer.runner_target import RunnerTarget
from tinyllm.infer.sampling import SamplingParams
from tinyllm.infer import spec
from tinyllm.model import ModelError, PagedRunner, load_llama, make_pool
from tinyllm.model.llama import expected_shapes, read_safetensors, rope, rope_tables, LlamaConfig

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "fixtures/models/tiny-llama"
ATOL = 1e-4
MARGIN = 1e-2
B = 4  # tokens per block in these tests: small, so every test crosses many block boundaries


@pytest.fixture(scope="module")
def model():
    return load_llama(TINY)


def target_for(model, num_blocks=160, block_tokens=B):
    pool = make_pool(model, num_blocks, block_tokens)
    return RunnerTarget(PagedRunner(model, pool), pool), pool


def words(rng, n):
    return [int(t) for t in rng.integers(2, 256, size=n)]


# ---- the loader ---------------------------------------------------------------------------------

SMALL = {"vocab_size": 32, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
         "max_position_embeddings": 64}


def write_checkpoint(root: Path, config=SMALL, drop=(), reshape=None, lm_head=True, seed=0) -> dict:
    from safetensors.numpy import save_file
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors = {n: (rng.standard_normal(s) * 0.2).astype(np.float32)
               for n, s in expected_shapes(LlamaConfig.from_dict(config)).items()}
    if not lm_head:
        del tensors["lm_head.weight"]
    for n in drop:
        del tensors[n]
    if reshape:
        tensors[reshape[0]] = np.zeros(reshape[1], dtype=np.float32)
    save_file(tensors, str(root / "model.safetensors"))
    (root / "config.json").write_text(json.dumps(config))
    (root / "SHA256SUMS").write_text("".join(
        f"{hashlib.sha256((root / n).read_bytes()).hexdigest()}  {n}\n" for n in ("config.json", "model.safetensors")))
    return tensors


def test_a_complete_checkpoint_loads_untied(tmp_path):
    tensors = write_checkpoint(tmp_path)
    m = load_llama(tmp_path)
    assert np.array_equal(m.lm_head_t, tensors["lm_head.weight"].T)
    assert m.forward_full([1, 2, 3]).shape == (3, 32)


def test_missing_lm_head_ties_unless_config_says_untied(tmp_path):
    tensors = write_checkpoint(tmp_path / "a", lm_head=False)
    assert np.array_equal(load_llama(tmp_path / "a").lm_head_t, tensors["model.embed_tokens.weight"].T)
    write_checkpoint(tmp_path / "b", config={**SMALL, "tie_word_embeddings": False}, lm_head=False)
    with pytest.raises(ModelError, match=r"lm_head\.weight is missing"):
        load_llama(tmp_path / "b")


def test_refuses_a_missing_tensor_naming_it(tmp_path):
    write_checkpoint(tmp_path, drop=["model.layers.1.mlp.up_proj.weight"])
    with pytest.raises(ModelError, match=r"model\.layers\.1\.mlp\.up_proj\.weight is missing.*remedy"):
        load_llama(tmp_path)


def test_refuses_a_wrong_shape_naming_it(tmp_path):
    write_checkpoint(tmp_path, reshape=("model.layers.0.self_attn.k_proj.weight", (16, 16)))
    with pytest.raises(ModelError, match=r"model\.layers\.0\.self_attn\.k_proj\.weight has shape \[16, 16\].*\[8, 16\]"):
        load_llama(tmp_path)


def test_refuses_a_bad_checksum_naming_the_file(tmp_path):
    write_checkpoint(tmp_path)
    raw = bytearray((tmp_path / "model.safetensors").read_bytes())
    raw[-1] ^= 0x01  # one bit of one weight
    (tmp_path / "model.safetensors").write_bytes(bytes(raw))
    with pytest.raises(ModelError, match=r"model\.safetensors: sha256 .* does not match.*remedy"):
        load_llama(tmp_path)


def test_refuses_an_unverifiable_checkpoint_unless_asked(tmp_path):
    write_checkpoint(tmp_path)
    (tmp_path / "SHA256SUMS").unlink()
    with pytest.raises(ModelError, match="no SHA256SUMS"):
        load_llama(tmp_path)
    load_llama(tmp_path, verify=False)


def test_bf16_tensors_are_read_as_their_float32_values(tmp_path):
    values = np.array([1.0, -2.5, 0.15625, 2.0 ** 100], dtype=np.float32)
    bf16 = (values.view(np.uint32) >> 16).astype("<u2")  # exact for these values
    header = json.dumps({"t": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}).encode()
    (tmp_path / "x.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + bf16.tobytes())
    got = read_safetensors(tmp_path / "x.safetensors")["t"]
    assert got.dtype == np.float32 and np.array_equal(got, values.reshape(2, 2))


def test_the_shipped_model_verifies_and_matches_torch(model):
    golden = json.loads((TINY / "golden_logits.json").read_text())
    got = model.forward_full(golden["ids"])[-8:]
    assert np.allclose(got, np.array(golden["last_rows"]), atol=ATOL)  # the JSON keeps 5 decimals


def test_rope_is_hf_rotate_half():
    """Dim i pairs with dim i + hd/2 (not 2i with 2i+1), and position 0 is the identity."""
    hd = 8
    cos, sin = rope_tables(np.array([0, 3]), hd, 10000.0)
    x = np.zeros((2, 1, hd), dtype=np.float32)
    x[:, 0, 1] = 1.0
    y = rope(x, cos, sin)
    angle = 3 * 10000.0 ** (-2 / hd)
    assert np.allclose(y[0, 0], x[0, 0])
    want = np.zeros(hd)
    want[1], want[1 + hd // 2] = np.cos(angle), np.sin(angle)
    assert np.allclose(y[1, 0], want, atol=1e-6)


# ---- the paged runner and RunnerTarget on the shipped model -------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_extend_row_equals_a_fresh_run_of_its_prefix(model, seed):
    rng = np.random.default_rng(seed)
    ids = words(rng, 37)
    tgt, _ = target_for(model)
    rows = tgt.extend(ids)
    assert len(rows) == len(ids)
    for i, row in enumerate(rows):
        fresh = model.forward_full(ids[:i + 1])[-1]
        assert row.dtype == np.float32
        np.testing.assert_allclose(row, fresh, rtol=0, atol=ATOL, err_msg=f"position {i}")


@pytest.mark.parametrize("cuts", [[1, 2, 3], [5, 8, 13], [4, 4, 4, 4], [30]])
def test_extend_in_chunks_equals_one_chunk(model, cuts):
    ids = words(np.random.default_rng(7), 40)
    whole, _ = target_for(model)
    want = np.array(whole.extend(ids))
    parts, _ = target_for(model)
    got, at = [], 0
    for n in cuts + [len(ids)]:
        got += parts.extend(ids[at:min(at + n, len(ids))])
        at = min(at + n, len(ids))
    np.testing.assert_allclose(np.array(got), want, rtol=0, atol=ATOL)


def test_one_batch_of_two_requests_scores_each_against_its_own_table(model):
    rng = np.random.default_rng(3)
    a, b = words(rng, 9), words(rng, 14)
    pool = make_pool(model, 16, B)
    runner = PagedRunner(model, pool)
    ta, tb = [pool.alloc() for _ in range(3)], [pool.alloc() for _ in range(4)]
    runner.forward([(t, i, ta) for i, t in enumerate(a[:6])] + [(t, i, tb) for i, t in enumerate(b[:10])])
    rows = runner.forward([(t, 6 + i, ta) for i, t in enumerate(a[6:])] + [(t, 10 + i, tb) for i, t in enumerate(b[10:])])
    np.testing.assert_allclose(rows[:3], model.forward_full(a)[6:], atol=ATOL)
    np.testing.assert_allclose(rows[3:], model.forward_full(b)[10:], atol=ATOL)


def test_blocks_follow_cached_positions_and_all_come_back(model):
    rng = np.random.default_rng(11)
    tgt, pool = target_for(model, num_blocks=40)
    for _ in range(25):
        if tgt.cached() and rng.random() < 0.4:
            tgt.truncate(int(rng.integers(0, tgt.cached() + 1)))
        else:
            tgt.extend(words(rng, int(rng.integers(1, 9))))
        assert tgt.blocks_held() == spec.blocks_for(tgt.cached(), B)
        assert pool.free_blocks() == 40 - tgt.blocks_held()
        for i, blk in enumerate(tgt.table):
            assert pool.fill(blk) == min(B, tgt.cached() - i * B)
    tgt.release_all()
    assert pool.free_blocks() == 40 and tgt.cached() == 0


def test_an_extend_the_pool_cannot_hold_changes_nothing(model):
    tgt, pool = target_for(model, num_blocks=3)
    tgt.extend(words(np.random.default_rng(4), 6))
    with pytest.raises(spec.SpecError, match="cannot hold 13 positions"):
        tgt.extend(words(np.random.default_rng(5), 7))
    assert tgt.cached() == 6 and tgt.blocks_held() == 2 and pool.free_blocks() == 1


def test_a_block_a_rejected_draft_filled_is_never_registered(model):
    rng = np.random.default_rng(5)
    prompt, draft = words(rng, 8), words(rng, 8)
    tgt, pool = target_for(model)
    tgt.extend(prompt)
    tgt.truncate(8)  # the prompt is verified: blocks 0 and 1 enter the index
    assert [pool.lookup(tuple(prompt[:4])), pool.lookup(tuple(prompt))] == tgt.table[:2]
    tgt.extend(draft)  # fills blocks 2 and 3 with draft tokens
    filled = tgt.table[2:]
    assert not any(pool.is_registered(blk) for blk in filled)  # extend never registers
    tgt.truncate(9)  # one draft token kept: block 2 partial, block 3 released
    assert len(tgt.table) == 3 and not pool.is_registered(tgt.table[2])
    assert pool.lookup(tuple(prompt + draft[:4])) is None and pool.lookup(tuple(prompt + draft)) is None
    assert pool.refcount(filled[1]) == 0


def test_cutting_into_a_shared_indexed_block_copies_it_first(model):
    rng = np.random.default_rng(6)
    ids = words(rng, 8)
    tgt, pool = target_for(model)
    tgt.extend(ids)
    tgt.truncate(8)
    shared = tgt.table[1]
    pool.retain(shared)  # another request holds it through the prefix cache
    k_before = pool.k[shared].copy()
    tgt.truncate(6)
    rows = tgt.extend(words(rng, 2))  # positions 6, 7 go into a private copy
    assert tgt.table[1] != shared and pool.refcount(shared) == 1
    assert pool.is_registered(shared) and pool.fill(shared) == B and np.array_equal(pool.k[shared], k_before)
    np.testing.assert_allclose(rows[-1], model.forward_full(tgt.tokens)[-1], atol=ATOL)


def quote_prompt(rng):
    doc = words(rng, 60)
    return [0] + doc + words(rng, 6) + doc[10:14]


PROMPTS = {"quote": quote_prompt, "random": lambda rng: [0] + words(rng, 20)}


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_speculation_on_the_model_emits_plain_greedy_tokens(model, name):
    prompt = PROMPTS[name](np.random.default_rng(21))
    greedy = SamplingParams()
    runs = {}
    for draft, k in [("none", 1), ("prompt_lookup", 2), ("prompt_lookup", 4), ("prompt_lookup", 8), ("ngram", 4)]:
        tgt, pool = target_for(model)
        g = spec.generate(tgt, spec.SpecConfig.parse(draft, k), prompt, greedy, seed=0, max_new=40, eos=[])
        assert tgt.cached() == len(prompt) + len(g.tokens) - 1  # the last emitted token is still pending
        assert tgt.blocks_held() == spec.blocks_for(tgt.cached(), B)
        ctx = prompt + g.tokens
        full = [i for i, blk in enumerate(tgt.table) if pool.fill(blk) == B]
        assert [pool.lookup(tuple(ctx[:(i + 1) * B])) for i in full] == [tgt.table[i] for i in full]
        assert sum(pool.is_registered(b) for b in range(pool.num_blocks)) == len(full)  # nothing stale
        tgt.release_all()
        assert pool.free_blocks() == pool.num_blocks
        runs[(draft, k)] = g
    plain = runs[("none", 1)]
    logits = model.forward_full(prompt + plain.tokens)[len(prompt) - 1:-1]  # the row that chose each token
    top2 = np.sort(logits, axis=1)[:, -2:]
    assert (top2[:, 1] - top2[:, 0]).min() > MARGIN  # greedy is robust to float reordering here
    for key, g in runs.items():
        assert g.tokens == plain.tokens, key
    if name == "quote":
        assert runs[("prompt_lookup", 4)].stats.target_calls * 2 < plain.stats.target_calls
