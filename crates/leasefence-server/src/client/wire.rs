//! The wire shapes of [`HttpStore`](super::HttpStore): path segments, field names, the JSON of
//! jobs, leases and counts, and how batches are cut to fit a request.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use leasefence::{Lease, NewJob, Stats};
use serde_json::{Value, json};

/// Percent-encodes one path segment (a job id, queue or resource name may hold any text).
pub(super) fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The field names a server's 400 may carry, as the library's `'static` argument names.
pub(super) fn argument(field: &str) -> &'static str {
    const KNOWN: [&str; 20] = [
        "job_id",
        "owner",
        "ttl",
        "fence",
        "result",
        "error",
        "n",
        "queue",
        "queues",
        "kind",
        "payload",
        "priority",
        "not_before",
        "max_attempts",
        "unique_key",
        "unique_for",
        "status",
        "limit",
        "after",
        "resource",
    ];
    let last = field.rsplit('.').next().unwrap_or(field);
    if last == "id" {
        return "job_id"; // a job's id in an enqueue body is the library's `job_id`
    }
    KNOWN.into_iter().find(|k| *k == last).unwrap_or("request")
}

/// The payload bytes of a lease or job answer.
pub(super) fn payload(v: &Value) -> Option<Vec<u8>> {
    v["payload_base64"]
        .as_str()
        .and_then(|b| B64.decode(b).ok())
}

pub(super) fn stats_of(v: &Value) -> Stats {
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    Stats {
        ready: n("ready"),
        scheduled: n("scheduled"),
        leased: n("leased"),
        expired: n("expired"),
        retrying: n("retrying"),
        done: n("done"),
        dead: n("dead"),
        cancelled: n("cancelled"),
    }
}

pub(super) fn job_body(job: &NewJob) -> Value {
    let mut body = json!({ "id": job.id(), "queue": job.queue_name().as_str() });
    if let Some(kind) = job.kind_name() {
        body["kind"] = json!(kind);
    }
    if let Some(bytes) = job.payload_bytes() {
        body["payload_base64"] = json!(B64.encode(bytes));
    }
    if job.priority_value() != 0 {
        body["priority"] = json!(job.priority_value());
    }
    if job.not_before_value() != 0.0 {
        body["not_before"] = json!(job.not_before_value());
    }
    if job.max_attempts_value() != 0 {
        body["max_attempts"] = json!(job.max_attempts_value());
    }
    if let Some(key) = job.unique_key_value() {
        body["unique_key"] = json!(key);
    }
    if let Some(seconds) = job.unique_for_value() {
        body["unique_for"] = json!(seconds);
    }
    body
}

pub(super) fn lease_ref(lease: &Lease) -> Value {
    json!({ "job_id": lease.job_id, "owner": lease.owner, "fence": lease.fence })
}

/// Request bodies stay well under the server's default limit (1 MiB): batches of at most 1,000
/// items and about 256 KiB of text each (an item larger than that goes alone).
pub(super) const CHUNK_BYTES: usize = 256 * 1024;

/// `items` cut into runs of at most 1,000 whose `size` adds up to at most [`CHUNK_BYTES`].
pub(super) fn chunks_by_size<T>(items: &[T], size: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        let n = size(item) + 64;
        if i > start && (bytes + n > CHUNK_BYTES || i - start == 1000) {
            chunks.push(&items[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += n;
    }
    if start < items.len() {
        chunks.push(&items[start..]);
    }
    chunks
}

/// The `ok` of each of `n` batch results, in order.
pub(super) fn oks(answer: &Value, n: usize) -> std::result::Result<Vec<bool>, String> {
    let results = answer["results"]
        .as_array()
        .ok_or("a batch answer without results")?;
    if results.len() != n {
        return Err(format!("{} results for {n} items", results.len()));
    }
    Ok(results.iter().map(|r| r["ok"] == true).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_cut_by_count_and_by_size() {
        let small = vec![10usize; 2500];
        let cut: Vec<usize> = chunks_by_size(&small, |n| *n)
            .iter()
            .map(|c| c.len())
            .collect();
        assert_eq!(cut, [1000, 1000, 500]);
        let big = vec![100_000usize; 5];
        let cut: Vec<usize> = chunks_by_size(&big, |n| *n)
            .iter()
            .map(|c| c.len())
            .collect();
        assert_eq!(cut, [2, 2, 1]);
        let huge = vec![1usize << 20, 1, 1];
        let cut: Vec<usize> = chunks_by_size(&huge, |n| *n)
            .iter()
            .map(|c| c.len())
            .collect();
        assert_eq!(cut, [1, 2], "an item over the size goes alone");
        assert!(chunks_by_size::<usize>(&[], |n| *n).is_empty());
    }

    #[test]
    fn field_names_map_to_the_library_s_arguments() {
        assert_eq!(argument("ttl"), "ttl");
        assert_eq!(argument("jobs[3].queue"), "queue");
        assert_eq!(argument("something_else"), "request");
        assert_eq!(argument("id"), "job_id");
        assert_eq!(argument("jobs[1].id"), "job_id");
        assert_eq!(segment("a/b c%"), "a%2Fb%20c%25");
    }
}
