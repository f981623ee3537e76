//! The WinOF mlx4 soft reset, racing a driver unload, as a readable timeline.
//!
//! Two kernel clients (IPoIB, SRP) and one user-space verbs context sit on an HCA. IPoIB
//! asks for a reset; the user-space context never answers and is revoked at its deadline;
//! the hardware resets; everybody gets RESET_END with the new epoch; stale handles are
//! refused until re-acquired. Then a second reset is requested and driver unload arrives
//! while the clients quiesce: the cycle aborts, every client is told Removed, and unload
//! finishes exactly once, after the last callback comes back.
//!
//! Run with `cargo run --example soft_reset`.

use pnp_lifecycle::*;

const HCA: DeviceId = DeviceId(0);
type Hca = Lifecycle<1, 8, 2, { queue_capacity(1, 8) }>;

/// What one input gave: the answer and the outputs drained after it.
struct Fed {
    reply: Result<Reply, Error>,
    outputs: Vec<Output>,
}

struct Timeline {
    m: Hca,
    step: u32,
    names: Vec<(ClientHandle, &'static str)>,
}

impl Timeline {
    fn name(&self, c: ClientHandle) -> String {
        self.names
            .iter()
            .find(|(h, _)| *h == c)
            .map(|(_, n)| n.to_string())
            .unwrap_or_else(|| format!("client#{}", c.slot))
    }

    fn describe(&self, o: &Output) -> String {
        match *o {
            Output::Notify { client, event } => {
                format!("notify {:<6} {:?}", self.name(client), event)
            }
            Output::Hardware { command, .. } => format!("hardware {command:?}"),
            Output::Complete { token, status, .. } => {
                format!("complete request {} {:?}", token.0, status)
            }
            Output::ResetCycleFinished { outcome, .. } => {
                format!("reset cycle finished: {outcome:?}")
            }
            Output::ClientGone { client } => format!("{} gone (slot free)", self.name(client)),
            Output::DeviceRemoved { .. } => "device removed".to_string(),
            Output::UnloadMayFinish => "UNLOAD MAY FINISH".to_string(),
        }
    }

    /// Feed one input, print it, its answer, its outputs and the state after it.
    fn feed(&mut self, label: &str, input: Input) -> Fed {
        self.step += 1;
        let reply = self.m.handle(input);
        let outputs: Vec<Output> = core::iter::from_fn(|| self.m.poll_output()).collect();
        let answer = match &reply {
            Ok(Reply::Accepted) => "ok".to_string(),
            Ok(r) => format!("{r:?}"),
            Err(e) => format!("REFUSED {e:?}"),
        };
        println!("{:>3}. {label:<44} -> {answer}", self.step);
        for o in &outputs {
            println!("       | {}", self.describe(o));
        }
        let phase = self.m.phase(HCA).map_or("?".into(), |p| format!("{p:?}"));
        println!(
            "       state: {phase}, epoch {}, next tick {:?}",
            self.m.epoch(HCA).map_or(0, |e| e.0),
            self.m.poll_timeout().map(|t| t.0)
        );
        Fed { reply, outputs }
    }

    /// The owner's side of every callback: deliver, then hand the token back.
    fn return_callbacks(&mut self, fed: &Fed) {
        for o in &fed.outputs {
            if let Output::Notify { client, .. } = o {
                let who = self.name(*client);
                self.feed(
                    &format!("{who} callback returns"),
                    Input::CallbackDone { client: *client },
                );
            }
        }
    }

    fn register(&mut self, name: &'static str, kind: ClientKind) -> ClientHandle {
        let Fed { reply, .. } = self.feed(
            &format!("{name} registers ({kind:?})"),
            Input::Register { device: HCA, kind },
        );
        let Ok(Reply::Registered { client, .. }) = reply else {
            panic!("registration refused: {reply:?}");
        };
        self.names.push((client, name));
        client
    }
}

fn main() {
    let mut t = Timeline {
        m: Hca::new(Config::DEFAULT),
        step: 0,
        names: Vec::new(),
    };
    println!("== pnp-lifecycle: WinOF soft reset racing driver unload ==");
    println!(
        "   (ticks are milliseconds; user space has {} ms to answer RESET)\n",
        Config::DEFAULT.untrusted_ack_timeout
    );

    t.feed("AddDevice", Input::AddDevice { device: HCA });
    let ib = PortCaps {
        protocol: Protocol::Ib,
        max_mtu: 4096,
        atomics: true,
    };
    for port in [PhysPort(0), PhysPort(1)] {
        t.feed(
            &format!("configure physical port {}", port.0),
            Input::ConfigurePort {
                device: HCA,
                port,
                caps: ib,
            },
        );
    }
    t.feed(
        "IRP_MN_START_DEVICE (request 1)",
        Input::Start {
            device: HCA,
            token: RequestToken(1),
        },
    );
    t.feed(
        "hardware start reports Started",
        Input::StartDone {
            device: HCA,
            result: StartResult::Started,
        },
    );

    let ipoib = t.register("ipoib", ClientKind::Trusted);
    let srp = t.register("srp", ClientKind::Trusted);
    let uverbs = t.register("uverbs", ClientKind::Untrusted);

    println!("\n-- ipoib asks for a soft reset --");
    let out = t.feed(
        "ipoib: reset_request",
        Input::ResetRequest { client: ipoib },
    );
    t.return_callbacks(&out);
    t.feed(
        "ipoib: reset_execute (quiesced)",
        Input::ResetExecute { client: ipoib },
    );
    t.feed(
        "srp: reset_request (coalesces)",
        Input::ResetRequest { client: srp },
    );
    t.feed(
        "srp: reset_execute (quiesced)",
        Input::ResetExecute { client: srp },
    );
    t.feed(
        "tick 999 ms: uverbs still silent",
        Input::Tick { now: Tick(999) },
    );
    let out = t.feed(
        "tick 1000 ms: the deadline",
        Input::Tick { now: Tick(1000) },
    );
    t.return_callbacks(&out);
    t.feed(
        "uverbs: pokes the hardware anyway",
        Input::Access {
            client: uverbs,
            epoch: Epoch(0),
            what: Access::HardwareOp,
        },
    );
    let out = t.feed(
        "reset worker: hardware reset succeeded",
        Input::ResetDone {
            device: HCA,
            result: ResetResult::Succeeded,
        },
    );
    t.return_callbacks(&out);
    t.feed(
        "ipoib: post work with its old interface",
        Input::Access {
            client: ipoib,
            epoch: Epoch(0),
            what: Access::HardwareOp,
        },
    );
    t.feed(
        "ipoib: acquire the fresh interface",
        Input::AcquireInterface { client: ipoib },
    );
    t.feed(
        "ipoib: post work at epoch 1",
        Input::Access {
            client: ipoib,
            epoch: Epoch(1),
            what: Access::HardwareOp,
        },
    );

    println!("\n-- a catastrophic-error interrupt, then driver unload while clients quiesce --");
    t.feed(
        "catastrophic error interrupt",
        Input::FatalError { device: HCA },
    );
    t.feed(
        "ipoib: reset_execute",
        Input::ResetExecute { client: ipoib },
    );
    let removed = t.feed("DriverUnload", Input::Unload);
    t.feed(
        "srp: reset_execute (too late)",
        Input::ResetExecute { client: srp },
    );
    t.feed(
        "IRP_MN_REMOVE_DEVICE (request 2)",
        Input::Remove {
            device: HCA,
            token: RequestToken(2),
        },
    );
    t.feed("ipoib: detaches", Input::Unregister { client: ipoib });
    t.feed(
        "uverbs: context closes",
        Input::Unregister { client: uverbs },
    );
    t.feed("srp: detaches", Input::Unregister { client: srp });
    t.feed(
        "ipoib: detaches again (idempotent)",
        Input::Unregister { client: ipoib },
    );
    // RESET callbacks of the second cycle, then the Removed ones.
    for c in [ipoib, srp] {
        let name = t.name(c);
        t.feed(
            &format!("{name} RESET callback returns"),
            Input::CallbackDone { client: c },
        );
    }
    t.return_callbacks(&removed);
    t.feed("anything after unload", Input::Tick { now: Tick(2000) });
    assert_eq!(t.m.driver_phase(), DriverPhase::Unloaded);
    println!("\nunload finished exactly once; the machine now refuses every input.");
}
