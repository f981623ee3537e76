//! `TRANSITIONS` against the real core: a seeded random walk asserts that every state
//! change it observes is listed (`is_listed`), and that it observes most of the list, so
//! the list can neither miss a change the machine makes nor keep dead entries unnoticed.

use pnp_lifecycle::table::*;
use pnp_lifecycle::*;
use std::collections::BTreeSet;

type M = Lifecycle<1, 3, 2, { queue_capacity(1, 3) }>;
const DEV: DeviceId = DeviceId(0);

/// The share of `TRANSITIONS` the walk must observe.
///
/// Seen unobserved (seed as committed): two edges reached only with the epoch counter
/// exhausted (`Running --FatalError--> Failed`, `StopPending --CancelStop--> Failed`,
/// `PoweringUp --PowerUpDone--> Failed` for a lost-state power-up at the last epoch),
/// `Stopping --AccessDone--> Absent` (rare), and four that look dead in the core as it
/// stands: `Running --ResetRequest--> Executing` (the requester is a voter, so a cycle it
/// starts always quiesces), `Quiescing --Remove/Unload--> Absent` (a quiescing device
/// has an active voter or an operation in flight, so removal cannot finish at once) and
/// `Quiescing --FenceDone--> Running` (a fenced voter leaves the vote when revoked, not
/// when its fence is done).
const COVERAGE_FLOOR_PERCENT: usize = 90;

/// xorshift64: deterministic, so a failure names its seed and replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

type Edge = (PhaseKind, InputKind, PhaseKind);

/// One walk of `steps` inputs from a fresh machine; records every state change.
fn walk(rng: &mut Rng, config: Config, steps: usize, seen: &mut BTreeSet<Edge>) {
    let mut m = M::new(config);
    let mut now = 0u64;
    let mut clients: Vec<ClientHandle> = vec![];
    let mut notified: Vec<ClientHandle> = vec![];
    let mut fences: Vec<ClientHandle> = vec![];
    let mut trail: Vec<(u64, Input)> = vec![];
    // Half the walks start from a running device whose clients have hardware operations
    // in flight, so stops, resets and removals that wait for them are reached often.
    let prefix: Vec<Input> = if rng.below(2) == 0 {
        let mut p = vec![
            Input::AddDevice { device: DEV },
            Input::Start {
                device: DEV,
                token: RequestToken(1),
            },
            Input::StartDone {
                device: DEV,
                result: StartResult::Started,
            },
        ];
        for _ in 0..1 + rng.below(3) {
            p.push(Input::Register {
                device: DEV,
                kind: if rng.below(2) == 0 {
                    ClientKind::Trusted
                } else {
                    ClientKind::Untrusted
                },
            });
        }
        p
    } else {
        vec![]
    };
    let mut prefix = prefix.into_iter();
    for _ in 0..steps {
        let c = if clients.is_empty() {
            ClientHandle {
                device: DEV,
                slot: 0,
                generation: 0,
            }
        } else {
            clients[rng.below(clients.len())]
        };
        let token = RequestToken(rng.below(1000) as u32);
        let op = Input::Access {
            client: c,
            epoch: m.epoch(DEV).unwrap(),
            what: Access::HardwareOp,
        };
        let quiescing = m.phase(DEV) == Some(PhaseKind::Quiescing);
        let grant_first = clients.len() < 3 && m.phase(DEV) == Some(PhaseKind::Running);
        let pick = rng.below(40);
        let input = if let Some(input) = prefix.next() {
            input
        } else {
            match pick {
                _ if grant_first && rng.below(3) == 0 => op,
                _ if quiescing && rng.below(3) == 0 => match rng.below(5) {
                    0 | 1 => Input::CanRecover { client: c },
                    2 | 3 => Input::ResetExecute { client: c },
                    _ => Input::ResetNack { client: c },
                },
                0 => Input::AddDevice { device: DEV },
                1 => Input::ConfigurePort {
                    device: DEV,
                    port: PhysPort(0),
                    caps: PortCaps {
                        protocol: Protocol::Ib,
                        max_mtu: 1,
                        atomics: true,
                    },
                },
                2 | 3 => Input::Start { device: DEV, token },
                4 => Input::StartDone {
                    device: DEV,
                    result: [
                        StartResult::Started,
                        StartResult::Started,
                        StartResult::FailedAfterResources,
                        StartResult::FailedBeforeResources,
                    ][rng.below(4)],
                },
                5 => Input::QueryStop { device: DEV, token },
                6 => Input::CancelStop { device: DEV, token },
                7 => Input::Stop { device: DEV, token },
                8 => Input::QueryRemove { device: DEV, token },
                9 => Input::CancelRemove { device: DEV, token },
                10 => Input::Remove { device: DEV, token },
                11 => Input::SurpriseRemoval { device: DEV },
                12 => Input::FatalError { device: DEV },
                13 => Input::ResetDone {
                    device: DEV,
                    result: if rng.below(4) == 0 {
                        ResetResult::Failed
                    } else {
                        ResetResult::Succeeded
                    },
                },
                14 => Input::LinkChanged {
                    device: DEV,
                    port: PhysPort(0),
                    state: [
                        LinkState::Down,
                        LinkState::Init,
                        LinkState::Armed,
                        LinkState::Active,
                    ][rng.below(4)],
                },
                15 | 16 => Input::Register {
                    device: DEV,
                    kind: if rng.below(2) == 0 {
                        ClientKind::Trusted
                    } else {
                        ClientKind::Untrusted
                    },
                },
                17 => Input::Unregister { client: c },
                18..=20 if !notified.is_empty() => {
                    let i = rng.below(notified.len());
                    let client = notified.swap_remove(i);
                    // A third of the returns carry the client's answer (DESIGN "Cost").
                    match rng.below(6) {
                        0 => Input::CallbackDoneWith {
                            client,
                            answer: CallbackAnswer::ResetExecute,
                        },
                        1 => Input::CallbackDoneWith {
                            client,
                            answer: CallbackAnswer::CanRecover,
                        },
                        _ => Input::CallbackDone { client },
                    }
                }
                21 => Input::AcquireInterface { client: c },
                22 => Input::ResetRequest { client: c },
                23 | 24 => Input::ResetExecute { client: c },
                25 => Input::CanRecover { client: c },
                26 => Input::Hold { client: c },
                27 => Input::ReleaseHold { client: c },
                28 | 29 => op,
                30 => Input::AccessDone { client: c },
                31 if !fences.is_empty() => Input::FenceDone {
                    client: fences.remove(0),
                },
                32 if rng.below(8) == 0 => Input::Unload,
                32 => Input::CannotPause { client: c },
                33 => Input::CanPause { client: c },
                34 => Input::Bind {
                    client: c,
                    ports: PortSet::single(PhysPort(0)),
                },
                36 => Input::PowerDown {
                    device: DEV,
                    kind: if rng.below(2) == 0 {
                        PowerDownKind::Idle
                    } else {
                        PowerDownKind::SystemSleep
                    },
                    token,
                },
                37 => Input::PowerDownDone { device: DEV },
                38 => Input::PowerUp { device: DEV, token },
                39 => Input::PowerUpDone {
                    device: DEV,
                    result: [
                        PowerUpResult::Powered,
                        PowerUpResult::Powered,
                        PowerUpResult::LostState,
                        PowerUpResult::Failed,
                    ][rng.below(4)],
                },
                _ => {
                    // A timer: sometimes exactly when the machine asks, sometimes a little on.
                    match m.poll_timeout() {
                        Some(due) if rng.below(2) == 0 => now = now.max(due.0),
                        _ => now += rng.below(4) as u64,
                    }
                    Input::Timeout
                }
            }
        };
        if rng.below(3) == 0 {
            now += 1;
        }
        let before = m.phase(DEV).unwrap();
        let reply = m.handle(Tick(now), input);
        trail.push((now, input));
        while let Some(output) = m.poll_output() {
            match output {
                Output::Notify { client, .. } => notified.push(client),
                Output::Fence { client } => fences.push(client),
                _ => {}
            }
        }
        if let Ok(Reply::Registered { client, .. }) = reply {
            clients.push(client);
        }
        let after = m.phase(DEV).unwrap();
        if reply.is_err() {
            assert_eq!(before, after, "refused {input:?} changed the state");
        }
        assert!(
            is_listed(before, input.kind(), after),
            "unlisted {before:?} --{:?}--> {after:?} after {trail:?}",
            input.kind()
        );
        if before != after {
            seen.insert((before, input.kind(), after));
        }
        if m.driver_phase() == DriverPhase::Unloaded {
            break;
        }
    }
}

#[test]
fn every_state_change_is_listed_and_the_walk_covers_the_list() {
    let base = Config {
        untrusted_ack_timeout: 3,
        trusted_ack_timeout: 5,
        trusted_policy: TrustedTimeoutPolicy::FailDevice,
        detach_timeout: 4,
        callback_timeout: 6,
        operation_timeout: 3,
    };
    let mut seen = BTreeSet::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for run in 0..300_000 {
        let mut config = base;
        if run % 2 == 0 {
            config.trusted_policy = TrustedTimeoutPolicy::Revoke;
        }
        walk(&mut rng, config, 60, &mut seen);
    }
    let listed: BTreeSet<Edge> = TRANSITIONS
        .iter()
        .map(|t| (t.from, t.input, t.to))
        .collect();
    assert_eq!(
        listed.len(),
        TRANSITIONS.len(),
        "TRANSITIONS lists an edge twice"
    );
    assert!(seen.is_subset(&listed));
    let missed: Vec<&Edge> = listed.difference(&seen).collect();
    println!(
        "transitions: observed {} of {} listed ({}%); never observed: {missed:?}",
        seen.len(),
        listed.len(),
        seen.len() * 100 / listed.len()
    );
    assert!(
        seen.len() * 100 >= listed.len() * COVERAGE_FLOOR_PERCENT,
        "the walk observed only {} of {} listed transitions; dead or unreachable entries: \
         {missed:?}",
        seen.len(),
        listed.len()
    );
}
