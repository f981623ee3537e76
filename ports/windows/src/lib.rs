//! # pnp-lifecycle-windows
//!
//! The Windows port of [`pnp_lifecycle`]: a model of the WDM/KMDF vocabulary to build a
//! real driver's glue on, running on `std` threads; not a kernel driver. Windows
//! vocabulary over the shared owner runtime ([`pnp_lifecycle_runtime`]). The runtime owns
//! the concurrency (one lock around the machine, work carried out in the machine's order
//! by the notification thread, waits that refuse instead of deadlocking, fences); the core
//! owns every lifecycle rule. What is left here is particular to Windows:
//!
//! * [`Driver::dispatch_pnp`]: the `IRP_MJ_PNP` dispatch ([`PnpMinor`]). Each [`Irp`] is the
//!   runtime's request, completed exactly once with the [`NtStatus`] of the core's
//!   completion or refusal. `IRP_MN_SURPRISE_REMOVAL` is completed behind the outputs it
//!   caused. The core's token of an IRP is minted by the runtime, so IRPs are never confused.
//! * The remove lock ([`RemoveLockState`]) brackets every client call and hardware
//!   operation; `IRP_MN_REMOVE_DEVICE` marks it removed and goes to the core at once (the
//!   core drains operations in flight with a deadline, then fences); `AddDevice`
//!   re-initialises it.
//! * A fence cuts the client's path to the hardware ([`Hal::cut_client`]) before any
//!   hardware command it let go ahead.
//! * `IRP_MJ_CREATE` / `IRP_MJ_CLOSE` ([`Driver::dispatch_create`]): the core's hold.
//! * A failed device: `IoInvalidateDeviceState` ([`Hal::invalidate_device_state`]), and
//!   `IRP_MN_QUERY_PNP_DEVICE_STATE` answered by asking the core
//!   ([`Driver::query_pnp_device_state`]).
//! * Power ([`Driver::dispatch_power`]): `IRP_MN_SET_POWER` to a system sleep (S1..S5) is
//!   the core's `PowerDown { SystemSleep }`, to a device Dx (D1..D3, the power policy
//!   owner's idle D-IRP) `PowerDown { Idle }`, to S0 / D0 `PowerUp`, each completed
//!   through the runtime exactly once; `IRP_MN_QUERY_POWER` is answered from the core's
//!   state ([`PowerState::query`]). A client's hardware operation in an idle Dx waits for
//!   the power-up the core commands, with a deadline (`STATUS_IO_TIMEOUT`); in system
//!   sleep it fails with `STATUS_DEVICE_POWERED_OFF`.
//! * The KMDF callbacks a driver writer knows ([`KmdfDevice`], optional:
//!   [`WindowsOs::with_kmdf`]), called in KMDF's documented orders from the core's hardware
//!   commands (README: "Power").
//! * The WinOF mlx4 reset interface ([`MlxInterface`]).
//!
//! The driver is generic over the platform's primitives (`K:`[`Kernel`], default
//! [`StdKernel`]; tests use `ShuttleKernel`) and over its [`Os`] vocabulary object (default
//! [`WindowsOs`]; tests wrap it to record what happened).

#![forbid(unsafe_code)]
#![deny(missing_docs, missing_debug_implementations)]

mod driver;
mod group;
mod ntstatus;
mod os;
mod power;

pub use driver::{Driver, MlxInterface, RemoveLockState};
pub use ntstatus::NtStatus;
pub use os::{
    feed_irp, Callback, Hal, Irp, PnpDeviceState, PnpMinor, WindowsOs, WindowsVocabulary,
};
pub use pnp_lifecycle_runtime::{
    Clock, Kernel, ManualClock, MonotonicClock, Os, Owner, Runtime, StdKernel, WouldDeadlock,
};
pub use power::{DevicePowerState, KmdfDevice, PowerState, SystemPowerState, WdfPowerDeviceState};

/// Devices one driver instance can own.
pub const DEVICES: usize = 2;
/// Client slots per device.
pub const CLIENTS: usize = 4;
/// Physical ports per device.
pub const PORTS: usize = 2;
/// The core's output queue capacity for this shape.
pub const QUEUE: usize = pnp_lifecycle::queue_capacity(DEVICES, CLIENTS);
/// The runtime's non-blocking owner state for this driver's shape.
pub type WinOwner<O> = Owner<O, DEVICES, CLIENTS, PORTS, QUEUE>;
/// The runtime for this driver's shape.
pub type WinRuntime<O, K> = Runtime<O, K, DEVICES, CLIENTS, PORTS, QUEUE>;
