//! L10.8's engine at the wire: its error types as the protocol's failures (spec/protocol.md section 4), and the
//! judge's target as the engine's `Target` (section 11). Part of the chapter's op table (`ops.rs`), which the
//! chapter's pack supplies to the course's worker crate (chapter.toml `course_sources`).

use std::cell::RefCell;

use tl_engine::kv::KvError;
use tl_engine::model::ModelError;
use tl_engine::runner_target::RunnerError;
use tl_engine::sampling::SamplingError;
use tl_engine::spec::{SpecError, Target};
use tl_json::Json;

use crate::conv::{self, obj, uint, Failure};
use crate::wire::Wire;

impl From<SpecError> for Failure {
    fn from(e: SpecError) -> Failure {
        Failure::spec(e.0)
    }
}

impl From<SamplingError> for Failure {
    fn from(e: SamplingError) -> Failure {
        Failure::new("SamplingError", e.0)
    }
}

impl From<KvError> for Failure {
    fn from(e: KvError) -> Failure {
        Failure::new("KvError", e.0)
    }
}

impl From<ModelError> for Failure {
    fn from(e: ModelError) -> Failure {
        Failure::new("ModelError", e.0)
    }
}

/// A runner target's failure under its own name: the runner's ModelError and the pool's KvError with
/// `spec_error` false, the target's own refusal as a SpecError.
impl From<RunnerError> for Failure {
    fn from(e: RunnerError) -> Failure {
        match e {
            RunnerError::Model(e) => e.into(),
            RunnerError::Kv(e) => e.into(),
            RunnerError::Spec(e) => e.into(),
        }
    }
}

/// The judge's target (section 11): `cached`, `extend` and `truncate` are callbacks. A refused
/// callback is `Err(SpecError(the judge's message))`, and the wire records it. `cached` is asked of
/// the judge once and then counted here from the calls the judge accepted (an extend of n ids adds n,
/// a truncate sets the length): what the judge's target holds, without a round trip a round; a
/// refused extend or truncate makes it ask again.
pub struct JudgeTarget<'a> {
    pub wire: &'a RefCell<Wire>,
    cached: Option<usize>,
}

impl<'a> JudgeTarget<'a> {
    pub fn new(wire: &'a RefCell<Wire>) -> Self {
        JudgeTarget { wire, cached: None }
    }

    fn call(&mut self, method: &str, args: Json) -> Result<Json, SpecError> {
        let out = self.wire.borrow_mut().call(method, args).map_err(SpecError);
        if out.is_err() {
            self.cached = None;
        }
        out
    }
}

impl Target for JudgeTarget<'_> {
    fn cached(&mut self) -> Result<usize, SpecError> {
        if let Some(n) = self.cached {
            return Ok(n);
        }
        let v = self.call("target.cached", obj(vec![]))?;
        let n = conv::to_usize(&v, "the judge's target.cached answer").map_err(SpecError)?;
        self.cached = Some(n);
        Ok(n)
    }

    fn extend(&mut self, ids: &[u32]) -> Result<Vec<Vec<f32>>, SpecError> {
        let v = self.call("target.extend", obj(vec![("ids", conv::ids(ids))]))?;
        self.cached = self.cached.map(|n| n + ids.len());
        conv::to_f32_rows(&v, "the judge's target.extend answer").map_err(SpecError)
    }

    fn truncate(&mut self, len: usize) -> Result<(), SpecError> {
        self.call("target.truncate", obj(vec![("length", uint(len))]))?;
        self.cached = Some(len);
        Ok(())
    }
}
