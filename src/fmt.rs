//! The logging shim: forwards to `defmt` or `log`, or expands to nothing. Declared first so
//! every module sees the macros. Enabling both backends at once is refused.

#![allow(unused_macros)]

#[cfg(all(feature = "defmt", feature = "log"))]
compile_error!("features `defmt` and `log` are mutually exclusive: pick one logging backend");

macro_rules! debug {
    ($($arg:expr),+ $(,)?) => {{
        #[cfg(feature = "defmt")]
        ::defmt::debug!($($arg),+);
        #[cfg(feature = "log")]
        ::log::debug!($($arg),+);
        #[cfg(not(any(feature = "defmt", feature = "log")))]
        { let _ = ($(&$arg),+); }
    }};
}

macro_rules! warn {
    ($($arg:expr),+ $(,)?) => {{
        #[cfg(feature = "defmt")]
        ::defmt::warn!($($arg),+);
        #[cfg(feature = "log")]
        ::log::warn!($($arg),+);
        #[cfg(not(any(feature = "defmt", feature = "log")))]
        { let _ = ($(&$arg),+); }
    }};
}
