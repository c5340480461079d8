//! docs/reliability.md ("Power loss") and `Synchronous::Normal` say a fence is handed out again at
//! NORMAL when "a claim's job survives a cut that its claim did not (the job was enqueued before
//! the last checkpoint)". The job need not survive: a job enqueued after the last checkpoint is
//! lost with its claim, and a producer that enqueues it again (its `enqueue` answers `true`: the
//! id is unknown) gets a job whose next claim hands out the acknowledged fence again.
//! `power_loss.rs` never enqueues a lost id again, so it cannot see this; the docs now name it,
//! and this test shows the hazard (as `cut_points.rs` does for the surviving job).

use leasefence::{JobId, Now, Owner, SqliteOptions, Store, Synchronous, Ttl};
use leasefence_powercut::PowerCut;

#[test]
fn normal_hands_out_again_the_fence_of_a_job_lost_with_its_claim_and_enqueued_again() {
    let seed = leasefence_powercut::seed();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let options = SqliteOptions::new().synchronous(Synchronous::Normal);
    let job = JobId::new("j").unwrap();
    let ttl = Ttl::new(10.0).unwrap();
    let power = PowerCut::new(dir.path(), seed);
    let acked = {
        let store = options.open(&path).unwrap();
        assert!(store.enqueue(job).unwrap());
        let lease = store
            .claim(job, Owner::new("w1").unwrap(), Now::new(1.0).unwrap(), ttl)
            .unwrap()
            .expect("j is ready");
        power.cut();
        lease.fence
    };
    power.reboot().unwrap();
    drop(power);
    // After the reboot the producer enqueues j again (it is unknown now), a worker claims it.
    let store = options.open(&path).unwrap();
    let again = store.enqueue(job).unwrap();
    let lease = store
        .claim(
            job,
            Owner::new("w2").unwrap(),
            Now::new(100.0).unwrap(),
            ttl,
        )
        .unwrap()
        .expect("j is ready");
    // The hazard the docs now name: when the cut took the job (and so its claim), the fence
    // acknowledged to w1 is w2's too. (When the job's enqueue reached the disk, its claim did
    // not: the same fence again, the case the docs named before.)
    assert!(
        lease.fence <= acked,
        "seed {seed}: fence {acked} acknowledged before the cut; after it (j enqueued again: \
         {again}) fence {}",
        lease.fence
    );
}
