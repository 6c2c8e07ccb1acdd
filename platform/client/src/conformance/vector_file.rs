//! The specification's vector file (`conformance-vectors.json`), the
//! [`Verdict`] of each vector for a Language, and their summary.

use serde::{Deserialize, Serialize};

/// One vector of the specification's file.
#[derive(Clone, Debug, Deserialize)]
pub struct Vector {
    /// Its id, e.g. `PIL-LOOKUP-LIST-G`.
    pub id: String,
    /// `server` or `client`.
    pub target: String,
    /// The requirement it tests.
    pub requirement: String,
    /// Capabilities it needs (`catalog`, `execute.idempotency`, …).
    #[serde(default)]
    pub requires: Vec<String>,
}

/// The specification's vector file.
#[derive(Clone, Debug, Deserialize)]
pub struct VectorFile {
    /// How many vectors it claims.
    pub count: usize,
    /// The vectors.
    pub vectors: Vec<Vector>,
}

/// What happened to one vector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Verdict {
    /// Every assertion held.
    Passed,
    /// Not run, and why.
    Skipped {
        /// Why it could not run here.
        reason: String,
    },
    /// Some assertions failed.
    Failed {
        /// What failed.
        failures: Vec<String>,
    },
}

/// A vector's verdict for one Language.
#[derive(Clone, Debug, Serialize)]
pub struct VectorResult {
    /// The vector.
    pub id: String,
    /// The Language.
    pub language: String,
    /// The verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// A one-line summary per Language: passed / skipped / failed.
pub fn summary(results: &[VectorResult]) -> String {
    let mut languages: Vec<&str> = results.iter().map(|r| r.language.as_str()).collect();
    languages.sort();
    languages.dedup();
    languages
        .into_iter()
        .map(|language| {
            let of = |f: &dyn Fn(&Verdict) -> bool| {
                results.iter().filter(|r| r.language == language && f(&r.verdict)).count()
            };
            format!(
                "{language}: {} passed, {} skipped, {} failed",
                of(&|v| matches!(v, Verdict::Passed)),
                of(&|v| matches!(v, Verdict::Skipped { .. })),
                of(&|v| matches!(v, Verdict::Failed { .. }))
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
