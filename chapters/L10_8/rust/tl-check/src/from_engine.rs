//! `cargo test` run in `crates/tl-engine` (or a folder inside it): cargo picks the package you stand in, whose
//! library's tests are left to the judge, so it would run nothing and say ok. This test target of tl-engine (its
//! manifest's `[[test]] judge`, std only, no unsafe) runs the workspace's own `cargo test` instead: the judge
//! through `crates/tl-check`, with your filters, then your own `#[test]`s. It builds tl-check apart
//! (`target/judge`): the cargo that started this holds the workspace's `target/` until it ends.

use std::path::Path;
use std::process::Command;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..");
    let root = root.canonicalize().unwrap_or(root);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    eprintln!("judge: `cargo test` in crates/tl-engine runs the workspace's `cargo test` ({}): the judge", root.display());
    let status = Command::new(cargo)
        .args(["test", "--offline", "-q", "-p", "tl-check", "--target-dir"])
        .arg(root.join("target").join("judge"))
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .arg("--")
        .args(std::env::args().skip(1))
        .status();
    match status {
        Ok(s) => std::process::exit(s.code().unwrap_or(130)),
        Err(e) => {
            eprintln!("error: cannot run cargo for the judge: {e}; run `cargo test` in {}", root.display());
            std::process::exit(101)
        }
    }
}
