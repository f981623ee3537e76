//! The `statig-fsm` peer, compiled from `shared/peers/statig-fsm/src/lib.rs` unchanged
//! (`shared/` is the repository's sibling) where it is there: `../build.rs` then sets
//! `cfg(peers)`. A user's clone has no `shared/`, and this crate is then empty. The module
//! is declared inside a macro so that rustfmt, which formats the files a crate's `mod`
//! items name, leaves the peer's file alone.
#![cfg_attr(not(test), no_std)]

#[cfg(peers)]
macro_rules! peer {
    () => {
        #[path = "../../../../../shared/peers/statig-fsm/src/lib.rs"]
        #[allow(warnings, clippy::all)]
        mod peer;
    };
}
#[cfg(peers)]
peer!();
#[cfg(peers)]
pub use peer::*;
