//! Arguments in, answers out: every JSON field converted to its Rust type, and every failure as the
//! protocol's error object (spec/protocol.md section 4).
//!
//! A field that is absent is a `KeyError` (as Python's `args["ctx"]`). A field that is present but
//! cannot be held by the Rust parameter's type (a negative id, `k` 4.0 or `true`, a matrix where a
//! row is due) is answered as the contract's refusal, `SpecError` with `spec_error` true, without
//! calling the engine (spec/rust.md section 3); the converters below return the reason as a
//! `String`, and each op says which error it becomes.

use tl_json::{f64_json, Json};

/// One failed request, as the error object of an answer.
#[derive(Debug, Clone)]
pub struct Failure {
    pub ty: String,
    pub message: String,
    pub spec_error: bool,
    pub traceback: String,
    pub frames: Vec<Json>,
}

impl Failure {
    pub fn new(ty: &str, message: impl Into<String>) -> Failure {
        Failure { ty: ty.to_string(), message: message.into(), spec_error: false, traceback: String::new(), frames: Vec::new() }
    }

    /// The contract's refusal (`spec_error` true).
    pub fn spec(message: impl Into<String>) -> Failure {
        Failure { spec_error: true, ..Failure::new("SpecError", message) }
    }

    /// A missing field, worded as Python's `str(KeyError(name))`.
    pub fn key(name: &str) -> Failure {
        Failure::new("KeyError", py_repr(name))
    }

    pub fn to_json(&self) -> Json {
        Json::Obj(vec![
            ("type".into(), Json::Str(self.ty.clone())),
            ("message".into(), Json::Str(self.message.clone())),
            ("spec_error".into(), Json::Bool(self.spec_error)),
            ("traceback".into(), Json::Str(self.traceback.clone())),
            ("frames".into(), Json::Arr(self.frames.clone())),
        ])
    }
}

pub type Res<T> = Result<T, Failure>;

/// A required field of an object (`args`, `cfg`): absent is a KeyError.
pub fn req<'a>(obj: &'a Json, name: &str) -> Res<&'a Json> {
    obj.get(name).ok_or_else(|| Failure::key(name))
}

/// A Python `repr` of a string: single quotes unless it holds one and no double quote.
pub fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// A value as Python would print it in a message (`repr`): strings quoted, the rest as JSON.
pub fn show(v: &Json) -> String {
    match v {
        Json::Str(s) => py_repr(s),
        Json::Bool(true) => "True".into(),
        Json::Bool(false) => "False".into(),
        Json::Null => "None".into(),
        Json::Float(x) => format!("{x:?}"),
        other => {
            let text = other.dump();
            if text.len() > 80 {
                format!("{}...", &text[..text.char_indices().nth(77).map_or(text.len(), |(i, _)| i)])
            } else {
                text
            }
        }
    }
}

/// What a value is, for a message: "-1", "4.0 (a float)", "true (a boolean)", "a list", ...
pub fn describe(v: &Json) -> String {
    match v {
        Json::Null => "null".into(),
        Json::Bool(b) => format!("{b} (a boolean)"),
        Json::Int(i) => i.to_string(),
        Json::Float(x) => format!("{x:?} (a float)"),
        Json::Str(s) => format!("{} (a string)", py_repr(s)),
        Json::Arr(_) => "a list".into(),
        Json::Obj(_) => "an object".into(),
    }
}

/// An integer in `lo..=hi`.
fn int_in(v: &Json, what: &str, lo: i128, hi: i128, expected: &str) -> Result<i128, String> {
    match v.as_i128() {
        Some(i) if lo <= i && i <= hi => Ok(i),
        _ => Err(format!("{what} is {}, expected {expected}", describe(v))),
    }
}

pub fn to_usize(v: &Json, what: &str) -> Result<usize, String> {
    int_in(v, what, 0, usize::MAX as i128, "an integer >= 0 (usize)").map(|i| i as usize)
}

pub fn to_u64(v: &Json, what: &str) -> Result<u64, String> {
    int_in(v, what, 0, u64::MAX as i128, "an integer in [0, 2^64) (u64)").map(|i| i as u64)
}

pub fn to_i64(v: &Json, what: &str) -> Result<i64, String> {
    int_in(v, what, i64::MIN as i128, i64::MAX as i128, "an integer (i64)").map(|i| i as i64)
}

pub fn to_u32(v: &Json, what: &str) -> Result<u32, String> {
    int_in(v, what, 0, u32::MAX as i128, "an id in [0, 2^32) (u32)").map(|i| i as u32)
}

/// A float: a JSON number (an integer too) or "inf", "-inf", "nan"; never a boolean.
pub fn to_f64(v: &Json, what: &str) -> Result<f64, String> {
    v.as_f64().ok_or_else(|| format!("{what} is {}, expected a number", describe(v)))
}

fn list<'a>(v: &'a Json, what: &str, of: &str) -> Result<&'a [Json], String> {
    v.as_array().ok_or_else(|| format!("{what} is {}, expected a list of {of}", describe(v)))
}

/// Token ids (or block ids): `&[u32]`.
pub fn to_u32s(v: &Json, what: &str) -> Result<Vec<u32>, String> {
    let items = list(v, what, "ids")?;
    items.iter().enumerate().map(|(i, x)| to_u32(x, &format!("{what}[{i}]"))).collect()
}

/// Integers of any size (ids a Python function takes as they come): `Vec<i128>`.
pub fn to_ints(v: &Json, what: &str) -> Result<Vec<i128>, String> {
    let items = list(v, what, "integers")?;
    items.iter().enumerate().map(|(i, x)| x.as_i128().ok_or_else(|| format!("{what}[{i}] is {}, expected an integer", describe(x)))).collect()
}

pub fn to_f64s(v: &Json, what: &str) -> Result<Vec<f64>, String> {
    let items = list(v, what, "numbers")?;
    items.iter().enumerate().map(|(i, x)| to_f64(x, &format!("{what}[{i}]"))).collect()
}

/// A logits row: the float64 of each value narrowed to f32 (exact for values that came from f32).
pub fn to_f32s(v: &Json, what: &str) -> Result<Vec<f32>, String> {
    let items = list(v, what, "numbers")?;
    items.iter().enumerate().map(|(i, x)| to_f64(x, &format!("{what}[{i}]")).map(|f| f as f32)).collect()
}

/// Logits rows: `&[Vec<f32>]`. A row that is not a flat list of numbers (a matrix) cannot be held.
pub fn to_f32_rows(v: &Json, what: &str) -> Result<Vec<Vec<f32>>, String> {
    let items = list(v, what, "rows")?;
    items.iter().enumerate().map(|(i, r)| to_f32s(r, &format!("{what}[{i}]"))).collect()
}

pub fn to_f64_rows(v: &Json, what: &str) -> Result<Vec<Vec<f64>>, String> {
    let items = list(v, what, "rows")?;
    items.iter().enumerate().map(|(i, r)| to_f64s(r, &format!("{what}[{i}]"))).collect()
}

pub fn to_str<'a>(v: &'a Json, what: &str) -> Result<&'a str, String> {
    v.as_str().ok_or_else(|| format!("{what} is {}, expected a string", describe(v)))
}

/// Python's truthiness of a JSON value (`if a.get("stream")`, `bool(reply)`).
pub fn truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Int(i) => *i != 0,
        Json::Float(x) => *x != 0.0,
        Json::Str(s) => !s.is_empty(),
        Json::Arr(a) => !a.is_empty(),
        Json::Obj(o) => !o.is_empty(),
    }
}

// ---- answers ------------------------------------------------------------------------------------

pub fn int(n: impl Into<i128>) -> Json {
    Json::Int(n.into())
}

pub fn uint(n: usize) -> Json {
    Json::Int(n as i128)
}

pub fn ids(xs: &[u32]) -> Json {
    Json::Arr(xs.iter().map(|&x| Json::Int(x as i128)).collect())
}

pub fn f64s(xs: &[f64]) -> Json {
    Json::Arr(xs.iter().map(|&x| f64_json(x)).collect())
}

/// f32 values widened to the f64 they equal.
pub fn f32s(xs: &[f32]) -> Json {
    Json::Arr(xs.iter().map(|&x| f64_json(x as f64)).collect())
}

pub fn obj(fields: Vec<(&str, Json)>) -> Json {
    Json::Obj(fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}
