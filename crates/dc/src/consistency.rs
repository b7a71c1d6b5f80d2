//! Keeping replicas consistent: the `ConsistencyMethod` (co-op validation, active update,
//! explicit or implicit notification), what a co-op does with a request for a copy
//! (`Consistency::decide`: fetch, validate or serve) and what a home does when one of its
//! documents changes (`on_document_changed`: push, notify or nothing).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ServerId;
use crate::replica_store::CopyMeta;

/// How replicas follow changes of the original.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConsistencyMethod {
    /// The co-op revalidates a copy (conditional GET) on a request once it is older than V.
    CoopValidation,
    /// The home pushes the new document to every co-op of its set.
    ActiveUpdate,
    /// The home tells every co-op of its set to drop the copy.
    ExplicitNotification,
    /// The replica URL carries the version; a co-op refetches when it is newer than its copy.
    ImplicitNotification,
}

impl ConsistencyMethod {
    pub const ALL: [ConsistencyMethod; 4] = [
        ConsistencyMethod::CoopValidation,
        ConsistencyMethod::ActiveUpdate,
        ConsistencyMethod::ExplicitNotification,
        ConsistencyMethod::ImplicitNotification,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ConsistencyMethod::CoopValidation => "coop-validation",
            ConsistencyMethod::ActiveUpdate => "active-update",
            ConsistencyMethod::ExplicitNotification => "explicit-notification",
            ConsistencyMethod::ImplicitNotification => "implicit-notification",
        }
    }
}

impl fmt::Display for ConsistencyMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A consistency method name that is none of the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown consistency method {0:?}; valid names are coop-validation, active-update, \
     explicit-notification, implicit-notification"
)]
pub struct UnknownConsistencyMethod(pub String);

impl FromStr for ConsistencyMethod {
    type Err = UnknownConsistencyMethod;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        (ConsistencyMethod::ALL.into_iter())
            .find(|m| m.as_str().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| UnknownConsistencyMethod(name.into()))
    }
}

/// What a co-op does with a request for a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyDecision {
    /// No usable copy: GET it from the home.
    Fetch,
    /// Conditional GET (If-Modified-Since the copy's version); 304 keeps it, 200 replaces it.
    Validate,
    /// Serve the copy as it is.
    Serve,
}

/// What a home does when one of its documents changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HomeAction {
    /// Send the new document to these co-ops.
    Push(Vec<ServerId>),
    /// Tell these co-ops to drop their copy.
    Notify(Vec<ServerId>),
    Nothing,
}

/// A consistency method with its settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consistency {
    pub method: ConsistencyMethod,
    /// Co-op validation: a copy checked longer ago than this (ns) is revalidated.
    pub validation_interval_ns: u64,
}

impl Default for Consistency {
    fn default() -> Self {
        Consistency::new(ConsistencyMethod::CoopValidation)
    }
}

impl Consistency {
    /// The default validation interval V, 60 s.
    pub const DEFAULT_VALIDATION_INTERVAL_NS: u64 = 60_000_000_000;

    /// `method` with the default interval.
    pub fn new(method: ConsistencyMethod) -> Consistency {
        Consistency { method, validation_interval_ns: Self::DEFAULT_VALIDATION_INTERVAL_NS }
    }

    /// Co-op side: what to do with a request for a replica whose URL names `url_version`,
    /// given the copy held (if any), at `now` (ns).
    pub fn decide(&self, copy: Option<&CopyMeta>, url_version: u64, now: u64) -> CopyDecision {
        let Some(copy) = copy else {
            return CopyDecision::Fetch;
        };
        match self.method {
            ConsistencyMethod::ImplicitNotification if url_version > copy.version => CopyDecision::Fetch,
            ConsistencyMethod::CoopValidation
                if now.saturating_sub(copy.last_check) > self.validation_interval_ns =>
            {
                CopyDecision::Validate
            }
            _ => CopyDecision::Serve,
        }
    }
}

/// Home side: what to do when a document held by `servers` (its set, `home` included)
/// changes. Co-op validation and implicit notification need nothing from the home.
pub fn on_document_changed(method: ConsistencyMethod, home: ServerId, servers: &[ServerId]) -> HomeAction {
    let coops: Vec<ServerId> = servers.iter().copied().filter(|&s| s != home).collect();
    if coops.is_empty() {
        return HomeAction::Nothing;
    }
    match method {
        ConsistencyMethod::ActiveUpdate => HomeAction::Push(coops),
        ConsistencyMethod::ExplicitNotification => HomeAction::Notify(coops),
        ConsistencyMethod::CoopValidation | ConsistencyMethod::ImplicitNotification => HomeAction::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn copy(version: u64, last_check: u64) -> CopyMeta {
        CopyMeta { version, size: 10, last_check, last_use: last_check }
    }

    #[test]
    fn missing_copy_is_always_fetched() {
        for m in ConsistencyMethod::ALL {
            assert_eq!(Consistency::new(m).decide(None, 1, 0), CopyDecision::Fetch);
        }
    }

    #[test]
    fn coop_validation_validates_only_after_the_interval() {
        let c = Consistency::default();
        assert_eq!(c.decide(Some(&copy(1, 0)), 1, 60 * S), CopyDecision::Serve);
        assert_eq!(c.decide(Some(&copy(1, 0)), 1, 60 * S + 1), CopyDecision::Validate);
        assert_eq!(c.decide(Some(&copy(1, 10 * S)), 1, 0), CopyDecision::Serve);
    }

    #[test]
    fn implicit_notification_fetches_only_for_a_newer_url_version() {
        let c = Consistency::new(ConsistencyMethod::ImplicitNotification);
        assert_eq!(c.decide(Some(&copy(5, 0)), 6, 1000 * S), CopyDecision::Fetch);
        assert_eq!(c.decide(Some(&copy(5, 0)), 5, 1000 * S), CopyDecision::Serve);
        assert_eq!(c.decide(Some(&copy(5, 0)), 4, 1000 * S), CopyDecision::Serve);
    }

    #[test]
    fn home_invalidation_methods_serve_copies_and_address_only_coops() {
        for m in [ConsistencyMethod::ActiveUpdate, ConsistencyMethod::ExplicitNotification] {
            assert_eq!(Consistency::new(m).decide(Some(&copy(1, 0)), 9, 1000 * S), CopyDecision::Serve);
        }
        let set = [ServerId(0), ServerId(2), ServerId(3)];
        let coops = vec![ServerId(2), ServerId(3)];
        let push = on_document_changed(ConsistencyMethod::ActiveUpdate, ServerId(0), &set);
        assert_eq!(push, HomeAction::Push(coops.clone()));
        let notify = on_document_changed(ConsistencyMethod::ExplicitNotification, ServerId(0), &set);
        assert_eq!(notify, HomeAction::Notify(coops));
        let alone = on_document_changed(ConsistencyMethod::ActiveUpdate, ServerId(0), &[ServerId(0)]);
        assert_eq!(alone, HomeAction::Nothing);
        let lazy = on_document_changed(ConsistencyMethod::CoopValidation, ServerId(0), &set);
        assert_eq!(lazy, HomeAction::Nothing);
    }

    #[test]
    fn method_names_parse_display_serde_and_refuse_unknown() {
        for m in ConsistencyMethod::ALL {
            assert_eq!(m.to_string().parse::<ConsistencyMethod>(), Ok(m));
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{m}\""));
        }
        let err = "ttl".parse::<ConsistencyMethod>().unwrap_err().to_string();
        assert!(err.contains("coop-validation") && err.contains("implicit-notification"), "{err}");
    }
}
