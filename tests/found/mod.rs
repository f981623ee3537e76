//! The set-ups of `tests/spec_found.rs`, and the core after them.
#![allow(dead_code)]

use pnp_lifecycle::{
    Access, CannotResetReason, ClientHandle, ClientKind, Config, CycleOutcome, DeviceId, Epoch,
    Input, Output, Tick, TrustedTimeoutPolicy,
};
use pnp_lifecycle_testkit::{Fuzz, World};

/// A trusted client's missed deadline fails the device (the set-up's policy).
pub const CONFIG: Config = Config {
    untrusted_ack_timeout: 3,
    trusted_ack_timeout: 7,
    trusted_policy: TrustedTimeoutPolicy::FailDevice,
    detach_timeout: 1,
    callback_timeout: 3,
    operation_timeout: 3,
};

/// The first client registered on device 0.
pub const CLIENT: ClientHandle = ClientHandle {
    device: DeviceId(0),
    slot: 0,
    generation: 0,
};

/// When the group's cycle (begun at 4) reaches its one deadline.
pub const GROUP_DEADLINE: u64 = 4 + CONFIG.group_cycle_timeout();

/// Two started devices in reset group 0; a trusted client on device 0 with a hardware
/// operation in flight when device 0's fatal error begins the group's cycle; its `RESET`
/// callback (made at 4) overruns at 7, so device 0 fails and the client is fenced, its
/// operation still in flight. Device 1 (no voter) is ready for the group's one reset,
/// which device 0's fenced operation holds back (I12).
pub fn failed_member_holding_the_groups_reset() -> Vec<(Tick, Input)> {
    let mut v = pnp_lifecycle_testkit::gen::two_devices_in_one_group();
    let (device, kind) = (DeviceId(0), ClientKind::Trusted);
    v.push((Tick(4), Input::Register { device, kind }));
    v.push((Tick(4), Input::FatalError { device }));
    let (client, epoch, what) = (CLIENT, Epoch(0), Access::HardwareOp);
    v.push((
        Tick(4),
        Input::Access {
            client,
            epoch,
            what,
        },
    ));
    v.push((Tick(7), Input::Timeout));
    v
}

/// What DESIGN reads when the group's deadline passes there: the cycle ends naming device
/// 0, the member not ready ("before the member was ready"), and no reset.
pub fn names_the_holder() -> Vec<Output> {
    vec![Output::ResetCycleFinished {
        device: DeviceId(1),
        outcome: CycleOutcome::CannotReset {
            member: DeviceId(0),
            reason: CannotResetReason::DeadlinePassed,
        },
    }]
}

pub const D0: DeviceId = DeviceId(0);
pub const D1: DeviceId = DeviceId(1);

/// The core after `inputs` (oracle on), with the outputs of the last input.
pub fn core_after(inputs: &[(Tick, Input)]) -> (World<Fuzz>, Vec<Output>) {
    let mut w: World<Fuzz> = World::new(CONFIG, false);
    let mut last = Vec::new();
    for &(now, input) in inputs {
        let step = w
            .step(now, input)
            .unwrap_or_else(|v| panic!("{input:?} at {now:?}: {v}"));
        last = step.outputs;
    }
    (w, last)
}
