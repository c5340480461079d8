//! `complete_batch` on SQLite: the whole batch in one statement (`complete_batch.sql`), its
//! completions passed as one JSON array, then a refusal counted for each one not stored, all
//! inside one transaction (a group commit's at `synchronous = FULL`).

use std::collections::HashMap;
use std::fmt::Write as _;

use rusqlite::params;

use super::{SqliteStore, sql};
use crate::error::Result;
use crate::types::{Fence, Lease, WriteOp};

/// A batch of completions, owned (a group commit's call may run on another thread, and run
/// again): the JSON array `complete_batch.sql` reads, and how to read its answer back.
pub(super) struct Completions {
    /// `[[id, owner, fence, result], …]`, each (id, owner, fence) once, at its first place.
    json: String,
    /// The place in the batch of each (id, owner, fence) sent.
    first: HashMap<(String, String, Fence), usize>,
    /// Each completion's (id, fence), in order: whose refusal to count.
    judged: Vec<(String, Fence)>,
}

impl Completions {
    /// Judged as if one after another: a repeated (id, owner, fence) is refused after its
    /// first, which alone can be stored (with its own result), so only that one is sent.
    pub(super) fn new(completions: &[(&Lease, &str)]) -> Self {
        let mut first = HashMap::with_capacity(completions.len());
        let mut judged = Vec::with_capacity(completions.len());
        let mut json = String::from("[");
        for (k, (lease, result)) in completions.iter().enumerate() {
            judged.push((lease.job_id.clone(), lease.fence));
            let key = (lease.job_id.clone(), lease.owner.clone(), lease.fence);
            if first.contains_key(&key) {
                continue;
            }
            first.insert(key, k);
            if json.len() > 1 {
                json.push(',');
            }
            json.push('[');
            push_json_string(&mut json, &lease.job_id);
            json.push(',');
            push_json_string(&mut json, &lease.owner);
            // Infallible: writing to a String.
            let _ = write!(json, ",{},", lease.fence);
            push_json_string(&mut json, result);
            json.push(']');
        }
        json.push(']');
        Completions {
            json,
            first,
            judged,
        }
    }
}

impl SqliteStore {
    /// Stores what it can of `batch` at `now` (seconds) inside the caller's transaction;
    /// returns, per completion, whether it was stored (the refused ones are counted in the
    /// ledger).
    pub(super) fn complete_all(&self, batch: &Completions, now: f64) -> Result<Vec<bool>> {
        let mut stored = vec![false; batch.judged.len()];
        let mut stmt = self
            .conn
            .prepare_cached(sql::COMPLETE_BATCH)
            .map_err(|e| self.err(e))?;
        let mut rows = stmt
            .query(params![batch.json, now])
            .map_err(|e| self.err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let key = (|| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))()
                .map_err(|e: rusqlite::Error| self.err(e))?;
            if let Some(&k) = batch.first.get(&key) {
                stored[k] = true;
            }
        }
        for ((job_id, fence), stored) in batch.judged.iter().zip(&stored) {
            if !stored {
                self.refuse(job_id, *fence, WriteOp::Complete)?;
            }
        }
        Ok(stored)
    }
}

/// Appends `text` to `out` as a JSON string: quoted, with `"`, `\` and the control characters
/// escaped (RFC 8259 §7); everything else as it is, UTF-8. SQLite reads every such string
/// back exactly, a NUL (`\u0000`) included.
fn push_json_string(out: &mut String, text: &str) {
    out.push('"');
    let mut plain = 0;
    for (at, byte) in text.bytes().enumerate() {
        let escaped = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&text[plain..at]);
        plain = at + 1;
        if escaped.is_empty() {
            // Infallible: writing to a String.
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escaped);
        }
    }
    out.push_str(&text[plain..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::push_json_string;

    fn quoted(text: &str) -> String {
        let mut out = String::new();
        push_json_string(&mut out, text);
        out
    }

    #[test]
    fn quotes_backslashes_and_control_characters_are_escaped() {
        assert_eq!(quoted(""), r#""""#);
        assert_eq!(quoted("plain é ✓"), "\"plain é ✓\"");
        assert_eq!(quoted(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(quoted("\n\t\u{1}\u{1f} "), r#""\u000a\u0009\u0001\u001f ""#);
    }

    #[test]
    fn sqlite_reads_back_every_string_exactly() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let texts = [
            String::new(),
            r#"say "hi" \ bye"#.to_owned(),
            (1u8..0x80).map(char::from).collect::<String>(),
            "日本語 — ✓ 🎉".to_owned(),
            "x".repeat(100_000),
            "a NUL \0 inside".to_owned(),
        ];
        for text in texts {
            let json = format!("[{}]", quoted(&text));
            let back: String = conn
                .query_row("SELECT ?1 ->> 0", [&json], |r| r.get(0))
                .unwrap();
            assert_eq!(back, text);
        }
    }
}
