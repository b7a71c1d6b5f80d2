//! `ByteSize`: a size in bytes as written in configuration files and on the command line —
//! a plain integer (bytes) or a number with a unit such as `"64MiB"`, `"512KB"` or `"1.5G"`.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// A number of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// `n` KiB.
    pub const fn kib(n: u64) -> ByteSize {
        ByteSize(n * 1024)
    }

    /// `n` MiB.
    pub const fn mib(n: u64) -> ByteSize {
        ByteSize(n * 1024 * 1024)
    }

    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

/// A size string that is not a number followed by a known unit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid size {text:?}: expected bytes as an integer or a number with a unit \
     (B, KB, MB, GB, TB = powers of 1000; KiB, MiB, GiB, TiB, K, M, G, T = powers of 1024)"
)]
pub struct InvalidByteSize {
    /// The text that was given.
    pub text: String,
}

impl FromStr for ByteSize {
    type Err = InvalidByteSize;

    /// Parses `"4096"`, `"64MiB"`, `"512 KB"`, `"1.5g"` (units are case-insensitive).
    fn from_str(text: &str) -> Result<ByteSize, InvalidByteSize> {
        let invalid = || InvalidByteSize { text: text.to_owned() };
        let s = text.trim();
        let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (number, unit) = s.split_at(split);
        if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
            return Err(invalid());
        }
        let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kb" => 1000,
            "mb" => 1000 * 1000,
            "gb" => 1000 * 1000 * 1000,
            "tb" => 1000 * 1000 * 1000 * 1000,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            "t" | "tib" => 1 << 40,
            _ => return Err(invalid()),
        };
        if let Ok(whole) = number.parse::<u64>() {
            return whole.checked_mul(multiplier).map(ByteSize).ok_or_else(invalid);
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let bytes = value * multiplier as f64;
        if !bytes.is_finite() || bytes >= u64::MAX as f64 || bytes.fract() != 0.0 {
            return Err(invalid());
        }
        Ok(ByteSize(bytes as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (unit, size) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if n >= size && n.is_multiple_of(size) {
                return write!(f, "{}{unit}", n / size);
            }
        }
        write!(f, "{n}")
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ByteSize, D::Error> {
        struct SizeVisitor;
        impl Visitor<'_> for SizeVisitor {
            type Value = ByteSize;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size in bytes: an integer or a string such as \"64MiB\"")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v).map(ByteSize).map_err(|_| E::custom(format!("negative size {v}")))
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                v.parse().map_err(E::custom)
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_strings_parse_with_binary_and_decimal_units() {
        assert_eq!("4096".parse(), Ok(ByteSize(4096)));
        assert_eq!("64MiB".parse(), Ok(ByteSize(64 << 20)));
        assert_eq!("512KB".parse(), Ok(ByteSize(512_000)));
        assert_eq!("512 kib".parse(), Ok(ByteSize(512 << 10)));
        assert_eq!("1.5G".parse(), Ok(ByteSize(3 << 29)));
        assert_eq!("10b".parse(), Ok(ByteSize(10)));
        assert_eq!("2TB".parse(), Ok(ByteSize(2_000_000_000_000)));
    }

    #[test]
    fn size_strings_with_bad_numbers_or_units_are_refused() {
        for bad in ["", "MiB", "12 parsecs", "-5", "1.2.3", ".5M", "5.", "0.3", "99999999999TB", "1e3"] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn size_displays_in_the_largest_exact_binary_unit() {
        assert_eq!(ByteSize::mib(64).to_string(), "64MiB");
        assert_eq!(ByteSize(1000).to_string(), "1000");
        assert_eq!(ByteSize::kib(3).to_string(), "3KiB");
    }
}
