// fn prompt_lookup
let total = ctx.len();
if min_ngram == 0 || min_ngram > max_ngram {
    return Err(SpecError(format!("invalid n-gram range {}..={}", min_ngram, max_ngram)));
}
let mut best: Option<(usize, usize)> = None;
for length in min_ngram..=max_ngram {
    if length >= total {
        break;
    }
    let needle = &ctx[total - length..];
    let mut found = None;
    for (j, window) in ctx[..total - 1].windows(length).enumerate() {
        if window == needle && j + length < total {
            found = Some(j);
        }
    }
    if let Some(j) = found {
        best = Some((j, length));
    }
}
Ok(match best {
    None => Vec::new(),
    Some((j, length)) => ctx[j + length..(j + length + k).min(total)].to_vec(),
})
// fn ngram_draft
fn guess(tokens: &[u32], m: usize) -> Option<u32> {
    if m == 0 {
        return None;
    }
    let key = &tokens[tokens.len() - m..];
    let mut freq: Vec<(u32, usize)> = Vec::new();
    for a in 0..tokens.len() - m {
        if &tokens[a..a + m] != key {
            continue;
        }
        let nxt = tokens[a + m];
        match freq.iter_mut().find(|e| e.0 == nxt) {
            Some(e) => e.1 += 1,
            None => freq.push((nxt, 1)),
        }
    }
    freq.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
    freq.first().map(|e| e.0).or_else(|| guess(tokens, m - 1))
}
if n < 1 {
    return Err(SpecError(String::from("n < 1")));
}
let mut tokens: Vec<u32> = ctx.iter().copied().collect();
let mut produced: Vec<u32> = Vec::new();
for _ in 0..k {
    match guess(&tokens, (n - 1).min(tokens.len().saturating_sub(1))) {
        Some(g) => {
            produced.push(g);
            tokens.push(g);
        }
        None => break,
    }
}
Ok(produced)
// fn residual
let mut leftover = vec![0.0f64; p.len()];
let mut norm = 0.0;
for i in 0..p.len() {
    let d = p[i] - q[i];
    if d > 0.0 {
        leftover[i] = d;
        norm += d;
    }
}
if norm <= 0.0 {
    let s: f64 = p.iter().sum();
    for i in 0..p.len() {
        leftover[i] = p[i] / s;
    }
    return Ok(leftover);
}
for v in leftover.iter_mut() {
    *v /= norm;
}
Ok(leftover)
// fn sample_dense
let mut cdf = Vec::with_capacity(p.len());
let mut acc = 0.0;
for &w in p {
    acc += w.max(0.0);
    cdf.push(acc);
}
if acc <= 0.0 {
    return Err(SpecError(String::from("all probabilities are zero")));
}
let idx = cdf.partition_point(|&c| c <= u);
Ok(idx.min(p.len() - 1))
// fn blocks_for
if block_tokens < 1 {
    return Err(SpecError(String::from("block_tokens < 1")));
}
Ok(if tokens == 0 { 0 } else { 1 + (tokens - 1) / block_tokens })
// fn rollback
let per = pool.block_tokens();
let capacity = per * table.len();
if keep > capacity {
    return Err(SpecError(format!("keep={} is outside 0..={}", keep, capacity)));
}
let mut count = 0usize;
while !table.is_empty() && (table.len() - 1) * per >= keep {
    let b = table.pop().expect("non-empty");
    pool.release(b).map_err(|e| SpecError(format!("{}", e)))?;
    count += 1;
}
if !table.is_empty() {
    let last = table[table.len() - 1];
    pool.set_fill(last, keep - (table.len() - 1) * per).map_err(|e| SpecError(format!("{}", e)))?;
}
Ok(count)
