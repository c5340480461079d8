//! [`JsonBody`]: a request body parsed as JSON, with an error that names the bad field.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// How long a request's body may take to arrive (set by the router from
/// [`ServerConfig::request_timeout`](crate::ServerConfig::request_timeout)).
#[derive(Debug, Clone, Copy)]
pub struct BodyTimeout(pub std::time::Duration);

/// A JSON request body. Bad JSON is a 400 naming the field (`ttl`, `jobs[2].id`, or `body` for
/// JSON that does not parse at all); a body over the server's limit is a 413. The
/// `Content-Type` is not checked, so `curl -d '{…}'` works as written.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let limit = req
            .extensions()
            .get::<BodyTimeout>()
            .map_or(std::time::Duration::from_secs(30), |t| t.0);
        let read = Bytes::from_request(req, state);
        let bytes = tokio::time::timeout(limit, read)
            .await
            .map_err(|_| ApiError::Timeout)?
            .map_err(|rejection| {
                if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::TooLarge("the request body is larger than the server's limit".into())
                } else {
                    ApiError::bad("body", "the request body could not be read")
                }
            })?;
        parse(&bytes).map(JsonBody)
    }
}

/// Parses `bytes` as a `T`, naming the field of the first error.
///
/// # Errors
/// A 400 naming the field.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // serde would take a struct from an array too (`["A", 30]`); the API speaks objects only.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::bad("body", "the body must be a JSON object"));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(path_error)
}

/// Reads an already parsed JSON value as a `T`, naming the field of the first error (for
/// bodies whose shape depends on a key, like an enqueue of one job or of `jobs`).
///
/// # Errors
/// A 400 naming the field.
pub fn from_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(path_error)
}

fn path_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    let inner = e.inner().to_string();
    // A missing field is reported on the object that lacks it (an unknown one is on the
    // path already).
    let named = inner
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    let field = match (named, path.as_str()) {
        (Some(name), "." | "" | "?") => name.to_owned(),
        (Some(name), path) => format!("{path}.{name}"),
        (None, "." | "" | "?") => "body".to_owned(),
        (None, path) => path.to_owned(),
    };
    let message = if e.inner().is_syntax() || e.inner().is_eof() {
        format!("the body is not valid JSON: {inner}")
    } else {
        inner
    };
    ApiError::bad(field, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Claim {
        owner: String,
        ttl: f64,
        jobs: Option<Vec<Job>>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Job {
        id: String,
    }

    fn field(json: &str) -> String {
        match parse::<Claim>(json.as_bytes()).unwrap_err() {
            ApiError::BadRequest { field, .. } => field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(field(r#"{"ttl": 1}"#), "owner");
        assert_eq!(field(r#"{"owner": "a", "ttl": "x"}"#), "ttl");
        assert_eq!(field(r#"{"owner": "a", "ttl": 1, "tll": 2}"#), "tll");
        assert_eq!(
            field(r#"{"owner": "a", "ttl": 1, "jobs": [{"id": "a"}, {}]}"#),
            "jobs[1].id"
        );
        assert_eq!(field(r#"{"owner": "a", "#), "body");
        assert_eq!(field("[1]"), "body");
        assert!(parse::<Claim>(br#"{"owner": "a", "ttl": 1}"#).is_ok());
    }
}
