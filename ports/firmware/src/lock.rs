//! How thread mode and interrupt handlers share the machine.
//!
//! On the target the shared state sits in a [`critical_section::Mutex`]`<`[`RefCell`]`<…>>`:
//! every access runs inside `critical_section::with`, so an interrupt cannot preempt a
//! half-done input. The [`Lock`] trait abstracts that one operation so that the host tests
//! can put a model-checked mutex (shuttle's) in its place.

use core::cell::{Cell, RefCell};

/// The shared state was already borrowed: a re-entrant access (an interrupt that preempted
/// a borrow made outside a critical section, or a poisoned test mutex). Nothing was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Busy;

/// Exclusive access to a `T` shared between thread mode and interrupt handlers.
pub trait Lock<T> {
    /// Run `f` with exclusive access to the value, or return [`Busy`] without running it.
    /// `f` must be short: on the target it runs with interrupts masked.
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, Busy>;
}

/// The target's lock: a critical section (interrupts masked on a single-core Cortex-M)
/// around a `RefCell` borrow. A borrow that is already taken is reported as [`Busy`],
/// never a panic.
impl<T> Lock<T> for critical_section::Mutex<RefCell<T>> {
    fn lock<R>(&self, f: impl FnOnce(&mut T) -> R) -> Result<R, Busy> {
        critical_section::with(|cs| {
            let mut value = self.borrow(cs).try_borrow_mut().map_err(|_| Busy)?;
            Ok(f(&mut value))
        })
    }
}

/// Where an interrupt handler (which takes no arguments) finds the `&'static` shared state
/// that thread mode took out of its `StaticCell` at boot.
///
/// ```
/// use core::cell::RefCell;
/// use critical_section::Mutex;
/// use pnp_lifecycle_firmware::IsrLink;
///
/// static CELL: static_cell::StaticCell<Mutex<RefCell<u32>>> = static_cell::StaticCell::new();
/// static LINK: IsrLink<Mutex<RefCell<u32>>> = IsrLink::new();
///
/// let shared: &'static Mutex<RefCell<u32>> = CELL.init(Mutex::new(RefCell::new(7)));
/// assert!(LINK.get().is_none()); // an interrupt before boot finished finds nothing
/// LINK.install(shared);
/// assert!(LINK.get().is_some());
/// ```
pub struct IsrLink<T: 'static> {
    slot: critical_section::Mutex<Cell<Option<&'static T>>>,
}

impl<T: 'static> IsrLink<T> {
    /// An empty link.
    pub const fn new() -> Self {
        IsrLink {
            slot: critical_section::Mutex::new(Cell::new(None)),
        }
    }

    /// Publish the shared state to interrupt handlers (call once at boot, before unmasking
    /// the interrupt).
    pub fn install(&self, shared: &'static T) {
        critical_section::with(|cs| self.slot.borrow(cs).set(Some(shared)));
    }

    /// The shared state, if it was installed.
    pub fn get(&self) -> Option<&'static T> {
        critical_section::with(|cs| self.slot.borrow(cs).get())
    }
}

/// Whether the shared state was installed (`T` need not be `Debug`).
impl<T: 'static> core::fmt::Debug for IsrLink<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IsrLink")
            .field("installed", &self.get().is_some())
            .finish()
    }
}

impl<T: 'static> Default for IsrLink<T> {
    fn default() -> Self {
        Self::new()
    }
}
