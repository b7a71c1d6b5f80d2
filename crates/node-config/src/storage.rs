//! `StorageConfig`: the node's storage model as configured — seek and rotation time, transfer
//! rate and number of disks — read from `[storage]` or a `--storage` spec string (`lard98`,
//! `csld`, `seek_ms=28,mb_s=10,disks=2`), with its presets and checks.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::preset_spec::{parse_preset_spec, spec_integer, spec_number};

/// The storage model: every miss costs `seek_ms + size / transfer_mb_s` on one of `disks`
/// disks (chosen by hashing the path), each a FIFO queue.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "StorageConfigFields")]
pub struct StorageConfig {
    /// Positioning time per read (seek and rotation), in ms.
    pub seek_ms: f64,
    /// Transfer rate in MB/s (10^6 bytes per second).
    pub transfer_mb_s: f64,
    /// Number of disks, each with its own queue.
    pub disks: usize,
}

impl StorageConfig {
    /// The LARD paper's disk (1998): 28 ms per read, 10 MB/s, one disk.
    pub fn lard98() -> StorageConfig {
        StorageConfig { seek_ms: 28.0, transfer_mb_s: 10.0, disks: 1 }
    }

    /// The CSLD paper's disk: 15.6 ms seek and rotation, 4 KB per 300 µs (≈ 13.65 MB/s).
    pub fn csld() -> StorageConfig {
        StorageConfig { seek_ms: 15.6, transfer_mb_s: 4096.0 / 300.0, disks: 1 }
    }

    fn preset(name: &str) -> Option<StorageConfig> {
        match name {
            "lard98" => Some(StorageConfig::lard98()),
            "csld" => Some(StorageConfig::csld()),
            _ => None,
        }
    }

    /// Check the parameters.
    pub fn validate(&self) -> Result<(), String> {
        if !self.seek_ms.is_finite() || self.seek_ms < 0.0 {
            return Err(format!("storage seek_ms must be >= 0, not {}", self.seek_ms));
        }
        if !self.transfer_mb_s.is_finite() || self.transfer_mb_s <= 0.0 {
            return Err(format!("storage transfer_mb_s must be > 0, not {}", self.transfer_mb_s));
        }
        if self.disks == 0 || self.disks > 1024 {
            return Err(format!("storage disks must be in 1..=1024, not {}", self.disks));
        }
        Ok(())
    }
}

impl Default for StorageConfig {
    fn default() -> StorageConfig {
        StorageConfig::lard98()
    }
}

/// `[storage]` as written: an optional preset, then explicit fields that override it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StorageConfigFields {
    preset: Option<String>,
    seek_ms: Option<f64>,
    transfer_mb_s: Option<f64>,
    disks: Option<usize>,
}

impl TryFrom<StorageConfigFields> for StorageConfig {
    type Error = String;

    fn try_from(f: StorageConfigFields) -> Result<StorageConfig, String> {
        let mut c = match f.preset.as_deref() {
            None => StorageConfig::lard98(),
            Some(name) => StorageConfig::preset(name)
                .ok_or_else(|| format!("unknown storage preset {name:?}; known presets: lard98, csld"))?,
        };
        c.seek_ms = f.seek_ms.unwrap_or(c.seek_ms);
        c.transfer_mb_s = f.transfer_mb_s.unwrap_or(c.transfer_mb_s);
        c.disks = f.disks.unwrap_or(c.disks);
        c.validate()?;
        Ok(c)
    }
}

impl FromStr for StorageConfig {
    type Err = String;

    /// `"lard98"`, `"csld"`, or `key=value` pairs separated by commas, optionally starting
    /// with a preset: `"seek_ms=28,mb_s=10,disks=2"`, `"lard98,disks=4"`.
    fn from_str(s: &str) -> Result<StorageConfig, String> {
        let c = parse_preset_spec(
            s,
            "storage",
            StorageConfig::lard98(),
            StorageConfig::preset,
            |c, key, value, item| {
                match key {
                    "seek_ms" | "seek" => c.seek_ms = spec_number(value, item)?,
                    "transfer_mb_s" | "mb_s" => c.transfer_mb_s = spec_number(value, item)?,
                    "disks" => c.disks = spec_integer(value, item)?,
                    other => return Err(format!("unknown storage key {other:?} (seek_ms, mb_s, disks)")),
                }
                Ok(())
            },
        )?;
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_strings_parse_presets_and_overrides() {
        assert_eq!("lard98".parse(), Ok(StorageConfig::lard98()));
        assert_eq!(
            "seek_ms=28,mb_s=10,disks=2".parse(),
            Ok(StorageConfig { seek_ms: 28.0, transfer_mb_s: 10.0, disks: 2 })
        );
        assert_eq!("lard98,disks=4".parse::<StorageConfig>().unwrap().disks, 4);
        assert!("seek_ms=-1".parse::<StorageConfig>().is_err());
        assert!("speed=3".parse::<StorageConfig>().is_err());
        assert!("disks=0".parse::<StorageConfig>().is_err());
    }
}
