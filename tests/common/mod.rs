//! A small owner for the tests: keeps a clock, feeds one input at that clock, drains every
//! output, keeps a log, and checks the owner-visible rules on every step.
#![allow(dead_code)]

use pnp_lifecycle::*;
use std::collections::{HashMap, HashSet};

pub const DEV: DeviceId = DeviceId(0);
pub const P0: PhysPort = PhysPort(0);
pub const P1: PhysPort = PhysPort(1);

pub type M = Lifecycle<1, 4, 2, { queue_capacity(1, 4) }>;
pub type M2 = Lifecycle<2, 4, 2, { queue_capacity(2, 4) }>;

pub const IB: PortCaps = PortCaps {
    protocol: Protocol::Ib,
    max_mtu: 4096,
    atomics: true,
};
pub const ROCE: PortCaps = PortCaps {
    protocol: Protocol::Roce,
    max_mtu: 1024,
    atomics: false,
};

/// The owner of a machine, as a test sees it.
pub struct Owner<const D: usize, const C: usize, const P: usize, const Q: usize> {
    pub m: Lifecycle<D, C, P, Q>,
    /// The owner's clock: passed with every input.
    pub now: Tick,
    /// Every event each client received, in order.
    pub events: HashMap<ClientHandle, Vec<Event>>,
    pub next_token: u32,
    /// Clients that got their last event (`Removed`, `Revoked`), a fence, or whose slot
    /// was freed: nothing may be addressed to them any more.
    pub ended: HashSet<ClientHandle>,
    /// Clients fenced or freed: not even a fence may be asked for them again.
    pub gone: HashSet<ClientHandle>,
}

impl<const D: usize, const C: usize, const P: usize, const Q: usize> Owner<D, C, P, Q> {
    pub fn new(config: Config) -> Self {
        Owner {
            m: Lifecycle::new(config),
            now: Tick(0),
            events: HashMap::new(),
            next_token: 1,
            ended: HashSet::new(),
            gone: HashSet::new(),
        }
    }

    /// Another owner of a copy of this machine, at the same clock, with empty logs.
    pub fn fork(&self) -> Self {
        Owner {
            m: self.m.clone(),
            now: self.now,
            events: HashMap::new(),
            next_token: self.next_token + 1000,
            ended: HashSet::new(),
            gone: HashSet::new(),
        }
    }

    pub fn token(&mut self) -> RequestToken {
        self.next_token += 1;
        RequestToken(self.next_token)
    }

    /// Move the clock `ticks` forward.
    pub fn advance(&mut self, ticks: u64) -> &mut Self {
        self.now = self.now.after(ticks);
        self
    }

    /// Set the clock to `t` (tests of time going backwards may set it back).
    pub fn at(&mut self, t: u64) -> &mut Self {
        self.now = Tick(t);
        self
    }

    /// Feed one input at the owner's clock; return its reply and every output it produced.
    pub fn step(&mut self, input: Input) -> (Result<Reply, Error>, Vec<Output>) {
        let before = self.m.clone();
        let reply = self.m.handle(self.now, input);
        let outputs: Vec<Output> = core::iter::from_fn(|| self.m.poll_output()).collect();
        if reply.is_err() {
            assert_eq!(self.m, before, "refused {input:?} changed the machine");
            assert!(outputs.is_empty(), "refused {input:?} queued {outputs:?}");
        } else {
            assert_eq!(
                self.m.now(),
                self.now,
                "accepted {input:?} did not take the time"
            );
        }
        assert_eq!(self.m.lost_outputs(), 0);
        self.check_outputs(&before, input, &outputs);
        if let (Input::Unregister { client }, Ok(Reply::Unregistered(Unregistered::Now))) =
            (input, reply)
        {
            // I1: nothing is addressed to it from now on.
            self.ended.insert(client);
        }
        for o in &outputs {
            if let Output::Notify { client, event } = o {
                self.events.entry(*client).or_default().push(*event);
            }
        }
        (reply, outputs)
    }

    /// What every owner can see: at most one callback in flight per client (a second one
    /// comes only out of the `CallbackDone` that returns the first), and nothing addressed
    /// to a client after its last event, its fence or its slot's release.
    fn check_outputs(&mut self, before: &Lifecycle<D, C, P, Q>, input: Input, outputs: &[Output]) {
        let mut notified = HashSet::new();
        for o in outputs {
            match *o {
                Output::Notify { client, event } => {
                    assert!(
                        !self.ended.contains(&client),
                        "{event:?} addressed to {client:?} after its end ({input:?})"
                    );
                    assert!(
                        notified.insert(client),
                        "two callbacks to {client:?} from one input {input:?}: {outputs:?}"
                    );
                    let had = before.client(client).is_some_and(|v| v.callback_in_flight);
                    assert!(
                        !had || matches!(
                            input,
                            Input::CallbackDone { client: c }
                                | Input::CallbackDoneWith { client: c, .. } if c == client
                        ),
                        "{event:?} to {client:?} while its callback is in flight ({input:?})"
                    );
                    assert!(
                        self.m.client(client).is_some_and(|v| v.callback_in_flight),
                        "{client:?} notified but no callback in flight"
                    );
                    if matches!(event, Event::Removed { .. } | Event::Revoked) {
                        self.ended.insert(client);
                    }
                }
                Output::Fence { client } => {
                    // A fence may follow `Removed` or `Revoked` (their callback hangs).
                    assert!(self.gone.insert(client), "second fence of {client:?}");
                    let view = self.m.client(client);
                    assert!(
                        view.is_none_or(|v| v.fence_requested
                            && matches!(v.state, ClientState::Revoked | ClientState::Unregistered)),
                        "{client:?} fenced but {view:?}"
                    );
                    self.ended.insert(client);
                }
                Output::ClientGone { client } => {
                    self.ended.insert(client);
                    assert!(
                        self.m.client(client).is_none(),
                        "{client:?} gone but still registered"
                    );
                    self.gone.insert(client);
                }
                _ => {}
            }
        }
    }

    /// Feed an input that must be accepted; return its outputs.
    pub fn ok(&mut self, input: Input) -> Vec<Output> {
        let (reply, outputs) = self.step(input);
        assert!(reply.is_ok(), "{input:?} refused: {reply:?}");
        outputs
    }

    /// Feed an input that must be refused with `error`.
    pub fn refused(&mut self, input: Input, error: Error) {
        let (reply, _) = self.step(input);
        assert_eq!(reply, Err(error), "{input:?}");
    }

    /// Feed `Timeout` at the owner's clock (early or spurious timeouts are allowed).
    pub fn timeout(&mut self) -> Vec<Output> {
        self.ok(Input::Timeout)
    }

    /// Move the clock to `t` and feed `Timeout`.
    pub fn timeout_at(&mut self, t: u64) -> Vec<Output> {
        self.at(t);
        self.timeout()
    }

    /// What a correct owner does when its timer fires: move the clock to `poll_timeout()`
    /// and feed `Timeout` then. Panics if the machine waits on no deadline.
    pub fn fire_timeout(&mut self) -> Vec<Output> {
        let due = self.m.poll_timeout().expect("no deadline to fire");
        assert!(
            due >= self.now,
            "deadline {due:?} in the past at {:?}",
            self.now
        );
        self.now = due;
        self.timeout()
    }

    pub fn register(&mut self, device: DeviceId, kind: ClientKind) -> ClientHandle {
        match self.step(Input::Register { device, kind }).0 {
            Ok(Reply::Registered { client, .. }) => client,
            other => panic!("register refused: {other:?}"),
        }
    }

    /// Return every callback in flight, and the ones each return hands over, until no
    /// client of the device has one in flight (fenced clients are the owner's fences, not
    /// callbacks: see [`Owner::finish_fences`]).
    pub fn return_callbacks(&mut self, device: DeviceId) -> Vec<Output> {
        let mut outs = Vec::new();
        for _ in 0..64 {
            let busy: Vec<ClientHandle> = self
                .m
                .clients(device)
                .filter(|(_, v)| v.callback_in_flight && !v.fence_requested)
                .map(|(h, _)| h)
                .collect();
            if busy.is_empty() {
                return outs;
            }
            for client in busy {
                outs.extend(self.ok(Input::CallbackDone { client }));
            }
        }
        panic!("callbacks keep coming: the mailbox is not bounded");
    }

    /// Report every fence the owner was asked for as done.
    pub fn finish_fences(&mut self, device: DeviceId) -> Vec<Output> {
        let fenced: Vec<ClientHandle> = self
            .m
            .clients(device)
            .filter(|(_, v)| v.fence_requested)
            .map(|(h, _)| h)
            .collect();
        let mut outs = Vec::new();
        for client in fenced {
            outs.extend(self.ok(Input::FenceDone { client }));
        }
        outs
    }

    /// Add and start a device with two configured ports (IB on both unless `mixed`).
    pub fn started(&mut self, device: DeviceId, mixed: bool) {
        self.ok(Input::AddDevice { device });
        self.ok(Input::ConfigurePort {
            device,
            port: P0,
            caps: IB,
        });
        self.ok(Input::ConfigurePort {
            device,
            port: P1,
            caps: if mixed { ROCE } else { IB },
        });
        let token = self.token();
        self.ok(Input::Start { device, token });
        self.ok(Input::StartDone {
            device,
            result: StartResult::Started,
        });
    }

    pub fn phase(&self, device: DeviceId) -> PhaseKind {
        self.m.phase(device).unwrap()
    }

    pub fn view(&self, client: ClientHandle) -> ClientView {
        self.m.client(client).expect("no such client")
    }

    pub fn events_of(&self, client: ClientHandle) -> Vec<Event> {
        self.events.get(&client).cloned().unwrap_or_default()
    }
}

pub fn owner() -> Owner<1, 4, 2, { queue_capacity(1, 4) }> {
    Owner::new(Config::DEFAULT)
}

pub fn notify(client: ClientHandle, event: Event) -> Output {
    Output::Notify { client, event }
}

pub fn hw(command: HardwareCommand) -> Output {
    Output::Hardware {
        device: DEV,
        command,
    }
}

pub fn complete(token: RequestToken, status: Status) -> Output {
    Output::Complete {
        device: DEV,
        token,
        status,
    }
}

pub fn finished(outcome: CycleOutcome) -> Output {
    Output::ResetCycleFinished {
        device: DEV,
        outcome,
    }
}

pub fn count_hw(outputs: &[Output], command: HardwareCommand) -> usize {
    outputs
        .iter()
        .filter(|o| matches!(o, Output::Hardware { command: c, .. } if *c == command))
        .count()
}
