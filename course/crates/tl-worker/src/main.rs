//! tl-worker: the judge's worker for tl-engine, protocol version 1 (spec/protocol.md), batches included.
//!
//!     tl-worker --in FD --out FD
//!
//! It reads requests from the descriptor `--in` and writes the hello, the answers and the callbacks
//! to `--out`, one JSON object per line; stdout and stderr belong to the engine's code. The engine is
//! linked in, so `load` has nothing to import and answers null. Every op runs under `catch_unwind`:
//! an error, a refusal or a panic of the engine is an error answer, and the worker goes on. It exits
//! 0 when the in descriptor ends (the judge went away), and 1 on a line it cannot answer (not a JSON
//! object: there is no id to answer).
//!
//! The op table, `ops.rs`, is the chapter's: its pack supplies it (chapter.toml's `course_sources`, e.g.
//! `rust/worker/ops.rs` in its folder) and every workspace ol assembles has it at `src/ops.rs`. It gives
//! `ops::State` (Default), `ops::dispatch(op, args, state, wire)` and `ops::unknown_op(op)`.

mod conv;
mod ops;
mod wire;

use std::cell::RefCell;
use std::fs::File;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Mutex;

use tl_json::Json;

use crate::conv::{obj, Failure};
use crate::wire::{die, Wire};

const PROTOCOL_VERSION: i128 = 1;

/// What the panic hook saw of the last panic: its message and where it happened.
struct PanicSeen {
    message: String,
    file: String,
    line: u32,
    column: u32,
}

static LAST_PANIC: Mutex<Option<PanicSeen>> = Mutex::new(None);

fn last_panic() -> std::sync::MutexGuard<'static, Option<PanicSeen>> {
    LAST_PANIC.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "Box<dyn Any>".to_string()
    }
}

/// Record every panic's message and location (the answer is made of them), and print one line on
/// stderr in place of the default hook's report (the judge captures stderr and shows it when a
/// worker crashes; a stub's todo!() panics on every call, so the lines stay short).
fn install_panic_hook() {
    panic::set_hook(Box::new(|info| {
        let (file, line, column) = info.location().map_or((String::from("<unknown>"), 0, 0), |l| (l.file().to_string(), l.line(), l.column()));
        let message = payload_text(info.payload());
        eprintln!("tl-worker: panicked at {file}:{line}:{column}: {}", message.lines().next().unwrap_or(""));
        *last_panic() = Some(PanicSeen { message, file, line, column });
    }));
}

/// A caught panic as an error answer: `todo!()` / `unimplemented!()` are "not implemented", any
/// other panic is type "panic" with its location as the one frame (the judge fills in the source).
fn panic_failure(payload: &(dyn std::any::Any + Send)) -> Failure {
    let seen = last_panic().take();
    let seen = seen.unwrap_or_else(|| PanicSeen { message: payload_text(payload), file: "<unknown>".into(), line: 0, column: 0 });
    if seen.message.starts_with("not yet implemented") || seen.message.starts_with("not implemented") {
        return Failure::new("NotImplementedError", seen.message);
    }
    let message = format!("your code panicked at {}:{}:{}: {}", seen.file, seen.line, seen.column, seen.message);
    let frame = obj(vec![("file", Json::Str(seen.file)), ("line", Json::Int(seen.line as i128)), ("function", Json::Str(String::new())),
                         ("source", Json::Str(String::new()))]);
    Failure { traceback: message.clone(), frames: vec![frame], ..Failure::new("panic", message) }
}

struct Args {
    fd_in: i32,
    fd_out: i32,
}

fn parse_args() -> Args {
    let usage = "usage: tl-worker --in FD --out FD";
    let (mut fd_in, mut fd_out) = (None, None);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let (flag, value) = match a.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (a.clone(), None),
        };
        let slot = match flag.as_str() {
            "--in" => &mut fd_in,
            "--out" => &mut fd_out,
            "-h" | "--help" => {
                println!("{usage}");
                std::process::exit(0);
            }
            _ => {
                eprintln!("tl-worker: unknown argument {a:?}\n{usage}");
                std::process::exit(2);
            }
        };
        let value = value.or_else(|| it.next()).unwrap_or_default();
        match value.parse::<i32>() {
            Ok(fd) if fd >= 0 => *slot = Some(fd),
            _ => {
                eprintln!("tl-worker: {flag} needs a file descriptor number, got {value:?}\n{usage}");
                std::process::exit(2);
            }
        }
    }
    match (fd_in, fd_out) {
        (Some(fd_in), Some(fd_out)) => Args { fd_in, fd_out },
        _ => {
            eprintln!("tl-worker: both --in and --out are required\n{usage}");
            std::process::exit(2);
        }
    }
}

/// The inherited descriptor as a File.
///
/// Reopening `/proc/self/fd/N` would avoid `unsafe`, but a pipe made by the judge is mode 0600 of
/// the judge's uid, so the confined worker (another uid, or a user namespace) may not reopen it;
/// and macOS has no /proc. The descriptor itself is always usable, so it is adopted as it is.
#[cfg(unix)]
fn adopt(fd: i32) -> File {
    use std::os::unix::io::FromRawFd;
    // SAFETY: the judge passes these descriptors to this process for its own use (spec/protocol.md
    // section 1) and nothing else in the process opens, uses or closes them; each is adopted once.
    unsafe { File::from_raw_fd(fd) }
}

#[cfg(not(unix))]
fn adopt(_fd: i32) -> File {
    die("tl-worker needs a Unix system (the protocol's descriptors are inherited pipes)")
}

fn main() {
    let args = parse_args();
    if args.fd_in == args.fd_out {
        die("--in and --out must be two different descriptors");
    }
    let wire = RefCell::new(Wire::new(adopt(args.fd_in), adopt(args.fd_out)));
    install_panic_hook();
    let mut state = ops::State::default();
    let pid = Json::Int(std::process::id() as i128);
    wire.borrow_mut().send(&obj(vec![("hello", obj(vec![("protocol", Json::Int(PROTOCOL_VERSION)), ("pid", pid), ("batch", Json::Bool(true))]))]));
    loop {
        let msg = match wire.borrow_mut().receive() {
            Some(m) => m,
            None => std::process::exit(0), // the judge went away
        };
        // a batch: its requests in turn, each answered as soon as it is done, as if it had come alone
        for request in msg.get("batch").and_then(Json::as_array).unwrap_or(std::slice::from_ref(&msg)) {
            let id = request.get("id").cloned().unwrap_or(Json::Null);
            let answer = match serve(request, &mut state, &wire) {
                Ok(v) => obj(vec![("id", id), ("ok", v)]),
                Err(f) => obj(vec![("id", id), ("error", f.to_json())]),
            };
            wire.borrow_mut().send(&answer);
        }
    }
}

/// One request: its op run under catch_unwind, every failure made an error object.
fn serve(msg: &Json, state: &mut ops::State, wire: &RefCell<Wire>) -> Result<Json, Failure> {
    if msg.get("id").is_none() {
        return Err(Failure::key("id"));
    }
    let op = msg.get("op").ok_or_else(|| Failure::key("op"))?;
    let empty = Json::Obj(Vec::new());
    let args = msg.get("args").unwrap_or(&empty);
    let name = match op.as_str() {
        Some("load") => return Ok(Json::Null), // the engine is linked in: nothing to import
        Some(name) => name,
        None => return Err(ops::unknown_op(op)),
    };
    if args.as_object().is_none() {
        return Err(Failure::new("TypeError", format!("the request's args must be an object, got {}", conv::describe(args))));
    }
    wire.borrow_mut().refused = None;
    *last_panic() = None;
    let result = panic::catch_unwind(AssertUnwindSafe(|| ops::dispatch(name, args, state, wire)));
    match result {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(f)) => {
            // the engine failed after the judge refused one of its callbacks: a refusal passed on
            // from the judge is not a refusal of the engine's (spec/rust.md section 4)
            let refused = if let Ok(w) = wire.try_borrow() { w.refused.clone() } else { None };
            match refused {
                Some(message) if f.ty != "NotImplementedError" && f.ty != "panic" => Err(Failure::new("JudgeRefused", message)),
                _ => Err(f),
            }
        }
        Err(payload) => Err(panic_failure(payload.as_ref())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::py_repr;

    #[test]
    fn python_reprs() {
        assert_eq!(py_repr("nope"), "'nope'");
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(py_repr("a\nb\\"), "'a\\nb\\\\'");
    }
}
