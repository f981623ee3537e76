//! The binary itself, a few rounds of every workload: counts checked, exit status zero.

use std::process::Command;

fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_pnp-compare"))
        .args(args)
        .output()
        .expect("run pnp-compare");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "pnp-compare {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        .parse()
        .unwrap()
}

#[test]
fn each_impl_runs_the_cycle_and_counts_it() {
    let mut impls = vec!["pnp", "slots64"];
    if pnp_compare::PEERS {
        impls.extend(["statig", "naive"]);
    }
    for imp in impls {
        for n in [1u64, 4, 64] {
            let line = run(&[imp, &n.to_string(), "5"]);
            assert_eq!(field(&line, "notifications"), 2 * n * 5, "{line}");
            assert_eq!(field(&line, "resets"), 5, "{line}");
        }
    }
}

#[test]
fn query_stop_and_sizes() {
    let line = run(&["qs", "0", "7"]);
    assert_eq!(field(&line, "other_outputs"), 14, "{line}");
    let sizes = run(&["sizes"]);
    for what in ["pnp Input", "pnp Output", "pnp Reply", "pnp Error"] {
        assert!(sizes.contains(what), "{what} missing from {sizes}");
    }
    for what in ["statig-fsm Device", "naive-std"] {
        assert_eq!(
            sizes.contains(what),
            pnp_compare::PEERS,
            "{what} in {sizes}"
        );
    }
}

#[test]
fn a_peer_missing_at_build_time_is_refused_by_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_pnp-compare"))
        .args(["statig", "1", "1"])
        .output()
        .unwrap();
    if pnp_compare::PEERS {
        assert!(out.status.success());
    } else {
        assert_eq!(out.status.code(), Some(3));
        assert!(String::from_utf8_lossy(&out.stderr).contains("shared/peers"));
    }
}

#[test]
fn a_bad_workload_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_pnp-compare"))
        .args(["pnp", "3", "1"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "3 clients has no pnp machine");
}
