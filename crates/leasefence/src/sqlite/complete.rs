//! `complete_batch` on SQLite: the whole batch in one statement (`complete_batch.sql`), its
//! completions passed as one JSON array, then a refusal counted for each one not stored, all
//! inside the caller's one transaction.

use std::collections::HashMap;
use std::fmt::Write as _;

use rusqlite::params;

use super::{SqliteStore, sql};
use crate::error::Result;
use crate::types::{Lease, WriteOp};

impl SqliteStore {
    /// Stores what it can of `completions` at `now` (seconds) inside the caller's transaction;
    /// returns, per completion, whether it was stored (the refused ones are counted in the
    /// ledger). Judged as if one after another: a repeated (id, owner, fence) is refused
    /// after its first, which alone can be stored (with its own result).
    pub(super) fn complete_all(
        &self,
        completions: &[(&Lease, &str)],
        now: f64,
    ) -> Result<Vec<bool>> {
        // Each (id, owner, fence) once, at its first place; `sent[position]` is that place.
        let mut first = HashMap::with_capacity(completions.len());
        let mut json = String::from("[");
        for (k, (lease, result)) in completions.iter().enumerate() {
            let key = (lease.job_id.as_str(), lease.owner.as_str(), lease.fence);
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
        let mut stored = vec![false; completions.len()];
        let mut stmt = self
            .conn
            .prepare_cached(sql::COMPLETE_BATCH)
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query(params![json, now]).map_err(|e| self.err(e))?;
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let id: String = row.get(0).map_err(|e| self.err(e))?;
            let owner: String = row.get(1).map_err(|e| self.err(e))?;
            let fence: i64 = row.get(2).map_err(|e| self.err(e))?;
            if let Some(&k) = first.get(&(id.as_str(), owner.as_str(), fence)) {
                stored[k] = true;
            }
        }
        for ((lease, _), stored) in completions.iter().zip(&stored) {
            if !stored {
                self.refuse(&lease.job_id, lease.fence, WriteOp::Complete)?;
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
