# def prompt_lookup
seq = [int(t) for t in ctx]
if k < 0:
    raise SpecError("k < 0")
if not (1 <= min_ngram <= max_ngram):
    raise SpecError("bad n-gram bounds")
for width in reversed(range(min_ngram, min(max_ngram, len(seq) - 1) + 1)):
    pattern = tuple(seq[-width:])
    hits = [i for i in range(len(seq) - width) if tuple(seq[i:i + width]) == pattern]
    if hits:
        begin = hits[-1] + width
        return seq[begin:begin + k]
return []
# def ngram_draft
from collections import Counter
seq = list(ctx)
result = []

def follower(order):
    suffix = tuple(seq[-order:])
    seen = Counter(seq[i + order] for i in range(len(seq) - order) if tuple(seq[i:i + order]) == suffix)
    if not seen:
        return None
    return sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]

while len(result) < k:
    choice = next((c for c in (follower(o) for o in range(min(n - 1, len(seq) - 1), 0, -1)) if c is not None), None)
    if choice is None:
        break
    result.append(choice)
    seq.append(choice)
return result
# def residual
p = np.array(p, dtype=float)
q = np.array(q, dtype=float)
excess = np.where(p > q, p - q, 0.0)
z = excess.sum()
return excess / z if z > 0 else p / p.sum()
# def sample_dense
weights = np.array(p, dtype=float)
if (weights <= 0).all():
    raise SpecError("nothing to sample")
cdf = np.cumsum(weights / weights.sum())
return int(np.searchsorted(cdf, u, side="right"))
# def speculative_step
if q[x] == 0:
    raise SpecError("draft token has zero probability under q")
accept = u_accept * q[x] < p[x]
return (x, True) if accept else (sample_dense(residual(p, q), u_resample), False)
# def blocks_for
if block_tokens <= 0:
    raise SpecError("block size must be positive")
full, rest = divmod(tokens, block_tokens)
return full + (1 if rest else 0)
# def rollback
bt = pool.block_tokens
if not 0 <= keep <= bt * len(table):
    raise SpecError("keep out of range")
keep_blocks = -(-keep // bt)
dropped = table[keep_blocks:]
del table[keep_blocks:]
for block in reversed(dropped):
    pool.release(block)
if keep_blocks:
    pool.set_fill(table[-1], keep - bt * (keep_blocks - 1))
return len(dropped)
