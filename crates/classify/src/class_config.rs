//! `ClassConfig`: one request class as written in configuration (a `[[classes]]` table).
//! Every field is checked as it is read, so a bad value is refused with its key and line.

use std::collections::BTreeMap;

use locus_core::ResourceKind;
use serde::{Deserialize, Deserializer, Serialize};

use crate::byte_size::ByteSize;
use crate::cost::CostDistribution;

/// One class as written in configuration:
///
/// ```toml
/// [[classes]]
/// name = "search"
/// prefix = "/cgi-bin/search"
/// query = { q = "*", lang = "en" }   # q with any value, lang exactly "en"
/// cost = { dist = "normal", mean_ms = 30, stddev_ms = 6 }
/// disk_ms = 20                       # optional: one uncached disk read of 20 ms
/// size = "4KiB"
/// resource = "cpu+disk"              # optional: none, cpu, disk, cpu+disk
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// Class name, sent back in `X-Locus-Class`: non-empty visible ASCII.
    #[serde(deserialize_with = "class_name")]
    pub name: String,
    /// Path prefix the request path must start with (compared before percent-decoding).
    #[serde(deserialize_with = "path_prefix")]
    pub prefix: String,
    /// Query parameters the request must carry: `"*"` accepts any value, anything else must
    /// equal the (percent-decoded) value.
    #[serde(default)]
    pub query: BTreeMap<String, String>,
    /// CPU time each request of the class costs.
    pub cost: CostDistribution,
    /// Disk time each request of the class costs (a read that no cache holds), ms.
    #[serde(default, deserialize_with = "non_negative_ms", skip_serializing_if = "is_zero")]
    pub disk_ms: f64,
    /// Response body size.
    pub size: ByteSize,
    /// The resource the class mostly uses; by default derived from its CPU and disk costs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceKind>,
}

/// A file of `[[classes]]` tables: the schema the node's `class_file`, the switch's
/// `class_file` and the simulator's `--class-file` all read.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassFile {
    #[serde(default)]
    pub classes: Vec<ClassConfig>,
}

impl ClassConfig {
    /// The stated resource kind, or the one its costs imply: CPU if it costs CPU, disk if it
    /// costs disk time, both, or none.
    pub fn resource_kind(&self) -> ResourceKind {
        self.resource.unwrap_or(ResourceKind::of_costs(self.cost.mean_ms() > 0.0, self.disk_ms > 0.0))
    }
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn class_name<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(serde::de::Error::custom(format!(
            "name {name:?} must be non-empty visible ASCII (no spaces)"
        )));
    }
    Ok(name)
}

fn path_prefix<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let prefix = String::deserialize(d)?;
    if !prefix.starts_with('/') {
        return Err(serde::de::Error::custom(format!("prefix {prefix:?} must start with '/'")));
    }
    Ok(prefix)
}

fn non_negative_ms<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let ms = f64::deserialize(d)?;
    if !ms.is_finite() || ms < 0.0 {
        return Err(serde::de::Error::custom(format!("disk_ms must be a finite number >= 0, not {ms}")));
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct File {
        classes: Vec<ClassConfig>,
    }

    const GOOD: &str = "[[classes]]\nname = \"db\"\nprefix = \"/db\"\n\
                        cost = { dist = \"const\", ms = 0 }\ndisk_ms = 20\nsize = \"4KiB\"\n";

    #[test]
    fn class_config_reads_disk_cost_and_derives_its_resource_kind() {
        let f: File = toml::from_str(GOOD).unwrap();
        assert_eq!(f.classes[0].disk_ms, 20.0);
        assert_eq!(f.classes[0].size, ByteSize::kib(4));
        assert_eq!(f.classes[0].resource_kind(), ResourceKind::Disk);
        let f: File = toml::from_str(&format!("{GOOD}resource = \"cpu+disk\"\n")).unwrap();
        assert_eq!(f.classes[0].resource_kind(), ResourceKind::CpuDisk);
    }

    #[test]
    fn bad_class_values_are_refused_naming_key_and_line() {
        let cases = [
            (GOOD.replace("\"/db\"", "\"db\""), "line 3", "must start with '/'"),
            (GOOD.replace("disk_ms = 20", "disk_ms = -2"), "line 5", "disk_ms must be"),
            (format!("{GOOD}resource = \"gpu\"\n"), "line 7", "unknown variant `gpu`"),
            (GOOD.replace("ms = 0", "ms = -1"), "line 4", "ms must be a finite number"),
            (GOOD.replace("\"db\"\n", "\"d b\"\n"), "line 2", "visible ASCII"),
            (format!("{GOOD}colour = 1\n"), "line 7", "unknown field `colour`"),
        ];
        for (text, line, what) in cases {
            let e = toml::from_str::<File>(&text).unwrap_err().to_string();
            assert!(e.contains(line) && e.contains(what), "expected {line} / {what} in:\n{e}");
        }
    }
}
