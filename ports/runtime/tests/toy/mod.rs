//! The toy port the runtime's tests share: a log of what it saw, in order, and hardware
//! that can be slow (it yields to shuttle's scheduler inside each command).

#![allow(dead_code)] // each test binary uses a part

use std::sync::{Arc, Mutex};

use pnp_lifecycle::{
    queue_capacity, ClientHandle, ClientKind, Config, DeviceId, Event, HardwareCommand, Input,
    PhaseKind, ResetResult, StartResult, Tick,
};
use pnp_lifecycle_runtime::{
    Completion, Dispatch, ManualClock, News, Os, Owner, Runtime, ShuttleKernel,
};

pub const DEV: DeviceId = DeviceId(0);
pub type Cb = Arc<dyn Fn(ClientHandle, Event) -> Option<Input> + Send + Sync>;
pub type Rt = Runtime<Toy, ShuttleKernel, 1, 4, 1, { queue_capacity(1, 4) }>;
pub type Plain = Owner<Toy, 1, 4, 1, { queue_capacity(1, 4) }>;

/// What the toy port saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Enter(ClientHandle, Event),
    Exit(ClientHandle),
    Hardware(HardwareCommand),
    /// The hardware command returned.
    HardwareDone(HardwareCommand),
    Completed(u32, Completion),
    Fenced(ClientHandle, bool),
    DeviceRemoved,
    UnloadMayFinish,
}

#[derive(Default)]
pub struct Toy {
    log: Mutex<Vec<Seen>>,
    /// Each hardware command yields this many times to shuttle's scheduler (0: none).
    slow: usize,
}

impl Toy {
    /// Hardware whose every command takes `yields` turns of shuttle's scheduler.
    pub fn slow(yields: usize) -> Self {
        Toy {
            slow: yields,
            ..Toy::default()
        }
    }
    pub fn push(&self, s: Seen) {
        self.log.lock().unwrap().push(s);
    }
    pub fn log(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }
}

impl Os for Toy {
    type Callback = Cb;
    type Request = u32;
    type Job = ();

    fn call(&self, cb: &Cb, client: ClientHandle, event: Event) -> Option<Input> {
        self.push(Seen::Enter(client, event));
        let answer = cb(client, event);
        self.push(Seen::Exit(client));
        answer
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        self.push(Seen::Hardware(command));
        for _ in 0..self.slow {
            shuttle::thread::yield_now();
        }
        self.push(Seen::HardwareDone(command));
        match command {
            HardwareCommand::Start => Some(Input::StartDone {
                device,
                result: StartResult::Started,
            }),
            HardwareCommand::Reset => Some(Input::ResetDone {
                device,
                result: ResetResult::Succeeded,
            }),
            HardwareCommand::PowerDown => Some(Input::PowerDownDone { device }),
            HardwareCommand::PowerUp => Some(Input::PowerUpDone {
                device,
                result: pnp_lifecycle::PowerUpResult::Powered,
            }),
            _ => None,
        }
    }

    fn complete(&self, request: u32, completion: Completion) {
        self.push(Seen::Completed(request, completion));
    }

    fn news(&self, news: News) {
        match news {
            News::Fenced { client, overran } => self.push(Seen::Fenced(client, overran)),
            News::DeviceRemoved { .. } => self.push(Seen::DeviceRemoved),
            News::UnloadMayFinish => self.push(Seen::UnloadMayFinish),
            _ => {}
        }
    }
}

pub fn quiet() -> Cb {
    Arc::new(|_, _| None)
}

/// A started device, fed through the runtime.
pub fn started(rt: &Arc<Rt>) {
    rt.feed(Input::AddDevice { device: DEV }).unwrap();
    rt.with(|o, now| o.submit(now, 1, |token| Input::Start { device: DEV, token }))
        .unwrap();
    rt.wait_until(|o, _| (o.machine().phase(DEV) == Some(PhaseKind::Running)).then_some(()))
        .unwrap();
}

fn completed(log: &[Seen], request: u32) -> Option<usize> {
    log.iter()
        .position(|s| matches!(s, Seen::Completed(r, _) if *r == request))
}

/// The OS's "the driver is done" — a request's completion, `DeviceRemoved`,
/// `UnloadMayFinish` — comes after every hardware command ordered before it returned.
/// Panics with the log if not.
pub fn done_after_teardown(log: &[Seen], remove: u32) {
    let returned = |c: HardwareCommand| {
        log.iter()
            .position(|s| *s == Seen::HardwareDone(c))
            .unwrap_or_else(|| panic!("{c:?} never returned: {log:?}"))
    };
    let teardown =
        returned(HardwareCommand::Shutdown).max(returned(HardwareCommand::ReleaseResources));
    let at = |what: &str, i: Option<usize>| {
        let i = i.unwrap_or_else(|| panic!("no {what}: {log:?}"));
        assert!(
            i > teardown,
            "{what} before the teardown returned (driver code still ran): {log:?}"
        );
    };
    at("remove completion", completed(log, remove));
    at(
        "DeviceRemoved",
        log.iter().position(|s| *s == Seen::DeviceRemoved),
    );
    at(
        "UnloadMayFinish",
        log.iter().position(|s| *s == Seen::UnloadMayFinish),
    );
}

/// A started device with one client (it leaves when told `Removed`) on hardware whose
/// commands are slow; the OS queries, then removes it while other threads carry work out
/// (with [`Dispatch::Inline`] a second thread pumps, as verbs threads do on Linux), then
/// unloads. `setup` runs on the fresh runtime (a planted fault). Checks
/// [`done_after_teardown`].
pub fn remove_behind_a_slow_teardown(dispatch: Dispatch, setup: fn(&Arc<Rt>)) {
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let rt: Arc<Rt> = Runtime::new(Config::DEFAULT, Toy::slow(3), clock, dispatch);
    setup(&rt);
    started(&rt);
    let leaves: Cb = Arc::new(|client, event| {
        matches!(event, Event::Removed { .. }).then_some(Input::Unregister { client })
    });
    rt.with(|o, now| o.register(now, DEV, ClientKind::Trusted, leaves))
        .unwrap();
    rt.with(|o, now| o.submit(now, 2, |token| Input::QueryRemove { device: DEV, token }))
        .unwrap();
    rt.wait_until(|_, _| completed(&rt.os().log(), 2).map(drop))
        .unwrap();
    let helper = (dispatch == Dispatch::Inline).then(|| {
        let rt = Arc::clone(&rt);
        shuttle::thread::spawn(move || {
            for _ in 0..6 {
                rt.pump();
                shuttle::thread::yield_now();
            }
        })
    });
    rt.with(|o, now| o.submit(now, 3, |token| Input::Remove { device: DEV, token }))
        .unwrap();
    // The PnP manager / PCI core sees the remove end here.
    rt.wait_until(|_, _| completed(&rt.os().log(), 3).map(drop))
        .unwrap();
    let seen_at_completion = rt.os().log();
    assert!(
        seen_at_completion.contains(&Seen::HardwareDone(HardwareCommand::ReleaseResources)),
        "remove completed while ReleaseResources still ran: {seen_at_completion:?}"
    );
    if let Some(h) = helper {
        h.join().unwrap();
    }
    rt.unload().unwrap();
    done_after_teardown(&rt.os().log(), 3);
}
