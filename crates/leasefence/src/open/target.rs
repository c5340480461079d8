//! [`Target`]: which backend a database string names, and how it is shown without its
//! password.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::{AnyOptions, AnyStore};
use crate::error::{Error, Result};

/// The URL schemes that select PostgreSQL, compared case-insensitively.
const PG_SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];
/// The optional prefix that marks an SQLite path explicitly.
const SQLITE_SCHEME: &str = "sqlite://";
/// The libpq keywords whose `key=` at the start of a word makes a string a PostgreSQL
/// `key=value` connection string. `password`, `passfile`, `service` and `sslmode` are among
/// them although a string may lack the others (libpq has defaults for them): such a string is
/// a connection string gone wrong, never a file to create — and as a path its password would
/// be shown unmasked.
const PG_KEYS: [&str; 9] = [
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service", "sslmode",
];

/// Where a store lives, as given by a user: an SQLite file or a PostgreSQL connection string.
///
/// Parsing rules ([`Target::parse`]):
///
/// - `postgres://…` or `postgresql://…` (scheme in any case) is PostgreSQL; the whole string is
///   the connection URL, as libpq takes it.
/// - A libpq `key=value` string is PostgreSQL: one with a white-space separated word that
///   starts with `host=`, `hostaddr=`, `port=`, `dbname=`, `user=`, `password=`,
///   `passfile=`, `service=` or `sslmode=` (`host=db user=app dbname=jobs`). Other keys may
///   follow.
/// - `sqlite://PATH` is the SQLite file `PATH` (`sqlite:///abs/jobs.db` is `/abs/jobs.db`);
///   use it for a file whose name would otherwise read as `key=value`.
/// - Anything else is an SQLite file path, as before PostgreSQL existed.
///
/// ```
/// use std::path::Path;
/// use leasefence::Target;
///
/// # fn main() -> Result<(), leasefence::Error> {
/// assert_eq!(Target::parse("jobs.db")?, Target::Sqlite("jobs.db".into()));
/// assert_eq!(Target::parse("sqlite:///var/lib/jobs.db")?, Target::Sqlite("/var/lib/jobs.db".into()));
/// let pg = Target::parse("postgres://app:secret@db.internal/jobs")?;
/// assert!(pg.is_postgres());
/// // Displayed without the password.
/// assert_eq!(pg.to_string(), "postgres://app:***@db.internal/jobs");
/// let kv = Target::parse("host=db.internal user=app password=secret dbname=jobs")?;
/// assert_eq!(kv.to_string(), "host=db.internal user=app password=*** dbname=jobs");
/// // A password alone is a connection string (with libpq's defaults), never a file name.
/// assert_eq!(Target::parse("password=secret")?.to_string(), "password=***");
/// assert!(Target::parse("").is_err());
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub enum Target {
    /// An SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection string: a URL (`postgres://…` or `postgresql://…`, scheme in
    /// lower case) or libpq `key=value` pairs, as given.
    Postgres(String),
}

impl Target {
    /// Tells an SQLite path from a PostgreSQL URL (see [`Target`] for the rules).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming `db` when `db` is empty or only white space, when it
    /// is `sqlite://` with no path after it, or when it starts with a URL scheme other than
    /// `postgres://`, `postgresql://` and `sqlite://` (`postgress://…`, a typo whose user info
    /// would otherwise be shown as a file name; the error names only the scheme).
    pub fn parse(db: &str) -> Result<Target> {
        if db.trim().is_empty() {
            return Err(Error::invalid(
                "db",
                "is empty: give an SQLite file path or a postgres:// URL",
            ));
        }
        // White space around a URL is a copy-and-paste slip, never part of the connection.
        let url = db.trim();
        for scheme in PG_SCHEMES {
            if let Some(rest) = strip_prefix_ignore_case(url, scheme) {
                return Ok(Target::Postgres(format!("{scheme}{rest}")));
            }
        }
        if let Some(scheme) = url_scheme(url)
            && !scheme.eq_ignore_ascii_case("sqlite")
        {
            return Err(Error::invalid(
                "db",
                format!(
                    "unknown scheme `{scheme}://`: give postgres:// (or postgresql://) for \
                     PostgreSQL, or an SQLite file path (sqlite://PATH)"
                ),
            ));
        }
        if let Some(path) = strip_prefix_ignore_case(db, SQLITE_SCHEME) {
            if path.is_empty() {
                return Err(Error::invalid(
                    "db",
                    "`sqlite://` needs a file path after it (sqlite://jobs.db, sqlite:///abs/jobs.db)",
                ));
            }
            return Ok(Target::Sqlite(PathBuf::from(path)));
        }
        if is_key_value(db) {
            return Ok(Target::Postgres(db.to_owned()));
        }
        Ok(Target::Sqlite(PathBuf::from(db)))
    }

    /// Whether this is a PostgreSQL connection string.
    pub fn is_postgres(&self) -> bool {
        matches!(self, Target::Postgres(_))
    }

    /// The SQLite file, if this is one.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            Target::Sqlite(path) => Some(path),
            Target::Postgres(_) => None,
        }
    }

    /// Opens the store with default options ([`SqliteStore::open`](crate::SqliteStore::open)
    /// creates the file and table; `PgStore::open` creates the schema `leasefence` and its
    /// tables).
    ///
    /// # Errors
    /// As [`AnyOptions::open_target`].
    pub fn open(&self) -> Result<AnyStore> {
        AnyOptions::new().open_target(self)
    }
}

impl FromStr for Target {
    type Err = Error;

    fn from_str(db: &str) -> Result<Target> {
        Target::parse(db)
    }
}

/// The path as given, or the URL with its password replaced by `***` (safe to print in logs).
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Sqlite(path) => write!(f, "{}", path.display()),
            Target::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

/// As `Display`: a PostgreSQL URL's password never appears, not even in `{:?}` (a `Target`
/// inside a logged error or struct must not leak it).
impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Target::Postgres(url) => f.debug_tuple("Postgres").field(&redact(url)).finish(),
        }
    }
}

/// The scheme of a URL-like `text` (`name://…`, the name a letter followed by letters, digits,
/// `+`, `-` or `.`), or `None`.
fn url_scheme(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Whether `db` is a libpq `key=value` string: a word starting with one of [`PG_KEYS`] and `=`,
/// in any case (`PASSWORD=` is a connection string with a slip, which libpq then refuses by
/// the key's name, not a file named after a password).
fn is_key_value(db: &str) -> bool {
    db.split_whitespace().any(|word| {
        word.split_once('=')
            .is_some_and(|(key, _)| PG_KEYS.contains(&key.to_ascii_lowercase().as_str()))
    })
}

/// A `key=value` string with the value of every `password` key (in any case) masked:
/// `password=***`. Values
/// may be single-quoted with backslash escapes, and `=` may have spaces around it, as libpq
/// allows.
fn redact_key_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        // The next key: after white space, up to `=` (with optional spaces before it).
        let start = rest.len() - rest.trim_start().len();
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        if rest.is_empty() {
            return out;
        }
        let key_end = rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        let key = &rest[..key_end];
        out.push_str(key);
        rest = &rest[key_end..];
        let spaces = rest.len() - rest.trim_start().len();
        if !rest[spaces..].starts_with('=') {
            // Not key=value: copied as it is — but `password secret`, its `=` forgotten (a
            // string libpq refuses), still has its next word masked.
            if key.eq_ignore_ascii_case("password") && spaces > 0 {
                let word = rest[spaces..]
                    .find(char::is_whitespace)
                    .map_or(rest.len(), |i| spaces + i);
                out.push_str(&rest[..spaces]);
                out.push_str("***");
                rest = &rest[word..];
            }
            continue;
        }
        let after_eq = spaces + 1;
        let value_start = after_eq + (rest[after_eq..].len() - rest[after_eq..].trim_start().len());
        out.push_str(&rest[..value_start]);
        rest = &rest[value_start..];
        // The value: quoted up to the closing quote, or up to white space.
        let value_end = if let Some(quoted) = rest.strip_prefix('\'') {
            let mut escaped = false;
            let close = quoted.char_indices().find(|&(_, c)| {
                let end = !escaped && c == '\'';
                escaped = !escaped && c == '\\';
                end
            });
            close.map_or(rest.len(), |(i, _)| i + 2)
        } else {
            // Unquoted, a backslash escapes the next character (`password=a\ b` is one value).
            let mut escaped = false;
            let end = rest.char_indices().find(|&(_, c)| {
                let end = !escaped && c.is_whitespace();
                escaped = !escaped && c == '\\';
                end
            });
            end.map_or(rest.len(), |(i, _)| i)
        };
        if key.eq_ignore_ascii_case("password") {
            out.push_str("***");
        } else {
            out.push_str(&rest[..value_end]);
        }
        rest = &rest[value_end..];
    }
}

/// `url` with the password of its user info and any `password=` query parameter masked; a
/// `key=value` string with its `password` value masked.
fn redact(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return redact_key_value(url);
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..start]);
    // The user info ends at the last `@` before the first `/` or `?` (a password with an
    // unencoded `@` masked whole), or, when there is none there, at the first `@` anywhere if a
    // `:` comes before it: the driver reads the credentials up to that `@`, so a password may
    // hold `/` or `?` unencoded (base64 ones often do). Masking too much is harmless; an `@`
    // in a query (`?password=se@cret`) is left to the query's masking below.
    let first_end = url[start..]
        .find(['/', '?'])
        .map_or(url.len(), |i| start + i);
    let at = url[start..first_end].rfind('@').or_else(|| {
        url[start..]
            .find('@')
            .filter(|&at| url[start..start + at].contains(':'))
    });
    let host_start = match at {
        Some(at) => {
            let userinfo = &url[start..start + at];
            match userinfo.find(':') {
                Some(colon) => {
                    out.push_str(&userinfo[..colon]);
                    out.push_str(":***");
                }
                None => out.push_str(userinfo),
            }
            out.push('@');
            start + at + 1
        }
        None => start,
    };
    let authority_end = url[host_start..]
        .find(['/', '?'])
        .map_or(url.len(), |i| host_start + i);
    out.push_str(&url[host_start..authority_end]);
    let rest = &url[authority_end..];
    match rest.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if is_password_key(k) => format!("{k}=***"),
                    _ => p.to_owned(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(rest),
    }
    out
}

/// Whether a URL query key is `password` as the driver reads it: percent-decoded first, so
/// `%70assword` is the password too.
fn is_password_key(key: &str) -> bool {
    let bytes = key.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match hex.map(|h| u8::from_str_radix(h, 16)) {
            Some(Ok(byte)) if bytes[i] == b'%' => {
                decoded.push(byte);
                i += 3;
            }
            _ => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    decoded.eq_ignore_ascii_case(b"password")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_postgres_and_everything_else_is_a_file() {
        let pg = |s: &str| Target::Postgres(s.to_owned());
        let file = |s: &str| Target::Sqlite(PathBuf::from(s));
        assert_eq!(
            Target::parse("postgres://u@h/d").unwrap(),
            pg("postgres://u@h/d")
        );
        assert_eq!(
            Target::parse("postgresql://h/d").unwrap(),
            pg("postgresql://h/d")
        );
        assert_eq!(
            Target::parse("POSTGRES://h/d").unwrap(),
            pg("postgres://h/d")
        );
        assert_eq!(Target::parse("sqlite://a/b.db").unwrap(), file("a/b.db"));
        assert_eq!(Target::parse("SQLite:///a.db").unwrap(), file("/a.db"));
        assert_eq!(Target::parse("jobs.db").unwrap(), file("jobs.db"));
        // libpq key=value strings, recognised by one of the connection keys.
        for kv in [
            "host=h user=u",
            "dbname=test",
            "user=postgres   port=5433",
            "sslmode=disable host=/run/postgresql",
            // Without a host or database, still a connection string (libpq's defaults), never
            // a file named after a password.
            "password=secret",
            "service=jobs",
            "sslmode=require",
            "passfile=/root/.pgpass",
        ] {
            assert_eq!(Target::parse(kv).unwrap(), pg(kv), "{kv}");
        }
        // Other `=` in a name, and other schemes, are file names.
        assert_eq!(Target::parse("a=b.db").unwrap(), file("a=b.db"));
        assert_eq!(
            Target::parse("/tmp/password=x.db").unwrap(),
            file("/tmp/password=x.db")
        );
        assert_eq!(
            Target::parse("sqlite://host=h.db").unwrap(),
            file("host=h.db")
        );
        assert_eq!(Target::parse("postgres:/x").unwrap(), file("postgres:/x"));
        // A URL with white space around it is still the URL.
        assert_eq!(
            Target::parse("  postgres://u@h/d \n").unwrap(),
            pg("postgres://u@h/d")
        );
        // A key in another case still makes a connection string (libpq refuses it by name).
        assert_eq!(
            Target::parse("host=h PASSWORD=x").unwrap(),
            pg("host=h PASSWORD=x")
        );
        assert_eq!(Target::parse("Password=x").unwrap(), pg("Password=x"));
        // Another scheme is refused, naming the scheme and nothing after it.
        for typo in ["postgress://u:pw@h/d", "mysql://u:pw@h/d", " pg://u:pw@h/d"] {
            let err = Target::parse(typo).unwrap_err();
            assert_eq!(err.argument(), Some("db"), "{typo:?}: {err}");
            assert!(!err.to_string().contains("pw"), "{typo:?}: {err}");
            assert!(
                err.to_string().contains("unknown scheme"),
                "{typo:?}: {err}"
            );
        }
        for bad in ["", "  ", "sqlite://"] {
            let err = Target::parse(bad).unwrap_err();
            assert_eq!(err.argument(), Some("db"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn passwords_are_not_displayed() {
        let shown = |s: &str| Target::parse(s).unwrap().to_string();
        assert_eq!(shown("postgres://u:pw@h:5/d"), "postgres://u:***@h:5/d");
        assert_eq!(shown("postgres://u@h/d"), "postgres://u@h/d");
        assert_eq!(
            shown("postgres://h/d?user=u&password=pw&sslmode=disable"),
            "postgres://h/d?user=u&password=***&sslmode=disable"
        );
        assert_eq!(shown("postgres://u:p@w@h/d"), "postgres://u:***@h/d");
        assert_eq!(shown("jobs.db"), "jobs.db");
        assert_eq!(
            shown("host=h password=pw user=u"),
            "host=h password=*** user=u"
        );
        assert_eq!(
            shown("host=h password = 'p w\\' x' dbname=d"),
            "host=h password = *** dbname=d"
        );
        assert_eq!(shown("dbname=d password="), "dbname=d password=***");
        assert_eq!(
            shown("host=h PASSWORD=pw dbname=d"),
            "host=h PASSWORD=*** dbname=d"
        );
        // Its `=` forgotten: the next word is still the password.
        assert_eq!(
            shown("host=h password pw dbname=d"),
            "host=h password *** dbname=d"
        );
        assert_eq!(shown("host=h password"), "host=h password");
        // The driver reads the user info up to the first `@`, `/` and `?` included.
        assert_eq!(shown("postgres://u:a/b@h/d"), "postgres://u:***@h/d");
        assert_eq!(
            shown("postgres://u:a?b@h:5432/d?x=1"),
            "postgres://u:***@h:5432/d?x=1"
        );
        assert_eq!(
            shown("postgres://h/d?user=u&password=se@cret"),
            "postgres://h/d?user=u&password=***"
        );
        assert!(!shown("postgres://h:5432/d?password=se@cret").contains("se"));
        // The driver percent-decodes query keys: `%70assword` is the password as well.
        assert_eq!(
            shown("postgres://h/d?user=u&%70assword=pw&%50%41SSWORD=pw2&%7=x"),
            "postgres://h/d?user=u&%70assword=***&%50%41SSWORD=***&%7=x"
        );
        // unquoted, a backslash-escaped space is part of the value (libpq's rule)
        assert_eq!(
            shown("host=h password=hun\\ ter2 dbname=d"),
            "host=h password=*** dbname=d"
        );
        assert_eq!(shown("password=a\\\\ user=u"), "password=*** user=u");
    }

    #[test]
    fn passwords_are_not_in_debug_output() {
        for url in [
            "postgres://app:s3cret-pw@db.internal:5432/jobs",
            "postgresql://db/jobs?user=app&password=s3cret-pw",
            "host=db user=app password=s3cret-pw dbname=jobs",
            "host=db password='s3cret-pw' dbname=jobs",
            "password = s3cret-pw host=db",
        ] {
            let target = Target::parse(url).unwrap();
            let debug = format!("{target:?} {target:#?}");
            assert!(!debug.contains("s3cret-pw"), "{debug}");
            assert!(debug.contains("Postgres"), "{debug}");
        }
        let kv = Target::parse("host=127.0.0.1 user=postgres password=secret dbname=test").unwrap();
        for shown in [format!("{kv:?}"), format!("{kv:#?}"), kv.to_string()] {
            assert!(!shown.contains("secret"), "{shown}");
            assert!(shown.contains("password=***"), "{shown}");
        }
        assert_eq!(
            format!("{:?}", Target::parse("jobs.db").unwrap()),
            r#"Sqlite("jobs.db")"#
        );
    }
}
