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
//! accepted and ignored. Filters go to the judge (`-k`, or `--test` with `--exact`): it runs only
//! the selected tests, judged as in a whole check. Each test's line is printed as the judge finishes
//! it (read from its console, stderr); the failures and the summary come last, from its report.
//!
//! This crate does not link `tl-engine`: `cargo test` compiles nothing of yours, and the judge's build
//! (sandboxed, incremental, kept between checks under ~/.cache/ol/rust) is the one build an edit
//! costs. Your own `#[test]`s (in a file of `crates/tl-engine/src` that is yours: not a stand-in `ol start`
//! wrote, nor the given model.rs and runner_target.rs) run after the judge, with `cargo test -p tl-engine --lib` into `target/own`.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tl_json::Json;

const CHAPTER: &str = "L10.8";
/// The course's modules in your crate (the judge builds its own copies): their tests are not yours.
const GIVEN: [&str; 2] = ["model.rs", "runner_target.rs"];

fn main() {
    wait_out_ctrl_c();
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
            "cannot run the judge: {why}.\nPoint this workspace at ol (where you keep it now), one line, your work \
             untouched: `echo /path/to/ol > {}`, or once: `OL=/path/to/ol cargo test`.",
            root.join(".ol-command").display()
        )),
    };
    let mut cmd = Command::new(&ol[0]);
    cmd.args(&ol[1..]).args(["check", CHAPTER, "--lang", "rust", "--submission"]).arg(&root).args(["--json", "-"]);
    cmd.args(opts.judge_selection());
    eprintln!("l10_8: the judge builds your crate (sandboxed, incrementally) and runs the chapter's tests on {}", root.display());
    let mut child = match cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn() {
        Ok(child) => child,
        Err(e) => fail(&format!(
            "cannot run `{}`: {e}.\nPoint this workspace at ol, one line, your work untouched: \
             `echo /path/to/ol > {}`, or once: `OL=/path/to/ol cargo test`.",
            ol.join(" "),
            root.join(".ol-command").display()
        )),
    };
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stdout.read_to_end(&mut text);
        text
    });
    println!("\nrunning the judge's tests");
    let (shown, stderr) = follow(child.stderr.take().expect("piped"));
    let stdout = reader.join().unwrap_or_default();
    let code = child.wait().ok().and_then(|s| s.code());
    if code == Some(2) && stderr.contains(&format!("no test of {CHAPTER} matches")) {
        println!("\ntest result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; all filtered out (no test of {CHAPTER} matches)\n");
        std::process::exit(own_tests(&root, 0));
    }
    if code == Some(130) || code.is_none() && interrupted(&stderr) {
        // Ctrl-C: the judge stopped; what ran is no verdict (ol check's own wording, with no score)
        eprintln!("\nl10_8: interrupted: no verdict (nothing was scored); run `cargo test` again for one");
        std::process::exit(130);
    }
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
    let report = match std::str::from_utf8(&stdout).map_err(|e| e.to_string()).and_then(|t| tl_json::parse(t.trim())) {
        Ok(r @ Json::Obj(_)) => r,
        Ok(_) => fail_with(&stderr, "the judge's report is not a JSON object"),
        Err(e) => fail_with(&stderr, &format!("cannot read the judge's report: {e}")),
    };
    let verdict = print_report(&report, &shown, &stderr);
    std::process::exit(own_tests(&root, verdict));
}

/// Ctrl-C reaches the judge too (the terminal's foreground group): this front end outlives it, to say the run was
/// interrupted rather than vanish, while the judge stops and says so (exit 130, no report).
#[cfg(unix)]
fn wait_out_ctrl_c() {
    extern "C" {
        fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
    }
    extern "C" fn noted(_: i32) {}
    const SIGINT: i32 = 2;
    // SAFETY: POSIX signal(2) before any thread exists; the handler does nothing. A caught signal (unlike an ignored
    // one) is back to its default in the judge this process starts, so Ctrl-C still stops the judge.
    unsafe {
        signal(SIGINT, noted);
    }
}

#[cfg(not(unix))]
fn wait_out_ctrl_c() {}

fn interrupted(stderr: &str) -> bool {
    stderr.contains("ol: interrupted")
}

/// The judge's console, read as it comes: each `test NAME ... OUTCOME (S s)` line printed at once the
/// libtest way, its lines saying what it builds passed on to stderr; (the tests shown, the rest of it).
fn follow(stderr: impl Read) -> (Vec<String>, String) {
    let (mut shown, mut rest) = (Vec::new(), String::new());
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        if let Some((name, outcome)) = test_line(&line) {
            println!("test {name} ... {}", if outcome == "pass" { "ok" } else { "FAILED" });
            shown.push(name.to_string());
        } else if line.starts_with("ol: building") || line.starts_with("ol: loading") {
            eprintln!("{line}"); // what the judge does now (harness.render.check_progress's stage lines)
        } else {
            rest.push_str(&line);
            rest.push('\n');
        }
    }
    (shown, rest)
}

/// The chapter's number of tests when the judge ran a selection (its line `ran N of the M tests ...`).
fn chapter_total(stderr: &str) -> Option<usize> {
    let line = stderr.lines().find(|l| l.starts_with("ran "))?;
    line.split(" of the ").nth(1)?.split_whitespace().next()?.parse().ok()
}

fn test_line(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("test ")?;
    let (name, rest) = rest.split_once(" ... ")?;
    let outcome = rest.split_whitespace().next()?;
    Some((name, outcome))
}

/// Your own `#[test]`s, when a file of yours in crates/tl-engine/src has one: `cargo test -p tl-engine --lib`
/// (same filters) into target/own, so it never waits on the outer cargo's lock. The exit code, worst of both.
fn own_tests(root: &Path, verdict: i32) -> i32 {
    let src = root.join("crates").join("tl-engine").join("src");
    if !has_own_tests(&src) {
        return verdict;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    println!("your own #[test]s in crates/tl-engine/src (cargo test -p tl-engine --lib):");
    let status = Command::new(cargo)
        .args(["test", "--offline", "-q", "-p", "tl-engine", "--lib", "--target-dir"])
        .arg(root.join("target").join("own"))
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--")
        .args(std::env::args().skip(1))
        .status();
    match status {
        Ok(s) if s.success() => verdict,
        Ok(_) => 101,
        Err(e) => {
            eprintln!("error: cannot run cargo for your own tests: {e}");
            101
        }
    }
}

fn has_own_tests(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.flatten().any(|e| {
        let path = e.path();
        if path.is_dir() {
            return has_own_tests(&path);
        }
        let Ok(text) = std::fs::read_to_string(&path) else { return false };
        let given = GIVEN.iter().any(|g| path.file_name().map_or(false, |n| n == *g));
        path.extension().map_or(false, |x| x == "rs") && !given && text.contains("#[test]") && !text.starts_with("// Written by `ol start")
    })
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
    let named = words(line).ok_or_else(|| format!("the first line of {} is not a command: {line:?}", file.display()))?;
    if named.len() > 1 || Path::new(&named[0]).is_file() {
        return Ok(named);
    }
    // the checkout moved since `ol start`: the `ol` on PATH, when there is one, is found again (and said)
    match on_path("ol") {
        Some(found) => {
            eprintln!("l10_8: {} names {line}, which is gone; using the `ol` on PATH, {} (`echo {} > {}` makes it \
                       the workspace's)", file.display(), found.display(), found.display(), file.display());
            Ok(vec![found.to_string_lossy().into_owned()])
        }
        None => Err(format!("{} names {line}, which is gone (ol moved?), and no `ol` is on PATH", file.display())),
    }
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
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

    /// The judge's options for libtest's filters: `--test NAME` per filter with `--exact`, else one `-k`
    /// expression (a filter is a substring of the name; `--skip` excludes).
    fn judge_selection(&self) -> Vec<String> {
        if self.exact && !self.filters.is_empty() {
            return self.filters.iter().flat_map(|f| ["--test".to_string(), f.clone()]).collect();
        }
        let mut parts = Vec::new();
        if !self.filters.is_empty() {
            parts.push(format!("({})", self.filters.join(" or ")));
        }
        parts.extend(self.skips.iter().map(|s| format!("not {s}")));
        if parts.is_empty() {
            Vec::new()
        } else {
            vec!["-k".to_string(), parts.join(" and ")]
        }
    }
}

fn text<'a>(v: &'a Json, key: &str) -> &'a str {
    v.get(key).and_then(Json::as_str).unwrap_or("")
}

/// Print the report libtest's way (the tests not yet shown as they finished, then the failures and the
/// summary); the exit code.
fn print_report(report: &Json, shown: &[String], stderr: &str) -> i32 {
    if let Some(why) = report.get("ungraded").and_then(Json::as_str) {
        println!("\nol could not grade this workspace (not a verdict on your code): {why}");
        return 101;
    }
    let tests = report.get("tests").and_then(Json::as_array).unwrap_or(&[]);
    let mut failed = Vec::new();
    for t in tests {
        let ok = text(t, "outcome") == "pass";
        if !shown.iter().any(|s| s == text(t, "name")) {
            println!("test {} ... {}", text(t, "name"), if ok { "ok" } else { "FAILED" });
        }
        if !ok {
            failed.push(t);
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
    let filtered = chapter_total(stderr).map_or(0, |total| total.saturating_sub(tests.len()));
    println!("\ntest result: {verdict}. {} passed; {} failed; 0 ignored; 0 measured; {filtered} filtered out; finished in {secs:.2}s\n",
             tests.len() - failed.len(), failed.len());
    if failed.is_empty() {
        0
    } else {
        101
    }
}
