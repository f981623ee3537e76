//! Reset groups on the runtime (DESIGN.md "Reset groups", issue 23), with a toy port of
//! two devices declared one group: the group's one hardware reset reaches the port as one
//! work item naming the carrier and every member it covers, and the cycle's end is
//! answered to every requester. Then, under shuttle (random and PCT schedules), a group
//! cycle racing a member's surprise removal, its remove, driver unload and its idle or
//! system-sleep power-down: at most one hardware reset for the one cycle, never through a
//! member that is not taking part, and every client told `RESET` told how it ended.

use std::sync::Arc;

use pnp_lifecycle::{
    CannotResetReason, ClientHandle, CycleOutcome, Epoch, Event, HardwareCommand, Input, PhaseKind,
    PowerDownKind,
};
use pnp_lifecycle_runtime::{Dispatch, GroupReset};

mod group_toy;

use group_toy::*;

fn resets(log: &[Seen]) -> usize {
    log.iter()
        .filter(|s| {
            matches!(
                s,
                Seen::GroupReset(_) | Seen::Hardware(_, HardwareCommand::Reset)
            )
        })
        .count()
}

fn told(log: &[Seen], client: ClientHandle) -> Vec<Event> {
    log.iter()
        .filter_map(|s| match s {
            Seen::Told(c, e) if *c == client => Some(*e),
            _ => None,
        })
        .collect()
}

/// Every client told `RESET` is told, later, how that cycle ended for it (I4).
fn every_reset_answered(log: &[Seen], clients: &[ClientHandle]) {
    for &c in clients {
        let events = told(log, c);
        for (i, e) in events.iter().enumerate() {
            if *e != Event::Reset {
                continue;
            }
            let ended = events[i + 1..].iter().any(|e| {
                matches!(
                    e,
                    Event::ResetEnd { .. }
                        | Event::Recovered { .. }
                        | Event::Removed { .. }
                        | Event::Revoked
                        | Event::DeviceFatal
                )
            });
            assert!(ended, "{c:?} told RESET, never told how it ended: {log:?}");
        }
    }
}

fn settled(rt: &Arc<Rt>) {
    rt.wait_until(|o, _| {
        let busy = [D0, D1].iter().any(|d| {
            matches!(
                o.machine().phase(*d),
                Some(PhaseKind::Quiescing | PhaseKind::Executing)
            )
        });
        (!busy && o.backlog() == 0).then_some(())
    })
    .unwrap();
}

#[test]
fn a_group_cycle_resets_every_member_once_through_the_carrier() {
    shuttle::check_random(
        || {
            let (rt, h0, h1) = group_of_two(Dispatch::Inline, acker(), acker());
            // A fatal error on the second member: one cycle for the whole group.
            rt.feed(Input::FatalError { device: D1 }).unwrap();
            settled(&rt);
            let log = rt.os().log();
            let reset = GroupReset {
                group: GROUP,
                carrier: D0,
                members: vec![D0, D1],
            };
            assert_eq!(
                log.iter()
                    .filter(|s| **s == Seen::GroupReset(reset.clone()))
                    .count(),
                1,
                "one reset, through the lowest member, covering both: {log:?}"
            );
            assert_eq!(resets(&log), 1, "{log:?}");
            let end = Event::ResetEnd { epoch: Epoch(1) };
            assert_eq!(told(&log, h0), vec![Event::Reset, end], "{log:?}");
            assert_eq!(told(&log, h1), vec![Event::Reset, end], "{log:?}");
            assert!(log.contains(&Seen::Cycle(D1, CycleOutcome::Completed(Epoch(1)))));
            // RESET to every voter of both members before the one reset.
            let reset_at = log.iter().position(|s| matches!(s, Seen::GroupReset(_)));
            let last_told = log.iter().rposition(|s| *s == Seen::Told(h1, Event::Reset));
            assert!(last_told < reset_at, "{log:?}");
            assert_eq!(rt.inspect(|o| o.anomalies()), 0);
            rt.unload().unwrap();
        },
        1,
    );
}

#[test]
fn a_nack_on_one_member_ends_the_groups_cycle_without_a_reset_answered_to_the_requester() {
    shuttle::check_random(
        || {
            let (rt, h0, h1) = group_of_two(Dispatch::Inline, acker(), nacker());
            rt.feed(Input::FatalError { device: D0 }).unwrap();
            settled(&rt);
            let log = rt.os().log();
            assert_eq!(resets(&log), 0, "{log:?}");
            let same = Event::Recovered { epoch: Epoch(0) };
            assert_eq!(told(&log, h0), vec![Event::Reset, same], "{log:?}");
            assert_eq!(told(&log, h1), vec![Event::Reset, same], "{log:?}");
            let refused = CycleOutcome::CannotReset {
                member: D1,
                reason: CannotResetReason::ClientRefused(h1),
            };
            assert!(
                log.contains(&Seen::Cycle(D0, refused)),
                "the requester's answer: {log:?}"
            );
            rt.unload().unwrap();
        },
        1,
    );
}

#[test]
fn a_member_surprise_removed_mid_cycle_is_not_in_the_groups_reset() {
    shuttle::check_random(|| surprise_removal_mid_cycle(|_| ()), 1);
}

/// What races the group's cycle.
#[derive(Debug, Clone, Copy)]
enum Race {
    SurpriseRemoval,
    Remove,
    Unload,
    PowerDown(PowerDownKind),
}

fn race(what: Race) {
    let check = move || {
        let (rt, h0, h1) = group_of_two(Dispatch::Thread, acker(), acker());
        let requester = {
            let rt = Arc::clone(&rt);
            shuttle::thread::spawn(move || {
                let _ = rt.feed(Input::FatalError { device: D0 });
            })
        };
        let racer =
            {
                let rt = Arc::clone(&rt);
                shuttle::thread::spawn(move || match what {
                    Race::SurpriseRemoval => drop(rt.feed(Input::SurpriseRemoval { device: D1 })),
                    Race::Remove => drop(rt.with(|o, now| {
                        o.submit(now, 1, |token| Input::Remove { device: D1, token })
                    })),
                    Race::Unload => rt.unload().unwrap(),
                    Race::PowerDown(kind) => drop(rt.with(|o, now| {
                        o.submit(now, 1, |token| Input::PowerDown {
                            device: D1,
                            kind,
                            token,
                        })
                    })),
                })
            };
        requester.join().unwrap();
        racer.join().unwrap();
        if !matches!(what, Race::Unload) {
            rt.unload().unwrap();
        }
        let log = rt.os().log();
        assert!(
            resets(&log) <= 1,
            "one request, one cycle, one reset at most: {log:?}"
        );
        for s in &log {
            if let Seen::GroupReset(r) = s {
                assert!(r.members.contains(&r.carrier), "{log:?}");
            }
        }
        assert_eq!(rt.inspect(|o| o.anomalies()), 0, "{log:?}");
        every_reset_answered(&log, &[h0, h1]);
    };
    shuttle::check_random(check, 500);
    shuttle::check_pct(check, 500, 3);
    println!("group cycle racing {what:?}: 1,000 schedules");
}

#[test]
fn a_group_cycle_racing_a_members_surprise_removal() {
    race(Race::SurpriseRemoval);
}

#[test]
fn a_group_cycle_racing_a_members_remove() {
    race(Race::Remove);
}

#[test]
fn a_group_cycle_racing_driver_unload() {
    race(Race::Unload);
}

#[test]
fn a_group_cycle_racing_a_members_idle_power_down() {
    race(Race::PowerDown(PowerDownKind::Idle));
}

#[test]
fn a_group_cycle_racing_a_members_system_sleep() {
    race(Race::PowerDown(PowerDownKind::SystemSleep));
}
