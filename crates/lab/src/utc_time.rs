//! `UtcTime`: the current date and time in UTC from the system clock (the calendar is the
//! `time` crate's, no time-zone database), for report headers and `lab-out/<timestamp>` folders.

use time::OffsetDateTime;

/// A moment in UTC, to the second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UtcTime {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl UtcTime {
    /// Now.
    pub fn now() -> UtcTime {
        UtcTime::from(OffsetDateTime::now_utc())
    }

    /// The moment `secs` seconds after 1970-01-01 00:00:00 UTC, if its year is within ±999,999.
    pub fn from_unix(secs: i64) -> Option<UtcTime> {
        OffsetDateTime::from_unix_timestamp(secs).ok().map(UtcTime::from)
    }

    /// `2025-01-31 12:00:00 UTC`.
    pub fn display(&self) -> String {
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// `20250131-120000`, for folder names.
    pub fn compact(&self) -> String {
        format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

impl From<OffsetDateTime> for UtcTime {
    fn from(t: OffsetDateTime) -> UtcTime {
        UtcTime {
            year: i64::from(t.year()),
            month: u32::from(u8::from(t.month())),
            day: u32::from(t.day()),
            hour: u32::from(t.hour()),
            minute: u32::from(t.minute()),
            second: u32::from(t.second()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_moments_convert_to_their_calendar_dates() {
        let at = |secs| UtcTime::from_unix(secs).unwrap();
        assert_eq!(at(0).display(), "1970-01-01 00:00:00 UTC");
        assert_eq!(at(-1).display(), "1969-12-31 23:59:59 UTC");
        assert_eq!(at(951_782_400).display(), "2000-02-29 00:00:00 UTC");
        assert_eq!(at(951_868_800).display(), "2000-03-01 00:00:00 UTC");
        assert_eq!(at(-2_203_977_600).display(), "1900-02-28 00:00:00 UTC");
        assert_eq!(at(-2_203_891_200).display(), "1900-03-01 00:00:00 UTC");
        assert_eq!(at(4_107_542_400).display(), "2100-03-01 00:00:00 UTC");
        assert_eq!(at(1_709_210_096).display(), "2024-02-29 12:34:56 UTC");
        assert_eq!(at(1_735_689_599).compact(), "20241231-235959");
        assert_eq!(at(253_402_300_799).compact(), "99991231-235959");
        assert_eq!(UtcTime::from_unix(i64::MAX), None);
        assert!(UtcTime::now().year >= 2024);
    }
}
