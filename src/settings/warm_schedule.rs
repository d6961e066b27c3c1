//! `WarmSchedule`: when a pool keeps warm agents. Empty means always. Otherwise one or more
//! windows separated by `;` (or by new lines), each `DAYS HH:MM-HH:MM ZONE`:
//!
//! - `DAYS`: weekdays (`Mon` … `Sun`, or their full names, any case), ranges of them (`Mon-Fri`,
//!   `Fri-Mon` wraps over the week's end), or lists of both joined by `,` (`Mon-Wed,Fri`); `,`
//!   only ever joins days, which is why windows are separated by `;`;
//! - `HH:MM-HH:MM`: the wall-clock time the window opens (included) and closes (excluded),
//!   `00:00` to `24:00`; a window that closes at or before it opens runs over midnight and
//!   belongs to the day it opens (`Fri 22:00-06:00` is Friday 22:00 to Saturday 06:00);
//! - `ZONE`: an IANA time zone (`Europe/Berlin`, `America/New_York`, `UTC`), required on every
//!   window so that no window depends on the GoCD server's own zone.
//!
//! Example: `Mon-Fri 07:00-19:00 Europe/Berlin; Sat 09:00-13:00 Europe/Berlin`.
//!
//! Windows are wall-clock times in their zone, so they follow daylight saving time: `07:00` is
//! 07:00 local time in winter and in summer. On the night the clocks go forward the skipped hour
//! does not exist and is never open; on the night they go back the repeated hour is open (or
//! closed) both times. The zones come from jiff's bundled tz database.

use std::fmt;
use std::str::FromStr;
use std::time::SystemTime;

use jiff::civil::Weekday;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// Minutes in a day.
const DAY: u16 = 24 * 60;

/// When warm agents are kept: no windows means always.
#[derive(Debug, Clone, Default)]
pub struct WarmSchedule {
    windows: Vec<Window>,
    /// The text it was parsed from, trimmed (for reports and equality).
    text: String,
}

/// One window: the days it opens on, its wall-clock times and its zone.
#[derive(Debug, Clone)]
struct Window {
    /// Monday first.
    days: [bool; 7],
    /// Minutes after midnight, local time.
    opens: u16,
    closes: u16,
    zone: TimeZone,
}

/// Why a `WarmSchedule` was refused; the message is shown to the GoCD administrator as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("WarmSchedule: {0}")]
pub struct ScheduleError(String);

impl WarmSchedule {
    /// Always open (the empty schedule).
    pub fn always() -> WarmSchedule {
        WarmSchedule::default()
    }

    /// Parses the setting's text (see the module doc for the syntax).
    pub fn parse(text: &str) -> Result<WarmSchedule, ScheduleError> {
        let trimmed = text.trim();
        let mut windows = Vec::new();
        for part in trimmed.split([';', '\n']).map(str::trim).filter(|p| !p.is_empty()) {
            windows.push(Window::parse(part)?);
        }
        Ok(WarmSchedule { windows, text: trimmed.to_string() })
    }

    /// Whether warm agents are kept at `at`.
    pub fn is_open(&self, at: SystemTime) -> bool {
        if self.windows.is_empty() {
            return true;
        }
        // A clock outside jiff's range (years beyond ±9999) is no time to keep agents.
        let Ok(at) = Timestamp::try_from(at) else { return false };
        self.windows.iter().any(|w| w.is_open(at))
    }

    /// Whether the schedule is empty (always open).
    pub fn is_always(&self) -> bool {
        self.windows.is_empty()
    }
}

impl FromStr for WarmSchedule {
    type Err = ScheduleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        WarmSchedule::parse(s)
    }
}

impl fmt::Display for WarmSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.text.is_empty() {
            f.write_str("always")
        } else {
            f.write_str(&self.text)
        }
    }
}

impl PartialEq for WarmSchedule {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for WarmSchedule {}

impl Window {
    fn parse(text: &str) -> Result<Window, ScheduleError> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [days, times, zone] = fields[..] else {
            return Err(ScheduleError(format!(
                "\"{text}\" is not a window: write DAYS HH:MM-HH:MM ZONE, for example \
                 \"Mon-Fri 07:00-19:00 Europe/Berlin\" (several windows separated by \";\")."
            )));
        };
        let days = parse_days(days)?;
        let (opens, closes) = times.split_once('-').ok_or_else(|| {
            ScheduleError(format!("\"{times}\" is not a time window: write HH:MM-HH:MM, for example 07:00-19:00."))
        })?;
        let (opens, closes) = (parse_time(opens)?, parse_time(closes)?);
        if opens == DAY {
            return Err(ScheduleError("a window cannot open at 24:00; open it at 00:00 of the next day.".into()));
        }
        if opens == closes {
            return Err(ScheduleError(format!(
                "\"{times}\" opens and closes at the same time; for a whole day write 00:00-24:00."
            )));
        }
        let zone = TimeZone::get(zone).map_err(|_| {
            ScheduleError(format!(
                "\"{zone}\" is not an IANA time zone; write one such as Europe/Berlin, America/New_York or UTC."
            ))
        })?;
        Ok(Window { days, opens, closes, zone })
    }

    fn is_open(&self, at: Timestamp) -> bool {
        let local = self.zone.to_datetime(at);
        let minute = u16::try_from(local.hour()).unwrap_or(0) * 60 + u16::try_from(local.minute()).unwrap_or(0);
        let today = self.days[day_index(local.weekday())];
        let yesterday = self.days[day_index(local.weekday().previous())];
        if self.opens < self.closes {
            today && self.opens <= minute && minute < self.closes
        } else {
            // Over midnight: the evening part belongs to today, the morning part to yesterday.
            (today && minute >= self.opens) || (yesterday && minute < self.closes)
        }
    }
}

/// Monday 0 … Sunday 6.
fn day_index(day: Weekday) -> usize {
    usize::try_from(day.to_monday_zero_offset()).unwrap_or(0)
}

const DAY_NAMES: [(&str, &str); 7] = [
    ("mon", "monday"),
    ("tue", "tuesday"),
    ("wed", "wednesday"),
    ("thu", "thursday"),
    ("fri", "friday"),
    ("sat", "saturday"),
    ("sun", "sunday"),
];

fn parse_day(text: &str) -> Result<usize, ScheduleError> {
    let lower = text.to_ascii_lowercase();
    DAY_NAMES.iter().position(|(short, long)| lower == *short || lower == *long).ok_or_else(|| {
        ScheduleError(format!("\"{text}\" is not a weekday; write Mon, Tue, Wed, Thu, Fri, Sat or Sun."))
    })
}

fn parse_days(text: &str) -> Result<[bool; 7], ScheduleError> {
    let mut days = [false; 7];
    for part in text.split(',') {
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (parse_day(first)?, parse_day(last)?);
                let mut day = first;
                loop {
                    days[day] = true;
                    if day == last {
                        break;
                    }
                    day = (day + 1) % 7;
                }
            }
            None => days[parse_day(part)?] = true,
        }
    }
    Ok(days)
}

/// `HH:MM` in minutes after midnight, `00:00` to `24:00`.
fn parse_time(text: &str) -> Result<u16, ScheduleError> {
    let bad = || ScheduleError(format!("\"{text}\" is not a time of day; write HH:MM from 00:00 to 24:00."));
    let (hours, minutes) = text.split_once(':').ok_or_else(bad)?;
    if hours.is_empty() || hours.len() > 2 || minutes.len() != 2 {
        return Err(bad());
    }
    let hours: u16 = hours.parse().map_err(|_| bad())?;
    let minutes: u16 = minutes.parse().map_err(|_| bad())?;
    if minutes >= 60 || hours * 60 + minutes > DAY {
        return Err(bad());
    }
    Ok(hours * 60 + minutes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instant `rfc3339` (with its offset) names.
    fn at(rfc3339: &str) -> SystemTime {
        let ts: Timestamp = rfc3339.parse().expect("an RFC 3339 instant");
        SystemTime::try_from(ts).expect("a SystemTime")
    }

    #[test]
    fn windows_open_and_close() {
        let office = "Mon-Fri 07:00-19:00 Europe/Berlin";
        let night = "Fri 22:00-06:00 UTC";
        let whole = "Sun 00:00-24:00 America/New_York";
        // (schedule, instant, open?)
        let cases = [
            ("", "2026-03-04T03:00:00Z", true),
            (office, "2026-01-14T06:00:00Z", true), // Wed 07:00 CET: opens (included)
            (office, "2026-01-14T05:59:59Z", false),
            (office, "2026-01-14T17:59:59Z", true),
            (office, "2026-01-14T18:00:00Z", false), // 19:00 CET: closes (excluded)
            (office, "2026-01-17T10:00:00Z", false), // Saturday
            // Summer time (CEST, UTC+2): 07:00 local is 05:00 UTC.
            (office, "2026-07-15T05:00:00Z", true),
            (office, "2026-07-15T04:59:00Z", false),
            (office, "2026-07-15T17:00:00Z", false),
            // Over midnight: Friday's window runs into Saturday morning, not into Friday's.
            (night, "2026-01-16T23:00:00Z", true),  // Fri 23:00
            (night, "2026-01-17T05:59:00Z", true),  // Sat 05:59
            (night, "2026-01-17T06:00:00Z", false), // Sat 06:00
            (night, "2026-01-16T05:00:00Z", false), // Fri 05:00 belongs to Thursday
            (night, "2026-01-17T23:00:00Z", false), // Sat 23:00
            // A whole day, in a zone west of UTC.
            (whole, "2026-01-18T05:00:00Z", true),  // Sun 00:00 EST
            (whole, "2026-01-19T04:59:00Z", true),  // Sun 23:59 EST
            (whole, "2026-01-19T05:00:00Z", false), // Mon 00:00 EST
            // Several windows: either opens.
            ("Mon 08:00-09:00 UTC; Tue 08:00-09:00 Asia/Tokyo", "2026-01-12T23:30:00Z", true),
            ("Mon 08:00-09:00 UTC; Tue 08:00-09:00 Asia/Tokyo", "2026-01-12T08:30:00Z", true),
            ("Mon 08:00-09:00 UTC; Tue 08:00-09:00 Asia/Tokyo", "2026-01-13T08:30:00Z", false),
            // A range over the week's end.
            ("Fri-Mon 10:00-11:00 UTC", "2026-01-18T10:30:00Z", true), // Sunday
            ("Fri-Mon 10:00-11:00 UTC", "2026-01-14T10:30:00Z", false), // Wednesday
        ];
        for (schedule, instant, open) in cases {
            let parsed = WarmSchedule::parse(schedule).expect("a valid schedule");
            assert_eq!(parsed.is_open(at(instant)), open, "{schedule:?} at {instant}");
        }
    }

    #[test]
    fn daylight_saving_moves_the_window_with_the_wall_clock() {
        // Berlin goes to summer time on 2026-03-29 at 02:00 (clocks to 03:00) and back on
        // 2026-10-25 at 03:00 (clocks to 02:00).
        let early = WarmSchedule::parse("Sun 01:30-03:30 Europe/Berlin").expect("valid");
        let cases = [
            ("2026-03-29T00:29:00Z", false), // 01:29 CET
            ("2026-03-29T00:30:00Z", true),  // 01:30 CET
            ("2026-03-29T00:59:00Z", true),  // 01:59 CET, then the clock jumps to 03:00
            ("2026-03-29T01:00:00Z", true),  // 03:00 CEST
            ("2026-03-29T01:29:00Z", true),  // 03:29 CEST
            ("2026-03-29T01:30:00Z", false), // 03:30 CEST: one UTC hour after opening
            ("2026-10-25T00:00:00Z", true),  // 02:00 CEST, first time
            ("2026-10-25T01:00:00Z", true),  // 02:00 CET, the repeated hour
            ("2026-10-25T02:29:00Z", true),  // 03:29 CET
            ("2026-10-25T02:30:00Z", false), // 03:30 CET: three UTC hours after opening
        ];
        for (instant, open) in cases {
            assert_eq!(early.is_open(at(instant)), open, "at {instant}");
        }
        // The skipped hour is never open.
        let skipped = WarmSchedule::parse("Sun 02:00-03:00 Europe/Berlin").expect("valid");
        assert!(!skipped.is_open(at("2026-03-29T00:59:00Z")));
        assert!(!skipped.is_open(at("2026-03-29T01:00:00Z")));
        // New York's summer time: 07:00 local is 12:00 UTC in winter, 11:00 UTC in summer.
        let ny = WarmSchedule::parse("Mon-Fri 07:00-19:00 America/New_York").expect("valid");
        assert!(!ny.is_open(at("2026-01-14T11:30:00Z")));
        assert!(ny.is_open(at("2026-07-15T11:30:00Z")));
    }

    #[test]
    fn syntax() {
        let ok = [
            "  ",
            "mon-FRI 07:00-19:00 Europe/Berlin",
            "Monday,Wednesday 7:00-9:30 UTC",
            "Mon-Wed,Fri 00:00-24:00 UTC ;; Sat 09:00-13:00 Europe/Berlin;",
            "Mon 08:00-09:00 UTC\nTue 08:00-09:00 UTC",
        ];
        for text in ok {
            assert!(WarmSchedule::parse(text).is_ok(), "{text:?}");
        }
        assert!(WarmSchedule::parse("").expect("valid").is_always());
        // (text, a part of the message)
        let bad = [
            ("Mon-Fri 07:00-19:00", "not a window"),
            ("Mon-Fri 07:00-19:00 Europe/Berlin extra", "not a window"),
            ("Mon-Fri, Sat 07:00-19:00 UTC", "not a window"),
            ("Mo-Fr 07:00-19:00 UTC", "\"Mo\" is not a weekday"),
            ("Mon-Fri 07:00 UTC", "not a time window"),
            ("Mon-Fri 7-19 UTC", "\"7\" is not a time of day"),
            ("Mon-Fri 07:00-25:00 UTC", "\"25:00\" is not a time of day"),
            ("Mon-Fri 07:60-19:00 UTC", "\"07:60\" is not a time of day"),
            ("Mon-Fri 24:00-06:00 UTC", "cannot open at 24:00"),
            ("Mon-Fri 07:00-07:00 UTC", "00:00-24:00"),
            ("Mon-Fri 07:00-19:00 Europe/Berlinn", "\"Europe/Berlinn\" is not an IANA time zone"),
            ("Mon-Fri 07:00-19:00 CEST", "not an IANA time zone"),
        ];
        for (text, message) in bad {
            let error = WarmSchedule::parse(text).expect_err(text).to_string();
            assert!(error.starts_with("WarmSchedule: "), "{error}");
            assert!(error.contains(message), "{text:?}: {error}");
        }
    }

    #[test]
    fn equal_by_text_and_shown_as_written() {
        let a = WarmSchedule::parse(" Mon 08:00-09:00 UTC ").expect("valid");
        let b: WarmSchedule = "Mon 08:00-09:00 UTC".parse().expect("valid");
        assert_eq!(a, b);
        assert_eq!(a.to_string(), "Mon 08:00-09:00 UTC");
        assert_eq!(WarmSchedule::always().to_string(), "always");
    }
}
