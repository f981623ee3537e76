//! The exhaustive explorer: breadth-first over the reachable states of a machine (with the
//! owner's bookkeeping and, optionally, the reference model), every invariant checked on
//! every edge, and liveness (I9) checked from every state.
//!
//! The owner's obligation to drain outputs after every input is built into
//! [`World::step`], so every explored machine state has an empty output queue.
//!
//! The state space of the core is infinite (epochs, slot generations and the clock grow
//! without bound), so the exploration is bounded by [`Bounds`]: a state beyond a bound is
//! counted but not expanded.

use crate::oracle::{Check, Violation};
use crate::sut::Sut;
use crate::world::{drive_to_quiescence, past_all_deadlines, Quiesce, World};
use pnp_lifecycle::{
    Access, ClientHandle, ClientKind, DeviceId, Epoch, Input, LinkState, PhysPort, PortCaps,
    PortSet, Protocol, RequestToken, ResetResult, StartResult, Tick,
};
use std::collections::{HashSet, VecDeque};
use std::hash::{DefaultHasher, Hash, Hasher};

/// What bounds the exploration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// States more inputs than this from the start are not expanded.
    pub max_depth: usize,
    /// States with a device epoch above this are not expanded (bounds reset cycles).
    pub max_epoch: u32,
    /// States where a slot generation exceeds this are not expanded (bounds client churn).
    pub max_generation: u16,
    /// States where a client has more callbacks in flight than this are not expanded.
    pub max_callbacks: u32,
    /// Stop after this many states (a safety net; reported if hit).
    pub max_states: usize,
    /// Run the I9 liveness drives from every `liveness_every`-th new state (0: never).
    pub liveness_every: usize,
    /// Compare with the reference model on every edge.
    pub compare_model: bool,
    /// Include the less important inputs (a third link state, stale accesses, forged
    /// handles, out-of-range ports, backwards ticks).
    pub wide_alphabet: bool,
}

impl Bounds {
    /// The full bound: BFS depth 8 (the state graph is infinite: epochs, generations and
    /// the clock grow), liveness from every state; about 20 s per policy in release.
    pub const FULL: Bounds = Bounds {
        max_depth: 8,
        max_epoch: 1,
        max_generation: 1,
        max_callbacks: 2,
        max_states: 3_000_000,
        liveness_every: 1,
        compare_model: true,
        wide_alphabet: true,
    };
    /// A smaller bound for debug builds: depth 6, narrower alphabet, liveness from every
    /// 7th state.
    pub const QUICK: Bounds = Bounds {
        max_depth: 6,
        max_epoch: 1,
        max_generation: 1,
        max_callbacks: 2,
        max_states: 2_000_000,
        liveness_every: 7,
        compare_model: true,
        wide_alphabet: false,
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
    /// The first violation found, with the inputs that lead to it from the start.
    pub violation: Option<(Violation, Vec<Input>)>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} states, {} edges, {} pruned at a bound, depth {}, {} liveness drives{}",
            self.states,
            self.edges,
            self.pruned,
            self.depth,
            self.liveness_runs,
            if self.truncated { ", TRUNCATED" } else { "" }
        )?;
        if let Some((v, path)) = &self.violation {
            write!(f, "\nviolation {} after {} inputs:", v, path.len())?;
            for i in path {
                write!(f, "\n  {:?}", i)?;
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

/// The input alphabet in a state: every input kind with small parameters.
pub fn alphabet<S: Sut>(world: &World<S>, wide: bool) -> Vec<Input> {
    let mut v = Vec::new();
    let now = world.sut.now();
    for di in 0..S::DEVICES {
        let device = DeviceId(di as u8);
        v.push(Input::AddDevice { device });
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
        for result in [
            StartResult::Started,
            StartResult::FailedBeforeResources,
            StartResult::FailedAfterResources,
        ] {
            v.push(Input::StartDone { device, result });
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
        v.push(Input::LinkChanged {
            device,
            port: PhysPort(0),
            state: LinkState::Active,
        });
        v.push(Input::LinkChanged {
            device,
            port: PhysPort(0),
            state: LinkState::Down,
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
        if book.callbacks > 0 {
            v.push(Input::CallbackDone { client });
        }
        v.push(Input::Unregister { client });
        v.push(Input::AcquireInterface { client });
        v.push(Input::ResetRequest { client });
        v.push(Input::ResetExecute { client });
        v.push(Input::Bind {
            client,
            ports: PortSet::single(PhysPort(0)),
        });
        if S::PORTS > 1 {
            v.push(Input::Bind {
                client,
                ports: PortSet::single(PhysPort(0)).with(PhysPort(1)),
            });
        }
        v.push(Input::Hold { client });
        v.push(Input::ReleaseHold { client });
        let held = book.interface.unwrap_or(Epoch(0));
        v.push(Input::Access {
            client,
            epoch: held,
            what: Access::HardwareOp,
        });
        let current = epoch_of(client.device);
        if current != held {
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
    if let Some(t) = world.sut.poll_timeout() {
        if t > now {
            v.push(Input::Tick { now: t });
        }
        v.push(Input::Tick {
            now: past_all_deadlines(&world.sut.config(), now),
        });
    }
    v.push(Input::Tick { now });
    if wide && now.0 > 0 {
        v.push(Input::Tick {
            now: Tick(now.0 - 1),
        });
    }
    v.push(Input::Unload);
    v
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
        .any(|(h, c)| h.generation > bounds.max_generation || c.callbacks > bounds.max_callbacks)
}

fn path_to(parents: &[(u32, Option<Input>)], mut at: u32) -> Vec<Input> {
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
pub fn explore<S: Sut>(start: World<S>, bounds: Bounds) -> Report {
    let mut start = start;
    if !bounds.compare_model {
        start.model = None;
    }
    let mut seen: HashSet<u128> = HashSet::new();
    seen.insert(fingerprint(&start));
    // parents[i] = (parent index, input that led here)
    let mut parents: Vec<(u32, Option<Input>)> = vec![(0, None)];
    let mut queue: VecDeque<(World<S>, u32, usize)> = VecDeque::new();
    queue.push_back((start, 0, 0));
    let mut report = Report {
        states: 1,
        edges: 0,
        pruned: 0,
        depth: 0,
        liveness_runs: 0,
        truncated: false,
        violation: None,
    };
    while let Some((world, id, depth)) = queue.pop_front() {
        report.depth = report.depth.max(depth);
        if bounds.liveness_every > 0 && (id as usize).is_multiple_of(bounds.liveness_every) {
            for mode in [Quiesce::Cooperative, Quiesce::Uncooperative] {
                let mut w = world.clone();
                report.liveness_runs += 1;
                if let Err(v) = drive_to_quiescence(&mut w, mode) {
                    let mut v = v;
                    v.detail = format!("{} (liveness drive {:?} from this state)", v.detail, mode);
                    report.violation = Some((v, path_to(&parents, id)));
                    return report;
                }
            }
        }
        if beyond(&world, &bounds, depth) {
            report.pruned += 1;
            continue;
        }
        for input in alphabet(&world, bounds.wide_alphabet) {
            let mut next = world.clone();
            report.edges += 1;
            if let Err(v) = next.step(input) {
                let mut path = path_to(&parents, id);
                path.push(input);
                report.violation = Some((v, path));
                return report;
            }
            if seen.insert(fingerprint(&next)) {
                if seen.len() > bounds.max_states {
                    report.truncated = true;
                    return report;
                }
                let nid = parents.len() as u32;
                parents.push((id, Some(input)));
                report.states += 1;
                queue.push_back((next, nid, depth + 1));
            }
        }
    }
    report
}

/// Replay a path of inputs from `start`, returning the first violation.
pub fn replay<S: Sut>(mut start: World<S>, path: &[Input]) -> Result<(), Violation> {
    for input in path {
        start.step(*input)?;
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
