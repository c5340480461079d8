//! Turning the store's values into what a page shows: times, durations, payloads, and links.
//! Every string made here is still escaped by the templates; links are built from
//! percent-encoded parts, so an id is never read as a scheme, a path or a query.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// The most bytes of a payload or result a page shows; the rest is a download.
pub(crate) const SHOWN_BYTES: usize = 4096;

/// Everything but unreserved characters is encoded: safe in a path segment and in a query.
const PART: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `text` as one percent-encoded URL part.
pub(crate) fn enc(text: &str) -> String {
    utf8_percent_encode(text, PART).to_string()
}

/// `text` as one path segment: percent-encoded, and — since browsers drop the segments `.`
/// and `..` even percent-encoded — with a `~` before a name that is all dots, or that starts
/// with `~` itself (so that [`unseg`] can tell the two apart). A job named `..` is
/// `/dashboard/jobs/~..`, one named `~x` is `/dashboard/jobs/~~x`.
pub(crate) fn seg(text: &str) -> String {
    if text == "." || text == ".." || text.starts_with('~') {
        format!("~{}", enc(text))
    } else {
        enc(text)
    }
}

/// The name a path segment made by [`seg`] stands for (axum has percent-decoded it already).
pub(crate) fn unseg(segment: String) -> String {
    match segment.strip_prefix('~') {
        Some(name) => name.to_owned(),
        None => segment,
    }
}

/// The dashboard page of a job.
pub(crate) fn job_href(id: &str) -> String {
    format!("/dashboard/jobs/{}", seg(id))
}

/// A query string from the pairs whose value is not empty (`?` included; empty when none).
pub(crate) fn query(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// A Unix time as `2026-12-02 07:30:15 UTC` (`—` for none, the raw number when the calendar
/// cannot hold it).
pub(crate) fn time(seconds: Option<f64>) -> String {
    let Some(s) = seconds else {
        return "—".into();
    };
    if !s.is_finite() {
        return format!("{s}");
    }
    match chrono::DateTime::from_timestamp(s.floor() as i64, 0) {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        // Past the calendar: the number, in scientific form once it is too long to read
        // (a `not_before` of 1e308 would otherwise be 309 digits across the page).
        None if s.abs() < 1e16 => format!("{s}"),
        None => format!("{s:e}"),
    }
}

/// A Unix time as `07:31` (the chart's minutes).
pub(crate) fn clock(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.format("%H:%M").to_string())
        .unwrap_or_else(|| seconds.to_string())
}

/// A duration in seconds, short: `42 s`, `3 min 5 s`, `2 h 10 min`, `4 d 3 h`.
pub(crate) fn span(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "—".into();
    }
    let s = seconds.abs().round() as u64;
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        3600..86_400 => format!("{} h {} min", s / 3600, (s % 3600) / 60),
        _ => format!("{} d {} h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// When `at` is, seen from `now`: `in 25 s` or `3 min 5 s ago`.
pub(crate) fn relative(at: f64, now: f64) -> String {
    if at >= now {
        format!("in {}", span(at - now))
    } else {
        format!("{} ago", span(now - at))
    }
}

/// A count with thousands separators: `1,000,000`.
pub(crate) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// How a payload or result is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shown {
    /// `text`, `hex` or `hidden`.
    pub(crate) form: &'static str,
    /// What the page shows (escaped by the template).
    pub(crate) body: String,
    /// The whole value's size in bytes.
    pub(crate) bytes: usize,
    /// Whether the page shows only the first [`SHOWN_BYTES`].
    pub(crate) truncated: bool,
}

impl Shown {
    /// Hidden by `--hide-payloads`: only the size is shown.
    pub(crate) fn hidden(bytes: usize) -> Shown {
        Shown {
            form: "hidden",
            body: String::new(),
            bytes,
            truncated: false,
        }
    }

    /// `data` as text when it is UTF-8 without control characters other than tab and line
    /// breaks, else as a hex dump; at most [`SHOWN_BYTES`] of it.
    pub(crate) fn of(data: &[u8]) -> Shown {
        let head = &data[..data.len().min(SHOWN_BYTES)];
        let truncated = data.len() > SHOWN_BYTES;
        // A cut may split a character at the end: the rest of a valid text is still text.
        let text = match std::str::from_utf8(head) {
            Ok(t) => Some(t),
            Err(e) if truncated && e.error_len().is_none() => {
                std::str::from_utf8(&head[..e.valid_up_to()]).ok()
            }
            Err(_) => None,
        };
        match text {
            Some(t)
                if !t
                    .chars()
                    .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t')) =>
            {
                Shown {
                    form: "text",
                    body: t.to_owned(),
                    bytes: data.len(),
                    truncated,
                }
            }
            _ => Shown {
                form: "hex",
                body: hex_dump(head),
                bytes: data.len(),
                truncated,
            },
        }
    }
}

/// Sixteen bytes a line: the offset, the bytes in hex, and their printable ASCII.
pub(crate) fn hex_dump(data: &[u8]) -> String {
    let mut out = String::new();
    for (i, chunk) in data.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let ascii: String = chunk
            .iter()
            .map(|&b| {
                if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        out.push_str(&format!("{:08x}  {:<47}  {ascii}\n", i * 16, hex.join(" ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_encoded_into_one_path_segment() {
        assert_eq!(job_href("a/b c"), "/dashboard/jobs/a%2Fb%20c");
        assert_eq!(
            job_href("javascript:alert(1)"),
            "/dashboard/jobs/javascript%3Aalert%281%29"
        );
        // Dot segments, which a browser would resolve away, and names starting with `~`.
        for (id, href) in [
            ("..", "/dashboard/jobs/~.."),
            (".", "/dashboard/jobs/~."),
            ("~x", "/dashboard/jobs/~~x"),
            ("...", "/dashboard/jobs/..."),
            ("a.b", "/dashboard/jobs/a.b"),
        ] {
            assert_eq!(job_href(id), href);
            let segment = href.trim_start_matches("/dashboard/jobs/").to_owned();
            assert_eq!(unseg(segment), id, "{href} names {id}");
        }
        assert_eq!(
            query(&[("status", "dead"), ("queue", ""), ("id", "a&b=c")]),
            "?status=dead&id=a%26b%3Dc"
        );
        assert_eq!(query(&[("x", "")]), "");
    }

    #[test]
    fn times_and_spans_read_well() {
        assert_eq!(time(Some(1_796_083_200.5)), "2026-12-01 00:00:00 UTC");
        assert_eq!(time(None), "—");
        assert_eq!(
            time(Some(9e15)),
            "9000000000000000",
            "past the calendar: the number"
        );
        assert_eq!(time(Some(1e16)), "1e16", "a long number in scientific form");
        assert_eq!(time(Some(1e18)), "1e18");
        assert_eq!(time(Some(f64::MAX)), "1.7976931348623157e308");
        assert_eq!(span(42.4), "42 s");
        assert_eq!(span(185.0), "3 min 5 s");
        assert_eq!(span(7800.0), "2 h 10 min");
        assert_eq!(span(356_400.0), "4 d 3 h");
        assert_eq!(relative(125.0, 100.0), "in 25 s");
        assert_eq!(relative(100.0, 285.0), "3 min 5 s ago");
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(count(999), "999");
        assert_eq!(clock(1_796_083_260), "00:01");
    }

    #[test]
    fn text_stays_text_and_anything_else_is_hex() {
        let t = Shown::of(b"hello\nworld\t!");
        assert_eq!(
            (t.form, t.body.as_str(), t.truncated),
            ("text", "hello\nworld\t!", false)
        );
        let b = Shown::of(&[0, 1, 0xff, b'A']);
        assert_eq!(b.form, "hex");
        assert!(b.body.starts_with("00000000  00 01 ff 41"), "{}", b.body);
        assert!(b.body.trim_end().ends_with("...A"), "{}", b.body);
        let big = "é".repeat(3000); // 6000 bytes; the cut at 4096 falls inside a character
        let s = Shown::of(big.as_bytes());
        assert_eq!((s.form, s.bytes, s.truncated), ("text", 6000, true));
        assert_eq!(s.body.chars().count(), 2048);
        let h = Shown::hidden(12);
        assert_eq!((h.form, h.bytes, h.body.as_str()), ("hidden", 12, ""));
    }
}
