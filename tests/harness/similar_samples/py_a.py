# def prompt_lookup
if k < 0 or not isinstance(k, int):
    raise SpecError(f"k must be a non-negative integer, got {k!r}")
if min_ngram < 1 or max_ngram < min_ngram:
    raise SpecError("need 1 <= min_ngram <= max_ngram")
tokens = list(ctx)
size = len(tokens)
n = min(max_ngram, size - 1)
while n >= min_ngram:
    tail = tokens[size - n:]
    start = size - n - 1
    while start >= 0:
        if tokens[start:start + n] == tail:
            end = min(start + n + k, size)
            return tokens[start + n:end]
        start -= 1
    n -= 1
return []
# def ngram_draft
history = list(ctx)
out = []
for _ in range(k):
    picked = None
    order = min(n - 1, len(history) - 1)
    while order > 0 and picked is None:
        key = history[len(history) - order:]
        tally = {}
        for pos in range(len(history) - order):
            if history[pos:pos + order] == key:
                follower = history[pos + order]
                tally[follower] = tally.get(follower, 0) + 1
        if tally:
            best = max(tally.values())
            picked = min(t for t, c in tally.items() if c == best)
        order -= 1
    if picked is None:
        break
    out.append(picked)
    history.append(picked)
return out
# def residual
pa = np.asarray(p, dtype=np.float64)
qa = np.asarray(q, dtype=np.float64)
if pa.shape != qa.shape:
    raise SpecError("p and q must have the same length")
diff = np.clip(pa - qa, 0.0, None)
total = float(np.cumsum(diff)[-1])
if total > 0:
    return diff / total
return pa / float(np.cumsum(pa)[-1])
# def sample_dense
probs = np.asarray(p, dtype=np.float64)
if not 0.0 <= u < 1.0:
    raise SpecError(f"u must be in [0, 1), got {u}")
if probs.sum() <= 0:
    raise SpecError("p has no mass")
return sample(probs, u)
# def speculative_step
pa = np.asarray(p, dtype=np.float64)
qa = np.asarray(q, dtype=np.float64)
if qa[x] <= 0:
    raise SpecError(f"q[{x}] is zero")
ratio = pa[x] / qa[x]
if u_accept < ratio:
    return x, True
fixed = residual(pa, qa)
return sample_dense(fixed, u_resample), False
# def blocks_for
if block_tokens < 1:
    raise SpecError("block_tokens must be >= 1")
return (tokens + block_tokens - 1) // block_tokens
# def rollback
size = pool.block_tokens
if keep < 0 or keep > len(table) * size:
    raise SpecError(f"cannot keep {keep} positions")
wanted = blocks_for(keep, size)
freed = 0
while len(table) > wanted:
    last = table.pop()
    pool.release(last)
    freed += 1
if wanted > 0:
    pool.set_fill(table[-1], keep - (wanted - 1) * size)
return freed
