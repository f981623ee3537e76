//! Planted faults in the runtime's own decisions, compiled only with `--cfg pnp_faults`
//! (never in a shipped build). A test plants one in an [`crate::Owner`]
//! ([`crate::Owner::plant`]) and shows that its check catches it. See
//! `tests/planted.rs`.

/// A wrong decision the runtime can be made to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// No fault.
    None,
    /// No barrier between lanes: a request's completion (`IRP_MN_REMOVE_DEVICE`'s, PCI
    /// `remove`'s), `DeviceRemoved` and `UnloadMayFinish` may be carried out while the
    /// teardown the machine ordered before them still runs on the device's lane.
    CompletionOvertakesTeardown,
    /// The fast path's begin checks the gate and counts the operation in two steps (a
    /// load, then a store), so a begin admitted after the close read the count is missed
    /// by it and the store reopens the gate behind the machine's back. Planted in the
    /// runtime's gates ([`crate::Runtime::plant_in_gates`]).
    BeginAfterClose,
    /// A reset group's one reset names every declared member, not only those whose cycle
    /// waits for it: a member that vanished or left the cycle is reset through the port.
    GroupResetCoversEveryMember,
}
