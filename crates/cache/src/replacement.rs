//! The replacement policies a `DocCache` can use (LRU, LFU, GDS, GDSF), their names as
//! written in configuration files, and the error for a name that is none of them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Which object a full cache evicts to make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Replacement {
    /// Least recently used: the object untouched for the longest time leaves first.
    Lru,
    /// Least frequently used while cached; ties go to the least recently used. An object's
    /// count starts again from one when it comes back after an eviction.
    Lfu,
    /// Greedy-Dual-Size (Cao & Irani): priority `L + cost / size`, where `L` rises to the
    /// priority of each evicted object.
    Gds,
    /// Greedy-Dual-Size-Frequency (Cherkasova): priority `L + frequency * cost / size`.
    Gdsf,
}

impl Replacement {
    /// Every policy, in the order they are listed in error messages.
    pub const ALL: [Replacement; 4] =
        [Replacement::Lru, Replacement::Lfu, Replacement::Gds, Replacement::Gdsf];

    /// The lowercase name used in configuration files and by `Display`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Replacement::Lru => "lru",
            Replacement::Lfu => "lfu",
            Replacement::Gds => "gds",
            Replacement::Gdsf => "gdsf",
        }
    }
}

impl fmt::Display for Replacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A replacement policy name that is not one of `lru`, `lfu`, `gds`, `gdsf`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown cache replacement policy {name:?}; valid names are lru, lfu, gds, gdsf")]
pub struct UnknownReplacement {
    /// The name that was given.
    pub name: String,
}

impl FromStr for Replacement {
    type Err = UnknownReplacement;

    /// Parses a policy name, ignoring ASCII case (`"GDSF"` and `"gdsf"` are the same).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Replacement::ALL
            .into_iter()
            .find(|policy| policy.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownReplacement { name: name.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_display_and_from_str() {
        for policy in Replacement::ALL {
            assert_eq!(policy.to_string().parse::<Replacement>(), Ok(policy));
        }
        assert_eq!("GDSF".parse::<Replacement>(), Ok(Replacement::Gdsf));
    }

    #[test]
    fn unknown_name_error_lists_the_valid_names() {
        let err = "fifo".parse::<Replacement>().unwrap_err();
        assert_eq!(err.name, "fifo");
        let message = err.to_string();
        for policy in Replacement::ALL {
            assert!(message.contains(policy.as_str()), "{message}");
        }
        assert!(message.contains("fifo"), "{message}");
    }

    #[test]
    fn serde_uses_lowercase_names() {
        assert_eq!(serde_json::to_string(&Replacement::Gdsf).unwrap(), "\"gdsf\"");
        assert_eq!(serde_json::from_str::<Replacement>("\"lfu\"").unwrap(), Replacement::Lfu);
        assert!(serde_json::from_str::<Replacement>("\"random\"").is_err());
    }
}
