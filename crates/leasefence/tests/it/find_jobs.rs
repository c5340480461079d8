//! `find_jobs`: the dashboard's job search — every filter, both orders, keyset pages that
//! return every match exactly once, a window that bounds how many jobs a page looks at, and
//! bad queries refused by name.

use crate::common::*;
use leasefence::{JobCursor, JobId, JobOrder, JobQuery, Queue, Status};

/// Every page of `query` at `at`, followed to the end: the ids in order, and the pages.
fn all_pages(s: &dyn Viewed, at: f64, query: JobQuery) -> (Vec<String>, usize) {
    let mut q = query;
    let (mut ids, mut pages) = (Vec::new(), 0);
    loop {
        let page = s.find_jobs(now(at), &q).unwrap();
        assert!(
            page.examined <= q.window,
            "{} > {}",
            page.examined,
            q.window
        );
        assert!(page.jobs.len() <= q.limit);
        ids.extend(page.jobs.into_iter().map(|j| j.state.id));
        pages += 1;
        match page.next {
            Some(next) => q.after = Some(next),
            None => return (ids, pages),
        }
        assert!(pages < 1000, "paging never ends");
    }
}

/// Forty jobs over two queues, two kinds, two owners, and every status but scheduled.
fn forty(s: &dyn Viewed) {
    let jobs: Vec<_> = (0..40)
        .map(|i| {
            let j = job(&format!("j{i:02}"));
            let j = if i % 2 == 0 {
                j.queue("even").unwrap()
            } else {
                j
            };
            if i % 3 == 0 {
                j.kind("email").unwrap()
            } else {
                j.kind("pdf").unwrap()
            }
        })
        .collect();
    s.enqueue_many(&jobs).unwrap();
    for i in 0..10 {
        let id = format!("j{i:02}");
        let who = if i < 5 { "alice" } else { "bob" };
        let l = s
            .claim(JobId::new(&id).unwrap(), owner(who), now(0.0), ttl(100.0))
            .unwrap()
            .unwrap();
        if i % 4 == 0 {
            assert!(s.complete_lease(&l, now(1.0), "ok").unwrap());
        }
    }
}

fn query() -> JobQuery {
    JobQuery::default()
}

contract!(viewed
    fn each_filter_returns_exactly_the_jobs_that_match(api, db, s) {
        forty(s);
        let at = 10.0;
        let all = s.list(now(at), None, None, 1000).unwrap();
        let expect = |f: &dyn Fn(&leasefence::JobInfo) -> bool| -> Vec<String> {
            let mut ids: Vec<String> = all.iter().filter(|j| f(j)).map(|j| j.state.id.clone()).collect();
            ids.reverse(); // newest first
            ids
        };
        // Each query newest first, oldest first, and by the id prefix every id has (the ids
        // j00..j39 are in enqueue order): the same jobs, in the order asked for.
        let every_order = |q: JobQuery| -> Vec<String> {
            let (newest, _) = all_pages(s, at, q.clone());
            let (mut oldest, _) = all_pages(s, at, JobQuery { order: JobOrder::Oldest, ..q.clone() });
            oldest.reverse();
            assert_eq!(oldest, newest, "oldest first: {q:?}");
            let (mut by_id, _) = all_pages(s, at, JobQuery { id_prefix: Some("j".into()), ..q.clone() });
            by_id.reverse();
            assert_eq!(by_id, newest, "by id prefix: {q:?}");
            newest
        };
        let got = every_order(query());
        assert_eq!(got, expect(&|_| true));
        let got = every_order(JobQuery { status: Some(Status::Leased), ..query() });
        assert_eq!(got, expect(&|j| j.status == Status::Leased));
        assert_eq!(got.len(), 7);
        let got = every_order(JobQuery { queue: Some(Queue::new("even").unwrap()), ..query() });
        assert_eq!(got, expect(&|j| j.queue == "even"));
        assert_eq!(got.len(), 20);
        let got = every_order(JobQuery { kind: Some("email".into()), ..query() });
        assert_eq!(got, expect(&|j| j.kind.as_deref() == Some("email")));
        assert_eq!(got.len(), 14);
        let got = every_order(JobQuery { owner: Some("bob".into()), ..query() });
        assert_eq!(got, expect(&|j| j.state.owner.as_deref() == Some("bob")));
        assert_eq!(got.len(), 5);
        // several filters at once: all must match
        let got = every_order(JobQuery {
            status: Some(Status::Done),
            queue: Some(Queue::new("even").unwrap()),
            owner: Some("alice".into()),
            ..query()
        });
        assert_eq!(got, ["j04", "j00"]);
        // no match: an empty last page
        let page = s.find_jobs(now(at), &JobQuery { owner: Some("carol".into()), ..query() }).unwrap();
        assert!(page.jobs.is_empty() && page.next.is_none());
        // the statuses are those of the clock given: at 200 every lease has expired
        let (got, _) = all_pages(s, 200.0, JobQuery { status: Some(Status::Expired), ..query() });
        assert_eq!(got.len(), 7);
    }
);

contract!(viewed
    fn pages_in_either_order_return_every_job_once(api, db, s) {
        forty(s);
        let newest: Vec<String> = (0..40).rev().map(|i| format!("j{i:02}")).collect();
        let (got, pages) = all_pages(s, 10.0, JobQuery { limit: 7, window: 7, ..query() });
        assert_eq!(got, newest);
        assert_eq!(pages, 6);
        let (got, _) = all_pages(s, 10.0, JobQuery { limit: 7, order: JobOrder::Oldest, ..query() });
        let oldest: Vec<String> = newest.iter().rev().cloned().collect();
        assert_eq!(got, oldest);
        // a job enqueued between two pages shows up on a later page of the oldest-first walk
        let first = s.find_jobs(now(10.0), &JobQuery { limit: 30, order: JobOrder::Oldest, ..query() }).unwrap();
        s.enqueue_job(job("late")).unwrap();
        let rest = s
            .find_jobs(now(10.0), &JobQuery { limit: 30, order: JobOrder::Oldest, after: first.next, ..query() })
            .unwrap();
        assert_eq!(rest.jobs.last().unwrap().state.id, "late");
        assert_eq!(rest.jobs.len(), 11);
    }
);

contract!(viewed
    fn a_sparse_filter_looks_at_no_more_than_the_window_and_goes_on_from_there(api, db, s) {
        forty(s);
        // bob's five jobs are j05..j09: the newest-first walk meets them after 30 others
        let q = JobQuery { owner: Some("bob".into()), limit: 8, window: 8, ..query() };
        let first = s.find_jobs(now(10.0), &q).unwrap();
        assert_eq!((first.jobs.len(), first.examined), (0, 8));
        assert_eq!(first.next, Some(JobCursor::Seq(first_seq_after_window(s))));
        let (got, pages) = all_pages(s, 10.0, q.clone());
        assert_eq!(got, ["j09", "j08", "j07", "j06", "j05"]);
        // 40 jobs in five full windows of 8; only a sixth look finds nothing left
        assert_eq!(pages, 6);
        // oldest first, the first window (j00..j07) holds three of them
        let q = JobQuery { order: JobOrder::Oldest, ..q };
        let first = s.find_jobs(now(10.0), &q).unwrap();
        let ids: Vec<&str> = first.jobs.iter().map(|j| j.state.id.as_str()).collect();
        assert_eq!((ids, first.examined), (vec!["j05", "j06", "j07"], 8));
        let (got, pages) = all_pages(s, 10.0, q);
        assert_eq!(got, ["j05", "j06", "j07", "j08", "j09"]);
        assert_eq!(pages, 6);
    }
);

/// The enqueue position of j32, the last job of the first newest-first window of 8.
fn first_seq_after_window(s: &dyn Viewed) -> i64 {
    let page = s
        .find_jobs(
            now(10.0),
            &JobQuery {
                limit: 8,
                window: 8,
                ..JobQuery::default()
            },
        )
        .unwrap();
    assert_eq!(page.jobs.last().unwrap().state.id, "j32");
    match page.next {
        Some(JobCursor::Seq(seq)) => seq,
        other => panic!("{other:?}"),
    }
}

contract!(viewed
    fn an_id_prefix_pages_in_id_order_and_takes_its_characters_literally(api, db, s) {
        s.enqueue_many(&[
            job("report-2"), job("report-10"), job("rep"), job("report_x"), job("report%"),
            job("reports"), job("mail-1"), job("report-1"),
        ])
        .unwrap();
        let q = |prefix: &str| JobQuery { id_prefix: Some(prefix.into()), limit: 2, ..query() };
        let (got, pages) = all_pages(s, 0.0, q("report"));
        // ids compare as bytes: % (0x25) < - (0x2d) < _ (0x5f) < s; three full pages, then a
        // fourth that finds nothing left
        assert_eq!(got, ["report%", "report-1", "report-10", "report-2", "report_x", "reports"]);
        assert_eq!(pages, 4);
        assert_eq!(all_pages(s, 0.0, q("report-1")).0, ["report-1", "report-10"]);
        assert_eq!(all_pages(s, 0.0, q("report%")).0, ["report%"]);
        assert_eq!(all_pages(s, 0.0, q("report_")).0, ["report_x"]);
        assert!(all_pages(s, 0.0, q("zzz")).0.is_empty());
        // with the other filters
        s.claim(JobId::new("report-2").unwrap(), owner("w"), now(0.0), ttl(10.0)).unwrap().unwrap();
        let (got, _) = all_pages(s, 1.0, JobQuery { status: Some(Status::Leased), ..q("rep") });
        assert_eq!(got, ["report-2"]);
        // a window smaller than the range: short pages that go on
        let (got, pages) = all_pages(s, 1.0, JobQuery { status: Some(Status::Leased), window: 2, ..q("rep") });
        assert_eq!((got.len(), pages), (1, 4));
    }
);

contract!(viewed
    fn a_bad_query_is_refused_by_name_and_changes_nothing(api, db, s) {
        forty(s);
        let before = db.rows();
        let arg = |q: JobQuery| s.find_jobs(now(0.0), &q).unwrap_err().argument();
        assert_eq!(arg(JobQuery { limit: 0, ..query() }), Some("limit"));
        assert_eq!(arg(JobQuery { limit: 20_000, window: 20_000, ..query() }), Some("limit"));
        assert_eq!(arg(JobQuery { limit: 10, window: 9, ..query() }), Some("window"));
        assert_eq!(arg(JobQuery { owner: Some(String::new()), ..query() }), Some("owner"));
        assert_eq!(arg(JobQuery { id_prefix: Some("a\0".into()), ..query() }), Some("id_prefix"));
        assert_eq!(arg(JobQuery { after: Some(JobCursor::Id("j01".into())), ..query() }), Some("cursor"));
        assert_eq!(db.rows(), before);
    }
);

/// An order's name (what the dashboard's links and forms carry) parses back to it; any other
/// name is refused naming `order`.
#[test]
fn an_order_is_named_and_parsed_back() {
    let named: Vec<&str> = [JobOrder::Newest, JobOrder::Oldest]
        .map(JobOrder::as_str)
        .to_vec();
    assert_eq!(named, ["newest", "oldest"]);
    for order in [JobOrder::Newest, JobOrder::Oldest] {
        assert_eq!(JobOrder::parse(order.as_str()).unwrap(), order);
    }
    assert_eq!(JobOrder::default(), JobOrder::Newest);
    let err = JobOrder::parse("Newest").unwrap_err();
    assert_eq!(err.argument(), Some("order"));
    assert!(err.to_string().contains("\"Newest\""), "{err}");
}

/// `JobQuery::check` at its bounds: a limit and a window of exactly `MAX_WINDOW`, and filters
/// of exactly `MAX_KEY_LEN` bytes, pass; one more is refused naming the argument.
#[test]
fn a_query_is_checked_at_its_bounds() {
    use leasefence::{MAX_KEY_LEN, MAX_WINDOW};
    let q = |limit, window| JobQuery {
        limit,
        window,
        ..JobQuery::default()
    };
    assert!(q(MAX_WINDOW, MAX_WINDOW).check().is_ok());
    assert!(q(1, 1).check().is_ok());
    assert_eq!(
        q(MAX_WINDOW + 1, MAX_WINDOW + 1)
            .check()
            .unwrap_err()
            .argument(),
        Some("limit")
    );
    assert_eq!(
        q(10, MAX_WINDOW + 1).check().unwrap_err().argument(),
        Some("window")
    );
    let longest = "k".repeat(MAX_KEY_LEN);
    let too_long = "k".repeat(MAX_KEY_LEN + 1);
    for (name, set) in [
        (
            "kind",
            (|q: &mut JobQuery, v: String| q.kind = Some(v)) as fn(&mut JobQuery, String),
        ),
        ("owner", |q, v| q.owner = Some(v)),
        ("id_prefix", |q, v| q.id_prefix = Some(v)),
    ] {
        let mut ok = JobQuery::default();
        set(&mut ok, longest.clone());
        assert!(ok.check().is_ok(), "{name} of {MAX_KEY_LEN} bytes");
        let mut bad = JobQuery::default();
        set(&mut bad, too_long.clone());
        assert_eq!(bad.check().unwrap_err().argument(), Some(name));
    }
}
