//! The toy port of the runtime's reset-group tests: two devices declared one group, a log
//! of what the port saw, in order (shared by `tests/group.rs` and `tests/planted.rs`).

#![allow(dead_code)] // each test binary uses a part

use std::sync::{Arc, Mutex};

use pnp_lifecycle::{
    queue_capacity, ClientHandle, ClientKind, Config, CycleOutcome, DeviceId, Event, GroupId,
    HardwareCommand, Input, PhaseKind, PowerUpResult, ResetResult, StartResult, Tick,
};
use pnp_lifecycle_runtime::{
    Completion, Dispatch, GroupReset, ManualClock, News, Os, Runtime, ShuttleKernel,
};

pub const D0: DeviceId = DeviceId(0);
pub const D1: DeviceId = DeviceId(1);
pub const GROUP: GroupId = GroupId(0);

pub type Cb = Arc<dyn Fn(ClientHandle, Event) -> Option<Input> + Send + Sync>;
pub type Rt = Runtime<GroupToy, ShuttleKernel, 2, 4, 1, { queue_capacity(2, 4) }>;

/// What the toy port saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Told(ClientHandle, Event),
    Hardware(DeviceId, HardwareCommand),
    GroupReset(GroupReset),
    Cycle(DeviceId, CycleOutcome),
    Completed(u32, Completion),
}

#[derive(Default)]
pub struct GroupToy {
    log: Mutex<Vec<Seen>>,
}

impl GroupToy {
    pub fn push(&self, s: Seen) {
        self.log.lock().unwrap().push(s);
    }
    pub fn log(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }
}

impl Os for GroupToy {
    type Callback = Cb;
    type Request = u32;
    type Job = ();

    fn call(&self, cb: &Cb, client: ClientHandle, event: Event) -> Option<Input> {
        self.push(Seen::Told(client, event));
        cb(client, event)
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        self.push(Seen::Hardware(device, command));
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
                result: PowerUpResult::Powered,
            }),
            _ => None,
        }
    }

    fn group_reset(&self, reset: &GroupReset) -> Option<Input> {
        self.push(Seen::GroupReset(reset.clone()));
        shuttle::thread::yield_now(); // the reset takes a while
        Some(Input::ResetDone {
            device: reset.carrier,
            result: ResetResult::Succeeded,
        })
    }

    fn complete(&self, request: u32, completion: Completion) {
        self.push(Seen::Completed(request, completion));
    }

    fn news(&self, news: News) {
        if let News::CycleFinished { device, outcome } = news {
            self.push(Seen::Cycle(device, outcome));
        }
    }
}

/// A client that acks `RESET`, re-acquires after `RESET_END` and leaves when removed.
pub fn acker() -> Cb {
    Arc::new(|client, event| match event {
        Event::Reset => Some(Input::ResetExecute { client }),
        Event::ResetEnd { .. } => Some(Input::AcquireInterface { client }),
        Event::Removed { .. } => Some(Input::Unregister { client }),
        _ => None,
    })
}

/// A client that refuses `RESET` (mlx5's nack).
pub fn nacker() -> Cb {
    Arc::new(|client, event| match event {
        Event::Reset => Some(Input::ResetNack { client }),
        Event::Removed { .. } => Some(Input::Unregister { client }),
        _ => None,
    })
}

/// Two started devices declared one reset group, a client on each (`c0`, `c1`).
pub fn group_of_two(dispatch: Dispatch, c0: Cb, c1: Cb) -> (Arc<Rt>, ClientHandle, ClientHandle) {
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let rt: Arc<Rt> = Runtime::new(Config::DEFAULT, GroupToy::default(), clock, dispatch);
    for (i, dev) in [D0, D1].into_iter().enumerate() {
        rt.feed(Input::AddDevice { device: dev }).unwrap();
        rt.with(|o, now| {
            o.submit(now, 100 + i as u32, |token| Input::Start {
                device: dev,
                token,
            })
        })
        .unwrap();
        rt.wait_until(|o, _| (o.machine().phase(dev) == Some(PhaseKind::Running)).then_some(()))
            .unwrap();
        rt.with(|o, now| o.join_reset_group(now, dev, GROUP))
            .unwrap();
    }
    let h0 = rt
        .with(|o, now| o.register(now, D0, ClientKind::Trusted, c0))
        .unwrap()
        .0;
    let h1 = rt
        .with(|o, now| o.register(now, D1, ClientKind::Trusted, c1))
        .unwrap()
        .0;
    (rt, h0, h1)
}

/// The client on the second member never answers `RESET`; the second member is
/// surprise-removed mid-cycle. The group's one reset must cover the first member only,
/// through it; the first client ends at epoch 1, the silent one is told `Removed`.
/// Panics with the log if not. `setup` runs on the fresh runtime (a planted fault).
pub fn surprise_removal_mid_cycle(setup: fn(&Arc<Rt>)) {
    let silent: Cb = Arc::new(|client, event| match event {
        Event::Removed { .. } => Some(Input::Unregister { client }),
        _ => None,
    });
    let (rt, h0, h1) = group_of_two(Dispatch::Inline, acker(), silent);
    setup(&rt);
    rt.feed(Input::FatalError { device: D0 }).unwrap();
    rt.feed(Input::SurpriseRemoval { device: D1 }).unwrap();
    rt.wait_until(|o, _| (o.machine().phase(D0) == Some(PhaseKind::Running)).then_some(()))
        .unwrap();
    let log = rt.os().log();
    let resets: Vec<&GroupReset> = log
        .iter()
        .filter_map(|s| match s {
            Seen::GroupReset(r) => Some(r),
            _ => None,
        })
        .collect();
    let only_d0 = GroupReset {
        group: GROUP,
        carrier: D0,
        members: vec![D0],
    };
    assert_eq!(
        resets,
        [&only_d0],
        "a reset through a vanished member: {log:?}"
    );
    let told = |c| -> Vec<Event> {
        log.iter()
            .filter_map(|s| match s {
                Seen::Told(x, e) if *x == c => Some(*e),
                _ => None,
            })
            .collect()
    };
    let end = Event::ResetEnd {
        epoch: pnp_lifecycle::Epoch(1),
    };
    assert_eq!(told(h0), [Event::Reset, end], "{log:?}");
    let removed = Event::Removed { surprise: true };
    assert_eq!(told(h1), [Event::Reset, removed], "{log:?}");
    rt.unload().unwrap();
}
