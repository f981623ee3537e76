//! The Linux port's test machinery (tests and fuzzing only): a recording `ib_client` and
//! recording hardware that log what the port's clients and hardware observed into the
//! common oracle's [`Log`], a shuttle setup, the cooperative schedule harness
//! [`race::run`] (what the fuzz target `linux_unload_race` calls), and the planted port
//! faults [`planted`].

pub mod planted;
pub mod race;

use std::sync::Arc;

use pnp_lifecycle::{
    ClientKind, Config, DeviceId, Epoch, Event, HardwareCommand, PortCaps, PowerDownKind,
    PowerUpResult, Protocol, ResetResult, StartResult, Tick, TrustedTimeoutPolicy,
};
use pnp_lifecycle_linux::{
    ClientId, Driver, Hardware, IbClient, IbEvent, PciErsResult, RemoveCause,
};
use pnp_lifecycle_runtime::{Kernel, ManualClock};

use crate::observed::{Log, Obs, Seen};

/// The device every scenario uses.
pub const DEV: DeviceId = DeviceId(0);

/// An InfiniBand port.
pub const IB: PortCaps = PortCaps {
    protocol: Protocol::Ib,
    max_mtu: 4096,
    atomics: true,
};

/// Short deadlines, so a scenario's timer reaches them in few steps.
pub const CONFIG: Config = Config {
    untrusted_ack_timeout: 10,
    trusted_ack_timeout: 100,
    trusted_policy: TrustedTimeoutPolicy::Revoke,
    detach_timeout: 50,
    callback_timeout: 200,
    operation_timeout: 50,
};

/// A client that logs every callback (enter, exit) under its number and votes `vote` on
/// `error_detected`. A vote it returns is logged as an answer taken, since the port feeds
/// it right after the callback returns; `DISCONNECT` as a detach.
#[derive(Debug)]
pub struct Recorder {
    /// Its number in the log.
    pub id: u32,
    /// What its `error_detected` returns.
    pub vote: PciErsResult,
    /// The log.
    pub log: Log,
    /// Yield to shuttle's scheduler inside every callback (the client takes time: other
    /// threads may run while it is inside).
    pub yields: bool,
}

impl Recorder {
    /// A recorder, ready to register.
    pub fn new(id: u32, vote: PciErsResult, log: &Log) -> Arc<Self> {
        Arc::new(Recorder {
            id,
            vote,
            log: log.clone(),
            yields: false,
        })
    }

    /// A recorder that yields inside its callbacks (under shuttle only).
    pub fn yielding(id: u32, vote: PciErsResult, log: &Log) -> Arc<Self> {
        Arc::new(Recorder {
            id,
            vote,
            log: log.clone(),
            yields: true,
        })
    }

    /// Log a callback around `f`.
    pub fn around<R>(&self, device: DeviceId, seen: Seen, f: impl FnOnce() -> R) -> R {
        let client = self.id;
        self.log.push(Obs::Enter {
            client,
            device,
            seen,
        });
        if self.yields {
            shuttle::thread::yield_now();
        }
        let r = f();
        self.log.push(Obs::Exit { client });
        r
    }
}

impl IbClient for Recorder {
    fn add(&self, dev: DeviceId) {
        self.around(dev, Seen::Attached, || ());
    }
    fn remove(&self, dev: DeviceId, cause: RemoveCause) {
        let surprise = matches!(cause, RemoveCause::DeviceRemoved { surprise: true });
        self.around(dev, Seen::Event(Event::Removed { surprise }), || ());
    }
    fn error_detected(&self, dev: DeviceId) -> PciErsResult {
        self.around(dev, Seen::Event(Event::Reset), || {
            let client = self.id;
            match self.vote {
                PciErsResult::NeedReset | PciErsResult::CanRecover => {
                    self.log.push(Obs::AnswerTried {
                        client,
                        device: dev,
                    });
                    self.log.push(Obs::AnswerResult {
                        client,
                        accepted: true,
                    });
                }
                PciErsResult::Disconnect => self.log.push(Obs::DetachBegin { client }),
                _ => {}
            }
            self.vote
        })
    }
    fn resume(&self, dev: DeviceId, epoch: Epoch) {
        self.around(dev, Seen::Event(Event::ResetEnd { epoch }), || ());
    }
    fn event(&self, dev: DeviceId, event: IbEvent) {
        let event = match event {
            IbEvent::PortActive(port) => Event::LinkChanged {
                port,
                state: pnp_lifecycle::LinkState::Active,
            },
            IbEvent::PortErr(port) => Event::LinkChanged {
                port,
                state: pnp_lifecycle::LinkState::Down,
            },
            IbEvent::DeviceFatal => Event::DeviceFatal,
        };
        self.around(dev, Seen::Event(event), || ());
    }
    fn suspending(&self, dev: DeviceId, kind: PowerDownKind) {
        self.around(dev, Seen::Event(Event::Suspending { kind }), || ());
    }
    fn resumed(&self, dev: DeviceId, epoch: Epoch, state_lost: bool) {
        let event = Event::Resumed { epoch, state_lost };
        self.around(dev, Seen::Event(event), || ());
    }
    fn disassociate(&self, dev: DeviceId) {
        self.around(dev, Seen::Event(Event::Revoked), || ());
    }
    fn disassociated(&self, dev: DeviceId, overran: bool) {
        self.log.push(Obs::Fenced {
            client: self.id,
            device: dev,
            overran,
        });
    }
}

/// Hardware that logs every command: the start, the re-initialisation after a slot or
/// function reset (as `Reset`), the power-down and power-up, shutdown and release.
#[derive(Debug)]
pub struct RecordingHardware {
    /// The log.
    pub log: Log,
    /// What the re-initialisation reports.
    pub reset: ResetResult,
    /// What a power-up reports.
    pub power_up: PowerUpResult,
}

impl RecordingHardware {
    /// Hardware on which everything succeeds.
    pub fn new(log: &Log) -> Arc<Self> {
        Arc::new(RecordingHardware {
            log: log.clone(),
            reset: ResetResult::Succeeded,
            power_up: PowerUpResult::Powered,
        })
    }

    /// Hardware whose power-up reports `power_up`.
    pub fn powering_up(log: &Log, power_up: PowerUpResult) -> Arc<Self> {
        Arc::new(RecordingHardware {
            log: log.clone(),
            reset: ResetResult::Succeeded,
            power_up,
        })
    }
}

impl Hardware for RecordingHardware {
    fn start(&self, device: DeviceId) -> StartResult {
        let command = HardwareCommand::Start;
        self.log.push(Obs::Hardware { device, command });
        StartResult::Started
    }
    fn reset(&self, device: DeviceId) -> ResetResult {
        let command = HardwareCommand::Reset;
        self.log.push(Obs::Hardware { device, command });
        self.reset
    }
    fn power_down(&self, device: DeviceId) {
        let command = HardwareCommand::PowerDown;
        self.log.push(Obs::Hardware { device, command });
    }
    fn power_up(&self, device: DeviceId) -> PowerUpResult {
        let command = HardwareCommand::PowerUp;
        self.log.push(Obs::Hardware { device, command });
        self.power_up
    }
    fn command(&self, device: DeviceId, command: HardwareCommand) {
        self.log.push(Obs::Hardware { device, command });
    }
}

/// The user-space side of a deferred vote: log the attempt and whether the core took it.
pub fn late_ack<K: Kernel, O: pnp_lifecycle_linux::LinuxPort>(
    d: &Driver<K, O>,
    log: &Log,
    client: u32,
    id: ClientId,
) -> bool {
    log.push(Obs::AnswerTried {
        client,
        device: DEV,
    });
    let accepted = d.reset_ack(id, DEV).is_ok();
    log.push(Obs::AnswerResult { client, accepted });
    accepted
}

/// `ib_unregister_client`, logged as a detach.
pub fn unregister<K: Kernel, O: pnp_lifecycle_linux::LinuxPort>(
    d: &Driver<K, O>,
    log: &Log,
    client: u32,
    id: ClientId,
) {
    log.push(Obs::DetachBegin { client });
    if d.unregister_client(id).is_ok() {
        log.push(Obs::DetachReturned { client });
    }
}

/// A driver on the shuttle kernel and a manual clock at zero, device [`DEV`] probed with
/// one IB port, and one [`Recorder`] per `(vote, kind)`, numbered from 0.
pub fn shuttle_driver(
    config: Config,
    clients: &[(PciErsResult, ClientKind)],
) -> (
    Arc<Driver<pnp_lifecycle_runtime::ShuttleKernel>>,
    Log,
    Vec<ClientId>,
    Arc<ManualClock>,
) {
    let log = Log::new();
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let d = Arc::new(Driver::with_clock(
        config,
        RecordingHardware::new(&log),
        clock.clone(),
    ));
    d.probe(DEV, &[IB]).expect("probe");
    let ids = clients
        .iter()
        .enumerate()
        .map(|(i, (vote, kind))| {
            d.register_client(Recorder::yielding(i as u32, *vote, &log), *kind)
                .expect("register")
        })
        .collect();
    (d, log, ids, clock)
}

/// A timer thread's body on simulated time, until unload finished: once no work is
/// ready and no client's code runs but that of `stuck` (clients are fast next to
/// deadlines), jump to the next deadline the driver waits for.
pub fn timer<K: Kernel, O: pnp_lifecycle_linux::LinuxPort>(
    d: &Driver<K, O>,
    clock: &ManualClock,
    stuck: &[ClientId],
) {
    let stuck: Vec<_> = stuck.iter().filter_map(|id| d.handle(*id, DEV)).collect();
    loop {
        let next = d.runtime().wait_until(|o, _| {
            let busy = o
                .machine()
                .clients(DEV)
                .any(|(h, _)| !stuck.contains(&h) && o.client_code_running(h));
            match o.unload_finished() {
                true => Some(None),
                false if busy || o.work_ready() => None,
                false => o.poll_timeout().map(Some),
            }
        });
        let Ok(Some(t)) = next else { return };
        clock.set(t);
        let _ = d.timeout();
    }
}

/// Schedules per shuttle scheduler and scenario: `PNP_LINUX_SHUTTLE_ITERS`, else
/// `default`.
pub fn iterations(default: usize) -> usize {
    std::env::var("PNP_LINUX_SHUTTLE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Run `scenario` under shuttle's random and PCT (depth 3) schedulers, `iters` schedules
/// each, and print the count. Returns the number of schedules run.
pub fn explore(name: &str, iters: usize, scenario: impl Fn() + Send + Sync + 'static) -> usize {
    let scenario = Arc::new(scenario);
    let s = scenario.clone();
    shuttle::check_random(move || s(), iters);
    shuttle::check_pct(move || scenario(), iters, 3);
    println!("linux shuttle {name}: {iters} random + {iters} PCT schedules");
    2 * iters
}
