//! [`JsonBody`]: a request body parsed as JSON, with an error that names the bad field.

use axum::body::Bytes;
use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::header;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// How long a request's body may take to arrive and how large it may be (set by the router
/// from [`ServerConfig`](crate::ServerConfig)'s `request_timeout` and `max_body_bytes`).
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// The time the whole body may take.
    pub timeout: std::time::Duration,
    /// The largest body taken, in bytes.
    pub max_bytes: usize,
}

/// A JSON request body. Bad JSON is a 400 naming the field (`ttl`, `jobs[2].id`, or `body` for
/// JSON that does not parse at all, has data after the value, or repeats a key); a body over
/// the server's limit is a 413, at once when its `Content-Length` says so and the client waits
/// for `100 Continue`. A
/// `Content-Encoding` other than `identity` is a 415 (none is decoded). The `Content-Type` is
/// not checked, so `curl -d '{…}'` works as written.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let limits = req.extensions().get::<BodyLimits>().copied();
        let timeout = limits.map_or(std::time::Duration::from_secs(30), |l| l.timeout);
        let headers = req.headers();
        // Every Content-Encoding header, every coding in each: only `identity` is no coding.
        let encoded = headers
            .get_all(header::CONTENT_ENCODING)
            .iter()
            .any(|value| {
                value.as_bytes().split(|&b| b == b',').any(|coding| {
                    let coding = coding.trim_ascii();
                    !coding.is_empty() && !coding.eq_ignore_ascii_case(b"identity")
                })
            });
        if encoded {
            return Err(ApiError::UnsupportedEncoding);
        }
        // A client that sent `Expect: 100-continue` waits for an answer before it sends the
        // body: one announced larger than the limit is refused then and there. (Without it the
        // client is sending already; answering before reading would cut its write short, and
        // it might never read the 413, so the body is read up to the limit first.)
        let announced = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let waiting = headers
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        if let (true, Some(len), Some(limits)) = (waiting, announced, limits)
            && len > limits.max_bytes as u64
        {
            return Err(too_large());
        }
        let read = Bytes::from_request(req, state);
        let bytes = tokio::time::timeout(timeout, read)
            .await
            .map_err(|_| ApiError::Timeout)?
            .map_err(|rejection| {
                if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    too_large()
                } else {
                    ApiError::bad("body", "the request body could not be read")
                }
            })?;
        parse(&bytes).map(JsonBody)
    }
}

/// A path segment of an API route (`{id}`, `{name}`, `{resource}`), percent-decoded. One that
/// does not decode to UTF-8 (`/v1/jobs/%ff`) is a 400 in the API's JSON naming the segment,
/// where axum's own extractor answers in plain text.
#[derive(Debug)]
pub struct Segment(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Segment {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(Segment(value)),
            Err(PathRejection::FailedToDeserializePathParams(e)) => {
                let field = match e.kind() {
                    ErrorKind::InvalidUtf8InPathParam { key } => key.clone(),
                    _ => "path".to_owned(),
                };
                Err(ApiError::bad(
                    field,
                    "the path segment is not valid UTF-8 once percent-decoded",
                ))
            }
            Err(other) => Err(ApiError::bad("path", other.body_text())),
        }
    }
}

fn too_large() -> ApiError {
    ApiError::TooLarge("the request body is larger than the server's limit".into())
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
    let value = serde_path_to_error::deserialize(&mut *de).map_err(path_error)?;
    // `{"id":"a"}{"id":"b"}` is not one object: the second would be dropped unseen.
    de.end()
        .map_err(|e| ApiError::bad("body", format!("the body is not valid JSON: {e}")))?;
    unique::check(bytes)?;
    Ok(value)
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
    // A missing or repeated field is reported on the object that lacks or repeats it (an
    // unknown one is on the path already).
    let named = inner
        .strip_prefix("missing field `")
        .or_else(|| inner.strip_prefix("duplicate field `"))
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

/// The check that no object of a body repeats a key: serde keeps the last of `{"id":"a",
/// "id":"b"}` where other parsers keep the first, and what a proxy or a log read as the job's
/// id would not be the one stored.
mod unique {
    use std::cell::RefCell;
    use std::collections::HashSet;
    use std::fmt;

    use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};

    use crate::error::ApiError;

    /// A 400 naming the first repeated key (`jobs[1].id`), or `Ok` for a body without one.
    pub(super) fn check(bytes: &[u8]) -> Result<(), ApiError> {
        let repeated = RefCell::new(None);
        let de = &mut serde_json::Deserializer::from_slice(bytes);
        let walk = Walk {
            path: String::new(),
            repeated: &repeated,
        };
        match (walk.deserialize(de), repeated.into_inner()) {
            (Err(_), Some(path)) => Err(ApiError::bad(
                path.clone(),
                format!("the key `{path}` appears more than once in its object"),
            )),
            // The body parsed already; anything else is no repeated key.
            _ => Ok(()),
        }
    }

    /// One value of the document, at `path`.
    struct Walk<'a> {
        path: String,
        repeated: &'a RefCell<Option<String>>,
    }

    impl Walk<'_> {
        fn at(&self, path: String) -> Self {
            Walk {
                path,
                repeated: self.repeated,
            }
        }
    }

    impl<'de> DeserializeSeed<'de> for Walk<'_> {
        type Value = ();

        fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
            de.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }

        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }

        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }

        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }

        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }

        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }

        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut i = 0;
            while seq
                .next_element_seed(self.at(format!("{}[{i}]", self.path)))?
                .is_some()
            {
                i += 1;
            }
            Ok(())
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                let path = match self.path.is_empty() {
                    true => key.clone(),
                    false => format!("{}.{key}", self.path),
                };
                if !seen.insert(key) {
                    *self.repeated.borrow_mut() = Some(path);
                    return Err(A::Error::custom("a repeated key"));
                }
                map.next_value_seed(self.at(path))?;
            }
            Ok(())
        }
    }
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
        // Data after the object, and a key given twice, at any depth.
        assert_eq!(field(r#"{"owner": "a", "ttl": 1}{"owner": "b"}"#), "body");
        assert_eq!(field(r#"{"owner": "a", "ttl": 1} x"#), "body");
        assert_eq!(field(r#"{"owner": "a", "owner": "b", "ttl": 1}"#), "owner");
        assert_eq!(
            field(r#"{"owner": "a", "ttl": 1, "jobs": [{"id": "a"}, {"id": "b", "id": "c"}]}"#),
            "jobs[1].id"
        );
        assert!(parse::<Claim>(b"{\"owner\": \"a\", \"ttl\": 1}\n").is_ok());
        assert!(parse::<Claim>(br#"{"owner": "a", "ttl": 1}"#).is_ok());
    }
}
