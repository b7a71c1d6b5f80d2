//! `locus sim reproduce`: the paper studies, one folder each — `lard`, `csld`, `cap`, `sc`,
//! `dc` (run, claims, report) — and what they share: a claim checked against the results, the
//! claims table of a `report.md`, the points of the process-driven studies (`study`), and the
//! message naming what a study wrote.

pub mod cap;
pub mod csld;
pub mod dc;
pub mod lard;
pub mod sc;
pub(crate) mod study;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::SimError;

pub use lard::{
    CHOICE, LARD_POLICIES, ReproduceOptions, Reproduction, check_claims, observations, reproduce_lard,
    rice_like_spec,
};

/// One of the paper's claims checked against the results.
#[derive(Clone, Debug, Serialize)]
pub struct Claim {
    /// What the paper says.
    pub statement: &'static str,
    /// How it is checked here (fixed before the runs, not tuned to them).
    pub criterion: &'static str,
    pub met: bool,
    /// The numbers behind the verdict.
    pub evidence: String,
    /// Whether the claim holds by how the model is built (e.g. CSLD's pick is the delay of a
    /// processor-sharing queue, which is what the modelled CPU is), so that its being met says
    /// little about the policy; the evidence says why.
    pub by_construction: bool,
    /// The slack through which the claim holds, when its criterion allows one beyond the
    /// paper's statement (e.g. "≥ 0.95 × DA"); `null` when the criterion is the paper's own.
    pub slack: Option<String>,
}

impl Claim {
    /// A claim that does not hold by construction and has no slack.
    pub fn new(statement: &'static str, criterion: &'static str, met: bool, evidence: String) -> Claim {
        Claim { statement, criterion, met, evidence, by_construction: false, slack: None }
    }

    /// The claim holds by how the model is built, for the reason `why` (added to the evidence).
    pub fn by_construction(mut self, why: &str) -> Claim {
        self.by_construction = true;
        self.evidence = format!("{} — by construction: {why}", self.evidence);
        self
    }

    /// The claim holds only through `slack`.
    pub fn with_slack(mut self, slack: impl Into<String>) -> Claim {
        self.slack = Some(slack.into());
        self
    }
}

/// The `## Claims` section of a study's `report.md`: one row per claim, met or not met, with
/// its criterion and evidence.
pub(crate) fn write_claims_table(o: &mut String, claims: &[Claim]) {
    let _ = writeln!(
        o,
        "## Claims\n\n\"By construction\": the claim holds by how the model is built, so its being met says \
         little about the policy. \"Slack\": what the criterion allows beyond the paper's own statement.\n\n\
         | | claim | criterion | by construction | slack | result |\n|---|---|---|---|---|---|"
    );
    for c in claims {
        let mark = if c.met { "**met**" } else { "**not met**" };
        let built = if c.by_construction { "yes" } else { "no" };
        let slack = c.slack.as_deref().unwrap_or("–");
        let _ = writeln!(
            o,
            "| {mark} | {} | {} | {built} | {slack} | {} |",
            c.statement, c.criterion, c.evidence
        );
    }
}

/// Write `text` into `dir/name`; returns the path.
pub(crate) fn write_file(dir: &Path, name: &str, text: String) -> Result<PathBuf, SimError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| SimError::io(&path, e))?;
    Ok(path)
}

/// `value` as pretty JSON with a final newline.
pub(crate) fn pretty_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).expect("study outputs serialize") + "\n"
}

/// The directory a reproduction writes into, for messages.
pub fn describe_outputs(files: &[PathBuf], dir: &Path) -> String {
    let names: Vec<String> =
        files.iter().map(|f| f.strip_prefix(dir).unwrap_or(f).display().to_string()).collect();
    format!("{}: {}", dir.display(), names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_serializes_by_construction_and_a_null_or_stated_slack_and_the_table_shows_both() {
        let plain = Claim::new("s", "c", true, "e".into());
        let json: serde_json::Value = serde_json::from_str(&pretty_json(&plain)).unwrap();
        assert_eq!((json["by_construction"].as_bool(), json["slack"].is_null()), (Some(false), true));
        let built =
            Claim::new("s2", "c2", false, "e2".into()).with_slack("0.95 of DA").by_construction("why");
        let json: serde_json::Value = serde_json::from_str(&pretty_json(&built)).unwrap();
        assert_eq!(
            (json["by_construction"].as_bool(), json["slack"].as_str()),
            (Some(true), Some("0.95 of DA"))
        );
        assert!(json["evidence"].as_str().unwrap().ends_with("by construction: why"));
        let mut table = String::new();
        write_claims_table(&mut table, &[plain, built]);
        assert!(table.contains("| **met** | s | c | no | – | e |"), "{table}");
        assert!(table.contains("| **not met** | s2 | c2 | yes | 0.95 of DA |"), "{table}");
    }
}
