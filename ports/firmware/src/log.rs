//! The logging shim: forwards to `defmt` behind the `defmt` feature, or expands to nothing
//! (the arguments are still evaluated by reference, so no unused-variable warnings).

#![allow(unused_macros)]

macro_rules! fw_debug {
    ($($arg:expr),+ $(,)?) => {{
        #[cfg(feature = "defmt")]
        ::defmt::debug!($($arg),+);
        #[cfg(not(feature = "defmt"))]
        { let _ = ($(&$arg),+); }
    }};
}

macro_rules! fw_warn {
    ($($arg:expr),+ $(,)?) => {{
        #[cfg(feature = "defmt")]
        ::defmt::warn!($($arg),+);
        #[cfg(not(feature = "defmt"))]
        { let _ = ($(&$arg),+); }
    }};
}
