//! Reset groups (DESIGN.md "Reset groups", issue 23): one rule test per promise of the
//! section, each with the exact outputs an owner sees.

mod common;

use common::*;
use pnp_lifecycle::*;

const A: DeviceId = DeviceId(0);
const B: DeviceId = DeviceId(1);
const ALONE: DeviceId = DeviceId(2);
const G: GroupId = GroupId(0);

type Three = Owner<3, 4, 2, { queue_capacity(3, 4) }>;

/// Devices A and B started in group G, one trusted client each; a third device alone.
fn group() -> (Three, ClientHandle, ClientHandle) {
    group_with(Config::DEFAULT)
}

/// [`group`] under `config`.
fn group_with(config: Config) -> (Three, ClientHandle, ClientHandle) {
    let mut o = Three::new(config);
    o.started(A, false);
    o.started(B, false);
    o.ok(Input::JoinResetGroup {
        device: A,
        group: G,
    });
    o.ok(Input::JoinResetGroup {
        device: B,
        group: G,
    });
    let a = o.register(A, ClientKind::Trusted);
    let b = o.register(B, ClientKind::Trusted);
    (o, a, b)
}

fn at(device: DeviceId, command: HardwareCommand) -> Output {
    Output::Hardware { device, command }
}

fn cycle(device: DeviceId, outcome: CycleOutcome) -> Output {
    Output::ResetCycleFinished { device, outcome }
}

fn cannot(member: DeviceId, reason: CannotResetReason) -> CycleOutcome {
    CycleOutcome::CannotReset { member, reason }
}

/// A's client asks for a reset; both voters are told RESET and return the callback.
fn requested(o: &mut Three, a: ClientHandle, b: ClientHandle) {
    let out = o.ok(Input::ResetRequest { client: a });
    assert_eq!(
        out,
        vec![notify(a, Event::Reset), notify(b, Event::Reset)],
        "one request on A tells RESET to every voter of every member"
    );
    o.ok(Input::CallbackDone { client: a });
    o.ok(Input::CallbackDone { client: b });
}

#[test]
fn a_request_on_one_member_tells_reset_to_every_voter_of_every_member() {
    let (mut o, a, b) = group();
    let reply = o.step(Input::ResetRequest { client: b }).0;
    assert_eq!(reply, Ok(Reply::Reset(ResetAnswer::Started)));
    assert_eq!(o.events_of(a), vec![Event::Reset]);
    assert_eq!(o.events_of(b), vec![Event::Reset]);
    assert_eq!(o.phase(A), PhaseKind::Quiescing);
    assert_eq!(o.phase(B), PhaseKind::Quiescing);
    assert_eq!(o.phase(ALONE), PhaseKind::Absent);
}

#[test]
fn a_fatal_error_on_one_member_starts_the_groups_cycle() {
    let (mut o, a, b) = group();
    let (reply, out) = o.step(Input::FatalError { device: B });
    assert_eq!(
        reply,
        Ok(Reply::Fatal(FatalAnswer::Served(ResetAnswer::Started)))
    );
    assert_eq!(out, vec![notify(b, Event::Reset), notify(a, Event::Reset)]);
}

#[test]
fn the_one_hardware_reset_waits_for_every_members_voters_and_goes_through_one_member() {
    let (mut o, a, b) = group();
    requested(&mut o, a, b);
    // A's voter answered: B's has not, so no reset yet (I3 per group).
    assert_eq!(o.ok(Input::ResetExecute { client: a }), vec![]);
    assert_eq!(o.phase(A), PhaseKind::Quiescing);
    // B's answers: the one reset, through A (the first member taking part).
    assert_eq!(
        o.ok(Input::ResetExecute { client: b }),
        vec![at(A, HardwareCommand::Reset)]
    );
    assert_eq!(o.phase(B), PhaseKind::Executing);
    // Only the carrier reports it.
    o.refused(
        Input::ResetDone {
            device: B,
            result: ResetResult::Succeeded,
        },
        Error::NoHardwareCommandInFlight,
    );
    let out = o.ok(Input::ResetDone {
        device: A,
        result: ResetResult::Succeeded,
    });
    assert_eq!(
        out,
        vec![
            notify(a, Event::ResetEnd { epoch: Epoch(1) }),
            cycle(A, CycleOutcome::Completed(Epoch(1))),
            notify(b, Event::ResetEnd { epoch: Epoch(1) }),
            cycle(B, CycleOutcome::Completed(Epoch(1))),
        ],
        "every member ends with RESET_END at its own new epoch"
    );
    assert_eq!(o.m.epoch(A), Some(Epoch(1)));
    assert_eq!(o.m.epoch(B), Some(Epoch(1)));
    assert_eq!(o.phase(A), PhaseKind::Running);
    assert_eq!(o.phase(B), PhaseKind::Running);
}

#[test]
fn each_member_ends_at_its_own_new_epoch() {
    let (mut o, a, b) = group();
    // A reset alone before joining: A is at epoch 1, B at 0.
    o.ok(Input::LeaveResetGroup { device: A });
    o.ok(Input::ResetRequest { client: a });
    o.ok(Input::CallbackDone { client: a });
    o.ok(Input::ResetExecute { client: a });
    o.ok(Input::ResetDone {
        device: A,
        result: ResetResult::Succeeded,
    });
    o.ok(Input::CallbackDone { client: a });
    o.ok(Input::JoinResetGroup {
        device: A,
        group: G,
    });
    o.ok(Input::ResetRequest { client: b });
    o.ok(Input::CallbackDone { client: a });
    o.ok(Input::CallbackDone { client: b });
    o.ok(Input::ResetExecute { client: a });
    o.ok(Input::ResetExecute { client: b });
    let out = o.ok(Input::ResetDone {
        device: A,
        result: ResetResult::Succeeded,
    });
    assert!(out.contains(&cycle(A, CycleOutcome::Completed(Epoch(2)))));
    assert!(out.contains(&cycle(B, CycleOutcome::Completed(Epoch(1)))));
}

#[test]
fn every_voter_of_every_member_recovering_ends_the_cycle_without_a_reset() {
    let (mut o, a, b) = group();
    requested(&mut o, a, b);
    assert_eq!(o.ok(Input::CanRecover { client: a }), vec![]);
    assert_eq!(
        o.ok(Input::CanRecover { client: b }),
        vec![
            notify(a, Event::Recovered { epoch: Epoch(0) }),
            cycle(A, CycleOutcome::Recovered(Epoch(0))),
            notify(b, Event::Recovered { epoch: Epoch(0) }),
            cycle(B, CycleOutcome::Recovered(Epoch(0))),
        ]
    );
}

#[test]
fn one_member_needing_the_reset_resets_the_whole_group() {
    let (mut o, a, b) = group();
    requested(&mut o, a, b);
    o.ok(Input::CanRecover { client: a });
    assert_eq!(
        o.ok(Input::ResetExecute { client: b }),
        vec![at(A, HardwareCommand::Reset)]
    );
}

#[test]
fn a_clients_nack_ends_the_groups_cycle_answered_to_every_requester() {
    let (mut o, a, b) = group();
    requested(&mut o, a, b);
    o.ok(Input::ResetExecute { client: a });
    let refused = cannot(B, CannotResetReason::ClientRefused(b));
    assert_eq!(
        o.ok(Input::ResetNack { client: b }),
        vec![
            notify(a, Event::Recovered { epoch: Epoch(0) }),
            cycle(A, refused),
            notify(b, Event::Recovered { epoch: Epoch(0) }),
            cycle(B, refused),
        ],
        "no hardware reset; every client told RESET told how it ended"
    );
    assert_eq!(o.phase(A), PhaseKind::Running);
    assert_eq!(o.phase(B), PhaseKind::Running);
}

#[test]
fn a_nack_alone_ends_the_devices_own_cycle() {
    let mut o = Three::new(Config::DEFAULT);
    o.started(ALONE, false);
    let c = o.register(ALONE, ClientKind::Untrusted);
    o.ok(Input::FatalError { device: ALONE });
    o.ok(Input::CallbackDone { client: c });
    let refused = cannot(ALONE, CannotResetReason::ClientRefused(c));
    assert_eq!(
        o.ok(Input::ResetNack { client: c }),
        vec![
            notify(c, Event::Recovered { epoch: Epoch(0) }),
            cycle(ALONE, refused),
        ]
    );
    // A nack is an answer: only a voter may give it.
    o.ok(Input::CallbackDone { client: c });
    o.refused(
        Input::ResetNack { client: c },
        Error::InvalidState {
            phase: PhaseKind::Running,
            input: InputKind::ResetNack,
        },
    );
}

/// B stopped (query stop, stop).
fn stopped(o: &mut Three, _: ClientHandle) {
    let t = o.token();
    o.ok(Input::QueryStop {
        device: B,
        token: t,
    });
    let t = o.token();
    o.ok(Input::Stop {
        device: B,
        token: t,
    });
    o.return_callbacks(B);
}

/// B with remove pending (query remove).
fn remove_pending(o: &mut Three, _: ClientHandle) {
    let t = o.token();
    o.ok(Input::QueryRemove {
        device: B,
        token: t,
    });
}

/// B in system sleep (powered down for it).
fn in_system_sleep(o: &mut Three, b: ClientHandle) {
    let t = o.token();
    o.ok(Input::PowerDown {
        device: B,
        kind: PowerDownKind::SystemSleep,
        token: t,
    });
    o.ok(Input::CallbackDone { client: b });
    o.ok(Input::PowerDownDone { device: B });
}

/// B powering down while its query stop is pending: it is in that query's state.
fn powering_down_with_a_query_pending(o: &mut Three, _: ClientHandle) {
    let t = o.token();
    o.ok(Input::QueryStop {
        device: B,
        token: t,
    });
    let t = o.token();
    o.ok(Input::PowerDown {
        device: B,
        kind: PowerDownKind::Idle,
        token: t,
    });
}

/// B idle-powered down: its client's `PowerDown` news returned, the hardware in Dx.
fn idle_powered_down(o: &mut Three, b: ClientHandle) {
    let t = o.token();
    o.ok(Input::PowerDown {
        device: B,
        kind: PowerDownKind::Idle,
        token: t,
    });
    o.ok(Input::CallbackDone { client: b });
    o.ok(Input::PowerDownDone { device: B });
}

type Setup = fn(&mut Three, ClientHandle);

/// A member that cannot take part: how B gets there, its phase, and the reason named.
const BLOCKERS: [(&str, Setup, PhaseKind, CannotResetReason); 4] = [
    (
        "stopped",
        stopped,
        PhaseKind::Stopped,
        CannotResetReason::MemberState(PhaseKind::Stopped),
    ),
    (
        "remove pending",
        remove_pending,
        PhaseKind::RemovePending,
        CannotResetReason::MemberState(PhaseKind::RemovePending),
    ),
    (
        "in system sleep",
        in_system_sleep,
        PhaseKind::LowPower,
        CannotResetReason::SystemSleep,
    ),
    (
        "powering down for a pending query stop",
        powering_down_with_a_query_pending,
        PhaseKind::PoweringDown,
        CannotResetReason::MemberState(PhaseKind::StopPending),
    ),
];

/// A member that cannot take part makes a cycle begun on another member end at once with
/// a named reason: no hardware reset, and nobody told `RESET`, whether a client asked for
/// the reset or a fatal error did.
#[test]
fn a_member_that_cannot_take_part_ends_the_cycle_with_a_named_reason_and_no_reset() {
    for (blocker, setup, phase, reason) in BLOCKERS {
        let (mut o, a, b) = group();
        setup(&mut o, b);
        assert_eq!(o.phase(B), phase, "{blocker}");
        let triggers = [
            ("a client's request", Input::ResetRequest { client: a }),
            ("a fatal error", Input::FatalError { device: A }),
        ];
        for (trigger, input) in triggers {
            let mut o = o.fork();
            assert_eq!(
                o.ok(input),
                vec![cycle(A, cannot(B, reason))],
                "B {blocker}, {trigger} on A: answered at once, no reset"
            );
            assert!(
                o.events_of(a).is_empty(),
                "B {blocker}, {trigger}: no RESET"
            );
            assert_eq!(o.phase(A), PhaseKind::Running, "B {blocker}, {trigger}");
            assert_eq!(o.phase(B), phase, "B {blocker}, {trigger}: B untouched");
        }
    }
}

/// A member in a power transition for its pending query: the fatal error its query holds
/// waits for the query, as in no group (no cycle begins for the group).
#[test]
fn a_fatal_error_on_a_member_whose_query_is_pending_waits_for_the_query() {
    let (mut o, a, b) = group();
    powering_down_with_a_query_pending(&mut o, b);
    let (reply, out) = o.step(Input::FatalError { device: B });
    assert_eq!(reply, Ok(Reply::Fatal(FatalAnswer::Deferred)));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(o.phase(A), PhaseKind::Running);
    assert!(o.events_of(a).is_empty());
}

#[test]
fn a_member_in_an_idle_power_down_is_powered_up_first() {
    let (mut o, a, b) = group();
    idle_powered_down(&mut o, b);
    let out = o.ok(Input::ResetRequest { client: a });
    assert_eq!(
        out,
        vec![notify(a, Event::Reset), at(B, HardwareCommand::PowerUp)]
    );
    o.ok(Input::CallbackDone { client: a });
    // A's voter answers: B is not back yet, so no reset.
    assert_eq!(o.ok(Input::ResetExecute { client: a }), vec![]);
    let out = o.ok(Input::PowerUpDone {
        device: B,
        result: PowerUpResult::Powered,
    });
    assert_eq!(
        out,
        vec![notify(
            b,
            Event::Resumed {
                epoch: Epoch(0),
                state_lost: false
            }
        )]
    );
    // B's RESET follows its Resumed.
    assert_eq!(
        o.ok(Input::CallbackDone { client: b }),
        vec![notify(b, Event::Reset)]
    );
    o.ok(Input::CallbackDone { client: b });
    assert_eq!(
        o.ok(Input::ResetExecute { client: b }),
        vec![at(A, HardwareCommand::Reset)]
    );
}

/// A member powered up for the group's cycle whose hardware lost its state: the power-up
/// ends like a reset of its own (epoch 1), yet the group's one reset still resets it, so
/// it takes part again: its voter is told `RESET` and the reset waits for its answer.
#[test]
fn a_member_back_from_a_lost_state_power_up_takes_part_in_the_groups_reset() {
    let (mut o, a, b) = group();
    idle_powered_down(&mut o, b);
    o.ok(Input::ResetRequest { client: a });
    o.ok(Input::CallbackDone { client: a });
    assert_eq!(o.ok(Input::ResetExecute { client: a }), vec![]);
    let out = o.ok(Input::PowerUpDone {
        device: B,
        result: PowerUpResult::LostState,
    });
    assert!(
        !out.contains(&at(A, HardwareCommand::Reset)),
        "B takes part again: no reset yet: {out:?}"
    );
    assert_eq!(o.phase(B), PhaseKind::Quiescing);
    o.return_callbacks(B);
    assert_eq!(o.events_of(b).last(), Some(&Event::Reset));
    assert_eq!(
        o.ok(Input::ResetExecute { client: b }),
        vec![at(A, HardwareCommand::Reset)]
    );
}

#[test]
fn a_member_surprise_removed_mid_cycle_leaves_it_without_blocking() {
    let (mut o, a, b) = group();
    requested(&mut o, a, b);
    o.ok(Input::SurpriseRemoval { device: B });
    assert_eq!(
        o.events_of(b).last(),
        Some(&Event::Removed { surprise: true })
    );
    assert_eq!(
        o.ok(Input::ResetExecute { client: a }),
        vec![at(A, HardwareCommand::Reset)]
    );
}

/// A member that vanishes with an operation in flight leaves the cycle all the same: the
/// reset does not wait for an operation on hardware that is gone (it holds back only a
/// member that failed and is still there).
#[test]
fn a_member_surprise_removed_with_an_operation_in_flight_does_not_hold_the_reset() {
    let (mut o, a, b) = group();
    let granted = o.step(Input::Access {
        client: b,
        epoch: Epoch(0),
        what: Access::HardwareOp,
    });
    assert_eq!(granted.0, Ok(Reply::AccessGranted));
    requested(&mut o, a, b);
    o.ok(Input::SurpriseRemoval { device: B });
    assert_eq!(
        o.ok(Input::ResetExecute { client: a }),
        vec![at(A, HardwareCommand::Reset)]
    );
}

#[test]
fn the_reset_is_never_commanded_through_a_vanished_member() {
    let (mut o, a, b) = group();
    requested(&mut o, a, b);
    // A, the first member, vanishes: the reset goes through B.
    o.ok(Input::SurpriseRemoval { device: A });
    let out = o.ok(Input::ResetExecute { client: b });
    assert_eq!(out, vec![at(B, HardwareCommand::Reset)]);
    assert_eq!(count_hw(&out, HardwareCommand::Reset), 1);
    let _ = a;
}

#[test]
fn a_member_removed_mid_cycle_leaves_it_without_blocking() {
    let (mut o, a, b) = group();
    requested(&mut o, a, b);
    let t = o.token();
    o.ok(Input::Remove {
        device: B,
        token: t,
    });
    assert_eq!(
        o.events_of(b).last(),
        Some(&Event::Removed { surprise: false })
    );
    assert_eq!(
        o.ok(Input::ResetExecute { client: a }),
        vec![at(A, HardwareCommand::Reset)]
    );
}

#[test]
fn a_member_surprise_removed_while_the_reset_runs_ends_with_the_carriers_report() {
    let (mut o, a, b) = group();
    requested(&mut o, a, b);
    o.ok(Input::ResetExecute { client: a });
    o.ok(Input::ResetExecute { client: b });
    o.ok(Input::SurpriseRemoval { device: B });
    let t = o.token();
    o.ok(Input::Remove {
        device: B,
        token: t,
    });
    assert_eq!(o.phase(B), PhaseKind::Removing);
    o.ok(Input::ResetDone {
        device: A,
        result: ResetResult::Succeeded,
    });
    // B's removal no longer waits for a reset that went through A.
    o.return_callbacks(B);
    o.ok(Input::Unregister { client: b });
    assert_eq!(o.phase(B), PhaseKind::Absent);
    assert_eq!(
        o.m.reset_group(B),
        None,
        "a removed device leaves its group"
    );
}

#[test]
fn the_groups_cycle_has_one_deadline() {
    let (mut o, a, b) = group();
    idle_powered_down(&mut o, b);
    o.at(100);
    o.ok(Input::ResetRequest { client: a });
    o.ok(Input::CallbackDone { client: a });
    o.ok(Input::ResetExecute { client: a });
    // The power-up is never reported: the group's deadline ends the cycle.
    let due = Tick(100 + Config::DEFAULT.group_cycle_timeout());
    assert_eq!(o.m.group_cycle(G), Some(Some(due)));
    assert_eq!(o.m.poll_timeout(), Some(due));
    let out = o.fire_timeout();
    assert_eq!(
        out,
        vec![
            notify(a, Event::Recovered { epoch: Epoch(0) }),
            cycle(A, cannot(B, CannotResetReason::DeadlinePassed)),
            cycle(B, cannot(B, CannotResetReason::DeadlinePassed)),
        ]
    );
    assert_eq!(o.m.group_cycle(G), None);
    // The late power-up brings B back with no reset waiting.
    let out = o.ok(Input::PowerUpDone {
        device: B,
        result: PowerUpResult::Powered,
    });
    assert_eq!(
        out,
        vec![notify(
            b,
            Event::Resumed {
                epoch: Epoch(0),
                state_lost: false
            }
        )]
    );
    assert_eq!(o.phase(B), PhaseKind::Running);
}

#[test]
fn a_device_in_no_group_resets_alone() {
    let (mut o, a, b) = group();
    o.started(ALONE, false);
    let c = o.register(ALONE, ClientKind::Trusted);
    assert_eq!(
        o.ok(Input::ResetRequest { client: c }),
        vec![notify(c, Event::Reset)]
    );
    o.ok(Input::CallbackDone { client: c });
    assert_eq!(
        o.ok(Input::ResetExecute { client: c }),
        vec![at(ALONE, HardwareCommand::Reset)]
    );
    assert!(o.events_of(a).is_empty() && o.events_of(b).is_empty());
}

#[test]
fn membership_is_declared_outside_a_cycle_and_refused_by_name() {
    let (mut o, a, b) = group();
    o.refused(
        Input::JoinResetGroup {
            device: A,
            group: GroupId(1),
        },
        Error::AlreadyInResetGroup { group: G },
    );
    o.started(ALONE, false);
    o.refused(
        Input::JoinResetGroup {
            device: ALONE,
            group: GroupId(3),
        },
        Error::NoSuchGroup,
    );
    requested(&mut o, a, b);
    o.refused(
        Input::JoinResetGroup {
            device: ALONE,
            group: G,
        },
        Error::GroupCycleInProgress { group: G },
    );
    o.refused(
        Input::LeaveResetGroup { device: A },
        Error::InvalidState {
            phase: PhaseKind::Quiescing,
            input: InputKind::LeaveResetGroup,
        },
    );
    // Leaving a device in no group does nothing.
    o.ok(Input::LeaveResetGroup { device: ALONE });
    assert_eq!(o.m.reset_group(ALONE), None);
    assert_eq!(o.m.reset_group(A), Some(G));
}

#[test]
fn a_member_with_no_voter_is_ready_at_once_and_the_group_waits_for_the_others() {
    let mut o = Three::new(Config::DEFAULT);
    o.started(A, false);
    o.started(B, false);
    for device in [A, B] {
        o.ok(Input::JoinResetGroup { device, group: G });
    }
    // A has no client: quiesced at once; B has none either: the reset runs at once.
    let out = o.ok(Input::FatalError { device: A });
    assert_eq!(out, vec![at(A, HardwareCommand::Reset)]);
    let out = o.ok(Input::ResetDone {
        device: A,
        result: ResetResult::Succeeded,
    });
    assert_eq!(
        out,
        vec![
            cycle(A, CycleOutcome::Completed(Epoch(1))),
            cycle(B, CycleOutcome::Completed(Epoch(1))),
        ]
    );
    // With a voter on B, A's readiness waits for it.
    let b = o.register(B, ClientKind::Untrusted);
    assert_eq!(
        o.ok(Input::FatalError { device: A }),
        vec![notify(b, Event::Reset)]
    );
    o.ok(Input::CallbackDone { client: b });
    assert_eq!(
        o.ok(Input::ResetExecute { client: b }),
        vec![at(A, HardwareCommand::Reset)]
    );
}

#[test]
fn a_follow_up_requested_during_the_groups_reset_runs_as_the_groups_next_cycle() {
    let mut o = Three::new(Config::DEFAULT);
    o.started(A, false);
    o.started(B, false);
    for device in [A, B] {
        o.ok(Input::JoinResetGroup { device, group: G });
    }
    assert_eq!(
        o.ok(Input::FatalError { device: A }),
        vec![at(A, HardwareCommand::Reset)]
    );
    // A fatal error while the group's reset runs: one follow-up, for the whole group.
    let (reply, _) = o.step(Input::FatalError { device: A });
    assert_eq!(
        reply,
        Ok(Reply::Fatal(FatalAnswer::Served(ResetAnswer::Scheduled)))
    );
    let out = o.ok(Input::ResetDone {
        device: A,
        result: ResetResult::Succeeded,
    });
    assert_eq!(
        out,
        vec![
            cycle(A, CycleOutcome::Completed(Epoch(1))),
            cycle(B, CycleOutcome::Completed(Epoch(1))),
            at(A, HardwareCommand::Reset),
        ],
        "the follow-up (no voter anywhere) resets the group again at once"
    );
}

/// B, removed by the owner (QueryRemove then Remove): its client detaches.
fn removed(o: &mut Three, _: ClientHandle, b: ClientHandle) -> Vec<Output> {
    let t = o.token();
    o.ok(Input::Remove {
        device: B,
        token: t,
    });
    o.return_callbacks(B);
    o.ok(Input::Unregister { client: b })
}

/// B vanishes, then the PnP manager's remove follows.
fn surprise_removed_then_removed(o: &mut Three, _: ClientHandle, b: ClientHandle) -> Vec<Output> {
    o.ok(Input::SurpriseRemoval { device: B });
    o.return_callbacks(B);
    o.ok(Input::Unregister { client: b });
    let t = o.token();
    o.ok(Input::Remove {
        device: B,
        token: t,
    })
}

/// Driver unload removes every device: B's client detaches, A's does not yet (so the
/// driver is still unloading and B's membership can be asked).
fn unloaded(o: &mut Three, _: ClientHandle, b: ClientHandle) -> Vec<Output> {
    o.ok(Input::Unload);
    o.return_callbacks(B);
    o.ok(Input::Unregister { client: b })
}

/// B is removed and its client never detaches: the detach deadline force-detaches it and
/// the removal ends on the timeout.
fn removed_on_a_detach_deadline(o: &mut Three, _: ClientHandle, _: ClientHandle) -> Vec<Output> {
    let t = o.token();
    o.ok(Input::Remove {
        device: B,
        token: t,
    });
    o.return_callbacks(B);
    o.fire_timeout()
}

/// B is removed while the group's reset runs through A: its removal waits for that reset,
/// and the group's decision (A's report) ends it.
fn removed_by_the_groups_decision(o: &mut Three, a: ClientHandle, b: ClientHandle) -> Vec<Output> {
    requested(o, a, b);
    o.ok(Input::ResetExecute { client: a });
    o.ok(Input::ResetExecute { client: b });
    let t = o.token();
    o.ok(Input::Remove {
        device: B,
        token: t,
    });
    o.return_callbacks(B);
    o.ok(Input::Unregister { client: b });
    assert_eq!(
        o.phase(B),
        PhaseKind::Executing,
        "B's removal waits for the group's reset"
    );
    o.ok(Input::ResetDone {
        device: A,
        result: ResetResult::Succeeded,
    })
}

type Removal = fn(&mut Three, ClientHandle, ClientHandle) -> Vec<Output>;

/// Every path by which a member becomes absent, and whether the driver still takes a
/// re-add afterwards (not while it unloads).
const REMOVALS: [(&str, Removal, bool); 5] = [
    ("remove", removed, true),
    (
        "surprise removal, then remove",
        surprise_removed_then_removed,
        true,
    ),
    ("driver unload", unloaded, false),
    (
        "remove ended by the detach deadline",
        removed_on_a_detach_deadline,
        true,
    ),
    (
        "remove ended by the group's reset",
        removed_by_the_groups_decision,
        true,
    ),
];

#[test]
fn every_path_to_absent_leaves_the_group_and_a_re_added_device_joins_it_again() {
    for (path, remove, re_add) in REMOVALS {
        let (mut o, a, b) = group();
        let out = remove(&mut o, a, b);
        assert!(
            out.contains(&Output::DeviceRemoved { device: B }),
            "{path}: the last input removes B: {out:?}"
        );
        assert_eq!(o.phase(B), PhaseKind::Absent, "{path}");
        assert_eq!(
            o.m.reset_group(B),
            None,
            "{path}: a removed device leaves its group"
        );
        assert_eq!(o.m.reset_group(A), Some(G), "{path}: A stays");
        if re_add {
            o.ok(Input::AddDevice { device: B });
            o.ok(Input::JoinResetGroup {
                device: B,
                group: G,
            });
            assert_eq!(
                o.m.reset_group(B),
                Some(G),
                "{path}: re-added, B joins G again"
            );
        }
    }
}

/// Trusted clients that miss a deadline fail their device.
const FAIL_DEVICE: Config = Config {
    trusted_policy: TrustedTimeoutPolicy::FailDevice,
    ..Config::DEFAULT
};

/// Under `FailDevice`, `voter`'s `RESET` callback is still out at the next deadline: the
/// timeout fences the voter, ends its member's part in the group's cycle as timed out and
/// fails that member, and orders nothing else.
fn voter_overruns_and_its_member_fails(o: &mut Three, voter: ClientHandle) {
    let member = voter.device;
    assert_eq!(
        o.fire_timeout(),
        vec![
            Output::Fence { client: voter },
            cycle(member, CycleOutcome::ClientTimedOut),
            Output::DeviceFailed {
                device: member,
                cause: FailureCause::ClientMissedDeadline
            },
        ]
    );
    assert_eq!(o.phase(member), PhaseKind::Failed);
}

/// A's client holds a hardware operation when B's client asks for the group's reset; B's
/// voter answers, A's never returns its `RESET`: under `FailDevice` A fails and leaves the
/// cycle, its client fenced with the operation still in flight, B quiesced and waiting.
fn a_failed_with_an_operation_in_flight() -> (Three, ClientHandle, ClientHandle) {
    let (mut o, a, b) = group_with(FAIL_DEVICE);
    let granted = o.step(Input::Access {
        client: a,
        epoch: Epoch(0),
        what: Access::HardwareOp,
    });
    assert_eq!(granted.0, Ok(Reply::AccessGranted));
    assert_eq!(
        o.ok(Input::ResetRequest { client: b }),
        vec![notify(b, Event::Reset), notify(a, Event::Reset)]
    );
    o.ok(Input::CallbackDone { client: b });
    assert_eq!(o.ok(Input::ResetExecute { client: b }), vec![]);
    // A's voter never returns its RESET: A fails and its client is fenced; no reset yet.
    voter_overruns_and_its_member_fails(&mut o, a);
    assert_eq!(o.phase(B), PhaseKind::Quiescing);
    (o, a, b)
}

/// I12 per group: a member whose trusted voter overran under `FailDevice` fails and leaves
/// the cycle, but the group's reset still touches its hardware: the reset waits until the
/// operation its fenced client had in flight has ended (found by the fuzz smoke).
#[test]
fn a_member_that_failed_mid_cycle_holds_the_groups_reset_until_its_fence_is_done() {
    let (mut o, a, _) = a_failed_with_an_operation_in_flight();
    // The fence is done: the operation has ended, the one reset goes through B.
    assert_eq!(
        o.ok(Input::FenceDone { client: a }),
        vec![at(B, HardwareCommand::Reset)]
    );
    assert_eq!(o.phase(B), PhaseKind::Executing);
}

/// The group's deadline passes while a failed member's fence still holds the reset: the
/// cycle ends naming that member, the one the reset waited for, not B (ready since its
/// voter answered).
#[test]
fn the_groups_deadline_names_the_failed_member_whose_fence_holds_the_reset() {
    let (mut o, a, b) = a_failed_with_an_operation_in_flight();
    let due = o.m.group_cycle(G).flatten();
    assert_eq!(due, Some(Tick(FAIL_DEVICE.group_cycle_timeout())));
    assert_eq!(o.m.poll_timeout(), due);
    let out = o.fire_timeout();
    assert_eq!(
        out,
        vec![
            notify(b, Event::Recovered { epoch: Epoch(0) }),
            cycle(B, cannot(A, CannotResetReason::DeadlinePassed)),
        ]
    );
    assert_eq!(o.m.group_cycle(G), None);
    assert_eq!(o.phase(A), PhaseKind::Failed);
    assert_eq!(o.phase(B), PhaseKind::Running);
    // The fence done later commands nothing: the cycle is over.
    assert_eq!(o.ok(Input::FenceDone { client: a }), vec![]);
}

/// A member that failed with nothing in flight holds nothing back: when the group's
/// deadline passes, the cycle ends naming the member still waited for (B, whose power-up
/// was never reported), not the failed one before it.
#[test]
fn the_groups_deadline_names_the_member_still_waited_for_not_one_that_failed_idle() {
    let (mut o, a, b) = group_with(FAIL_DEVICE);
    idle_powered_down(&mut o, b);
    assert_eq!(
        o.ok(Input::ResetRequest { client: a }),
        vec![notify(a, Event::Reset), at(B, HardwareCommand::PowerUp)]
    );
    // A's voter never returns its RESET: A fails, with no operation in flight.
    let out = o.fire_timeout();
    assert!(out.contains(&Output::DeviceFailed {
        device: A,
        cause: FailureCause::ClientMissedDeadline
    }));
    assert_eq!(o.phase(A), PhaseKind::Failed);
    // B's power-up is never reported: the group's deadline ends the cycle.
    let due = Tick(FAIL_DEVICE.group_cycle_timeout());
    assert_eq!(o.m.group_cycle(G), Some(Some(due)));
    assert_eq!(o.m.poll_timeout(), Some(due));
    assert_eq!(
        o.fire_timeout(),
        vec![cycle(B, cannot(B, CannotResetReason::DeadlinePassed))]
    );
    assert_eq!(o.m.group_cycle(G), None);
}

/// A member that failed mid-cycle and left it, then had a query remove accepted, is a
/// member no cycle could begin with: the group's cycle ends without its reset, naming it
/// (found by the fuzz smoke: the reset went through the other member while this one was
/// remove-pending).
#[test]
fn a_member_that_failed_then_got_a_query_remove_ends_the_groups_cycle_without_a_reset() {
    let (mut o, a, b) = group_with(FAIL_DEVICE);
    assert_eq!(
        o.ok(Input::ResetRequest { client: a }),
        vec![notify(a, Event::Reset), notify(b, Event::Reset)]
    );
    o.ok(Input::CallbackDone { client: a });
    // B's voter never returns its RESET: B fails and leaves; A's voter has not answered.
    voter_overruns_and_its_member_fails(&mut o, b);
    // The OS queries B's removal: accepted, and the group's cycle ends without a reset.
    let out = o.ok(Input::QueryRemove {
        device: B,
        token: RequestToken(5),
    });
    let reason = CannotResetReason::MemberState(PhaseKind::RemovePending);
    assert_eq!(
        out,
        vec![
            Output::Complete {
                device: B,
                token: RequestToken(5),
                status: Status::Success
            },
            notify(a, Event::Recovered { epoch: Epoch(0) }),
            cycle(A, cannot(B, reason)),
        ]
    );
    assert_eq!(o.phase(A), PhaseKind::Running);
    assert_eq!(o.phase(B), PhaseKind::RemovePending);
}

/// A device that joins a group while it already waits for a reset (a fatal error served
/// after its power transition) begins the group's cycle at the join, not at whatever
/// input on a member comes next (found by the fuzz smoke: a client registered on the
/// other member in the next input was counted a voter of a cycle that had not begun).
#[test]
fn joining_with_a_reset_waiting_begins_the_groups_cycle_at_the_join() {
    let mut o = Three::new(Config::DEFAULT);
    o.started(A, false);
    o.started(B, false);
    let a = o.register(A, ClientKind::Trusted);
    o.ok(Input::JoinResetGroup {
        device: A,
        group: G,
    });
    o.ok(Input::PowerDown {
        device: B,
        kind: PowerDownKind::Idle,
        token: RequestToken(3),
    });
    let (reply, _) = o.step(Input::FatalError { device: B });
    assert_eq!(
        reply,
        Ok(Reply::Fatal(FatalAnswer::Served(ResetAnswer::AfterPowerUp)))
    );
    let out = o.ok(Input::JoinResetGroup {
        device: B,
        group: G,
    });
    assert_eq!(out, vec![notify(a, Event::Reset)]);
    assert_eq!(o.phase(A), PhaseKind::Quiescing);
    assert!(o.m.group_cycle(G).is_some(), "the group's cycle runs");
    // A client registering on A now joins a running cycle: admitted, not a voter.
    let late = o.register(A, ClientKind::Untrusted);
    assert_eq!(o.events_of(late), vec![]);
}
