//! The connection loop: hyper's HTTP/1 server under axum's router, with the limits that
//! `axum::serve` has no setting for — a client must send a request's headers within the
//! request timeout, and a shutdown waits for the requests in flight only that long again.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tower_service::Service as _;

/// A year: the longest header timeout handed to hyper.
const A_YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// Serves `router` on `listener` until `shutdown` resolves; see [`crate::serve_with`].
pub(crate) async fn run(
    listener: tokio::net::TcpListener,
    router: Router,
    request_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    // hyper adds the header timeout to the clock unchecked: a timeout of centuries (a valid
    // `--request-timeout`) would panic every connection, so it waits a year at most.
    let header_timeout = request_timeout.min(A_YEAR);
    // Every connection's task, so that those still open after the shutdown grace end with it.
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        while connections.try_join_next().is_some() {} // forget the ended ones
        let (stream, addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_error(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let router = router.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            // What `into_make_service_with_connect_info` gives the handlers: the peer.
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(addr));
            let mut router = router.clone();
            async move { router.call(request.map(axum::body::Body::new)).await }
        });
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            // A client that sends a request's headers slowly, or not at all — a new connection
            // or an idle keep-alive one — is closed when this runs out instead of holding the
            // connection (and a shutdown) for as long as it likes.
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        connections.spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(peer = %addr, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    // Idle connections close at once; requests in flight get the request timeout again (a
    // store call, once started, runs to its end), then the server stops regardless.
    let grace = request_timeout.saturating_add(Duration::from_secs(5));
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(grace) => {
            tracing::warn!(
                grace_s = grace.as_secs_f64(),
                open = connections.len(),
                "stopping with connections still open after the shutdown grace; closing them"
            );
        }
    }
    connections.shutdown().await;
    Ok(())
}

/// What `axum::serve` does with an accept error: a connection reset before it was accepted is
/// nothing; anything else (out of file descriptors) is logged and waited out for a second.
async fn accept_error(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accept error; trying again in 1 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
