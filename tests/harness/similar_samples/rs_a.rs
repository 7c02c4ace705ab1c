// fn prompt_lookup
if min_ngram < 1 || max_ngram < min_ngram {
    return Err(SpecError(format!("need 1 <= min_ngram <= max_ngram, got {} and {}", min_ngram, max_ngram)));
}
let t = ctx.len();
let mut n = max_ngram.min(t.saturating_sub(1));
while n >= min_ngram {
    let tail = &ctx[t - n..];
    let mut start = t - n;
    while start > 0 {
        start -= 1;
        if &ctx[start..start + n] == tail {
            let end = (start + n + k).min(t);
            return Ok(ctx[start + n..end].to_vec());
        }
    }
    n -= 1;
}
Ok(Vec::new())
// fn ngram_draft
if n < 1 {
    return Err(SpecError(format!("n must be >= 1, got {}", n)));
}
let mut history: Vec<u32> = ctx.to_vec();
let mut out = Vec::with_capacity(k);
while out.len() < k {
    let mut picked: Option<u32> = None;
    let mut order = (n - 1).min(history.len().saturating_sub(1));
    while order > 0 && picked.is_none() {
        let key = history[history.len() - order..].to_vec();
        let mut tally: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
        for pos in 0..history.len() - order {
            if history[pos..pos + order] == key[..] {
                *tally.entry(history[pos + order]).or_insert(0) += 1;
            }
        }
        if let Some(best) = tally.values().copied().max() {
            picked = tally.iter().find(|(_, c)| **c == best).map(|(t, _)| *t);
        }
        order -= 1;
    }
    match picked {
        Some(tok) => {
            out.push(tok);
            history.push(tok);
        }
        None => break,
    }
}
Ok(out)
// fn residual
if p.len() != q.len() {
    return Err(SpecError("p and q differ in length".into()));
}
let diff: Vec<f64> = p.iter().zip(q).map(|(a, b)| (a - b).max(0.0)).collect();
let total: f64 = diff.iter().sum();
if total > 0.0 {
    Ok(diff.iter().map(|d| d / total).collect())
} else {
    let s: f64 = p.iter().sum();
    Ok(p.iter().map(|v| v / s).collect())
}
// fn sample_dense
if !(0.0..1.0).contains(&u) {
    return Err(SpecError(format!("u must be in [0, 1), got {}", u)));
}
let mut acc = 0.0;
let mut last = None;
for (i, &w) in p.iter().enumerate() {
    if w > 0.0 {
        acc += w;
        last = Some(i);
        if u < acc {
            return Ok(i);
        }
    }
}
last.ok_or_else(|| SpecError("p has no mass".into()))
// fn blocks_for
if block_tokens == 0 {
    return Err(SpecError("block_tokens must be >= 1".into()));
}
Ok((tokens + block_tokens - 1) / block_tokens)
// fn rollback
let size = pool.block_tokens();
if keep > table.len() * size {
    return Err(SpecError(format!("cannot keep {} positions", keep)));
}
let wanted = blocks_for(keep, size)?;
let mut freed = 0;
while table.len() > wanted {
    let last = table.pop().unwrap();
    pool.release(last).map_err(|e| SpecError(format!("pool refused: {}", e)))?;
    freed += 1;
}
if wanted > 0 {
    let fill = keep - (wanted - 1) * size;
    pool.set_fill(*table.last().unwrap(), fill).map_err(|e| SpecError(e.to_string()))?;
}
Ok(freed)
