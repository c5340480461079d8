//! Clock readings for people: `2026-12-01 07:30:12Z (in 25 s)`, relative to the reading a
//! command worked at, or the raw seconds since the Unix epoch with `--epoch` (JSON always has
//! the raw seconds).
//!
//! UTC only and no time-zone database: the calendar date comes from the day count by Howard
//! Hinnant's `civil_from_days`, which is exact for the proleptic Gregorian calendar.

use crate::cmd::shared;

/// How a command shows clock readings: humanly, relative to `now`, or as epoch seconds.
#[derive(Debug, Clone, Copy)]
pub struct Times {
    /// The clock reading the command worked at.
    pub now: f64,
    /// Raw seconds since the Unix epoch instead of a date.
    pub epoch: bool,
}

impl Times {
    /// A reading; `0` (never set: no lease, no not-before) shows as `-`.
    pub fn show(self, t: f64) -> String {
        if t == 0.0 {
            "-".to_owned()
        } else if self.epoch {
            shared::time(t)
        } else {
            human(t, self.now)
        }
    }

    /// An optional reading; absent (or `0`) shows as `-`.
    pub fn show_opt(self, t: Option<f64>) -> String {
        t.map_or_else(|| "-".to_owned(), |t| self.show(t))
    }
}

/// A time the command computed, for its readable line: as given, in the caller's own seconds,
/// when the caller passed `--now` (its timescale may be any: `lease until 30`); as a date with
/// how far it is (`human`) when the command read the system's or the database's clock, whose
/// raw epoch floats say nothing at a glance. `--json` always carries the number.
pub fn reading(t: f64, now: f64, now_given: bool) -> String {
    if now_given {
        shared::time(t)
    } else {
        human(t, now)
    }
}

/// `2026-12-01 07:30:12Z (in 25 s)`: the UTC date and time to the second, and how far it is
/// from `now`. A reading too far from the epoch for a calendar date is shown as seconds.
pub fn human(t: f64, now: f64) -> String {
    match utc(t) {
        Some(date) => format!("{date} ({})", relative(t, now)),
        None => shared::time(t),
    }
}

/// The UTC date and time of `t` (seconds since the Unix epoch, fraction dropped), or `None`
/// when it is not finite or beyond the years 1..=9999.
pub fn utc(t: f64) -> Option<String> {
    // 0001-01-01 and 10000-01-01 in Unix seconds.
    if !t.is_finite() || !(-62_135_596_800.0..253_402_300_800.0).contains(&t) {
        return None;
    }
    // In range, so the cast is exact after flooring.
    let secs = t.floor() as i64;
    let (days, of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (of_day / 3600, of_day % 3600 / 60, of_day % 60);
    Some(format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02}:{ss:02}Z"))
}

/// `in 25 s`, `3 min ago`, `now`: the distance from `now` to `t`, in the largest whole unit.
pub fn relative(t: f64, now: f64) -> String {
    let delta = t - now;
    if !delta.is_finite() {
        return "far away".to_owned();
    }
    let secs = delta.abs().floor();
    if secs < 1.0 {
        return "now".to_owned();
    }
    let (n, unit) = if secs < 60.0 {
        (secs, "s")
    } else if secs < 3600.0 {
        ((secs / 60.0).floor(), "min")
    } else if secs < 86_400.0 {
        ((secs / 3600.0).floor(), "h")
    } else {
        ((secs / 86_400.0).floor(), "d")
    };
    if delta > 0.0 {
        format!("in {n} {unit}")
    } else {
        format!("{n} {unit} ago")
    }
}

/// The (year, month, day) of the `z`-th day after 1970-01-01 (negative: before it).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March first
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_utc_to_the_second() {
        assert_eq!(utc(0.0).unwrap(), "1970-01-01 00:00:00Z");
        assert_eq!(utc(140.9).unwrap(), "1970-01-01 00:02:20Z");
        assert_eq!(utc(1_796_110_212.0).unwrap(), "2026-12-01 07:30:12Z");
        // A leap day, and the turn of a century that is a leap year.
        assert_eq!(utc(951_782_400.0).unwrap(), "2000-02-29 00:00:00Z");
        assert_eq!(utc(-1.0).unwrap(), "1969-12-31 23:59:59Z");
        assert_eq!(utc(-62_135_596_800.0).unwrap(), "0001-01-01 00:00:00Z");
        assert_eq!(utc(253_402_300_799.0).unwrap(), "9999-12-31 23:59:59Z");
        assert_eq!(utc(253_402_300_800.0), None);
        assert_eq!(utc(f64::NAN), None);
    }

    #[test]
    fn distances_use_the_largest_whole_unit() {
        assert_eq!(relative(125.0, 100.0), "in 25 s");
        assert_eq!(relative(100.0, 280.5), "3 min ago");
        assert_eq!(relative(100.4, 100.0), "now");
        assert_eq!(relative(100.0 + 7200.0, 100.0), "in 2 h");
        assert_eq!(relative(0.0, 3.0 * 86_400.0), "3 d ago");
        assert_eq!(
            human(1_796_110_212.0, 1_796_110_187.0),
            "2026-12-01 07:30:12Z (in 25 s)"
        );
    }

    #[test]
    fn unset_times_are_a_dash_and_epoch_is_raw() {
        let human = Times {
            now: 100.0,
            epoch: false,
        };
        let epoch = Times {
            now: 100.0,
            epoch: true,
        };
        assert_eq!(human.show(0.0), "-");
        assert_eq!(human.show_opt(None), "-");
        assert_eq!(epoch.show(0.0), "-");
        assert_eq!(epoch.show(140.5), "140.5");
        assert_eq!(human.show(140.0), "1970-01-01 00:02:20Z (in 40 s)");
    }
}
