//! A retry policy whose delays mean nothing — a base or cap that is not a finite number of
//! seconds 0 or more, a factor not above 0, a jitter outside `0.0..1.0` — is refused when the
//! worker is built, naming `backoff` and the field; it used to build and be clamped at run
//! time, so a typo went unnoticed.

use crate::common::*;
use leasefence::{Backoff, Worker};

#[test]
fn a_meaningless_backoff_is_refused_when_the_worker_is_built() {
    let db = Db::new();
    let ok = Backoff::default();
    for (backoff, field) in [
        (
            Backoff {
                base: f64::NAN,
                ..ok
            },
            "base",
        ),
        (Backoff { base: -5.0, ..ok }, "base"),
        (Backoff { factor: 0.0, ..ok }, "factor"),
        (
            Backoff {
                factor: f64::INFINITY,
                ..ok
            },
            "factor",
        ),
        (
            Backoff {
                max: f64::INFINITY,
                ..ok
            },
            "max",
        ),
        (Backoff { max: -1.0, ..ok }, "max"),
        (Backoff { jitter: 5.0, ..ok }, "jitter"),
        (Backoff { jitter: 1.0, ..ok }, "jitter"),
        (Backoff { jitter: -0.1, ..ok }, "jitter"),
    ] {
        let built = Worker::sqlite(&db.path)
            .backoff(backoff)
            .build(|_| Ok(String::new()));
        let message = built
            .as_ref()
            .err()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert_invalid(built.map(drop), "backoff");
        assert!(message.contains(field), "{field}: {message}");
    }
    // The edges that mean something: no delay, no growth, no spread.
    let still = Backoff {
        base: 0.0,
        factor: 1.0,
        max: 0.0,
        jitter: 0.0,
    };
    assert!(
        Worker::sqlite(&db.path)
            .backoff(still)
            .build(|_| Ok(String::new()))
            .is_ok()
    );
}
