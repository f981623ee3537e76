//! A small owner for the tests: feeds one input, drains every output, keeps a log.
#![allow(dead_code)]

use pnp_lifecycle::*;
use std::collections::HashMap;

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
    /// Every event each client received, in order.
    pub events: HashMap<ClientHandle, Vec<Event>>,
    pub next_token: u32,
}

impl<const D: usize, const C: usize, const P: usize, const Q: usize> Owner<D, C, P, Q> {
    pub fn new(config: Config) -> Self {
        Owner {
            m: Lifecycle::new(config),
            events: HashMap::new(),
            next_token: 1,
        }
    }

    pub fn token(&mut self) -> RequestToken {
        self.next_token += 1;
        RequestToken(self.next_token)
    }

    /// Feed one input; return its reply and every output it produced.
    pub fn step(&mut self, input: Input) -> (Result<Reply, Error>, Vec<Output>) {
        let before = self.m.clone();
        let reply = self.m.handle(input);
        let outputs: Vec<Output> = core::iter::from_fn(|| self.m.poll_output()).collect();
        if reply.is_err() {
            assert_eq!(self.m, before, "refused {input:?} changed the machine");
            assert!(outputs.is_empty(), "refused {input:?} queued {outputs:?}");
        }
        assert_eq!(self.m.lost_outputs(), 0);
        for o in &outputs {
            if let Output::Notify { client, event } = o {
                self.events.entry(*client).or_default().push(*event);
            }
        }
        (reply, outputs)
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

    pub fn register(&mut self, device: DeviceId, kind: ClientKind) -> ClientHandle {
        match self.step(Input::Register { device, kind }).0 {
            Ok(Reply::Registered { client, .. }) => client,
            other => panic!("register refused: {other:?}"),
        }
    }

    /// Return every callback in flight.
    pub fn return_callbacks(&mut self, device: DeviceId) -> Vec<Output> {
        let mut outs = Vec::new();
        let clients: Vec<_> = self.m.clients(device).collect();
        for (handle, view) in clients {
            for _ in 0..view.callbacks_in_flight {
                outs.extend(self.ok(Input::CallbackDone { client: handle }));
            }
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

pub fn count_hw(outputs: &[Output], command: HardwareCommand) -> usize {
    outputs
        .iter()
        .filter(|o| matches!(o, Output::Hardware { command: c, .. } if *c == command))
        .count()
}
