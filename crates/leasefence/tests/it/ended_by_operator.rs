//! `JobContext::is_ended_by_operator`: a handler whose job an operator cancelled is told so —
//! lost (its writes are refused) and ended by an operator — while a job that runs to its end
//! is neither; the worker counts the first as cancelled, not lost.

use std::sync::mpsc;
use std::time::Duration;

use crate::common::*;
use leasefence::{JobId, NewJob, Now, SqliteStore, Store, Worker};

#[test]
fn a_handler_is_told_an_operator_ended_its_job() {
    let db = Db::empty();
    let store = SqliteStore::open(&db.path).unwrap();
    store
        .enqueue_many(&[NewJob::new("keep").unwrap(), NewJob::new("stop").unwrap()])
        .unwrap();
    let (started, running) = mpsc::channel::<String>();
    let (told, seen) = mpsc::channel::<(String, bool, bool)>();
    let stats = std::thread::scope(|scope| {
        let worker = Worker::sqlite(&db.path)
            .ttl(0.6)
            .poll_interval(Duration::from_millis(20))
            .drain(true)
            .build(move |ctx| {
                let id = ctx.job_id().to_owned();
                if id == "stop" {
                    started.send(id.clone()).unwrap();
                    // Until the heartbeat's refused renewal cancels the token.
                    assert!(ctx.token().wait_timeout(Duration::from_secs(30)));
                }
                told.send((id, ctx.is_lost(), ctx.is_ended_by_operator()))
                    .unwrap();
                Ok("done".to_string())
            })
            .unwrap();
        let run = scope.spawn(move || worker.run());
        assert_eq!(
            running.recv_timeout(Duration::from_secs(30)).unwrap(),
            "stop"
        );
        let now = Now::new(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64(),
        )
        .unwrap();
        assert!(store.cancel(JobId::new("stop").unwrap(), now).unwrap());
        run.join().unwrap().unwrap()
    });
    let mut seen: Vec<_> = seen.try_iter().collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("keep".to_string(), false, false),
            ("stop".to_string(), true, true)
        ]
    );
    assert_eq!((stats.completed, stats.cancelled, stats.lost), (1, 1, 0));
    let stop = store.state(JobId::new("stop").unwrap()).unwrap().unwrap();
    assert_eq!((stop.done, stop.result), (true, None));
}
