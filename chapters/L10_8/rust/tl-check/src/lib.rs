//! `cargo test`'s front end to the judge lives in `tests/l10_8.rs`. This crate depends on `tl-json` only,
//! never on `tl-engine`: `cargo test` compiles nothing of yours, and the judge's own build of your crate
//! (sandboxed, incremental, kept between checks) is the one build an edit costs.
