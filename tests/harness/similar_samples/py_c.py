# def prompt_lookup
toks = list(ctx)
if k < 0 or min_ngram < 1 or max_ngram < min_ngram:
    raise SpecError(f"invalid arguments k={k} max_ngram={max_ngram} min_ngram={min_ngram}")
best = None
for length in range(min_ngram, max_ngram + 1):
    if length >= len(toks):
        break
    needle = toks[len(toks) - length:]
    found = None
    for j, _ in enumerate(toks[: len(toks) - length]):
        if toks[j:j + length] == needle:
            found = j
    if found is not None:
        best = (found, length)
if best is None:
    return []
j, length = best
return toks[j + length:j + length + k]
# def ngram_draft
tokens = list(ctx)
produced = []

def guess(m):
    if m <= 0:
        return None
    key = tuple(tokens[len(tokens) - m:])
    freq = {}
    for a in range(0, len(tokens) - m):
        if tuple(tokens[a:a + m]) != key:
            continue
        nxt = tokens[a + m]
        freq[nxt] = freq.get(nxt, 0) + 1
    if freq:
        top = max(freq.values())
        return min(tok for tok in freq if freq[tok] == top)
    return guess(m - 1)

for _ in range(k):
    g = guess(min(n - 1, len(tokens) - 1))
    if g is None:
        break
    produced.append(g)
    tokens.append(g)
return produced
# def residual
target = np.asarray(p, float)
draft = np.asarray(q, float)
leftover = target - draft
leftover[leftover < 0] = 0.0
norm = leftover.sum()
if norm <= 0:
    return target / target.sum()
return leftover / norm
# def sample_dense
acc = 0.0
last = None
for tok, w in enumerate(p):
    if w <= 0:
        continue
    last = tok
    acc += w
    if u < acc:
        return tok
if last is None:
    raise SpecError("all probabilities are zero")
return last
# def speculative_step
px, qx = float(p[x]), float(q[x])
if qx == 0.0:
    raise SpecError("q[x] == 0")
if u_accept < px / qx:
    return x, True
return sample_dense(residual(p, q), u_resample), False
# def blocks_for
if block_tokens < 1:
    raise SpecError("block_tokens must be at least 1")
return 0 if tokens == 0 else 1 + (tokens - 1) // block_tokens
# def rollback
per = pool.block_tokens
capacity = per * len(table)
if keep < 0 or keep > capacity:
    raise SpecError(f"keep={keep} is outside 0..{capacity}")
count = 0
while table and (len(table) - 1) * per >= keep:
    pool.release(table.pop())
    count += 1
if table:
    pool.set_fill(table[-1], keep - (len(table) - 1) * per)
return count
