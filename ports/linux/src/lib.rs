//! # pnp-lifecycle-linux
//!
//! A model, on `std` threads, of the glue a Linux RDMA driver needs around
//! `pnp-lifecycle`, in the kernel's vocabulary: the shape to build a real driver's glue
//! on, not a kernel module (no kernel API is called; the PCI core, the PM core and
//! `ib_core` are the caller of these entry points). In the shape of an RDMA provider: the
//! `ib_client` registry ([`IbClient`] `add` / `remove`, [`Driver::register_client`],
//! [`Driver::unregister_client`] that returns only when no callback of the client runs or
//! will run), PCI probe / remove, PCI error recovery on the core's reset cycle
//! (`error_detected` → `RESET` with each client's vote, `mmio_enabled` with each
//! `CAN_RECOVER` client's second vote, `slot_reset` → hardware reset, `resume` →
//! `RESET_END`; `reset_prepare` / `reset_done` around a function reset;
//! `pci_channel_io_perm_failure` → surprise removal), uverbs-style
//! disassociate as the fence, errno values, IB port events and `ib_query_port`;
//! `dev_pm_ops` system sleep and runtime PM ([`Driver::pm`], [`Driver::runtime_idle`],
//! hardware calls as `pm_runtime_get_sync` / `pm_runtime_put`); reset groups
//! ([`Driver::join_reset_group`]) with mlx5's synchronised firmware reset
//! ([`Driver::fw_reset_sync`]) and PCI error recovery across a slot's functions.
//!
//! The concurrency is the shared owner runtime's ([`pnp_lifecycle_runtime`]) with
//! [`Dispatch::Inline`]: callers carry out the callbacks their call caused, as `ib_core`
//! does. Every lifecycle rule is the core's; the driver asks the machine
//! ([`Driver::runtime`]) rather than keeping copies. See the README for the name mapping.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(missing_debug_implementations)]

mod driver;
pub mod errno;
mod group;
mod os;

pub use driver::{Driver, HwContext, HwOp, LinuxOwner, LinuxPort, LinuxRuntime, PortAttr};
pub use errno::{errno_of, Errno, LinuxError};
pub use group::SyncResetAnswer;
pub use os::{
    failure_text, ClientId, Hardware, IbClient, IbEvent, Job, LinuxOs, NullHardware,
    PciChannelState, PciErsResult, Pending, PmOp, RemoveCause, KERNEL_LOG_LINES, MAX_CLIENTS,
    MAX_DEVICES, MAX_PORTS,
};
pub use pnp_lifecycle_runtime::{
    Clock, Dispatch, Kernel, ManualClock, MonotonicClock, StdKernel, WouldDeadlock,
};
