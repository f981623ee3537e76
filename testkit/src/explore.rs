//! The exhaustive explorer: breadth-first over the reachable states of a machine (with the
//! owner's bookkeeping and, optionally, the reference model), every invariant checked on
//! every edge, and liveness (I9) checked from every state.
//!
//! The owner's obligation to drain outputs after every input is built into
//! [`World::step`], so every explored machine state has an empty output queue.
//!
//! **Abstract time.** Every input happens at the owner's current clock, except
//! `Timeout`, which either happens now (a deadline already passed, or a spurious wake) or
//! jumps the clock to the next deadline (`poll_timeout`). So each step either happens
//! before every pending deadline or exactly at the next one: the only distinction the
//! machine can make. (The wide alphabet adds a jump past every deadline.)
//!
//! **Reduction.** Inputs to different devices commute (each touches only its device,
//! and time does not move between them), so between two driver-wide inputs (`Timeout`,
//! `Unload`) the explorer takes device inputs in non-decreasing device order only: every
//! interleaving reaches the same states as this one (a sequentialisation, a simple partial
//! order reduction). Not while any device is in a reset group: an input to one member
//! moves the others, so every order is explored.
//!
//! The state space of the core is infinite (epochs, slot generations and the clock grow
//! without bound), so the exploration is bounded by [`Bounds`]: a state beyond a bound is
//! counted but not expanded.

use crate::oracle::{Check, Violation};
use crate::sut::Sut;
use crate::world::{drive_to_quiescence, past_all_deadlines, Quiesce, World};
use pnp_lifecycle::{
    Access, ClientHandle, ClientKind, DeviceId, Epoch, Input, LinkState, PhysPort, PortCaps,
    PortSet, PowerDownKind, PowerUpResult, Protocol, RequestToken, ResetResult, StartResult, Tick,
};
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

/// What bounds the exploration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// States more inputs than this from the start are not expanded.
    pub max_depth: usize,
    /// States with a device epoch above this are not expanded (bounds reset cycles).
    pub max_epoch: u32,
    /// States where a slot generation exceeds this are not expanded (bounds client churn).
    pub max_generation: u16,
    /// Stop after this many states (a safety net; reported if hit).
    pub max_states: usize,
    /// Run the I9 liveness drives from every `liveness_every`-th new state (0: never).
    pub liveness_every: usize,
    /// Compare with the reference model on every edge.
    pub compare_model: bool,
    /// Include the less important inputs (a third link state, stale accesses, forged
    /// handles, out-of-range ports, backwards ticks).
    pub wide_alphabet: bool,
    /// Threads expanding each breadth-first layer (1: on the calling thread, which the
    /// planted-fault tests need since a planted fault is per thread).
    pub threads: usize,
}

impl Bounds {
    /// The full bound: BFS depth 8 (the state graph is infinite: epochs, generations and
    /// the clock grow), liveness from every state; about 20 s per policy in release.
    pub const FULL: Bounds = Bounds {
        max_depth: 8,
        max_epoch: 1,
        max_generation: 1,
        max_states: 3_000_000,
        liveness_every: 1,
        compare_model: true,
        wide_alphabet: true,
        threads: 1,
    };
    /// A smaller bound for debug builds: depth 6, narrower alphabet, liveness from every
    /// 7th state.
    pub const QUICK: Bounds = Bounds {
        max_depth: 6,
        max_epoch: 1,
        max_generation: 1,
        max_states: 2_000_000,
        liveness_every: 7,
        compare_model: true,
        wide_alphabet: false,
        threads: 1,
    };
}

/// The result of an exploration.
#[derive(Debug, Clone)]
pub struct Report {
    /// Distinct states reached (including pruned ones).
    pub states: usize,
    /// Edges (input applications) checked.
    pub edges: usize,
    /// States not expanded because a bound was hit.
    pub pruned: usize,
    /// The deepest BFS layer reached.
    pub depth: usize,
    /// Liveness drives run (two per checked state).
    pub liveness_runs: usize,
    /// Whether `max_states` stopped the search early.
    pub truncated: bool,
    /// The first violation found, with the inputs (and the owner's `now` for each) that
    /// lead to it from the start.
    pub violation: Option<(Violation, Vec<(Tick, Input)>)>,
    /// Wall-clock seconds the exploration took.
    pub seconds: f64,
    /// Edges whose outputs reached each landmark (see [`LANDMARKS`]).
    pub reached: [usize; LANDMARKS.len()],
}

/// What the explorer counts edges for, to show what its bound reaches: outputs, and
/// hardware operations in flight racing a stop, a reset, a removal and a revocation.
pub const LANDMARKS: [&str; 24] = [
    "cycle completed",
    "fence",
    "revoked",
    "deferred fatal answered",
    "device removed",
    "unload finished",
    "stop ended after waiting for an operation",
    "reset commanded after waiting for an operation",
    "removal ended after waiting for an operation",
    "operation holder revoked and fenced",
    "cycle recovered without a reset",
    "query stop vetoed by a client that cannot pause",
    "power-down commanded after waiting for an operation",
    "device back in D0 after a power-up",
    "lost-state power-up",
    "access woke an idle device",
    "reset served after a power-up",
    "fast-path close answered with an operation in flight",
    "fast-path close overran and was fenced",
    "fast-path gate reopened at a new epoch",
    "group reset through one member for the whole group",
    "group cycle ended by a nack",
    "group member removed mid-cycle, the group reset without it",
    "group member in Dx powered up for the group's cycle",
];

/// The landmarks only a fast-path machine ([`crate::sut::FastPath`]) reaches.
pub const FAST_PATH_LANDMARKS: std::ops::Range<usize> = 17..20;

/// The landmarks only a machine with a reset group reaches.
pub const GROUP_LANDMARKS: std::ops::Range<usize> = 20..24;

fn landmarks<S: Sut>(
    before: &World<S>,
    input: &Input,
    step: &crate::world::Step,
    after: &World<S>,
    reached: &mut [usize; LANDMARKS.len()],
) {
    use pnp_lifecycle::{
        CycleOutcome, Error, Event, HardwareCommand, Output, PhaseKind, VetoReason,
    };
    let ops_of = |c: ClientHandle| before.oracle.client(c).map_or(0, |b| b.ops);
    let ended_an_op = match *input {
        Input::AccessDone { client } | Input::FenceDone { client } => ops_of(client) > 0,
        _ => false,
    };
    for d in 0..S::DEVICES {
        let d = DeviceId(d as u8);
        if before.sut.phase(d) == Some(PhaseKind::Stopping)
            && after.sut.phase(d) != Some(PhaseKind::Stopping)
        {
            reached[6] += 1;
        }
        if before.sut.phase(d) == Some(PhaseKind::PoweringUp) {
            match after.sut.phase(d) {
                Some(PhaseKind::Running) => reached[13] += 1,
                Some(PhaseKind::Quiescing | PhaseKind::Executing) => {
                    reached[13] += 1;
                    reached[16] += 1;
                }
                _ => {}
            }
            if matches!(
                (input, &step.result),
                (
                    Input::PowerUpDone {
                        result: pnp_lifecycle::PowerUpResult::LostState,
                        ..
                    },
                    Ok(_)
                )
            ) {
                reached[14] += 1;
            }
        }
    }
    if matches!(
        (input, &step.result),
        (
            Input::QueryStop { .. },
            Err(Error::Vetoed(VetoReason::ClientCannotPause))
        )
    ) {
        reached[11] += 1;
    }
    if matches!(
        (input, &step.result),
        (Input::FastPathClosed { in_flight: 1.., .. }, Ok(_))
    ) {
        reached[17] += 1;
    }
    let closing = |c: ClientHandle| {
        before
            .oracle
            .client(c)
            .is_some_and(|b| b.gate_closing.is_some())
    };
    for o in &step.outputs {
        let i = match o {
            Output::Hardware {
                command: HardwareCommand::Reset,
                ..
            } if ended_an_op => 7,
            Output::DeviceRemoved { .. } if ended_an_op => 8,
            Output::Fence { client } if ops_of(*client) > 0 => 9,
            Output::Fence { client } if *input == Input::Timeout && closing(*client) => 18,
            Output::FastPath {
                gate: pnp_lifecycle::FastPathGate::Open { epoch },
                ..
            } if epoch.0 > 0 => 19,
            Output::ResetCycleFinished {
                outcome: CycleOutcome::Recovered(_),
                ..
            } => 10,
            Output::Hardware {
                command: HardwareCommand::PowerDown,
                ..
            } if ended_an_op => 12,
            Output::Hardware {
                command: HardwareCommand::PowerUp,
                ..
            } if matches!(input, Input::Access { .. }) => 15,
            _ => continue,
        };
        reached[i] += 1;
    }
    // Reset groups.
    let grouped = |d: DeviceId| {
        before
            .oracle
            .devices
            .get(usize::from(d.0))
            .is_some_and(|b| b.group.is_some())
    };
    let vanished_member = (0..S::DEVICES).any(|d| {
        let d = DeviceId(d as u8);
        grouped(d)
            && before
                .oracle
                .devices
                .get(usize::from(d.0))
                .is_some_and(|b| b.surprise || b.removal_requested)
    });
    for o in &step.outputs {
        match o {
            Output::Hardware {
                device,
                command: HardwareCommand::Reset,
            } if grouped(*device) => {
                reached[20] += 1;
                if vanished_member {
                    reached[22] += 1;
                }
            }
            Output::ResetCycleFinished {
                outcome:
                    CycleOutcome::CannotReset {
                        reason: pnp_lifecycle::CannotResetReason::ClientRefused(_),
                        ..
                    },
                ..
            } => reached[21] += 1,
            Output::Hardware {
                device,
                command: HardwareCommand::PowerUp,
            } if grouped(*device) && input.device() != Some(*device) => reached[23] += 1,
            _ => {}
        }
    }
    for o in &step.outputs {
        let i = match o {
            Output::ResetCycleFinished {
                outcome: CycleOutcome::Completed(_),
                ..
            } => 0,
            Output::Fence { .. } => 1,
            Output::Notify {
                event: Event::Revoked,
                ..
            } => 2,
            Output::ResetCycleFinished {
                outcome: CycleOutcome::FoldedIntoStop,
                ..
            } => 3,
            Output::DeviceRemoved { .. } => 4,
            Output::UnloadMayFinish => 5,
            _ => continue,
        };
        reached[i] += 1;
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} states, {} edges, {:.1} s, {} pruned at a bound, depth {}, {} liveness drives{}",
            self.states,
            self.edges,
            self.seconds,
            self.pruned,
            self.depth,
            self.liveness_runs,
            if self.truncated { ", TRUNCATED" } else { "" }
        )?;
        write!(f, "; edges reaching")?;
        for (name, n) in LANDMARKS.iter().zip(self.reached) {
            write!(f, " {name}: {n},")?;
        }
        if let Some((v, path)) = &self.violation {
            write!(f, "\nviolation {} after {} inputs:", v, path.len())?;
            for (now, i) in path {
                write!(f, "\n  @{} {:?}", now.0, i)?;
            }
        }
        Ok(())
    }
}

fn fingerprint<T: Hash>(t: &T) -> u128 {
    let mut a = DefaultHasher::new();
    0u8.hash(&mut a);
    t.hash(&mut a);
    let mut b = DefaultHasher::new();
    1u8.hash(&mut b);
    t.hash(&mut b);
    t.hash(&mut b);
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

/// The port capabilities the explorer configures: port 0 InfiniBand, port 1 RoCE (so a
/// binding of both is refused as mixed).
pub const EXPLORER_PORTS: [PortCaps; 2] = [
    PortCaps {
        protocol: Protocol::Ib,
        max_mtu: 4096,
        atomics: true,
    },
    PortCaps {
        protocol: Protocol::Roce,
        max_mtu: 1024,
        atomics: false,
    },
];

/// The input alphabet in a state: every input kind with small parameters, each at the
/// owner's clock, plus `Timeout` now and at the next deadline.
pub fn alphabet<S: Sut>(world: &World<S>, wide: bool) -> Vec<(Tick, Input)> {
    let mut v = Vec::new();
    let now = world.clock;
    for di in 0..S::DEVICES {
        let device = DeviceId(di as u8);
        let present = world.sut.phase(device) != Some(pnp_lifecycle::PhaseKind::Absent);
        v.push(Input::AddDevice { device });
        if !present && !wide {
            continue;
        }
        #[allow(clippy::needless_range_loop)]
        for p in 0..S::PORTS.min(2) {
            v.push(Input::ConfigurePort {
                device,
                port: PhysPort(p as u8),
                caps: EXPLORER_PORTS[p],
            });
        }
        let t = |n| RequestToken(n);
        v.push(Input::Start {
            device,
            token: t(1),
        });
        v.push(Input::StartDone {
            device,
            result: StartResult::Started,
        });
        v.push(Input::StartDone {
            device,
            result: StartResult::FailedAfterResources,
        });
        if wide {
            v.push(Input::StartDone {
                device,
                result: StartResult::FailedBeforeResources,
            });
        }
        v.push(Input::QueryStop {
            device,
            token: t(2),
        });
        v.push(Input::CancelStop {
            device,
            token: t(3),
        });
        v.push(Input::Stop {
            device,
            token: t(4),
        });
        v.push(Input::QueryRemove {
            device,
            token: t(5),
        });
        v.push(Input::CancelRemove {
            device,
            token: t(6),
        });
        v.push(Input::Remove {
            device,
            token: t(7),
        });
        v.push(Input::SurpriseRemoval { device });
        v.push(Input::FatalError { device });
        v.push(Input::ResetDone {
            device,
            result: ResetResult::Succeeded,
        });
        v.push(Input::ResetDone {
            device,
            result: ResetResult::Failed,
        });
        // Power: the wide alphabet offers both kinds of power-down, the narrow one an idle
        // power-down on even devices and a system sleep on odd ones. Completions only for
        // a power command in flight and the power-up only in Dx (the state matrix walks
        // their refusals); the wide alphabet adds the failed power-up.
        for kind in [PowerDownKind::Idle, PowerDownKind::SystemSleep] {
            if wide || (kind == PowerDownKind::Idle) == (di % 2 == 0) {
                v.push(Input::PowerDown {
                    device,
                    kind,
                    token: t(8),
                });
            }
        }
        let book = world.oracle.devices.get(di);
        if book.is_some_and(|b| b.power_down_in_flight) {
            v.push(Input::PowerDownDone { device });
        }
        if world.sut.phase(device) == Some(pnp_lifecycle::PhaseKind::LowPower) {
            v.push(Input::PowerUp {
                device,
                token: t(9),
            });
        }
        if book.is_some_and(|b| b.power_up_in_flight) {
            v.push(Input::PowerUpDone {
                device,
                result: PowerUpResult::Powered,
            });
            v.push(Input::PowerUpDone {
                device,
                result: PowerUpResult::LostState,
            });
            if wide {
                v.push(Input::PowerUpDone {
                    device,
                    result: PowerUpResult::Failed,
                });
            }
        }
        let up = world.sut.link(device, PhysPort(0)) == Some(LinkState::Active);
        v.push(Input::LinkChanged {
            device,
            port: PhysPort(0),
            state: if up {
                LinkState::Down
            } else {
                LinkState::Active
            },
        });
        if wide && S::PORTS > 1 {
            v.push(Input::LinkChanged {
                device,
                port: PhysPort(1),
                state: LinkState::Armed,
            });
        }
        v.push(Input::Register {
            device,
            kind: ClientKind::Trusted,
        });
        v.push(Input::Register {
            device,
            kind: ClientKind::Untrusted,
        });
        if wide {
            v.push(Input::ConfigurePort {
                device,
                port: PhysPort(S::PORTS as u8),
                caps: EXPLORER_PORTS[0],
            });
            let forged = ClientHandle {
                device,
                slot: 0,
                generation: 77,
            };
            v.push(Input::Unregister { client: forged });
            v.push(Input::ResetRequest { client: forged });
        }
    }
    let epoch_of = |d: DeviceId| world.sut.epoch(d).unwrap_or(Epoch(0));
    for (client, book) in world.oracle.handles() {
        if book.gone {
            // A stale handle from a slot's earlier client.
            v.push(Input::Unregister { client });
            if wide {
                v.push(Input::CallbackDone { client });
                v.push(Input::ResetRequest { client });
            }
            continue;
        }
        if book.callback.is_some() {
            v.push(Input::CallbackDone { client });
        }
        if book.gate_closing.is_some() {
            // The owner answers a close with nothing or one operation in flight.
            for in_flight in [0, 1] {
                v.push(Input::FastPathClosed { client, in_flight });
            }
        }
        if book.ops > 0 && !book.fence_pending {
            v.push(Input::AccessDone { client });
        }
        if book.fence_pending {
            v.push(Input::FenceDone { client });
            continue; // revoked: every other call fails
        }
        if book.unregistered {
            continue;
        }
        v.push(Input::Unregister { client });
        if book.revoked || book.removed || book.cut {
            continue;
        }
        v.push(Input::AcquireInterface { client });
        v.push(Input::ResetRequest { client });
        v.push(Input::ResetExecute { client });
        v.push(Input::CanRecover { client });
        let grouped = |d: DeviceId| {
            world
                .oracle
                .devices
                .get(usize::from(d.0))
                .is_some_and(|b| b.group.is_some())
        };
        if grouped(client.device) {
            v.push(Input::ResetNack { client });
        }
        v.push(if book.cannot_pause {
            Input::CanPause { client }
        } else {
            Input::CannotPause { client }
        });
        v.push(Input::Bind {
            client,
            ports: PortSet::single(PhysPort(0)),
        });
        if S::PORTS > 1 && wide {
            v.push(Input::Bind {
                client,
                ports: PortSet::single(PhysPort(0)).with(PhysPort(1)),
            });
        }
        v.push(if book.holding {
            Input::ReleaseHold { client }
        } else {
            Input::Hold { client }
        });
        let held = book.interface.unwrap_or(Epoch(0));
        v.push(Input::Access {
            client,
            epoch: held,
            what: Access::HardwareOp,
        });
        let current = epoch_of(client.device);
        if current != held && wide {
            v.push(Input::Access {
                client,
                epoch: current,
                what: Access::HardwareOp,
            });
        }
        if wide {
            v.push(Input::Access {
                client,
                epoch: held,
                what: Access::QueryCounters(PhysPort(1)),
            });
        }
    }
    if !wide {
        // The narrow alphabet leaves out inputs the state table refuses outright (the wide
        // one and `tests/state_matrix.rs` cover those cells): they loop back unchanged.
        v.retain(|i| {
            let Some(d) = i.device() else { return true };
            if i.kind() == pnp_lifecycle::InputKind::Register {
                return true; // admission is a rule of its own (remove pending, unload)
            }
            world.sut.phase(d).is_none_or(|p| {
                pnp_lifecycle::table::disposition(p, i.kind())
                    != pnp_lifecycle::table::Disposition::Refuse
            })
        });
    }
    let mut timed: Vec<(Tick, Input)> = v.into_iter().map(|i| (now, i)).collect();
    if wide || world.sut.driver_phase() == pnp_lifecycle::DriverPhase::Loaded {
        timed.push((now, Input::Unload));
    }
    match world.sut.poll_timeout() {
        // The deadline passed (or is now): the owner wakes now.
        Some(t) if t <= now => timed.push((now, Input::Timeout)),
        // The clock jumps to the next deadline.
        Some(t) => timed.push((t, Input::Timeout)),
        None => {}
    }
    if wide {
        timed.push((past_all_deadlines(&world.sut.config(), now), Input::Timeout));
        timed.push((now, Input::Timeout));
        if now.0 > 0 {
            timed.push((Tick(now.0 - 1), Input::Timeout));
        }
    }
    timed
}

/// The device a device input concerns (`None` for the driver-wide inputs).
fn device_of(input: &Input) -> Option<u8> {
    match input {
        Input::Timeout | Input::Unload => None,
        _ => input.device().map(|d| d.0),
    }
}

fn beyond<S: Sut>(world: &World<S>, bounds: &Bounds, depth: usize) -> bool {
    if depth >= bounds.max_depth {
        return true;
    }
    for di in 0..S::DEVICES {
        let d = DeviceId(di as u8);
        if world.sut.epoch(d).is_some_and(|e| e.0 > bounds.max_epoch) {
            return true;
        }
    }
    world
        .oracle
        .handles()
        .any(|(h, _)| h.generation > bounds.max_generation)
}

fn path_to(parents: &[(u32, Option<(Tick, Input)>)], mut at: u32) -> Vec<(Tick, Input)> {
    let mut path = Vec::new();
    while let (parent, Some(input)) = parents[at as usize] {
        path.push(input);
        at = parent;
    }
    path.reverse();
    path
}

/// Explore every state reachable from `start` within `bounds`, checking every edge.
/// Stops at the first violation.
pub fn explore<S: Sut + Send + Sync>(start: World<S>, bounds: Bounds) -> Report {
    explore_from(start, &[], bounds)
}

/// An input with the owner's `now` for it: one edge of the state graph.
pub type Edge = (Tick, Input);

/// A new state: the world (`None` for a leaf at the depth bound: checked, counted, not
/// kept), the device of the input that reached it, its parent's id and that input.
type Reached<S> = (Option<World<S>>, Option<u8>, u32, Edge);

/// What one thread found while expanding its share of a layer.
struct Expansion<S: Sut> {
    /// New states.
    next: Vec<Reached<S>>,
    edges: usize,
    pruned: usize,
    liveness_runs: usize,
    reached: [usize; LANDMARKS.len()],
    violation: Option<(Violation, u32, Option<Edge>)>,
}

fn expand<S: Sut>(
    layer: &[(World<S>, Option<u8>, u32)],
    depth: usize,
    bounds: &Bounds,
    seen: &Mutex<HashSet<u128>>,
) -> Expansion<S> {
    let mut x = Expansion {
        next: Vec::new(),
        edges: 0,
        pruned: 0,
        liveness_runs: 0,
        reached: [0; LANDMARKS.len()],
        violation: None,
    };
    for (world, last_dev, id) in layer {
        // Inputs to members of a reset group do not commute (one moves the others): no
        // device-order reduction while any device is in a group.
        let grouped = world.oracle.devices.iter().any(|b| b.group.is_some());
        if bounds.liveness_every > 0 && (*id as usize).is_multiple_of(bounds.liveness_every) {
            for mode in [
                Quiesce::Cooperative,
                Quiesce::Uncooperative,
                Quiesce::Hostile,
            ] {
                let mut w = world.clone();
                x.liveness_runs += 1;
                if let Err(v) = drive_to_quiescence(&mut w, mode) {
                    let mut v = v;
                    v.detail = format!("{} (liveness drive {:?} from this state)", v.detail, mode);
                    x.violation = Some((v, *id, None));
                    return x;
                }
            }
        }
        if beyond(world, bounds, depth) {
            x.pruned += 1;
            continue;
        }
        for (now, input) in alphabet(world, bounds.wide_alphabet) {
            let dev = device_of(&input);
            if let (Some(d), Some(last), false) = (dev, *last_dev, grouped) {
                if d < last {
                    continue; // reached by the reordering in device order
                }
            }
            let mut next = world.clone();
            x.edges += 1;
            match next.step(now, input) {
                Ok(step) => landmarks(world, &input, &step, &next, &mut x.reached),
                Err(v) => {
                    x.violation = Some((v, *id, Some((now, input))));
                    return x;
                }
            }
            let fp = fingerprint(&(&next, dev));
            let fresh = seen.lock().map(|mut s| s.insert(fp)).unwrap_or(false);
            if !fresh {
                continue;
            }
            if depth + 1 < bounds.max_depth {
                x.next.push((Some(next), dev, *id, (now, input)));
                continue;
            }
            // A leaf: the depth bound prunes it, so it is not kept; its liveness is
            // checked here on the same sample as the kept states.
            x.pruned += 1;
            if bounds.liveness_every > 0 && (fp as usize).is_multiple_of(bounds.liveness_every) {
                for mode in [
                    Quiesce::Cooperative,
                    Quiesce::Uncooperative,
                    Quiesce::Hostile,
                ] {
                    let mut w = next.clone();
                    x.liveness_runs += 1;
                    if let Err(v) = drive_to_quiescence(&mut w, mode) {
                        let mut v = v;
                        v.detail =
                            format!("{} (liveness drive {:?} after this input)", v.detail, mode);
                        x.violation = Some((v, *id, Some((now, input))));
                        return x;
                    }
                }
            }
            x.next.push((None, dev, *id, (now, input)));
        }
    }
    x
}

/// Apply `prefix` to `start` (checked like every edge), then explore every state reachable
/// from there within `bounds`, one breadth-first layer at a time, each layer split over
/// `bounds.threads` threads. A violation's path includes the prefix.
pub fn explore_from<S: Sut + Send + Sync>(
    start: World<S>,
    prefix: &[(Tick, Input)],
    bounds: Bounds,
) -> Report {
    let clock = std::time::Instant::now();
    let mut start = start;
    if !bounds.compare_model {
        start.model = None;
    }
    let mut report = Report {
        states: 1,
        edges: 0,
        pruned: 0,
        depth: 0,
        liveness_runs: 0,
        truncated: false,
        violation: None,
        seconds: 0.0,
        reached: [0; LANDMARKS.len()],
    };
    for (i, (now, input)) in prefix.iter().enumerate() {
        if let Err(v) = start.step(*now, *input) {
            report.violation = Some((v, prefix[..=i].to_vec()));
            report.seconds = clock.elapsed().as_secs_f64();
            return report;
        }
    }
    let with_prefix = |path: Vec<(Tick, Input)>| {
        let mut p = prefix.to_vec();
        p.extend(path);
        p
    };
    // The reduction's state: the last device that took an input since the last
    // driver-wide input.
    let seen: Mutex<HashSet<u128>> = Mutex::new(HashSet::new());
    if let Ok(mut s) = seen.lock() {
        s.insert(fingerprint(&(&start, None::<u8>)));
    }
    let mut parents: Vec<(u32, Option<(Tick, Input)>)> = vec![(0, None)];
    let mut layer: Vec<(World<S>, Option<u8>, u32)> = vec![(start, None, 0)];
    let mut depth = 0;
    let threads = bounds.threads.max(1);
    while !layer.is_empty() {
        report.depth = depth;
        let chunk = layer.len().div_ceil(threads);
        let results: Vec<Expansion<S>> = if threads == 1 {
            vec![expand(&layer, depth, &bounds, &seen)]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = layer
                    .chunks(chunk)
                    .map(|part| scope.spawn(|| expand(part, depth, &bounds, &seen)))
                    .collect();
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            })
        };
        let mut next_layer = Vec::new();
        for x in results {
            if !x.next.is_empty() {
                report.depth = report.depth.max(depth + 1);
            }
            report.edges += x.edges;
            for (r, n) in report.reached.iter_mut().zip(x.reached) {
                *r += n;
            }
            report.pruned += x.pruned;
            report.liveness_runs += x.liveness_runs;
            if report.violation.is_none() {
                if let Some((v, id, edge)) = x.violation {
                    let mut path = path_to(&parents, id);
                    path.extend(edge);
                    report.violation = Some((v, with_prefix(path)));
                }
            }
            for (world, dev, parent, edge) in x.next {
                let nid = parents.len() as u32;
                parents.push((parent, Some(edge)));
                report.states += 1;
                if let Some(world) = world {
                    next_layer.push((world, dev, nid));
                }
            }
        }
        if report.violation.is_some() {
            break;
        }
        if report.states > bounds.max_states {
            report.truncated = true;
            break;
        }
        layer = next_layer;
        depth += 1;
    }
    report.seconds = clock.elapsed().as_secs_f64();
    report
}

/// Replay a path of inputs from `start`, returning the first violation.
pub fn replay<S: Sut>(mut start: World<S>, path: &[(Tick, Input)]) -> Result<(), Violation> {
    for (now, input) in path {
        start.step(*now, *input)?;
    }
    Ok(())
}

/// A violation used when a bounded search finds nothing (for tests that expect one).
pub fn nothing_found() -> Violation {
    Violation {
        check: Check::Harness,
        detail: "no violation found".into(),
    }
}
