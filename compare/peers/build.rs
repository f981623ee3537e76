//! Build script shared by `pnp-compare` and the two peer shims: it looks for the peers'
//! sources in `shared/peers/`, the repository's sibling folder. Only this project's CI has
//! that folder; a user's clone does not. Where every source the crate needs is there it
//! sets `cfg(peers)` and the peers are compiled; where one is missing the crate builds
//! without them (the comparison then prints a SKIPPED line with the reason).

use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(peers)");
    println!("cargo::rerun-if-changed=build.rs");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    // The repository root is the first ancestor holding `compare/run.sh`.
    let Some(repo) = manifest
        .ancestors()
        .find(|dir| dir.join("compare").join("run.sh").is_file())
    else {
        return;
    };
    let peers = repo.join("..").join("shared").join("peers");
    let needed: &[&str] = match env::var("CARGO_PKG_NAME").unwrap_or_default().as_str() {
        "statig-fsm-peer" => &["statig-fsm"],
        "naive-std-peer" => &["naive-std"],
        _ => &["statig-fsm", "naive-std"],
    };
    let sources: Vec<PathBuf> = needed
        .iter()
        .map(|peer| peers.join(peer).join("src").join("lib.rs"))
        .collect();
    if sources.iter().all(|s| Path::is_file(s)) {
        for s in &sources {
            println!("cargo::rerun-if-changed={}", s.display());
        }
        println!("cargo::rustc-cfg=peers");
    }
}
