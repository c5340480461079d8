//! `HttpStore`: every `Store` method it offers, through a real server, each effect read back
//! from the database directly; what it does not offer is `Unsupported`, a server that is gone
//! is the retryable `Unavailable`, and a refused token names `token`.

use leasefence::{
    BatchSize, Enqueued, Error, Failed, JobId, NewJob, Now, Owner, Queue, Queues, Resource, Status,
    Store, Ttl,
};
use leasefence_server::{HttpStore, ServerConfig, Token, Tokens};

use crate::support::{Db, Server, backends};

fn id(s: &str) -> JobId<'_> {
    JobId::new(s).unwrap()
}
fn who(s: &str) -> Owner<'_> {
    Owner::new(s).unwrap()
}
fn ttl(t: f64) -> Ttl {
    Ttl::new(t).unwrap()
}

backends! {
    fn every_offered_method_works_through_the_server(db: &Db) {
        let server = Server::start(db);
        let s = HttpStore::new(&server.url, None).unwrap();
        let now = Now::system();
        // enqueue, enqueue_jobs, state, inspect
        assert!(s.enqueue(id("a")).unwrap());
        assert!(!s.enqueue(id("a")).unwrap());
        let jobs = [
            NewJob::new("b").unwrap().queue("mail").unwrap().payload(vec![0u8, 159, 255]).priority(3),
            NewJob::new("a").unwrap(),
            NewJob::new("c").unwrap().queue("mail").unwrap().unique_key("k").unwrap(),
            NewJob::new("d").unwrap().queue("mail").unwrap().unique_key("k").unwrap(),
        ];
        assert_eq!(
            s.enqueue_jobs(&jobs).unwrap(),
            [Enqueued::Inserted, Enqueued::Known, Enqueued::Inserted, Enqueued::Duplicate { of: "c".into() }]
        );
        assert_eq!(s.state(id("a")).unwrap().unwrap().fence, 0);
        assert!(s.state(id("zz")).unwrap().is_none());
        let b = s.inspect(id("b"), now).unwrap().unwrap();
        assert_eq!((b.queue.as_str(), b.payload.as_deref(), b.priority, b.status), ("mail", Some(&[0u8, 159, 255][..]), 3, Status::Ready));
        // claim, renew, complete, release
        let lease = s.claim(id("a"), who("w"), now, ttl(60.0)).unwrap().unwrap();
        assert_eq!(lease.fence, 1);
        assert!(s.claim(id("a"), who("x"), now, ttl(60.0)).unwrap().is_none());
        assert!(s.renew(id("a"), who("w"), 1, now, ttl(120.0)).unwrap());
        assert!(!s.renew(id("a"), who("w"), 2, now, ttl(120.0)).unwrap());
        assert!(!s.complete(id("a"), who("x"), 1, now, "no").unwrap());
        assert!(s.release(id("a"), who("w"), 1).unwrap());
        assert_eq!((db.row("a").unwrap().owner, db.row("a").unwrap().fence), (None, 1));
        let again = s.claim(id("a"), who("w"), now, ttl(60.0)).unwrap().unwrap();
        assert!(s.complete_lease(&again, now, "done").unwrap());
        assert_eq!(db.row("a").unwrap().result.as_deref(), Some("done"));
        // claim_batch_in by queue, best first; renew_batch and complete_batch, each fenced
        let mail = s.claim_batch_in(&Queues::only(["mail"]).unwrap(), who("m"), now, ttl(60.0), BatchSize::new(5).unwrap()).unwrap();
        assert_eq!(mail.iter().map(|l| l.job_id.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(mail[0].payload.as_deref(), Some(&[0u8, 159, 255][..]));
        let mut stale = mail[1].clone();
        stale.fence += 1;
        assert_eq!(s.renew_batch(&[&mail[0], &stale], now, ttl(90.0)).unwrap(), [true, false]);
        assert_eq!(s.complete_batch(&[(&mail[0], "rb"), (&stale, "no")], now).unwrap(), [true, false]);
        assert_eq!(db.row("b").unwrap().result.as_deref(), Some("rb"));
        assert!(!db.row("c").unwrap().done);
        // fail: retrying at the time asked, then dead
        let failed = s.fail(&mail[1], now, "boom", Some(Now::new(now.seconds() + 100.0).unwrap())).unwrap();
        match failed {
            Some(Failed::Retrying { at }) => assert!((at - (now.seconds() + 100.0)).abs() < 5.0, "{at}"),
            other => panic!("{other:?}"),
        }
        assert!(s.fail(&mail[1], now, "again", None).unwrap().is_none(), "given up: refused");
        // list, stats, queues, pause, resume, admit, cancel, retry, delete
        let listed = s.list(now, None, None, 10).unwrap();
        assert_eq!(listed.iter().map(|j| j.id()).collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(s.list(now, Some(Status::Done), None, 10).unwrap().len(), 2);
        assert_eq!(s.list(now, None, Some(id("a")), 1).unwrap()[0].id(), "b");
        let stats = s.stats(now).unwrap();
        assert_eq!((stats.done, stats.retrying, stats.total()), (2, 1, 3));
        assert!(s.pause(&Queue::new("mail").unwrap()).unwrap());
        assert!(s.queues(now).unwrap().iter().any(|q| q.name == "mail" && q.paused));
        assert!(s.resume(&Queue::new("mail").unwrap()).unwrap());
        assert!(!s.resume(&Queue::new("mail").unwrap()).unwrap(), "not paused: unchanged");
        assert!(s.admit(Resource::new("r").unwrap(), 5).unwrap());
        assert!(!s.admit(Resource::new("r").unwrap(), 4).unwrap());
        assert!(s.cancel(id("c"), now).unwrap());
        assert!(!s.cancel(id("c"), now).unwrap());
        assert_eq!(s.retry(&[id("c"), id("zz")], now).unwrap(), [true, false]);
        assert_eq!(s.delete(&[id("c"), id("zz")]).unwrap(), [true, false]);
        assert!(db.row("c").is_none());
        // the clock that judges leases
        let clock = s.database_now().unwrap().unwrap().seconds();
        assert!((clock - Now::system().seconds()).abs() < 5.0);
    }
}

#[test]
fn what_http_does_not_offer_is_unsupported_and_a_gone_server_is_retryable() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let s = HttpStore::new(&server.url, None).unwrap();
    let now = Now::system();
    for err in [
        s.purge(now).unwrap_err(),
        s.retry_dead(now).unwrap_err(),
        s.history(id("a")).unwrap_err(),
        s.schedules().unwrap_err(),
    ] {
        assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    }
    let url = server.url.clone();
    server.stop();
    let gone = HttpStore::new(&url, None).unwrap();
    let err = gone.enqueue(id("x")).unwrap_err();
    assert!(
        matches!(err, Error::Unavailable { .. }) && err.is_retryable(),
        "{err}"
    );
    assert_eq!(
        HttpStore::new("ftp://x", None).unwrap_err().argument(),
        Some("server")
    );
}

/// A server that takes the connection and never answers (a hung proxy, a host cut off after
/// the handshake): the request gives up at the client's timeout with the retryable
/// `Unavailable`, and nothing was stored; a zero timeout is refused by name.
#[test]
fn a_server_that_never_answers_is_unavailable_at_the_clients_timeout() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    // keep every accepted connection open, unanswered, until the test ends
    std::thread::spawn(move || {
        let held: Vec<_> = silent.incoming().collect();
        drop(held);
    });
    let s = HttpStore::new(&url, None)
        .unwrap()
        .timeout(std::time::Duration::from_millis(300))
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(s.enqueue(id("x"))).unwrap());
    // the default (60 s) would still be waiting: the shorter limit must end the call
    let err = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the call outlived its 300 ms timeout by 20 s")
        .unwrap_err();
    assert!(
        matches!(err, Error::Unavailable { .. }) && err.is_retryable(),
        "{err}"
    );
    assert_eq!(
        HttpStore::new(&url, None)
            .unwrap()
            .timeout(std::time::Duration::ZERO)
            .unwrap_err()
            .argument(),
        Some("timeout")
    );
}

/// An `https://` URL of a plain-HTTP server is a setting to fix, not an outage: the bad
/// argument `server`, not retryable (the worker stops instead of retrying forever).
#[test]
fn https_to_a_plain_server_is_a_bad_server_argument_not_an_outage() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let server = Server::start(&db);
    let tls_url = server.url.replacen("http://", "https://", 1);
    let s = HttpStore::new(&tls_url, None).unwrap();
    let err = s.enqueue(id("x")).unwrap_err();
    assert_eq!(err.argument(), Some("server"), "{err}");
    assert!(!err.is_retryable(), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("without TLS") && text.contains("http://"),
        "{text}"
    );
    // Nothing was written: the plain URL finds no job.
    let plain = HttpStore::new(&server.url, None).unwrap();
    assert_eq!(plain.state(id("x")).unwrap(), None);
}

#[test]
fn a_refused_token_names_it_and_is_never_shown() {
    let db = Db::new(crate::support::Backend::Sqlite).unwrap();
    let config = ServerConfig {
        tokens: Tokens {
            worker: Some(Token::new("the-right-token-0000", "worker token").unwrap()),
            admin: None,
        },
        ..ServerConfig::default()
    };
    let server = Server::with(&db, config);
    let wrong = HttpStore::new(
        &server.url,
        Some(Token::new("the-wrong-token-1111", "t").unwrap()),
    )
    .unwrap();
    let err = wrong.enqueue(id("x")).unwrap_err();
    assert_eq!(err.argument(), Some("token"));
    assert!(
        !format!("{err} {err:?} {wrong:?}").contains("the-wrong-token"),
        "{err:?} {wrong:?}"
    );
    let right = HttpStore::new(
        &server.url,
        Some(Token::new("the-right-token-0000", "t").unwrap()),
    )
    .unwrap();
    assert!(right.enqueue(id("x")).unwrap());
    // Bad input the server names comes back as the same argument.
    let err = right
        .claim_batch(
            who("w"),
            Now::system(),
            ttl(30.0),
            BatchSize::new(5000).unwrap(),
        )
        .unwrap_err();
    assert_eq!(err.argument(), Some("n"), "{err}");
    assert_eq!(db.row("x").unwrap().fence, 0);
}

backends! {
    // A 400 comes back as the library's invalid argument naming the server's field, in words
    // that name it once: "invalid argument `ttl`: too small …", not "invalid argument `ttl`:
    // invalid `ttl`: too small …" (the server's whole message repeated after the name).
    fn a_bad_argument_the_server_refuses_is_named_once(db: &Db) {
        let server = Server::start(db);
        let s = HttpStore::new(&server.url, None).unwrap();
        assert!(s.enqueue(id("a")).unwrap());
        // Valid here, but the server's clock is far past 1: now + 1e-9 rounds to now.
        let e = s.claim(id("a"), who("w"), Now::system(), ttl(1e-9)).unwrap_err();
        assert_eq!(e.argument(), Some("ttl"), "{e}");
        let text = e.to_string();
        assert_eq!(text.matches("`ttl`").count(), 1, "{text}");
        assert!(text.contains("too small"), "{text}");
        assert_eq!(db.row("a").unwrap().fence, 0, "nothing was changed");
    }
}
