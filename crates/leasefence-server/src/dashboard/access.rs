//! Who is looking at the dashboard, and what they may do.
//!
//! - A server without tokens (loopback only, as the API) is open: every page and action.
//! - Otherwise a visitor signs in with one of the API's tokens — on the login form (a session
//!   cookie, `HttpOnly`, `SameSite=Strict`), or with HTTP basic auth (any user name, the token
//!   as the password) or a bearer token on each request. The worker token reads (read-only);
//!   the admin token also acts.
//! - Every action is a POST carrying the visitor's CSRF token (a per-session random one, or
//!   the server's per-role one for basic and bearer auth and for an open server), from a page
//!   of the same origin (`Origin` or `Sec-Fetch-Site`, when the browser sends them).
//!
//! Tokens and session ids are compared in constant time and never shown or logged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine as _;
use subtle::ConstantTimeEq;

use crate::AppState;
use crate::auth::Role;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "lf_session";
/// How long a session lasts after sign-in.
pub(crate) const SESSION_LIFE: Duration = Duration::from_secs(8 * 3600);
/// The most sessions kept at once; past it the oldest are dropped.
const MAX_SESSIONS: usize = 10_000;

/// How the visitor was recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// A server without tokens.
    Open,
    /// The login form's session.
    Session,
    /// HTTP basic auth or a bearer token on the request.
    Header,
}

/// The visitor of one request.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    /// Whether they may act (the admin token, or an open server).
    pub(crate) can_act: bool,
    /// Who, for the audit log: the name given and from where.
    pub(crate) actor: String,
    /// The CSRF token their forms carry.
    pub(crate) csrf: String,
    /// How they were recognised.
    pub(crate) via: Via,
}

struct Session {
    role: Role,
    user: String,
    csrf: String,
    expires: Instant,
}

/// The dashboard's sessions and CSRF tokens.
pub(crate) struct Access {
    sessions: Mutex<HashMap<String, Session>>,
    /// For an open server.
    open_csrf: String,
    /// For basic and bearer auth, per role.
    admin_csrf: String,
    worker_csrf: String,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Access(***)")
    }
}

/// 32 random bytes as hex.
pub(crate) fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    // The operating system's randomness; without it no session could be safe.
    getrandom::fill(&mut bytes).expect("the operating system's random number generator");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn same(a: &str, b: &str) -> bool {
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl Access {
    pub(crate) fn new() -> Access {
        Access {
            sessions: Mutex::new(HashMap::new()),
            open_csrf: random_hex(),
            admin_csrf: random_hex(),
            worker_csrf: random_hex(),
        }
    }

    /// Starts a session for `role`; returns its id (the cookie's value).
    pub(crate) fn start(&self, role: Role, user: &str) -> String {
        let id = random_hex();
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        sessions.retain(|_, s| s.expires > now);
        if sessions.len() >= MAX_SESSIONS {
            // Full of live sessions: the one closest to its end goes.
            if let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| k.clone())
            {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(
            id.clone(),
            Session {
                role,
                user: user.to_owned(),
                csrf: random_hex(),
                expires: now + SESSION_LIFE,
            },
        );
        id
    }

    /// Ends the session `id`, if there is one.
    pub(crate) fn end(&self, id: &str) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.retain(|k, _| !same(k, id));
    }

    fn session(&self, id: &str) -> Option<(Role, String, String)> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        // Every key compared, in constant time each: a lookup by hash would leak timing.
        sessions
            .iter()
            .find(|(k, s)| same(k, id) && s.expires > now)
            .map(|(_, s)| (s.role, s.user.clone(), s.csrf.clone()))
    }
}

/// The session id the request's cookie carries.
pub(crate) fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// The token and user name of an `Authorization: Basic` or `Bearer` header.
fn header_token(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    if let Some(b64) = crate::auth::credentials(value, "Basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (user, token) = text.split_once(':')?;
        return Some((token.to_owned(), user.to_owned()));
    }
    let token = crate::auth::credentials(value, "Bearer")?;
    Some((token.to_owned(), String::new()))
}

/// Where the request came from, for the audit log.
fn from_where(parts: &Parts) -> String {
    parts
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// A name as the visitor gave it, cut to something printable and short.
pub(crate) fn clean_name(name: &str) -> String {
    let name: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    match name.trim() {
        "" => "operator".to_owned(),
        name => name.to_owned(),
    }
}

/// A request the dashboard cannot serve until its visitor signs in.
#[derive(Debug)]
pub(crate) struct SignIn {
    next: String,
    get: bool,
}

impl IntoResponse for SignIn {
    fn into_response(self) -> Response {
        if self.get {
            let target = format!(
                "/dashboard/login?next={}",
                percent_encoding::utf8_percent_encode(
                    &self.next,
                    percent_encoding::NON_ALPHANUMERIC
                )
            );
            return Redirect::to(&target).into_response();
        }
        // No `WWW-Authenticate` challenge: a browser's script would stop at its password
        // prompt. Basic-auth clients send their credentials without being asked.
        (
            StatusCode::UNAUTHORIZED,
            "sign in first (/dashboard/login), or send the token as HTTP basic auth",
        )
            .into_response()
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = SignIn;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, SignIn> {
        let access = &state.dashboard.access;
        let place = from_where(parts);
        if !state.tokens.any() {
            return Ok(Viewer {
                can_act: true,
                actor: format!("local from {place}"),
                csrf: access.open_csrf.clone(),
                via: Via::Open,
            });
        }
        if let Some((role, user, csrf)) =
            session_cookie(&parts.headers).and_then(|id| access.session(&id))
        {
            return Ok(Viewer {
                can_act: role == Role::Admin,
                actor: format!("{user} from {place}"),
                csrf,
                via: Via::Session,
            });
        }
        if let Some((token, user)) = header_token(&parts.headers)
            && let Some(role) = state.tokens.role_of(token.as_bytes())
        {
            let csrf = match role {
                Role::Admin => access.admin_csrf.clone(),
                Role::Worker => access.worker_csrf.clone(),
            };
            return Ok(Viewer {
                can_act: role == Role::Admin,
                actor: format!("{} from {place}", clean_name(&user)),
                csrf,
                via: Via::Header,
            });
        }
        let next = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| "/dashboard".into());
        Err(SignIn {
            next,
            get: parts.method == axum::http::Method::GET,
        })
    }
}

impl Viewer {
    /// Whether a form's CSRF token is this visitor's.
    pub(crate) fn csrf_ok(&self, presented: &str) -> bool {
        same(&self.csrf, presented)
    }
}

/// Whether a POST comes from a page of this server: its `Origin` names this host (or the one
/// a proxy forwarded), or `Sec-Fetch-Site` says same-origin. A client that sends neither (not
/// a browser) passes; the CSRF token still has to match.
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site")
        && !matches!(site, "same-origin" | "none")
    {
        return false;
    }
    let Some(origin) = text("origin") else {
        return true;
    };
    let host = origin
        .split_once("://")
        .map(|(_, rest)| rest)
        .unwrap_or(origin);
    [text("x-forwarded-host"), text("host")]
        .into_iter()
        .flatten()
        .any(|h| h.eq_ignore_ascii_case(host))
}

/// A `next` target that stays on the dashboard (never another site), and that a `Location`
/// header can carry (no control character).
pub(crate) fn safe_next(next: &str) -> &str {
    if next.starts_with("/dashboard")
        && !next.starts_with("//")
        && !next.contains('\\')
        && !next.chars().any(char::is_control)
    {
        next
    } else {
        "/dashboard"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn a_session_is_found_by_its_id_and_ends() {
        let access = Access::new();
        let id = access.start(Role::Admin, "ann");
        assert_eq!(id.len(), 64);
        let (role, user, csrf) = access.session(&id).unwrap();
        assert_eq!((role, user.as_str()), (Role::Admin, "ann"));
        assert_eq!(csrf.len(), 64);
        assert!(access.session(&id[1..]).is_none());
        access.end(&id);
        assert!(access.session(&id).is_none());
    }

    #[test]
    fn the_cookie_and_the_authorization_header_are_read() {
        let h = headers(&[("cookie", "a=1; lf_session=abc; b=2")]);
        assert_eq!(session_cookie(&h).as_deref(), Some("abc"));
        let basic = base64::engine::general_purpose::STANDARD.encode("ann:tok:en");
        let h = headers(&[("authorization", &format!("Basic {basic}"))]);
        assert_eq!(header_token(&h), Some(("tok:en".into(), "ann".into())));
        let h = headers(&[("authorization", "Bearer xyz")]);
        assert_eq!(header_token(&h), Some(("xyz".into(), String::new())));
    }

    #[test]
    fn a_post_from_another_site_is_refused() {
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:7878"),
            ("origin", "http://127.0.0.1:7878")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "127.0.0.1:7878"),
            ("origin", "http://evil.example")
        ])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(
            same_origin(&headers(&[("host", "h:1")])),
            "no Origin: not a browser"
        );
        assert!(same_origin(&headers(&[
            ("host", "127.0.0.1:7878"),
            ("x-forwarded-host", "jobs.example.com"),
            ("origin", "https://jobs.example.com"),
        ])));
    }

    #[test]
    fn next_never_leaves_the_dashboard() {
        assert_eq!(safe_next("/dashboard/jobs?x=1"), "/dashboard/jobs?x=1");
        assert_eq!(safe_next("https://evil.example"), "/dashboard");
        assert_eq!(safe_next("//evil.example/dashboard"), "/dashboard");
        assert_eq!(safe_next("/dashboard\\..\\x"), "/dashboard");
    }

    #[test]
    fn names_are_cleaned_for_the_log() {
        assert_eq!(clean_name(" ann\n"), "ann");
        assert_eq!(clean_name(""), "operator");
        assert_eq!(clean_name(&"x".repeat(100)).len(), 64);
    }

    #[test]
    fn debug_shows_no_secret() {
        let access = Access::new();
        let id = access.start(Role::Admin, "ann");
        let shown = format!("{access:?}");
        assert!(
            !shown.contains(&id) && !shown.contains(&access.admin_csrf),
            "{shown}"
        );
    }
}
