//! The `naive-std` peer, compiled from `shared/peers/naive-std/src/lib.rs` unchanged
//! (`shared/` is the repository's sibling). The module is declared inside a macro so that
//! rustfmt, which formats the files a crate's `mod` items name, leaves the peer's file alone.

macro_rules! peer {
    () => {
        #[path = "../../../../../shared/peers/naive-std/src/lib.rs"]
        #[allow(warnings, clippy::all)]
        mod peer;
    };
}
peer!();
pub use peer::*;
