// fn prompt_lookup
if k == 0 {
    return Ok(vec![]);
}
if !(1..=max_ngram).contains(&min_ngram) {
    return Err(SpecError("bad n-gram bounds".to_string()));
}
let len = ctx.len();
for width in (min_ngram..=max_ngram.min(len.saturating_sub(1))).rev() {
    let pattern = &ctx[len - width..];
    if let Some(i) = (0..len - width).rev().find(|&i| ctx[i..].starts_with(pattern)) {
        return Ok(ctx.iter().skip(i + width).take(k).copied().collect());
    }
}
Ok(vec![])
// fn ngram_draft
use std::collections::HashMap;
if n == 0 {
    return Err(SpecError("n is zero".to_string()));
}
let mut seq = ctx.to_vec();
let mut drafted = vec![];
let follower = |s: &[u32], m: usize| -> Option<u32> {
    let suffix = &s[s.len() - m..];
    let mut counts: HashMap<u32, u32> = HashMap::new();
    s.windows(m + 1).filter(|w| &w[..m] == suffix).for_each(|w| *counts.entry(w[m]).or_default() += 1);
    counts.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0))).map(|(tok, _)| tok)
};
while drafted.len() < k {
    let top = (n - 1).min(seq.len().saturating_sub(1));
    let next = (1..=top).rev().find_map(|m| follower(&seq, m));
    let Some(tok) = next else { break };
    drafted.push(tok);
    seq.push(tok);
}
Ok(drafted)
// fn residual
let excess: Vec<f64> = p.iter().zip(q.iter()).map(|(&pi, &qi)| if pi > qi { pi - qi } else { 0.0 }).collect();
let z = excess.iter().fold(0.0, |s, v| s + v);
let (src, norm) = if z > 0.0 { (excess, z) } else { (p.to_vec(), p.iter().fold(0.0, |s, v| s + v)) };
Ok(src.into_iter().map(|v| v / norm).collect())
// fn sample_dense
let total: f64 = p.iter().filter(|w| **w > 0.0).sum();
if total <= 0.0 {
    return Err(SpecError("nothing to sample".to_string()));
}
let mut running = 0.0;
p.iter()
    .position(|&w| {
        running += w;
        w > 0.0 && u < running
    })
    .or_else(|| p.iter().rposition(|&w| w > 0.0))
    .ok_or_else(|| SpecError("nothing to sample".to_string()))
// fn blocks_for
match block_tokens {
    0 => Err(SpecError("block size must be positive".to_string())),
    b => Ok(tokens / b + usize::from(tokens % b != 0)),
}
// fn rollback
let bt = pool.block_tokens();
if keep > bt * table.len() {
    return Err(SpecError("keep out of range".to_string()));
}
let keep_blocks = (keep + bt - 1) / bt;
let dropped: Vec<u32> = table.drain(keep_blocks..).collect();
for block in dropped.iter().rev() {
    pool.release(*block).map_err(|e| SpecError(e.to_string()))?;
}
if let Some(&last) = table.last() {
    pool.set_fill(last, keep - bt * (keep_blocks - 1)).map_err(|e| SpecError(e.to_string()))?;
}
Ok(dropped.len())
