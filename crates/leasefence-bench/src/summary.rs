//! Summaries of samples, shared by the probes and the report.

/// (median, min, max) of a non-empty sample.
pub(crate) fn stats(samples: &[f64]) -> (f64, f64, f64) {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    (median, s[0], s[n - 1])
}
