//! `cargo test`'s front end to the judge: runs `ol check L10.8 --lang rust` on this workspace and
//! prints its verdict the way libtest prints tests (one line per chapter test, then the failures
//! with their messages and the chapter's pitfall hints, then the summary). Exit 0 when every test
//! passes, 101 otherwise (what a failing libtest binary exits with).
//!
//! `ol` is the command in the environment variable OL, else the first line of the workspace's
//! `.ol-command` (written by `ol start L10.8 --lang rust`). The judge's report is read from its
//! stdout (`--json -`); its console output (stderr) is dropped when the report could be read, and
//! printed when it could not (bad input, a harness error).
//!
//! libtest's own options are understood where they make sense: name filters (`cargo test -- NAME`),
//! `--exact`, `--skip NAME`, `--ignored` (there are no ignored tests), `--list`; the others are
//! accepted and ignored. The judge always runs every test; filters only choose what is reported.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tl_json::Json;

const CHAPTER: &str = "L10.8";

fn main() {
    let opts = Options::from_args();
    if opts.list {
        println!("{}: test\n\n1 test, 0 benchmarks", CHAPTER.replace('.', "_").to_lowercase());
        return;
    }
    if opts.ignored {
        println!("\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s\n");
        return;
    }
    let root = workspace_root();
    let ol = match find_ol(&root) {
        Ok(words) => words,
        Err(why) => fail(&format!(
            "cannot run the judge: {why}.\nSet OL to the `ol` command (OL=/path/to/ol cargo test), or rerun \
             `ol start {CHAPTER} --lang rust` for this workspace, which writes {}.",
            root.join(".ol-command").display()
        )),
    };
    let mut cmd = Command::new(&ol[0]);
    cmd.args(&ol[1..]).args(["check", CHAPTER, "--lang", "rust", "--submission"]).arg(&root).args(["--json", "-"]);
    eprintln!("l10_8: running the judge on {} (it builds the crate again, then runs the chapter's tests)...", root.display());
    let out = match cmd.stdin(Stdio::null()).output() {
        Ok(out) => out,
        Err(e) => fail(&format!(
            "cannot run `{}`: {e}.\nSet OL to the `ol` command, or rerun `ol start {CHAPTER} --lang rust` for this workspace.",
            ol.join(" ")
        )),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    if !matches!(code, Some(0) | Some(1)) {
        let how = code.map_or_else(|| "was killed by a signal".to_string(), |c| format!("exited {c}"));
        let what = match code {
            Some(2) => " (bad input)",
            Some(3) => " (a harness error)",
            _ => "",
        };
        eprint!("{stderr}");
        fail(&format!("`ol check {CHAPTER}` {how}{what}; no verdict on your code. Its output is above."));
    }
    let report = match std::str::from_utf8(&out.stdout).map_err(|e| e.to_string()).and_then(|t| tl_json::parse(t.trim())) {
        Ok(r @ Json::Obj(_)) => r,
        Ok(_) => fail_with(&stderr, "the judge's report is not a JSON object"),
        Err(e) => fail_with(&stderr, &format!("cannot read the judge's report: {e}")),
    };
    std::process::exit(print_report(&report, &opts));
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(101)
}

fn fail_with(stderr: &str, message: &str) -> ! {
    eprint!("{stderr}");
    fail(message)
}

fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..");
    root.canonicalize().unwrap_or(root)
}

/// The `ol` command as words: OL, else the first line of `.ol-command`.
fn find_ol(root: &Path) -> Result<Vec<String>, String> {
    if let Ok(v) = std::env::var("OL") {
        if !v.trim().is_empty() {
            return words(v.trim()).ok_or_else(|| format!("OL={v:?} is not a command"));
        }
    }
    let file = root.join(".ol-command");
    let text = std::fs::read_to_string(&file).map_err(|e| format!("OL is not set and {} cannot be read ({e})", file.display()))?;
    let line = text.lines().next().unwrap_or("").trim();
    if line.is_empty() {
        return Err(format!("OL is not set and the first line of {} is empty", file.display()));
    }
    words(line).ok_or_else(|| format!("the first line of {} is not a command: {line:?}", file.display()))
}

/// A command line as words: the whole line when it names a file (a path with spaces), else split
/// at blanks, with '...' and "..." quoting and backslash escapes as a shell does.
fn words(line: &str) -> Option<Vec<String>> {
    if Path::new(line).is_file() {
        return Some(vec![line.to_string()]);
    }
    let (mut out, mut cur, mut started) = (Vec::new(), String::new(), false);
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => cur.push(chars.next()?),
            (Some(_), c) => cur.push(c),
            (None, '\'') | (None, '"') => {
                quote = Some(c);
                started = true;
            }
            (None, '\\') => {
                cur.push(chars.next()?);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            (None, c) => {
                cur.push(c);
                started = true;
            }
        }
    }
    if quote.is_some() {
        return None;
    }
    if started {
        out.push(cur);
    }
    if out.is_empty() {
        None
    } else {
        Some(out)
    }
}

#[derive(Default)]
struct Options {
    filters: Vec<String>,
    skips: Vec<String>,
    exact: bool,
    list: bool,
    ignored: bool,
}

impl Options {
    fn from_args() -> Options {
        let mut o = Options::default();
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            match a.as_str() {
                "--exact" => o.exact = true,
                "--list" => o.list = true,
                "--ignored" => o.ignored = true,
                "--skip" => o.skips.extend(it.next()),
                "--test-threads" | "--color" | "--format" | "--logfile" | "-Z" | "--shuffle-seed" => {
                    it.next();
                }
                s if s.starts_with('-') => {} // --nocapture, --quiet, --include-ignored, --show-output, ...
                s => o.filters.push(s.to_string()),
            }
        }
        o
    }

    fn selects(&self, name: &str) -> bool {
        let hit = |f: &String| if self.exact { name == f } else { name.contains(f.as_str()) };
        (self.filters.is_empty() || self.filters.iter().any(hit)) && !self.skips.iter().any(hit)
    }
}

fn text<'a>(v: &'a Json, key: &str) -> &'a str {
    v.get(key).and_then(Json::as_str).unwrap_or("")
}

/// Print the report libtest's way; the exit code.
fn print_report(report: &Json, opts: &Options) -> i32 {
    if let Some(why) = report.get("ungraded").and_then(Json::as_str) {
        println!("\nol could not grade this workspace (not a verdict on your code): {why}");
        return 101;
    }
    let tests = report.get("tests").and_then(Json::as_array).unwrap_or(&[]);
    let shown: Vec<&Json> = tests.iter().filter(|t| opts.selects(text(t, "name"))).collect();
    let filtered = tests.len() - shown.len();
    println!("\nrunning {} test{}", shown.len(), if shown.len() == 1 { "" } else { "s" });
    let mut failed = Vec::new();
    for t in &shown {
        let ok = text(t, "outcome") == "pass";
        println!("test {} ... {}", text(t, "name"), if ok { "ok" } else { "FAILED" });
        if !ok {
            failed.push(*t);
        }
    }
    if !failed.is_empty() {
        println!("\nfailures:\n");
        if let Some(why) = report.get("load_error").and_then(Json::as_str) {
            println!("your workspace could not be loaded, so every test failed at once:\n{why}\n");
        }
        for t in &failed {
            println!("---- {} ({}) ----", text(t, "name"), text(t, "outcome"));
            println!("{}", text(t, "message").trim_end());
            for p in t.get("pitfalls").and_then(Json::as_array).unwrap_or(&[]) {
                println!("known pitfall: {}", p.as_str().unwrap_or(""));
            }
            println!();
        }
        let matches = report.get("pitfall_matches").and_then(Json::as_array).unwrap_or(&[]);
        for m in matches.iter().take(3) {
            let n = |k: &str| m.get(k).and_then(Json::as_i128).unwrap_or(0);
            println!("hint: your answers match pitfall {}, {}, on {} of {} golden cases where it shows",
                     text(m, "id"), text(m, "pitfall"), n("matched"), n("shows"));
        }
        if !matches.is_empty() {
            println!();
        }
        println!("failures:");
        for t in &failed {
            println!("    {}", text(t, "name"));
        }
    }
    let secs = report.get("summary").and_then(|s| s.get("duration_s")).and_then(Json::as_f64).unwrap_or(0.0);
    let verdict = if failed.is_empty() { "ok" } else { "FAILED" };
    println!("\ntest result: {verdict}. {} passed; {} failed; 0 ignored; 0 measured; {filtered} filtered out; finished in {secs:.2}s\n",
             shown.len() - failed.len(), failed.len());
    if failed.is_empty() {
        0
    } else {
        101
    }
}
