//! Value parsers for counts and durations, so that a bad number (`--limit -1`, `--ttl -5`) is
//! an error naming its flag with the accepted range, not clap's "unexpected argument '-1'".
//! The flags using them also set `allow_negative_numbers`, so `-1` reaches the parser.

/// A whole number from `min` to `max`.
pub fn count(min: u32, max: u32) -> impl Fn(&str) -> Result<u32, String> + Clone {
    move |text: &str| {
        let range = format!("from {min} to {max}");
        match text.trim().parse::<i128>() {
            Ok(n) if (i128::from(min)..=i128::from(max)).contains(&n) => {
                Ok(u32::try_from(n).expect("in range"))
            }
            Ok(_) => Err(format!("must be a whole number {range}")),
            Err(_) => Err(format!("not a whole number; give one {range}")),
        }
    }
}

/// A finite number of seconds, 0 or more (`positive`: greater than 0).
pub fn seconds(positive: bool) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |text: &str| {
        let least = if positive {
            "greater than 0"
        } else {
            "0 or more"
        };
        match text.trim().parse::<f64>() {
            Ok(s) if s.is_finite() && (s > 0.0 || (!positive && s == 0.0)) => Ok(s),
            Ok(_) => Err(format!("must be a finite number of seconds, {least}")),
            Err(_) => Err(format!("not a number; give seconds, {least}")),
        }
    }
}

/// A queue name (see `leasefence::Queue::new`), checked when the flag is parsed.
pub fn queue_name(text: &str) -> Result<String, String> {
    leasefence::Queue::new(text)
        .map(|q| q.as_str().to_owned())
        .map_err(|e| e.to_string())
}

/// `Q` or `Q=N` for `work --queue`: a queue name and, optionally, its number of concurrent jobs
/// (1 to 256).
pub fn queue_threads(text: &str) -> Result<(String, Option<u32>), String> {
    let (name, threads) = match text.split_once('=') {
        Some((name, n)) => (name, Some(count(1, 256)(n).map_err(|e| format!("N {e}"))?)),
        None => (text, None),
    };
    Ok((queue_name(name)?, threads))
}

/// The queues `--queue` named: every queue when none was given.
pub fn queues(names: &[String]) -> leasefence::Result<leasefence::Queues> {
    if names.is_empty() {
        Ok(leasefence::Queues::All)
    } else {
        leasefence::Queues::only(names.iter().cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_flags_are_checked_when_parsed() {
        assert_eq!(queue_name("emails"), Ok("emails".to_owned()));
        assert!(queue_name("a b").unwrap_err().contains("queue"));
        assert_eq!(
            queue_threads("emails=4"),
            Ok(("emails".to_owned(), Some(4)))
        );
        assert_eq!(queue_threads("emails"), Ok(("emails".to_owned(), None)));
        assert!(
            queue_threads("emails=0")
                .unwrap_err()
                .starts_with("N must be")
        );
        assert!(queue_threads("=2").unwrap_err().contains("queue"));
    }

    #[test]
    fn counts_name_their_range() {
        let limit = count(1, u32::MAX);
        assert_eq!(limit("3"), Ok(3));
        assert_eq!(
            limit("-1").unwrap_err(),
            "must be a whole number from 1 to 4294967295"
        );
        assert_eq!(
            limit("99999999999").unwrap_err(),
            "must be a whole number from 1 to 4294967295"
        );
        assert_eq!(
            count(1, 256)("300").unwrap_err(),
            "must be a whole number from 1 to 256"
        );
        assert!(limit("x").unwrap_err().starts_with("not a whole number"));
    }

    #[test]
    fn seconds_are_finite_and_not_negative() {
        assert_eq!(seconds(false)("0"), Ok(0.0));
        assert_eq!(seconds(true)("0.5"), Ok(0.5));
        assert!(seconds(true)("0").is_err());
        assert!(seconds(false)("-1").is_err());
        assert!(seconds(false)("inf").is_err());
    }
}
