//! The JSON of the worker protocol (spec/protocol.md, sections 2 and 7), std only.
//!
//! - Parsing is recursive descent over the whole of RFC 8259, nested at most [`MAX_DEPTH`] arrays
//!   and objects deep. `\uXXXX` escapes and surrogate pairs are decoded; a lone surrogate becomes
//!   U+FFFD (a Rust `String` cannot hold it).
//! - A number without fraction and exponent is an [`Json::Int`], exactly, when it fits an `i128`
//!   (every u64 seed and every negative one does); a longer one is read as a [`Json::Float`] (the
//!   nearest double), so a caller that wants an integer sees "not an integer" rather than a parse
//!   failure. `-0` is `Int(0)`.
//! - Every other number is a [`Json::Float`] through `str::parse::<f64>`, which is correctly rounded.
//! - Objects keep their keys in order, duplicates included; [`Json::get`] answers the last one, as
//!   Python's `json` does.
//! - [`Json::dump`] writes compact JSON on one line. A finite float is written with the shortest
//!   digits that read back as the same double, always with a `.` or an `e` (`1.0`, `1e-7`), so
//!   Python reads a float back; a non-finite one as the string `"inf"`, `"-inf"` or `"nan"`
//!   (what [`f64_json`] builds). Strings escape `"`, `\` and control characters; other characters
//!   are written as UTF-8.

use std::fmt::Write as _;

/// Arrays and objects nest at most this deep.
pub const MAX_DEPTH: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

/// A float as the protocol writes it: finite -> `Float`, non-finite -> the string "inf", "-inf" or "nan".
pub fn f64_json(x: f64) -> Json {
    if x.is_finite() {
        Json::Float(x)
    } else {
        Json::Str(non_finite_name(x).to_string())
    }
}

fn non_finite_name(x: f64) -> &'static str {
    if x.is_nan() {
        "nan"
    } else if x > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

/// Parse one JSON text (surrounding whitespace allowed, nothing else after the value).
pub fn parse(text: &str) -> Result<Json, String> {
    let mut p = Parser { s: text.as_bytes(), i: 0 };
    p.ws();
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("unexpected text after the value"));
    }
    Ok(v)
}

impl Json {
    /// The value of `key` in an object (the last one if the key repeats); None for anything else.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(fields) => fields.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// A number as f64: `Int` (rounded to the nearest double), `Float`, or the strings "inf",
    /// "-inf", "nan". Never a `Bool`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Int(i) => Some(*i as f64),
            Json::Float(x) => Some(*x),
            Json::Str(s) => match s.as_str() {
                "inf" => Some(f64::INFINITY),
                "-inf" => Some(f64::NEG_INFINITY),
                "nan" => Some(f64::NAN),
                _ => None,
            },
            _ => None,
        }
    }

    /// An integer: `Int` only, never a `Bool` or a `Float` (4.0 is not the integer 4).
    pub fn as_i128(&self) -> Option<i128> {
        match self {
            Json::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Arr(a) => Some(a),
            _ => None,
        }
    }

    /// The fields of an object, in order.
    pub fn as_object(&self) -> Option<&[(String, Json)]> {
        match self {
            Json::Obj(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// Compact JSON on one line (no raw newline: strings escape it).
    pub fn dump(&self) -> String {
        let mut out = String::new();
        self.write_to(&mut out);
        out
    }

    /// Append the compact JSON of this value to `out`.
    pub fn write_to(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Json::Float(x) => write_f64(*x, out),
            Json::Str(s) => write_str(s, out),
            Json::Arr(a) => {
                out.push('[');
                for (n, v) in a.iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    v.write_to(out);
                }
                out.push(']');
            }
            Json::Obj(o) => {
                out.push('{');
                for (n, (k, v)) in o.iter().enumerate() {
                    if n > 0 {
                        out.push(',');
                    }
                    write_str(k, out);
                    out.push(':');
                    v.write_to(out);
                }
                out.push('}');
            }
        }
    }
}

/// A double with the shortest round-trip digits (`{:?}` always holds a '.' or an 'e'); non-finite
/// as one of the protocol's strings.
fn write_f64(x: f64, out: &mut String) {
    if x.is_finite() {
        let _ = write!(out, "{x:?}");
    } else {
        write_str(non_finite_name(x), out);
    }
}

fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn err(&self, what: &str) -> String {
        format!("invalid JSON at byte {}: {what}", self.i)
    }

    fn ws(&mut self) {
        while let Some(&c) = self.s.get(self.i) {
            if c == b' ' || c == b'\t' || c == b'\n' || c == b'\r' {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn literal(&mut self, word: &str, v: Json) -> Result<Json, String> {
        if self.s[self.i..].starts_with(word.as_bytes()) {
            self.i += word.len();
            Ok(v)
        } else {
            Err(self.err("unknown literal"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, String> {
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b'[') => {
                if depth >= MAX_DEPTH {
                    return Err(self.err(&format!("nested deeper than {MAX_DEPTH}")));
                }
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                    return Ok(Json::Arr(items));
                }
                loop {
                    self.ws();
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Arr(items));
                        }
                        _ => return Err(self.err("expected ',' or ']'")),
                    }
                }
            }
            Some(b'{') => {
                if depth >= MAX_DEPTH {
                    return Err(self.err(&format!("nested deeper than {MAX_DEPTH}")));
                }
                self.i += 1;
                let mut fields = Vec::new();
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                    return Ok(Json::Obj(fields));
                }
                loop {
                    self.ws();
                    if self.peek() != Some(b'"') {
                        return Err(self.err("expected a string key"));
                    }
                    let key = self.string()?;
                    self.ws();
                    if self.peek() != Some(b':') {
                        return Err(self.err("expected ':'"));
                    }
                    self.i += 1;
                    self.ws();
                    let v = self.value(depth + 1)?;
                    fields.push((key, v));
                    self.ws();
                    match self.peek() {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Obj(fields));
                        }
                        _ => return Err(self.err("expected ',' or '}'")),
                    }
                }
            }
            Some(c) if c == b'-' || c.is_ascii_digit() => self.number(),
            Some(_) => Err(self.err("unexpected character")),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<Json, String> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        let n = self.digits();
        if n == 0 {
            return Err(self.err("expected digits"));
        }
        if n > 1 && self.s[int_start] == b'0' {
            return Err(self.err("leading zero in a number"));
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            integer = false;
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.err("expected digits after '.'"));
            }
        }
        if matches!(self.peek(), Some(b'e') | Some(b'E')) {
            integer = false;
            self.i += 1;
            if matches!(self.peek(), Some(b'+') | Some(b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.err("expected digits in the exponent"));
            }
        }
        // the slice is ASCII digits, signs, '.', 'e': valid UTF-8
        let text = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| self.err("bad number"))?;
        if integer {
            if let Ok(i) = text.parse::<i128>() {
                return Ok(Json::Int(i));
            }
        }
        text.parse::<f64>().map(Json::Float).map_err(|_| self.err("bad number"))
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let end = self.i + 4;
        if end > self.s.len() {
            return Err(self.err("short \\u escape"));
        }
        let mut v = 0u32;
        for &c in &self.s[self.i..end] {
            let d = (c as char).to_digit(16).ok_or_else(|| self.err("bad hex digit in \\u escape"))?;
            v = v * 16 + d;
        }
        self.i = end;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, String> {
        self.i += 1; // the opening quote
        let mut out = String::new();
        loop {
            // copy the run up to the next quote, backslash or control character in one go
            let start = self.i;
            while matches!(self.peek(), Some(c) if c != b'"' && c != b'\\' && c >= 0x20) {
                self.i += 1;
            }
            if self.i > start {
                let run = std::str::from_utf8(&self.s[start..self.i]).map_err(|_| self.err("invalid UTF-8"))?;
                out.push_str(run);
            }
            match self.peek() {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = self.peek().ok_or_else(|| self.err("unterminated escape"))?;
                    self.i += 1;
                    match c {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if self.s[self.i..].starts_with(b"\\u") {
                                    let save = self.i;
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    if (0xDC00..0xE000).contains(&lo) {
                                        0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                    } else {
                                        self.i = save; // a lone high surrogate; the next escape stands alone
                                        0xFFFD
                                    }
                                } else {
                                    0xFFFD
                                }
                            } else {
                                hi
                            };
                            out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                        }
                        _ => {
                            self.i -= 1;
                            return Err(self.err("unknown escape"));
                        }
                    }
                }
                Some(_) => return Err(self.err("control character in a string")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(x: f64) {
        let text = Json::Float(x).dump();
        assert!(text.contains('.') || text.contains('e'), "{text} would read back as an int");
        match parse(&text).unwrap() {
            Json::Float(y) => assert_eq!(y.to_bits(), x.to_bits(), "{text}"),
            other => panic!("{text} parsed as {other:?}"),
        }
    }

    #[test]
    fn tricky_doubles_round_trip() {
        for x in [5e-324, 1.7976931348623157e308, 0.1f32 as f64, -0.0, 0.0, 1.0, 1e16, 1e-7, 2.2250738585072014e-308,
                  0.1, 1.0 / 3.0, -2.5, 123456789012345680.0, 9007199254740993.0, f64::EPSILON] {
            round_trip(x);
        }
        assert_eq!(Json::Float(0.1f32 as f64).dump(), "0.10000000149011612");
        assert_eq!(Json::Float(-0.0).dump(), "-0.0");
        assert_eq!(Json::Float(1.0).dump(), "1.0");
        assert_eq!(Json::Float(5e-324).dump(), "5e-324");
        assert_eq!(Json::Float(1.7976931348623157e308).dump(), "1.7976931348623157e308");
        assert_eq!(parse("-0.0").unwrap().as_f64().unwrap().to_bits(), (-0.0f64).to_bits());
        assert_eq!(parse("0.10000000149011612").unwrap().as_f64().unwrap() as f32, 0.1f32);
        // a pseudo-random sweep of bit patterns
        let mut s = 0x9E3779B97F4A7C15u64;
        for _ in 0..20000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let x = f64::from_bits(s);
            if x.is_finite() {
                round_trip(x);
            }
            round_trip(f32::from_bits(s as u32).abs().min(f32::MAX) as f64);
        }
    }

    #[test]
    fn non_finite_floats_are_strings() {
        assert_eq!(f64_json(f64::INFINITY), Json::Str("inf".into()));
        assert_eq!(f64_json(f64::NEG_INFINITY), Json::Str("-inf".into()));
        assert_eq!(f64_json(f64::NAN), Json::Str("nan".into()));
        assert_eq!(f64_json(0.5), Json::Float(0.5));
        assert_eq!(Json::Float(f64::NEG_INFINITY).dump(), "\"-inf\"");
        let row = parse(r#"[0.5,"-inf",2.25,1,"nan","inf","x"]"#).unwrap();
        let a = row.as_array().unwrap();
        assert_eq!(a[1].as_f64(), Some(f64::NEG_INFINITY));
        assert_eq!(a[3].as_f64(), Some(1.0));
        assert!(a[4].as_f64().unwrap().is_nan());
        assert_eq!(a[5].as_f64(), Some(f64::INFINITY));
        assert_eq!(a[6].as_f64(), None);
        assert_eq!(Json::Bool(true).as_f64(), None);
    }

    #[test]
    fn integers_are_exact() {
        assert_eq!(parse("18446744073709551615").unwrap(), Json::Int(u64::MAX as i128));
        assert_eq!(parse("18446744073709551616").unwrap(), Json::Int(1i128 << 64));
        assert_eq!(parse("-1").unwrap(), Json::Int(-1));
        assert_eq!(parse("-0").unwrap(), Json::Int(0));
        assert_eq!(parse("170141183460469231731687303715884105727").unwrap(), Json::Int(i128::MAX));
        // past i128: the nearest double
        assert_eq!(parse("1000000000000000000000000000000000000000").unwrap(), Json::Float(1e39));
        assert_eq!(parse("4.0").unwrap(), Json::Float(4.0));
        assert_eq!(parse("4.0").unwrap().as_i128(), None);
        assert_eq!(parse("4e0").unwrap().as_i128(), None);
        assert_eq!(parse("true").unwrap().as_i128(), None);
        assert_eq!(Json::Int(u64::MAX as i128).dump(), "18446744073709551615");
        assert_eq!(Json::Int(-1).dump(), "-1");
        for bad in ["01", "-", "1.", ".5", "1e", "+1", "0x10", "1.5e+"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn escapes() {
        let v = parse(r#""a\"b\\c\/d\n\t\r\b\f\u0041\u00e9\u20ac\ud83d\ude00""#).unwrap();
        assert_eq!(v.as_str().unwrap(), "a\"b\\c/d\n\t\r\u{8}\u{c}Aé€😀");
        let text = v.dump();
        assert!(!text.contains('\n'));
        assert_eq!(parse(&text).unwrap(), v);
        assert_eq!(Json::Str("\u{1}".into()).dump(), "\"\\u0001\"");
        assert_eq!(parse(r#""\ud800x""#).unwrap().as_str().unwrap(), "\u{FFFD}x");
        assert_eq!(parse(r#""\ud800\u0041""#).unwrap().as_str().unwrap(), "\u{FFFD}A");
        assert_eq!(parse("\"é€\"").unwrap().as_str().unwrap(), "é€");
        assert!(parse(r#""\x""#).is_err());
        assert!(parse("\"a\nb\"").is_err());
        assert!(parse("\"abc").is_err());
        assert!(parse(r#""\u12""#).is_err());
    }

    #[test]
    fn depth_limit() {
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(&ok).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(parse(&deep).unwrap_err().contains("deeper"));
        let objs = format!("{}1{}", "{\"a\":".repeat(MAX_DEPTH + 1), "}".repeat(MAX_DEPTH + 1));
        assert!(parse(&objs).is_err());
        assert!(parse(&"[".repeat(100_000)).is_err()); // no stack overflow
    }

    #[test]
    fn messages() {
        let line = r#"{"id":2,"op":"generate","args":{"target":"judge","cfg":{"draft":"prompt_lookup","k":4},"prompt":[1,2,1],"params":{"temperature":0.0},"seed":18446744073709551615,"max_new":1,"eos":[],"stream":false}}"#;
        let v = parse(line).unwrap();
        assert_eq!(v.dump(), line);
        assert_eq!(v.get("id").and_then(Json::as_i128), Some(2));
        let args = v.get("args").unwrap();
        assert_eq!(args.get("seed").unwrap().as_i128(), Some(u64::MAX as i128));
        assert_eq!(args.get("stream").unwrap().as_bool(), Some(false));
        assert_eq!(args.get("cfg").unwrap().get("draft").unwrap().as_str(), Some("prompt_lookup"));
        assert_eq!(args.get("nope"), None);
        assert_eq!(Json::Int(3).get("x"), None);
        assert_eq!(parse(r#"{"a":1,"a":2}"#).unwrap().get("a"), Some(&Json::Int(2)));
        assert_eq!(parse(" \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } } \n").unwrap().dump(), r#"{"a":[1,2],"b":{}}"#);
        for bad in ["", "{", "{\"a\"}", "{\"a\":1,}", "[1,]", "[1 2]", "nul", "{} x", "{1:2}", "NaN", "Infinity"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse("null").unwrap(), Json::Null);
        assert!(Json::Null.is_null());
        assert_eq!(parse("[]").unwrap().as_array().unwrap().len(), 0);
    }
}
