//! What a request that did not take effect gets back: a status and a JSON body
//! `{"error": KIND, "message": …}`, with `field` for bad input and `reason` for a refusal.
//!
//! | status | `error` | when |
//! |---|---|---|
//! | 400 | `bad_request` | bad input; `field` names it; nothing changed |
//! | 401 | `unauthorized` | no token, or not a known one (`WWW-Authenticate: Bearer`) |
//! | 403 | `forbidden` | a worker token on an admin route |
//! | 404 | `not_found` | an unknown job or route |
//! | 405 | `method_not_allowed` | a route with another method |
//! | 409 | `refused` | the contract refused it; `reason` says why; nothing changed |
//! | 413 | `too_large` | the body is over the limit |
//! | 415 | `unsupported_encoding` | a `Content-Encoding` other than `identity`; nothing is decoded |
//! | 503 | `busy` / `unavailable` / `timeout` | retryable: `Retry-After` says when |
//! | 500 | `internal` | anything else; the details go to the server's log, never the body |

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// Why the contract refused a write (the `reason` of a 409).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// No such job.
    Unknown,
    /// The job is finished (completed, dead or cancelled).
    Done,
    /// The fence is not the job's current one: a later claim superseded it (or it was never
    /// handed out).
    StaleFence,
    /// Another owner holds the current fence.
    OtherOwner,
    /// The lease ran out (`until <= now`); nobody may store under it any more.
    Expired,
    /// The lease was given back (released or failed); the fence no longer holds a lease.
    NotHeld,
    /// A claim: the job is leased by someone else and the lease is live.
    Leased,
    /// A claim by id: the job's attempts budget is spent (its last attempt's lease expired);
    /// the next claim of any job finishes it as dead.
    AttemptsSpent,
    /// An enqueue: the id is known (the job is left untouched); a schedule's add: a schedule
    /// of that name exists (left as stored).
    Known,
    /// An enqueue: another unfinished job holds the same unique key in the queue; a retry: a
    /// dead or cancelled job is kept so because another unfinished job of its queue holds its
    /// unique key.
    Duplicate,
    /// An admit: a higher fence was already admitted for the resource.
    LowerFence,
    /// A retry: the job is neither dead nor cancelled (it is waiting or running).
    NotDead,
    /// The store refused the write, but why could not be read back.
    Unexplained,
}

impl Reason {
    /// The words of the `message` for this reason.
    pub fn explain(self) -> &'static str {
        match self {
            Reason::Unknown => "no such job",
            Reason::Done => "the job is finished",
            Reason::StaleFence => "the fence is not the job's current fence",
            Reason::OtherOwner => "another owner holds the job's current fence",
            Reason::Expired => "the lease has expired",
            Reason::NotHeld => "the lease under this fence was given back",
            Reason::Leased => "another worker holds a live lease on the job",
            Reason::AttemptsSpent => "the job has no attempts left in its budget",
            Reason::Known => "the job id is known; the job is left untouched",
            Reason::Duplicate => "an unfinished job of the queue holds the same unique key",
            Reason::LowerFence => "a higher fence was already admitted",
            Reason::NotDead => "the job is neither dead nor cancelled",
            Reason::Unexplained => "the store refused it (why could not be read back)",
        }
    }
}

/// The JSON body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// `bad_request`, `unauthorized`, `forbidden`, `not_found`, `method_not_allowed`,
    /// `refused`, `too_large`, `unsupported_encoding`, `busy`, `unavailable`, `timeout` or
    /// `internal`.
    pub error: &'static str,
    /// A sentence for people.
    pub message: String,
    /// Bad input: the field (or argument) that was wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// A refusal: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// A refusal of an enqueue for a duplicate unique key: the job holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of: Option<String>,
}

/// A request that did not take effect.
#[derive(Debug)]
pub enum ApiError {
    /// 400: `field` was wrong.
    BadRequest {
        /// The field or argument.
        field: String,
        /// What was wrong with it.
        message: String,
    },
    /// 401: no token or an unknown one.
    Unauthorized,
    /// 403: the token may not do this.
    Forbidden(&'static str),
    /// 404.
    NotFound(String),
    /// 405: the route exists, not with this method.
    MethodNotAllowed,
    /// 409: the contract refused it.
    Refused {
        /// Why.
        reason: Reason,
        /// The message.
        message: String,
        /// The job holding a duplicate unique key.
        of: Option<String>,
    },
    /// 413.
    TooLarge(String),
    /// 415: the body is compressed (or otherwise encoded); the server decodes none.
    UnsupportedEncoding,
    /// 503: the database was locked past the busy timeout, or every store connection stayed
    /// busy; nothing was done; retry.
    Busy,
    /// 503: the database cannot be reached; nothing was done; retry.
    Unavailable,
    /// 503: the connection to the database was lost during the call: the write may have taken
    /// effect; read the job back before retrying.
    Lost,
    /// 503: the request's body did not arrive in time; nothing was done.
    Timeout,
    /// 500: details logged, not shown.
    Internal,
}

impl ApiError {
    /// A refusal for `reason`, with its standard message about `subject`.
    pub fn refused(reason: Reason, subject: &str) -> Self {
        ApiError::Refused {
            reason,
            message: format!(
                "refused: {subject}: {}; nothing was changed",
                reason.explain()
            ),
            of: None,
        }
    }

    /// Bad input in `field`.
    pub fn bad(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest { .. } => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Refused { .. } => StatusCode::CONFLICT,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedEncoding => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Busy | ApiError::Unavailable | ApiError::Lost | ApiError::Timeout => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The status and the message of the body (what a dashboard page shows).
    pub(crate) fn shown(self) -> (StatusCode, String) {
        (self.status(), self.body().message)
    }

    fn body(self) -> ErrorBody {
        let plain = |error, message: &str| ErrorBody {
            error,
            message: message.to_owned(),
            field: None,
            reason: None,
            of: None,
        };
        match self {
            ApiError::BadRequest { field, message } => ErrorBody {
                error: "bad_request",
                message: format!("invalid `{field}`: {message}; nothing was changed"),
                field: Some(field),
                reason: None,
                of: None,
            },
            ApiError::Unauthorized => plain(
                "unauthorized",
                "a token of this server is required (Authorization: Bearer TOKEN): none was \
                 sent, or it is not one of its tokens",
            ),
            ApiError::Forbidden(why) => plain("forbidden", why),
            ApiError::NotFound(what) => plain("not_found", &what),
            ApiError::MethodNotAllowed => plain(
                "method_not_allowed",
                "this route does not take that method; see /v1/openapi.json",
            ),
            ApiError::Refused {
                reason,
                message,
                of,
            } => ErrorBody {
                error: "refused",
                message,
                field: None,
                reason: Some(reason),
                of,
            },
            ApiError::TooLarge(what) => plain("too_large", &what),
            ApiError::UnsupportedEncoding => plain(
                "unsupported_encoding",
                "the body has a Content-Encoding; send it uncompressed (identity)",
            ),
            ApiError::Busy => plain(
                "busy",
                "the database is busy (another writer held the lock, or every store connection \
                 stayed busy); nothing was done, retry the request",
            ),
            ApiError::Unavailable => plain(
                "unavailable",
                "the database cannot be reached; nothing was done, retry the request",
            ),
            ApiError::Lost => plain(
                "unavailable",
                "the connection to the database was lost during the call: the write may have \
                 taken effect; read the job back before retrying",
            ),
            ApiError::Timeout => plain(
                "timeout",
                "the request's body did not arrive within the server's time limit; nothing was \
                 done",
            ),
            ApiError::Internal => plain(
                "internal",
                "internal error; the server's log has the details",
            ),
        }
    }
}

impl From<leasefence::Error> for ApiError {
    fn from(e: leasefence::Error) -> Self {
        match e {
            leasefence::Error::InvalidArgument { argument, reason } => ApiError::BadRequest {
                field: argument.to_owned(),
                message: reason,
            },
            // Busy: the lock, or (AsyncStore's acquire timeout) every connection; nothing ran.
            leasefence::Error::Busy | leasefence::Error::Unavailable { .. } => ApiError::Busy,
            leasefence::Error::CannotConnect { .. } => {
                crate::outage::unreachable(&e);
                ApiError::Unavailable
            }
            leasefence::Error::ConnectionLost { .. } => {
                tracing::warn!(
                    error = %leasefence::error_chain(&e),
                    "store connection lost during a call"
                );
                ApiError::Lost
            }
            other => {
                // The library's errors never carry a password; they stay in the log all the same.
                tracing::error!(error = %other, "store call failed");
                ApiError::Internal
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let retry = matches!(
            self,
            ApiError::Busy | ApiError::Unavailable | ApiError::Lost | ApiError::Timeout
        );
        let unauthorized = matches!(self, ApiError::Unauthorized);
        // Answered before the body was read whole: the connection cannot carry another request,
        // and the client is told so instead of reusing it and meeting a closed socket.
        let body_unread = matches!(
            self,
            ApiError::TooLarge(_) | ApiError::Timeout | ApiError::UnsupportedEncoding
        );
        let mut response = (status, axum::Json(self.body())).into_response();
        if body_unread {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if retry {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if unauthorized {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"leasefence\""),
            );
        }
        response
    }
}
