//! The connection settings a `PgOptions` hands the driver: read back from the driver's own
//! configuration, no server needed.

use std::time::Duration;

use super::PgOptions;

const URL: &str = "host=127.0.0.1 user=postgres dbname=test";

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

#[test]
fn the_defaults_reach_the_driver() {
    let config = PgOptions::new().connection_config(URL).unwrap();
    assert_eq!(config.get_connect_timeout(), Some(&secs(5.0)));
    // network_timeout 10 s: unacknowledged data for 10 s, or an idle connection probed after
    // a third of it, 3 probes a sixth of it apart.
    assert_eq!(config.get_tcp_user_timeout(), Some(&secs(10.0)));
    assert!(config.get_keepalives());
    assert_eq!(config.get_keepalives_idle(), secs(10.0) / 3);
    assert_eq!(config.get_keepalives_interval(), Some(secs(10.0) / 6));
    assert_eq!(config.get_keepalives_retries(), Some(3));
}

#[test]
fn the_timeouts_set_reach_the_driver_and_keep_the_other_options() {
    let options = PgOptions::new()
        .schema("tenant_a")
        .pool_size(3)
        .connect_timeout(secs(2.5))
        .network_timeout(secs(30.0))
        .lock_timeout(secs(7.0));
    let config = options.connection_config(URL).unwrap();
    assert_eq!(config.get_connect_timeout(), Some(&secs(2.5)));
    assert_eq!(config.get_tcp_user_timeout(), Some(&secs(30.0)));
    assert_eq!(config.get_keepalives_idle(), secs(10.0));
    assert_eq!(config.get_keepalives_interval(), Some(secs(5.0)));
    // Each setter changed its own option only.
    assert_eq!(options.schema, "tenant_a");
    assert_eq!(options.pool_size, 3);
    assert_eq!(options.lock_timeout, secs(7.0));
    assert_eq!(options.connect_timeout, secs(2.5));
    assert_eq!(options.network_timeout, secs(30.0));
}

#[test]
fn a_network_timeout_under_a_second_is_one_second_and_probes_never_come_faster() {
    let config = PgOptions::new()
        .network_timeout(Duration::from_millis(300))
        .connection_config(URL)
        .unwrap();
    assert_eq!(config.get_tcp_user_timeout(), Some(&secs(1.0)));
    assert_eq!(config.get_keepalives_idle(), secs(1.0));
    assert_eq!(config.get_keepalives_interval(), Some(secs(1.0)));
    // 2 s: a third and a sixth of it are under a second, each raised to one.
    let config = PgOptions::new()
        .network_timeout(secs(2.0))
        .connection_config(URL)
        .unwrap();
    assert_eq!(config.get_tcp_user_timeout(), Some(&secs(2.0)));
    assert_eq!(config.get_keepalives_idle(), secs(1.0));
    assert_eq!(config.get_keepalives_interval(), Some(secs(1.0)));
}

#[test]
fn a_connection_string_keeps_its_own_tcp_timeouts() {
    let url = format!("{URL} tcp_user_timeout=20 keepalives_idle=60");
    let config = PgOptions::new().connection_config(&url).unwrap();
    assert_eq!(config.get_tcp_user_timeout(), Some(&secs(20.0)));
    assert_eq!(config.get_keepalives_idle(), secs(60.0));
    // Its keepalive probing is its own too: none of the store's interval or retries.
    assert_eq!(config.get_keepalives_interval(), None);
    assert_eq!(config.get_keepalives_retries(), None);
}

#[test]
fn a_bad_connection_string_is_refused_naming_the_url() {
    let err = PgOptions::new()
        .connection_config("host=127.0.0.1 port=notaport")
        .unwrap_err();
    assert!(
        matches!(&err, crate::Error::InvalidArgument { argument, .. } if *argument == "url"),
        "{err:?}"
    );
}

/// A timeout longer than 2^31 - 1 ms is refused by `open`, naming it, before any connection
/// (the server would refuse the `lock_timeout`, the kernel the `TCP_USER_TIMEOUT`, and the pool
/// would overflow the clock on `Duration::MAX`); the limit itself is taken.
#[test]
fn a_timeout_beyond_the_limit_is_refused_by_name_before_connecting() {
    // Nothing listens on port 1: a check that let the value through would fail to connect.
    let nowhere = "host=127.0.0.1 port=1 user=postgres dbname=test";
    let limit = Duration::from_millis(i32::MAX as u64);
    let over = [
        (
            "connect_timeout",
            PgOptions::new().connect_timeout(Duration::MAX),
        ),
        (
            "lock_timeout",
            PgOptions::new().lock_timeout(limit + Duration::from_millis(1)),
        ),
        (
            "network_timeout",
            PgOptions::new().network_timeout(Duration::MAX),
        ),
    ];
    for (name, options) in over {
        match options.open(nowhere) {
            Err(crate::Error::InvalidArgument { argument, reason }) => {
                assert_eq!(argument, name);
                assert!(reason.contains("2147483647 ms"), "{reason}");
            }
            other => panic!("{name}: {:?}", other.map(|_| "opened")),
        }
    }
    let at_limit = PgOptions::new()
        .connect_timeout(limit)
        .lock_timeout(limit)
        .network_timeout(limit);
    assert!(at_limit.check_timeouts().is_ok());
    // The keepalive times stay within the kernel's 32,767 s (a third of the limit is not).
    let config = at_limit.connection_config(URL).unwrap();
    assert_eq!(config.get_tcp_user_timeout(), Some(&limit));
    assert_eq!(config.get_keepalives_idle(), secs(32_767.0));
    assert_eq!(config.get_keepalives_interval(), Some(secs(32_767.0)));
}

#[test]
fn the_sessions_are_named_leasefence_unless_the_string_names_them() {
    let config = PgOptions::new().connection_config(URL).unwrap();
    assert_eq!(config.get_application_name(), Some("leasefence"));
    let named = PgOptions::new()
        .connection_config(&format!("{URL} application_name=billing"))
        .unwrap();
    assert_eq!(named.get_application_name(), Some("billing"));
    let url = PgOptions::new()
        .connection_config("postgres://app@127.0.0.1/jobs?application_name=reports")
        .unwrap();
    assert_eq!(url.get_application_name(), Some("reports"));
}
