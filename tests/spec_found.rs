//! Disagreements the spec model (`testkit/src/spec/`) found between the core and DESIGN.md,
//! each pinned with the core's exact outputs as DESIGN reads them, and the spec model's
//! reading beside it. Each failed on the core it was found in; the core is mended.

mod found;

use found::*;
use pnp_lifecycle::{
    CycleOutcome, Event, FailureCause, GroupId, HardwareCommand, Input, Output, Reply, Tick,
};
use pnp_lifecycle_testkit::spec::Spec;
use pnp_lifecycle_testkit::world::is_hw;
use pnp_lifecycle_testkit::{Fuzz, Sut};

/// The set-up itself, on the core: device 0 fails with its client fenced, and device 1's
/// reset waits for that fence (no reset commanded), the group's cycle still under way.
#[test]
fn a_member_failed_mid_cycle_holds_the_groups_reset_with_its_fenced_operation() {
    let inputs = failed_member_holding_the_groups_reset();
    let (w, out) = core_after(&inputs);
    assert_eq!(
        out,
        [
            Output::Fence { client: CLIENT },
            Output::ResetCycleFinished {
                device: D0,
                outcome: CycleOutcome::ClientTimedOut
            },
            Output::DeviceFailed {
                device: D0,
                cause: FailureCause::ClientMissedDeadline
            },
        ]
    );
    let (_, fatal) = core_after(&inputs[..10]);
    let reset = Event::Reset;
    let told = Output::Notify {
        client: CLIENT,
        event: reset,
    };
    assert_eq!(fatal, [told]);
    let deadline = Tick(GROUP_DEADLINE);
    assert_eq!(w.sut.group_cycle(GroupId(0)), Some(Some(deadline)));
}

/// The group's one deadline passes while a member that failed mid-cycle still holds the
/// group's reset back with its fenced operation: the cycle ends without the reset naming
/// *that* member (`DeadlinePassed`: "before the member was ready"), not the member that
/// was ready. The core named device 1, which was ready.
#[test]
fn a_groups_deadline_names_the_failed_member_whose_fenced_operation_holds_the_reset() {
    let mut inputs = failed_member_holding_the_groups_reset();
    inputs.push((Tick(GROUP_DEADLINE), Input::Timeout));
    let (_, out) = core_after(&inputs);
    assert_eq!(out, names_the_holder());
    assert!(!out.iter().any(|o| is_hw(o, HardwareCommand::Reset)));
}

/// The same when the fenced client reported its operation done before the fence: the
/// operation counts until the owner reports the fence done, so device 0 still holds the
/// reset and is the member the deadline names.
#[test]
fn a_groups_deadline_names_the_failed_member_whose_fence_is_not_done() {
    let mut inputs = failed_member_holding_the_groups_reset();
    inputs.push((Tick(10), Input::AccessDone { client: CLIENT }));
    inputs.push((Tick(GROUP_DEADLINE), Input::Timeout));
    let (_, out) = core_after(&inputs);
    assert_eq!(out, names_the_holder());
}

/// The spec model reads both cases so (its answer to the same inputs).
#[test]
fn the_spec_model_names_the_failed_member_holding_the_groups_reset() {
    for done_before_the_fence in [false, true] {
        let mut inputs = failed_member_holding_the_groups_reset();
        if done_before_the_fence {
            inputs.push((Tick(10), Input::AccessDone { client: CLIENT }));
        }
        inputs.push((Tick(GROUP_DEADLINE), Input::Timeout));
        let mut spec = Spec::new(Fuzz::DEVICES, Fuzz::CLIENTS, Fuzz::PORTS, CONFIG);
        let mut last = (Ok(Reply::Accepted), Vec::new());
        for &(now, input) in &inputs {
            last = spec.handle(now, input);
        }
        assert_eq!(last, (Ok(Reply::Accepted), names_the_holder()));
    }
}
