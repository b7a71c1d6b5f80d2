//! `UtcTime`: the current date and time in UTC from the system clock (civil-from-days
//! arithmetic, no time-zone database), for report headers and `lab-out/<timestamp>` folders.

use std::time::{SystemTime, UNIX_EPOCH};

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
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        UtcTime::from_unix(secs as i64)
    }

    /// The moment `secs` seconds after 1970-01-01 00:00:00 UTC.
    pub fn from_unix(secs: i64) -> UtcTime {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        // Howard Hinnant's days-to-civil algorithm.
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        UtcTime {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem % 3600 / 60) as u32,
            second: (rem % 60) as u32,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_moments_convert_to_their_calendar_dates() {
        assert_eq!(UtcTime::from_unix(0).display(), "1970-01-01 00:00:00 UTC");
        assert_eq!(UtcTime::from_unix(951_782_400).display(), "2000-02-29 00:00:00 UTC");
        assert_eq!(UtcTime::from_unix(1_735_689_599).compact(), "20241231-235959");
        assert!(UtcTime::now().year >= 2024);
    }
}
