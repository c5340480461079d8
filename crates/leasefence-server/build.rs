//! Decides, at build time, whether the PostgreSQL test cases (and the browser test) run.
//!
//! With `LEASEFENCE_TEST_PG` set (or `CI` set, where an unset database must fail rather than
//! skip) the cfg `leasefence_pg` is on and the PostgreSQL cases run. Without either, they are
//! compiled with `#[ignore = "…"]`, so `cargo test` reports them as **ignored**, with the
//! reason, instead of counting them as passed. Cargo rebuilds when either variable changes.

fn main() {
    // The browser test (tests/http/browser.rs), the same way: LEASEFENCE_TEST_BROWSER or CI.
    println!("cargo::rustc-check-cfg=cfg(leasefence_browser)");
    println!("cargo::rerun-if-env-changed=LEASEFENCE_TEST_BROWSER");
    let browser = std::env::var("LEASEFENCE_TEST_BROWSER").is_ok_and(|v| !v.trim().is_empty());
    if browser || std::env::var_os("CI").is_some() {
        println!("cargo::rustc-cfg=leasefence_browser");
    }
    println!("cargo::rustc-check-cfg=cfg(leasefence_pg)");
    println!("cargo::rerun-if-env-changed=LEASEFENCE_TEST_PG");
    println!("cargo::rerun-if-env-changed=CI");
    let configured = std::env::var("LEASEFENCE_TEST_PG").is_ok_and(|v| !v.trim().is_empty());
    if configured || std::env::var_os("CI").is_some() {
        println!("cargo::rustc-cfg=leasefence_pg");
    }
}
