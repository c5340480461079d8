//! `fences`: the fence gate's resources, each with the highest fence admitted, in pages.

use crate::common::*;
use leasefence::{FenceRecord, Resource};

contract!(viewed
    fn lists_each_resource_with_its_highest_admitted_fence(api, db, s) {
        let gate = |r: &str, f: i64| s.admit(Resource::new(r).unwrap(), f).unwrap();
        assert!(gate("s3://bucket/report", 3));
        assert!(gate("s3://bucket/report", 5));
        assert!(!gate("s3://bucket/report", 4), "an older generation is refused");
        assert!(gate("db:accounts", 1));
        assert!(gate("cache", 9));
        let all = s.fences(None, 100).unwrap();
        let pairs: Vec<(&str, i64)> = all.iter().map(|f| (f.resource.as_str(), f.fence)).collect();
        assert_eq!(pairs, [("cache", 9), ("db:accounts", 1), ("s3://bucket/report", 5)]);
        for f in &all {
            assert_eq!(db.fence_gate(&f.resource), Some(f.fence), "as stored");
        }
        // pages: after the last resource of one, the next
        let first = s.fences(None, 2).unwrap();
        assert_eq!(first.len(), 2);
        let after = Resource::new(&first[1].resource).unwrap();
        assert_eq!(
            s.fences(Some(after), 2).unwrap(),
            [FenceRecord { resource: "s3://bucket/report".into(), fence: 5 }]
        );
        assert!(s.fences(Some(Resource::new("zzz").unwrap()), 2).unwrap().is_empty());
    }
);
