//! The two descriptors: one JSON object per line in each direction (spec/protocol.md sections 2 and 3),
//! and the callbacks into the judge.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};

use tl_json::{parse, Json};

use crate::conv::obj;

pub struct Wire {
    input: BufReader<File>,
    output: File,
    callbacks: u64,
    /// The message of the first callback the judge refused during the current request.
    pub refused: Option<String>,
}

impl Wire {
    pub fn new(input: File, output: File) -> Wire {
        Wire { input: BufReader::with_capacity(1 << 16, input), output, callbacks: 0, refused: None }
    }

    /// Write one message as one line, in one write, and flush it.
    pub fn send(&mut self, msg: &Json) {
        let mut line = msg.dump();
        line.push('\n');
        if let Err(e) = self.output.write_all(line.as_bytes()).and_then(|_| self.output.flush()) {
            die(&format!("cannot write to the protocol's out descriptor: {e}"));
        }
    }

    /// The next message from the judge, an object; None at the end of the in descriptor (the judge
    /// went away: a line cut short by the end counts as no line, as in the Python worker). A line
    /// that is not a JSON object cannot be answered (it has no id): the worker stops with code 1.
    pub fn receive(&mut self) -> Option<Json> {
        let mut buf = Vec::new();
        match self.input.read_until(b'\n', &mut buf) {
            Ok(_) if buf.last() != Some(&b'\n') => return None,
            Ok(_) => {}
            Err(e) => die(&format!("cannot read the protocol's in descriptor: {e}")),
        }
        let text = match std::str::from_utf8(&buf) {
            Ok(t) => t,
            Err(_) => die("the judge sent a line that is not UTF-8"),
        };
        match parse(text) {
            Ok(v @ Json::Obj(_)) => Some(v),
            Ok(_) => die("the judge sent a line that is not a JSON object"),
            Err(e) => die(&format!("the judge sent a line that is not JSON: {e}")),
        }
    }

    /// Call back into the judge and wait for its reply: Ok(the reply's `ok`), or Err(the message of
    /// its error reply), which is also recorded in `refused`.
    pub fn call(&mut self, method: &str, args: Json) -> Result<Json, String> {
        self.callbacks += 1;
        let id = format!("c{}", self.callbacks);
        self.send(&obj(vec![("id", Json::Str(id)), ("call", Json::Str(method.into())), ("args", args)]));
        let reply = match self.receive() {
            Some(r) => r,
            None => std::process::exit(0), // the judge went away
        };
        if let Some(err) = reply.get("error") {
            let message = err.get("message").and_then(Json::as_str).unwrap_or("the judge refused the call").to_string();
            if self.refused.is_none() {
                self.refused = Some(message.clone());
            }
            return Err(message);
        }
        Ok(reply.get("ok").cloned().unwrap_or(Json::Null))
    }
}

/// Stop the worker: nothing sensible can be answered any more.
pub fn die(why: &str) -> ! {
    eprintln!("tl-worker: {why}");
    std::process::exit(1)
}
