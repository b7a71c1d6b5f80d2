//! `locus sim reproduce csld`: the CSLD paper's study on the process-driven back end — the
//! run of Table 4, Table 5 and Fig. 6 (`run`), its claims (`claims`) and `report.md` (`report`).

mod claims;
mod report;
mod run;

pub use claims::check_csld_claims;
pub use report::csld_markdown;
pub(crate) use run::point_config;
pub use run::{
    CsldCase, CsldOptions, FIG6_POLICIES, StudyOutput, TABLE4, TABLE4_POLICIES, TABLE5, TABLE5_CASE,
    csld_label, reproduce_csld, workload_stats,
};
