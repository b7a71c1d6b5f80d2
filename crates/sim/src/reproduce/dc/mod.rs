//! `locus sim reproduce dc`: the DC-Apache paper's Figs 7–9 on the peer simulator — the run
//! (`run`), its claims (`claims`), plots (`plots`) and `report.md` (`report`), over the rows
//! each figure reads (`rows`).

mod claims;
mod plots;
mod report;
mod rows;
mod run;

pub use claims::check_dc_claims;
pub use plots::write_dc_plots;
pub use report::dc_markdown;
pub use run::{
    DcOptions, DcOutcome, DcRow, QUOTA_FRACTIONS, QUOTA_METHODS, QUOTA_SERVERS, QUOTA_SETS, full_sizes,
    quota_points, reproduce_dc,
};
