//! `locus sim reproduce lard`: the LARD paper's simulation study — the run over a Rice-like
//! trace (`run`), its claims (`claims`) and its `report.md` (`report`).

mod claims;
mod report;
mod run;

pub use claims::{check_claims, observations};
pub use run::{CHOICE, LARD_POLICIES, ReproduceOptions, Reproduction, reproduce_lard, rice_like_spec};
