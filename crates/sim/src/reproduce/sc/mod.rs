//! `locus sim reproduce sc`: the Socket Cloning paper's Fig. 9 — the run (`run`), the
//! file-server rate sweep (`sensitivity`), its claims (`claims`) and `report.md` (`report`).

mod claims;
mod report;
mod run;
mod sensitivity;

pub use claims::{CF_NOT_ABOVE_SLACK, RATIO_TOLERANCE, RR_FLAT_RISE, check_sc_claims};
pub use report::{ScReportInputs, sc_markdown};
pub use run::{
    FILE_SERVER_BPS, PAPER_RATIOS_AT_12, PIII_733_SPEED, SC_POLICIES, SENSITIVITY_SHARE, ScOptions,
    ScReproduction, ScRow, reproduce_sc, sc_study_config,
};
pub use sensitivity::{
    KEEP_COPY_POLICIES, SENSITIVITY_MBPS, SensitivityRow, file_server_sensitivity, keep_copy_rows,
};
