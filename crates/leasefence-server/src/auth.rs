//! Bearer tokens: a **worker** token (claim, renew, complete, fail, release, enqueue and the
//! reads) and an **admin** token (everything, including cancel, retry, delete, queue pause and
//! schedules). Compared in constant time; never logged, never in `Debug`.

use std::net::SocketAddr;

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use subtle::ConstantTimeEq;

use crate::AppState;
use crate::error::ApiError;

/// A secret token. Its `Debug` never shows it.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl Token {
    /// A token from its text, trimmed of surrounding whitespace (a token file's newline).
    ///
    /// # Errors
    /// `InvalidArgument` naming `what` when the token is shorter than 16 characters or holds
    /// a character outside printable ASCII.
    pub fn new(text: &str, what: &'static str) -> leasefence::Result<Token> {
        let text = text.trim();
        if text.len() < 16 {
            return Err(leasefence::Error::InvalidArgument {
                argument: what,
                reason: format!(
                    "a token must be at least 16 characters (got {}); make one with \
                     `head -c 32 /dev/urandom | base64`",
                    text.len()
                ),
            });
        }
        if !text.bytes().all(|b| (0x21..0x7f).contains(&b)) {
            return Err(leasefence::Error::InvalidArgument {
                argument: what,
                reason: "a token holds printable ASCII without spaces only".into(),
            });
        }
        Ok(Token(text.as_bytes().to_vec()))
    }

    /// Whether two tokens are the same (constant time).
    pub fn same_as(&self, other: &Token) -> bool {
        self.matches(&other.0)
    }

    /// The token's text, to send it (never to show it).
    pub(crate) fn expose(&self) -> &str {
        // `new` admits printable ASCII only.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    fn matches(&self, presented: &[u8]) -> bool {
        // `ct_eq` of slices of different lengths is false without looking at the bytes; the
        // length of a token is not the secret.
        bool::from(self.0.as_slice().ct_eq(presented))
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

/// The server's tokens. With neither, every route is open and the server binds loopback only.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    /// The worker token.
    pub worker: Option<Token>,
    /// The admin token.
    pub admin: Option<Token>,
}

impl Tokens {
    /// Whether any token is set (then every `/v1` route needs one).
    pub fn any(&self) -> bool {
        self.worker.is_some() || self.admin.is_some()
    }

    /// Refuses to serve an address other than loopback without tokens.
    ///
    /// # Errors
    /// `InvalidArgument` naming `bind`.
    pub fn check_bind(&self, addr: SocketAddr) -> leasefence::Result<()> {
        if !self.any() && !addr.ip().is_loopback() {
            return Err(leasefence::Error::InvalidArgument {
                argument: "bind",
                reason: format!(
                    "{addr} is not a loopback address and no token is set: anyone who can \
                     reach it could claim, complete and delete jobs. Set a worker token \
                     (--worker-token-file or LEASEFENCE_WORKER_TOKEN) and an admin token, or \
                     bind 127.0.0.1"
                ),
            });
        }
        Ok(())
    }

    /// What the request's token allows.
    fn role(&self, headers: &HeaderMap) -> Result<Role, ApiError> {
        if !self.any() {
            return Ok(Role::Admin);
        }
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| credentials(v, "Bearer"))
            .ok_or(ApiError::Unauthorized)?;
        self.role_of(presented.as_bytes())
            .ok_or(ApiError::Unauthorized)
    }

    /// What a presented token allows: `None` when it is neither the admin nor the worker
    /// token. Both comparisons always run, so timing tells nothing about which one matched.
    pub(crate) fn role_of(&self, presented: &[u8]) -> Option<Role> {
        let admin = self.admin.as_ref().is_some_and(|t| t.matches(presented));
        let worker = self.worker.as_ref().is_some_and(|t| t.matches(presented));
        match (admin, worker) {
            (true, _) => Some(Role::Admin),
            (false, true) => Some(Role::Worker),
            (false, false) => None,
        }
    }
}

/// The credentials of an `Authorization` header value of `scheme`, which is compared without
/// regard to case (`Bearer`, `bearer`, `BEARER`: RFC 9110, 11.1), trimmed.
pub(crate) fn credentials<'a>(value: &'a str, scheme: &str) -> Option<&'a str> {
    let (given, rest) = value.trim_start().split_once(' ')?;
    given.eq_ignore_ascii_case(scheme).then(|| rest.trim())
}

/// Whether a `Host` header names this machine's loopback: `localhost` (or a name under
/// `.localhost`, which browsers resolve themselves) or a loopback IP, with or without a port.
/// A server without tokens answers only these: a web page that re-points a name of its own at
/// 127.0.0.1 (DNS rebinding) sends that name, and would otherwise be served as if it were this
/// server's own page — reading the dashboard's CSRF token and calling every route.
pub(crate) fn loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        // `[::1]:7878`, `localhost:7878`; a bare IPv6 address (`::1`) has colons of its own.
        Some((name, port))
            if port.bytes().all(|b| b.is_ascii_digit())
                && (name.ends_with(']') || !name.contains(':')) =>
        {
            name
        }
        _ => host,
    };
    let name = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name)
        .to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The worker routes and the reads.
    Worker,
    /// Everything.
    Admin,
}

/// An extractor: the request holds the worker token or the admin token (or none is set).
#[derive(Debug)]
pub struct Worker;

/// An extractor: the request holds the admin token (or none is set).
#[derive(Debug)]
pub struct Admin;

impl FromRequestParts<AppState> for Worker {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let State(state) = State::<AppState>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::Internal)?;
        state.tokens.role(&parts.headers).map(|_| Worker)
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let State(state) = State::<AppState>::from_request_parts(parts, state)
            .await
            .map_err(|_| ApiError::Internal)?;
        match state.tokens.role(&parts.headers)? {
            Role::Admin => Ok(Admin),
            Role::Worker => Err(ApiError::Forbidden(if state.tokens.admin.is_some() {
                "this route needs the admin token"
            } else {
                "this route needs the admin token, and the server has none set"
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        h
    }

    #[test]
    fn roles_follow_the_token() {
        let tokens = Tokens {
            worker: Some(Token::new("worker-token-0123456789", "worker token").unwrap()),
            admin: Some(Token::new("admin-token-0123456789\n", "admin token").unwrap()),
        };
        assert_eq!(
            tokens.role(&headers("worker-token-0123456789")).unwrap(),
            Role::Worker
        );
        assert_eq!(
            tokens.role(&headers("admin-token-0123456789")).unwrap(),
            Role::Admin
        );
        assert!(tokens.role(&headers("admin-token-012345678")).is_err());
        assert!(tokens.role(&HeaderMap::new()).is_err());
        assert_eq!(
            Tokens::default().role(&HeaderMap::new()).unwrap(),
            Role::Admin
        );
    }

    #[test]
    fn tokens_are_checked_and_never_shown() {
        assert_eq!(
            Token::new("short", "worker token").unwrap_err().argument(),
            Some("worker token")
        );
        assert!(Token::new("has a space in it 0123", "admin token").is_err());
        let t = Token::new("s3cret-s3cret-s3cret", "x").unwrap();
        assert_eq!(format!("{t:?}"), "Token(***)");
        let all = format!(
            "{:?}",
            Tokens {
                worker: Some(t.clone()),
                admin: Some(t)
            }
        );
        assert!(!all.contains("s3cret"), "{all}");
    }

    #[test]
    fn loopback_hosts_are_told_from_other_names() {
        for host in [
            "localhost",
            "localhost:7878",
            "LocalHost:7878",
            "app.localhost:1",
            "127.0.0.1",
            "127.0.0.1:7878",
            "127.1.2.3:80",
            "[::1]:7878",
            "[::1]",
            "::1",
        ] {
            assert!(loopback_host(host), "{host}");
        }
        for host in [
            "evil.example:7878",
            "localhost.evil.example",
            "127.0.0.1.nip.io:7878",
            "10.0.0.1:7878",
            "[::2]:7878",
            "",
        ] {
            assert!(!loopback_host(host), "{host}");
        }
    }

    #[test]
    fn open_servers_bind_loopback_only() {
        let open = Tokens::default();
        assert!(open.check_bind("127.0.0.1:7878".parse().unwrap()).is_ok());
        assert!(open.check_bind("[::1]:7878".parse().unwrap()).is_ok());
        let err = open
            .check_bind("0.0.0.0:7878".parse().unwrap())
            .unwrap_err();
        assert_eq!(err.argument(), Some("bind"));
        let closed = Tokens {
            worker: Some(Token::new("worker-token-0123456789", "w").unwrap()),
            admin: None,
        };
        assert!(closed.check_bind("0.0.0.0:7878".parse().unwrap()).is_ok());
    }
}
