//! The Windows port's test machinery (tests and fuzzing only): a recording [`Os`] wrapper
//! and hardware that log what the port's clients, hardware and IRPs observed into the
//! common oracle's [`Log`], a shuttle [`World`] with recording mlx4 clients, the
//! cooperative schedule harness [`race::run`], the planted port faults [`planted`], and
//! recording KMDF callbacks [`kmdf`].

pub mod kmdf;
pub mod planted;
pub mod race;
pub mod scenarios;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use pnp_lifecycle::{
    ClientHandle, ClientKind, Config, DeviceId, Event, HardwareCommand, Input, ResetResult,
    StartResult, Tick,
};
use pnp_lifecycle_runtime::{
    Completion, Kernel, ManualClock, Monitor, News, Os, ShuttleKernel, ShuttleMonitor,
};
use pnp_lifecycle_windows::{
    Callback, Driver, Hal, Irp, MlxInterface, NtStatus, PnpMinor, WindowsOs, WindowsVocabulary,
};

use crate::observed::{check, Log, Obs, Seen};
use kmdf::KmdfRecorder;

/// The device every scenario uses.
pub const DEV: DeviceId = DeviceId(0);

/// The test's small numbers for client handles (the oracle indexes by them).
#[derive(Debug, Clone, Default)]
pub struct Ids(Arc<Mutex<Vec<ClientHandle>>>);

impl Ids {
    /// The number of `client`, given on first sight.
    pub fn of(&self, client: ClientHandle) -> u32 {
        let mut ids = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let pos = ids.iter().position(|c| *c == client).unwrap_or_else(|| {
            ids.push(client);
            ids.len() - 1
        });
        pos as u32
    }
}

/// An [`Os`] wrapper that logs each callback's entry and return, each hardware command and
/// each fence, then hands the work to the port's own vocabulary.
pub struct Recorded<O> {
    inner: O,
    log: Log,
    ids: Ids,
}

impl<O> Recorded<O> {
    /// Record around `inner`.
    pub fn new(inner: O, log: Log, ids: Ids) -> Self {
        Recorded { inner, log, ids }
    }
}

impl<K: Kernel, O: WindowsVocabulary<K>> WindowsVocabulary<K> for Recorded<O> {
    fn windows(&self) -> &WindowsOs<K> {
        self.inner.windows()
    }
}

impl<O: Os> Os for Recorded<O> {
    type Callback = O::Callback;
    type Request = O::Request;
    type Job = O::Job;

    fn call(&self, callback: &O::Callback, client: ClientHandle, event: Event) -> Option<Input> {
        let id = self.ids.of(client);
        self.log.push(Obs::Enter {
            client: id,
            device: client.device,
            seen: Seen::Event(event),
        });
        let answer = self.inner.call(callback, client, event);
        self.log.push(Obs::Exit { client: id });
        answer
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        self.log.push(Obs::Hardware { device, command });
        self.inner.hardware(device, command)
    }

    fn complete(&self, request: O::Request, completion: Completion) {
        self.inner.complete(request, completion);
    }

    fn job(&self, job: O::Job) -> Option<Input> {
        self.inner.job(job)
    }

    fn news(&self, news: News) {
        if let News::Fenced { client, overran } = news {
            self.log.push(Obs::Fenced {
                client: self.ids.of(client),
                device: client.device,
                overran,
            });
        }
        self.inner.news(news);
    }
}

/// What a client's next operation does once it touched the hardware ([`TestHal::hold`]).
#[derive(Debug, Clone)]
pub enum Hold {
    /// It never ends by itself (a process spinning on its doorbell page): it waits until
    /// its path is cut ([`Hal::cut_client`]), then its last access hits nothing.
    Stuck,
    /// It waits until `gate` opens, then touches the hardware `touches` more times (an
    /// operation still running when its client's fence overran).
    Until(Arc<ShuttleMonitor<bool>>, usize),
}

/// The hardware as clients reach it: a reset in progress, released resources, and the
/// clients whose path was cut (their accesses hit nothing).
#[derive(Debug, Default)]
struct Hw {
    resetting: bool,
    released: bool,
    cut: Vec<ClientHandle>,
    missed: usize,
    holds: Vec<(ClientHandle, Hold)>,
}

/// Hardware that logs each client operation and yields inside it (and inside a reset) so
/// the scheduler can run others meanwhile. An operation touches the hardware as it begins
/// and as it ends (and, held, in between). A touch while the hardware resets, or after its
/// resources were released, panics (I12 seen from the hardware) — unless the client's path
/// was cut first: then the touch hits nothing (an unmapped page), and is counted.
pub struct TestHal {
    log: Log,
    ids: Ids,
    yields: usize,
    reset: ResetResult,
    hw: Mutex<Hw>,
    /// Bumped on every cut: a [`Hold::Stuck`] operation waits on it (shuttle only).
    cuts: Mutex<Option<Arc<ShuttleMonitor<usize>>>>,
    invalidations: AtomicUsize,
}

impl TestHal {
    /// Hardware whose operations and resets yield `yields` times under shuttle (0 outside
    /// shuttle) and whose reset ends with `reset`.
    pub fn new(log: Log, ids: Ids, yields: usize, reset: ResetResult) -> Self {
        TestHal {
            log,
            ids,
            yields,
            reset,
            hw: Mutex::new(Hw::default()),
            cuts: Mutex::new(None),
            invalidations: AtomicUsize::new(0),
        }
    }

    /// How many times the port called `IoInvalidateDeviceState`.
    pub fn invalidations(&self) -> usize {
        self.invalidations.load(Ordering::SeqCst)
    }

    /// `client`'s next operation is held as `hold` says (under shuttle only).
    pub fn hold(&self, client: ClientHandle, hold: Hold) {
        self.cuts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| Arc::new(ShuttleMonitor::new(0)));
        self.hw().holds.push((client, hold));
    }

    /// Whether `client`'s path was cut.
    pub fn is_cut(&self, client: ClientHandle) -> bool {
        self.hw().cut.contains(&client)
    }

    /// Accesses that hit nothing because their client's path was cut.
    pub fn missed(&self) -> usize {
        self.hw().missed
    }

    fn hw(&self) -> std::sync::MutexGuard<'_, Hw> {
        self.hw.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn pause(&self) {
        for _ in 0..self.yields {
            shuttle::thread::yield_now();
        }
    }

    /// One access of `client` to the hardware, atomic with the cut and the reset.
    fn touch(&self, client: ClientHandle, id: u32) {
        let mut hw = self.hw();
        if hw.cut.contains(&client) {
            hw.missed += 1;
            return;
        }
        assert!(
            !hw.resetting,
            "I12 (hardware): client {id}'s access while the hardware resets"
        );
        assert!(
            !hw.released,
            "client {id}'s access after the hardware was released"
        );
    }
}

impl Hal for TestHal {
    fn start(&self, _: DeviceId) -> StartResult {
        self.hw().released = false;
        StartResult::Started
    }
    fn reset(&self, _: DeviceId) -> ResetResult {
        self.hw().resetting = true;
        for _ in 0..4 {
            self.pause(); // a reset takes longer than an operation
        }
        self.hw().resetting = false;
        self.reset
    }
    fn shutdown(&self, _: DeviceId) {}
    fn release(&self, _: DeviceId) {
        self.hw().released = true;
    }
    fn client_op(&self, device: DeviceId, client: ClientHandle) {
        let id = self.ids.of(client);
        self.log.push(Obs::OperationBegin { client: id, device });
        self.touch(client, id);
        self.pause();
        let hold = {
            let mut hw = self.hw();
            let at = hw.holds.iter().position(|(c, _)| *c == client);
            at.map(|i| hw.holds.swap_remove(i).1)
        };
        match hold {
            Some(Hold::Stuck) => {
                let cuts = self
                    .cuts
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                if let Some(cuts) = cuts {
                    cuts.wait_until(|_| self.is_cut(client).then_some(()));
                }
            }
            Some(Hold::Until(gate, touches)) => {
                gate.wait_until(|open| open.then_some(()));
                for _ in 0..touches {
                    self.touch(client, id);
                    self.pause();
                }
            }
            None => {}
        }
        self.touch(client, id);
        self.log.push(Obs::OperationEnd { client: id, device });
    }
    fn cut_client(&self, _: DeviceId, client: ClientHandle) {
        self.hw().cut.push(client);
        let cuts = self
            .cuts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(cuts) = cuts {
            cuts.with(|n| *n += 1);
        }
    }
    fn invalidate_device_state(&self, _: DeviceId) {
        self.invalidations.fetch_add(1, Ordering::SeqCst);
    }
}

/// The recording vocabulary a shuttle world runs on.
pub type RecordedOs<K> = Recorded<WindowsOs<K>>;

/// An mlx4 client of a [`World`]: its number, interface and the events its callback queued.
pub struct Client<K: Kernel, O: WindowsVocabulary<K>> {
    /// The oracle's number for it.
    pub id: u32,
    /// Its interface.
    pub iface: MlxInterface<K, O>,
    inbox: Arc<K::Monitor<VecDeque<Event>>>,
}

/// A started driver under shuttle with recording clients, hardware and IRPs.
pub struct World<K: Kernel = ShuttleKernel, O: WindowsVocabulary<K> = RecordedOs<K>> {
    /// The driver.
    pub driver: Driver<K, O>,
    /// What was observed.
    pub log: Log,
    /// The clients' numbers.
    pub ids: Ids,
    /// The clock (moves only when a test moves it).
    pub clock: Arc<ManualClock>,
    /// The driver writer's KMDF callbacks, if the world has them ([`World::powered`]).
    pub kmdf: Option<Arc<KmdfRecorder>>,
    /// The hardware.
    pub hal: Arc<TestHal>,
    irps: Mutex<Vec<Arc<Irp<K>>>>,
    dispatch: Mutex<Option<PnpDispatch<K, O>>>,
}

/// A substitute for [`Driver::dispatch_pnp`] (a planted fault's).
pub type PnpDispatch<K, O> = fn(&Driver<K, O>, &Arc<Irp<K>>) -> NtStatus;

impl World {
    /// A started world on the recording vocabulary, under shuttle.
    pub fn new() -> Arc<Self> {
        Self::with(ResetResult::Succeeded, |os| os)
    }

    /// Like [`Self::new`], the vocabulary carrying the hardware commands out through
    /// recording KMDF callbacks ([`World::kmdf`]) that yield inside.
    pub fn powered() -> Arc<Self> {
        Self::build(
            ResetResult::Succeeded,
            Some(Arc::new(KmdfRecorder::new(2))),
            |os| os,
        )
    }
}

impl<K: Kernel, O: WindowsVocabulary<K>> World<K, O> {
    /// A started world whose hardware reset ends with `reset`, its vocabulary wrapped by
    /// `wrap` (a planted fault; `|os| os` for none).
    pub fn with(reset: ResetResult, wrap: impl FnOnce(RecordedOs<K>) -> O) -> Arc<Self> {
        Self::build(reset, None, wrap)
    }

    /// Like [`Self::with`], with KMDF callbacks `kmdf` if given.
    pub fn build(
        reset: ResetResult,
        kmdf: Option<Arc<KmdfRecorder>>,
        wrap: impl FnOnce(RecordedOs<K>) -> O,
    ) -> Arc<Self> {
        let (log, ids) = (Log::new(), Ids::default());
        let test_hal = Arc::new(TestHal::new(log.clone(), ids.clone(), 8, reset));
        let hal: Arc<dyn Hal> = test_hal.clone();
        let clock = Arc::new(ManualClock::new(Tick(0)));
        let vocabulary = match &kmdf {
            Some(k) => WindowsOs::with_kmdf(hal.clone(), k.clone()),
            None => WindowsOs::new(hal.clone()),
        };
        let os = wrap(Recorded::new(vocabulary, log.clone(), ids.clone()));
        let driver = Driver::with_os(Config::DEFAULT, hal, clock.clone(), os);
        let world = Arc::new(World {
            driver,
            log,
            ids,
            clock,
            kmdf,
            hal: test_hal,
            irps: Mutex::new(Vec::new()),
            dispatch: Mutex::new(None),
        });
        world.driver.add_device(DEV).expect("AddDevice");
        assert_eq!(world.pnp(PnpMinor::StartDevice), NtStatus::SUCCESS);
        world
    }

    /// The PnP manager (or the power manager, for a power minor code) sends one IRP and
    /// waits for its completion.
    pub fn pnp(&self, minor: PnpMinor) -> NtStatus {
        self.pnp_tagged(minor, None)
    }

    /// Like [`Self::pnp`], the IRP carrying the caller token `token` (default: its own
    /// number; the oracle always gets a unique one).
    pub fn pnp_tagged(&self, minor: PnpMinor, token: Option<u32>) -> NtStatus {
        let id = {
            let mut irps = self.irps.lock().unwrap_or_else(PoisonError::into_inner);
            let id = irps.len() as u32;
            let irp = Irp::new(DEV, minor, token.unwrap_or(id));
            irps.push(irp);
            id
        };
        let irp =
            Arc::clone(&self.irps.lock().unwrap_or_else(PoisonError::into_inner)[id as usize]);
        self.log.push(Obs::RequestSent { id });
        let dispatch = *self.dispatch.lock().unwrap_or_else(PoisonError::into_inner);
        if minor.is_power() {
            self.driver.dispatch_power(&irp);
        } else if let Some(dispatch) = dispatch {
            dispatch(&self.driver, &irp);
        } else {
            self.driver.dispatch_pnp(&irp);
        }
        let status = irp.wait();
        self.log.push(Obs::RequestCompleted {
            id,
            success: status.is_success(),
        });
        status
    }

    /// From now on, PnP IRPs go through `dispatch` instead of [`Driver::dispatch_pnp`].
    pub fn set_pnp_dispatch(&self, dispatch: PnpDispatch<K, O>) {
        *self.dispatch.lock().unwrap_or_else(PoisonError::into_inner) = Some(dispatch);
    }

    /// Register a client whose callback queues each event, then runs `hook`.
    pub fn register_with(
        &self,
        kind: ClientKind,
        hook: impl Fn(Event) + Send + Sync + 'static,
    ) -> Option<Client<K, O>> {
        let inbox: Arc<K::Monitor<VecDeque<Event>>> = Arc::new(Monitor::new(VecDeque::new()));
        let queue = Arc::clone(&inbox);
        let callback: Callback = Arc::new(move |event| {
            queue.with(|q| q.push_back(event));
            hook(event);
        });
        let iface = self.driver.register_client(DEV, kind, callback).ok()?;
        Some(Client {
            id: self.ids.of(iface.handle()),
            iface,
            inbox,
        })
    }

    /// Register a trusted client.
    pub fn register(&self) -> Option<Client<K, O>> {
        self.register_with(ClientKind::Trusted, |_| {})
    }

    /// A blocking unregister, logged (after unload it is refused: the client is gone).
    pub fn unregister(&self, id: u32, iface: &MlxInterface<K, O>) {
        self.log.push(Obs::DetachBegin { client: id });
        let result = iface.unregister();
        assert!(
            matches!(result, Ok(_) | Err(NtStatus::NO_SUCH_DEVICE)),
            "a blocking unregister outside callbacks: {result:?}"
        );
        self.log.push(Obs::DetachReturned { client: id });
    }

    /// A client's thread: `reset_request` first if `request`, then answer RESET with
    /// `reset_execute`, acquire the fresh interface on RESET_END, detach on Removed or
    /// Revoked.
    pub fn run_client(&self, client: Client<K, O>, request: bool) {
        let Client {
            id,
            mut iface,
            inbox,
        } = client;
        if request {
            let _ = iface.reset_request();
        }
        loop {
            match inbox.wait_until(VecDeque::pop_front) {
                Event::Reset => {
                    self.log.push(Obs::AnswerTried {
                        client: id,
                        device: DEV,
                    });
                    let accepted = iface.reset_execute().is_ok();
                    self.log.push(Obs::AnswerResult {
                        client: id,
                        accepted,
                    });
                }
                Event::ResetEnd { epoch } => {
                    if let Ok(fresh) = iface.acquire() {
                        assert!(fresh.epoch() >= epoch, "RESET_END's epoch or a newer one");
                        iface = fresh;
                    }
                }
                Event::Removed { .. } | Event::Revoked => {
                    self.unregister(id, &iface);
                    return;
                }
                _ => {}
            }
        }
    }

    /// `DriverUnload`, logged.
    pub fn unload(&self) {
        self.driver.unload().expect("unload is accepted once");
        self.log.push(Obs::UnloadReturned);
    }

    /// The oracle over everything observed, every IRP completed exactly once, and no
    /// runtime anomaly.
    pub fn verdict(&self) -> Result<(), String> {
        let log = self.log.snapshot();
        check(&log, true).map_err(|e| format!("{e}\n{log:#?}"))?;
        for irp in self
            .irps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            if irp.completions() != 1 {
                return Err(format!("{irp:?} completed {} times", irp.completions()));
            }
        }
        match self.driver.runtime().inspect(|o| o.anomalies()) {
            0 => Ok(()),
            n => Err(format!("{n} runtime anomalies")),
        }
    }

    /// Panic unless [`Self::verdict`] holds.
    pub fn finish(&self) {
        if let Err(e) = self.verdict() {
            panic!("{e}");
        }
    }
}

/// Run `scenario` under shuttle's random and PCT schedulers, `iterations` each; returns
/// the number of schedules run.
pub fn both_schedulers(scenario: fn(), iterations: usize) -> usize {
    shuttle::check_random(scenario, iterations);
    shuttle::check_pct(scenario, iterations, 3);
    2 * iterations
}

/// Schedules per scheduler: `WINDOWS_SHUTTLE_ITERS`, else `default`.
pub fn iterations(default: usize) -> usize {
    std::env::var("WINDOWS_SHUTTLE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
