//! Times as the reports show them: relative ("3 min ago") for reading at a glance, absolute
//! (UTC, to the second) for comparing with logs, and ISO 8601 for the `<time>` element.

use std::time::{Duration, SystemTime};

use serde::Serialize;

/// One point in time, three ways.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct When {
    /// `2026-11-30T13:04:11Z`.
    pub iso: String,
    /// `2026-11-30 13:04:11 UTC`.
    pub absolute: String,
    /// `3 min ago`, `just now`, `in 12 min`.
    pub relative: String,
}

impl When {
    /// `t` as seen from `now`.
    pub fn at(t: SystemTime, now: SystemTime) -> When {
        let iso = humantime::format_rfc3339_seconds(t).to_string();
        let absolute = format!("{} UTC", iso.trim_end_matches('Z').replacen('T', " ", 1));
        let relative = match now.duration_since(t) {
            Ok(d) if d < Duration::from_secs(5) => "just now".to_string(),
            Ok(d) => format!("{} ago", span(d)),
            Err(e) if e.duration() < Duration::from_secs(5) => "just now".to_string(),
            Err(e) => format!("in {}", span(e.duration())),
        };
        When { iso, absolute, relative }
    }
}

/// A duration in words, two units at most: `42 s`, `3 min 5 s`, `2 h 10 min`, `3 days`.
pub fn span(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s} s"),
        60..=599 if s % 60 != 0 => format!("{} min {} s", s / 60, s % 60),
        60..=3599 => format!("{} min", s / 60),
        3600..=86_399 if (s % 3600) / 60 != 0 => format!("{} h {} min", s / 3600, (s % 3600) / 60),
        3600..=86_399 => format!("{} h", s / 3600),
        _ if s / 86_400 == 1 => "1 day".to_string(),
        _ => format!("{} days", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_and_absolute() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000);
        let w = When::at(t, t + Duration::from_secs(185));
        assert_eq!(w.iso, "2026-09-21T14:13:20Z");
        assert_eq!(w.absolute, "2026-09-21 14:13:20 UTC");
        assert_eq!(w.relative, "3 min 5 s ago");
        assert_eq!(When::at(t, t).relative, "just now");
        assert_eq!(When::at(t + Duration::from_secs(600), t).relative, "in 10 min");
    }

    #[test]
    fn spans() {
        assert_eq!(span(Duration::from_secs(42)), "42 s");
        assert_eq!(span(Duration::from_secs(600)), "10 min");
        assert_eq!(span(Duration::from_secs(7800)), "2 h 10 min");
        assert_eq!(span(Duration::from_secs(86_400 * 3)), "3 days");
    }
}
