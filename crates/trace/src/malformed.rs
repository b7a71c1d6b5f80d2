//! `MalformedBudget`: how a reader counts and skips malformed records, keeps the first few
//! errors for a report, and fails once more than the tolerated number were seen.

use crate::error::TraceError;

/// How many malformed-record errors a reader keeps for its report.
pub const MALFORMED_SAMPLES_KEPT: usize = 10;

/// Counter of malformed records with a limit.
#[derive(Debug)]
pub(crate) struct MalformedBudget {
    path: String,
    limit: u64,
    count: u64,
    samples: Vec<TraceError>,
}

impl MalformedBudget {
    /// A budget tolerating `limit` malformed records of `path`.
    pub(crate) fn new(path: impl Into<String>, limit: u64) -> MalformedBudget {
        MalformedBudget { path: path.into(), limit, count: 0, samples: Vec::new() }
    }

    /// Count one malformed record at `line`; `Err(TooManyMalformed)` once over the limit.
    pub(crate) fn skip(&mut self, line: u64, message: String) -> Result<(), TraceError> {
        self.count += 1;
        if self.count > self.limit {
            return Err(TraceError::TooManyMalformed {
                path: self.path.clone(),
                count: self.count,
                limit: self.limit,
                line,
                message,
            });
        }
        if self.samples.len() < MALFORMED_SAMPLES_KEPT {
            self.samples.push(TraceError::Malformed { path: self.path.clone(), line, message });
        }
        Ok(())
    }

    /// Malformed records seen so far.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// The first few malformed-record errors.
    pub(crate) fn samples(&self) -> &[TraceError] {
        &self.samples
    }

    /// The file name used in errors.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_tolerates_exactly_its_limit_then_fails_naming_the_line() {
        let mut b = MalformedBudget::new("x.log", 2);
        assert!(b.skip(3, "bad".into()).is_ok());
        assert!(b.skip(5, "bad".into()).is_ok());
        let err = b.skip(9, "worse".into()).unwrap_err();
        assert!(matches!(err, TraceError::TooManyMalformed { count: 3, limit: 2, line: 9, .. }));
        assert!(err.to_string().contains("x.log"), "{err}");
        assert_eq!(b.samples().len(), 2);
        assert_eq!(b.samples()[1].to_string(), "x.log:5: bad");
    }
}
