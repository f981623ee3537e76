//! The exhaustive explorer over the core's reachable state graph: 1 device, 3 clients,
//! 2 physical ports, every input kind with small parameters, ticks that land on and jump
//! past every deadline, both trusted-timeout policies. Every invariant is checked on every
//! edge, the reference model is compared on every edge, and the I9 liveness drives run from
//! every state (every 7th in the debug bound).
//!
//! Release builds (or `PNP_EXPLORE_FULL=1`) run the full bound; debug builds run a
//! depth-bounded, narrower alphabet unless the variable is set.

use pnp_lifecycle::{Config, TrustedTimeoutPolicy};
use pnp_lifecycle_testkit::explore::{explore, Bounds};
use pnp_lifecycle_testkit::{Small, World};
use std::time::Instant;

fn config(policy: TrustedTimeoutPolicy) -> Config {
    Config {
        untrusted_ack_timeout: 2,
        trusted_ack_timeout: 5,
        trusted_policy: policy,
        detach_timeout: 3,
    }
}

fn bounds() -> (Bounds, &'static str) {
    if let Some(d) = std::env::var("PNP_EXPLORE_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
    {
        return (
            Bounds {
                max_depth: d,
                ..Bounds::FULL
            },
            "full alphabet, depth from PNP_EXPLORE_DEPTH",
        );
    }
    let full = std::env::var_os("PNP_EXPLORE_FULL").is_some() || !cfg!(debug_assertions);
    if full {
        (Bounds::FULL, "full")
    } else {
        (
            Bounds::QUICK,
            "quick (debug build; set PNP_EXPLORE_FULL=1 for the full bound)",
        )
    }
}

fn run(policy: TrustedTimeoutPolicy) {
    let (bounds, name) = bounds();
    let start = Instant::now();
    let report = explore(World::<Small>::new(config(policy), true), bounds);
    println!(
        "explore {:?} [{} bound {:?}]: {} in {:.1?}",
        policy,
        name,
        bounds,
        report,
        start.elapsed()
    );
    assert!(report.violation.is_none(), "{}", report);
    assert!(!report.truncated, "state budget exhausted: {}", report);
    assert!(
        report.states > 1000,
        "suspiciously small state space: {}",
        report
    );
    assert!(report.edges > report.states);
}

#[test]
fn explore_revoke_policy() {
    run(TrustedTimeoutPolicy::Revoke);
}

#[test]
fn explore_fail_device_policy() {
    run(TrustedTimeoutPolicy::FailDevice);
}
