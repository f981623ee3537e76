//! Internal macros.

/// Derive the traits every public value type carries, plus `defmt::Format` and
/// `arbitrary::Arbitrary` behind their features.
macro_rules! value_type {
    ($(#[$m:meta])* $vis:vis $kw:ident $name:ident $($rest:tt)*) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
        $vis $kw $name $($rest)*
    };
}

/// `value_type!` plus an order, for identifiers and quantities that have one (a tick, an
/// epoch, a slot), never for inputs, outputs or errors.
macro_rules! ordered_type {
    ($(#[$m:meta])* $vis:vis $kw:ident $name:ident $($rest:tt)*) => {
        value_type! {
            $(#[$m])*
            #[derive(PartialOrd, Ord)]
            $vis $kw $name $($rest)*
        }
    };
}

/// Whether a planted fault is active: always `false` unless built with `--cfg pnp_faults`
/// (see `planted.rs`), so a shipped build holds no fault code.
macro_rules! planted {
    ($fault:ident) => {{
        #[cfg(pnp_faults)]
        let on = crate::planted::active(crate::planted::Fault::$fault);
        #[cfg(not(pnp_faults))]
        let on = false;
        on
    }};
}
