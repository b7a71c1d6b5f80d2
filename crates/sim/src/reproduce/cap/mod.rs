//! `locus sim reproduce cap`: CAP beside LARD, LARD/R, LC and WRR on static and dynamic mixes —
//! the run (`run`), its claims (`claims`) and its `report.md` (`report`).

mod claims;
mod report;
mod run;

pub use claims::check_cap_claims;
pub use report::cap_markdown;
pub use run::{
    CAP_POLICIES, MIX_RATIOS, MIX_SHARES, MIX_TARGET_UTILISATION, STATIC_RATE, THRESHOLDS, cap_classes,
    mix_cases, mix_classes, mix_rate, reproduce_cap, static_spec,
};
