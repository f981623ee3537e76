//! The WinOF mlx4 soft reset, racing a driver unload, as a readable timeline.
//!
//! Two kernel clients (IPoIB, SRP) and one user-space verbs context sit on an HCA. A minute
//! after start, IPoIB asks for a reset: every deadline counts from that moment, because the
//! owner passes its clock with every input. The user-space context never answers and is
//! revoked at its deadline; the hardware resets; everybody gets RESET_END with the new
//! epoch; stale handles are refused until re-acquired. Then a second user-space context's
//! callback hangs: at the callback deadline it is revoked and the owner is asked to fence
//! it. Finally a catastrophic error starts a second reset and driver unload arrives while
//! the clients quiesce: the cycle aborts, every client is told Removed, and unload finishes
//! exactly once, after the last callback comes back.
//!
//! A hardware operation races the first reset: SRP posts one last I/O before it answers
//! `RESET`, and the hardware reset waits for it to finish. At the end the library's own
//! flight recorder ([`Recorder`]) prints the last inputs it kept, as an owner would dump
//! it after a failure.
//!
//! Run with `cargo run -p pnp-lifecycle-demo` (it builds only the core). The scenario
//! lives in this library so that `tests/sequence.rs` can check the README's sequence
//! diagram of the race against it.

use core::fmt::Write as _;
use pnp_lifecycle::*;

/// Append one line to the timeline's text.
macro_rules! say {
    ($t:expr, $($arg:tt)*) => {
        // Writing to a String cannot fail.
        let _ = writeln!($t.out, $($arg)*);
    };
}

const HCA: DeviceId = DeviceId(0);
type Hca = Lifecycle<1, 8, 2, { queue_capacity(1, 8) }>;

/// What one input gave: the answer and the outputs drained after it.
struct Fed {
    reply: Result<Reply, Error>,
    outputs: Vec<Output>,
}

struct Timeline {
    m: Hca,
    /// The owner's clock, in milliseconds: passed with every input.
    now: Tick,
    step: u32,
    names: Vec<(ClientHandle, &'static str)>,
    /// The library's flight recorder: the last records, oldest dropped first.
    recorder: Recorder<RECORDS, 16>,
    /// Every input from the catastrophic error on: the reset racing unload.
    race: Option<Recorder<RACE_RECORDS, 16>>,
    /// The printed timeline.
    out: String,
}

/// What the demonstration produced.
pub struct Demo {
    /// The timeline, as `cargo run -p pnp-lifecycle-demo` prints it.
    pub text: String,
    /// Every input of the last section: a fatal error's reset cycle racing driver unload.
    pub race: Recorder<RACE_RECORDS, 16>,
    /// The clients' names, for drawing the race.
    pub names: Vec<(ClientHandle, &'static str)>,
}

/// How many inputs the race section may have (it has fewer).
pub const RACE_RECORDS: usize = 48;

/// How many inputs the flight recorder keeps.
const RECORDS: usize = 12;

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
            Output::Fence { client } => format!(
                "FENCE  {:<6} (its callback hangs: cut it off, then report FenceDone)",
                self.name(client)
            ),
            Output::ClientGone { client } => format!("{} gone (slot free)", self.name(client)),
            Output::DeviceFailed { cause, .. } => format!("DEVICE FAILED: {cause:?}"),
            Output::DeviceRemoved { .. } => "device removed".to_string(),
            Output::UnloadMayFinish => "UNLOAD MAY FINISH".to_string(),
            // The demo's machine runs no fast path: never emitted.
            Output::FastPath { client, gate } => {
                format!("fast path {} {gate:?}", self.name(client))
            }
        }
    }

    /// Move the owner's clock to `ms`.
    fn at(&mut self, ms: u64) {
        self.now = Tick(ms);
    }

    /// Wake when the machine asked to be woken, and tell it the time.
    fn timer_fires(&mut self, label: &str) -> Fed {
        let due = self
            .m
            .poll_timeout()
            .expect("the machine waits on no deadline");
        self.now = due;
        self.feed(label, Input::Timeout)
    }

    /// Feed one input at the owner's clock, print it, its answer, its outputs and the
    /// state after it.
    fn feed(&mut self, label: &str, input: Input) -> Fed {
        self.step += 1;
        let reply = self.m.handle(self.now, input);
        self.recorder
            .record(self.now, input, reply, self.m.pending_outputs());
        if let Some(race) = &mut self.race {
            race.record(self.now, input, reply, self.m.pending_outputs());
        }
        let outputs: Vec<Output> = core::iter::from_fn(|| self.m.poll_output()).collect();
        let answer = match &reply {
            Ok(Reply::Accepted) => "ok".to_string(),
            Ok(r) => format!("{r:?}"),
            Err(e) => format!("REFUSED {e:?}"),
        };
        say!(
            self,
            "{:>3}. [{:>6} ms] {label:<44} -> {answer}",
            self.step,
            self.now.0
        );
        for o in &outputs {
            say!(self, "       | {}", self.describe(o));
        }
        let phase = self.m.phase(HCA).map_or("?".into(), |p| format!("{p:?}"));
        let wake = self
            .m
            .poll_timeout()
            .map_or("nothing due".to_string(), |t| format!("wake at {} ms", t.0));
        say!(
            self,
            "       state: {phase}, epoch {}, {wake}",
            self.m.epoch(HCA).map_or(0, |e| e.0),
        );
        Fed { reply, outputs }
    }

    /// The owner's side of every callback: deliver, then report its return. A client has
    /// one callback at a time: a return may hand over the client's next event, whose
    /// callback returns in turn.
    fn return_callbacks(&mut self, fed: &Fed) {
        for o in &fed.outputs {
            if let Output::Notify { client, .. } = o {
                let who = self.name(*client);
                let next = self.feed(
                    &format!("{who} callback returns"),
                    Input::CallbackDone { client: *client },
                );
                self.return_callbacks(&next);
            }
        }
    }

    fn register(&mut self, name: &'static str, kind: ClientKind) -> ClientHandle {
        self.now = self.now.after(1);
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

/// Run the demonstration: the timeline's text, and the race of its last section.
pub fn soft_reset_racing_unload() -> Demo {
    let mut t = Timeline {
        m: Hca::new(Config::DEFAULT),
        now: Tick(0),
        step: 0,
        names: Vec::new(),
        recorder: Recorder::new(),
        race: None,
        out: String::new(),
    };
    let c = Config::DEFAULT;
    say!(
        t,
        "== pnp-lifecycle: WinOF soft reset racing driver unload =="
    );
    say!(
        t,
        "   (the owner's clock is in milliseconds and goes with every input; user space has \
         {} ms to answer RESET, kernel clients {} ms, every callback {} ms)\n",
        c.untrusted_ack_timeout,
        c.trusted_ack_timeout,
        c.callback_timeout
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
    t.at(5);
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

    say!(
        t,
        "\n-- a minute later, ipoib asks for a soft reset: deadlines count from now --"
    );
    t.at(60_000);
    let out = t.feed(
        "ipoib: reset_request",
        Input::ResetRequest { client: ipoib },
    );
    t.at(60_002);
    t.return_callbacks(&out);
    t.at(60_010);
    t.feed(
        "ipoib: reset_execute (quiesced)",
        Input::ResetExecute { client: ipoib },
    );
    t.at(60_020);
    t.feed(
        "srp: reset_request (coalesces)",
        Input::ResetRequest { client: srp },
    );
    t.at(60_025);
    t.feed(
        "srp: posts one last I/O (in flight)",
        Input::Access {
            client: srp,
            epoch: Epoch(0),
            what: Access::HardwareOp,
        },
    );
    t.at(60_030);
    t.feed(
        "srp: reset_execute (its I/O still runs)",
        Input::ResetExecute { client: srp },
    );
    t.at(60_999);
    t.feed("an early timer: uverbs still silent", Input::Timeout);
    let out = t.timer_fires("the timer fires at the deadline");
    say!(
        t,
        "       (every vote is in, but srp's I/O is in flight: the reset waits for it)"
    );
    t.return_callbacks(&out);
    t.at(61_020);
    t.feed(
        "srp: its I/O completes (AccessDone)",
        Input::AccessDone { client: srp },
    );
    t.at(61_050);
    let out = t.feed(
        "reset worker: hardware reset succeeded",
        Input::ResetDone {
            device: HCA,
            result: ResetResult::Succeeded,
        },
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
    t.feed(
        "ipoib: the work completes",
        Input::AccessDone { client: ipoib },
    );

    say!(
        t,
        "\n-- a second user-space context binds port 0; its link callback hangs --"
    );
    t.at(62_000);
    let rdma_cm = t.register("rdmacm", ClientKind::Untrusted);
    t.feed(
        "rdmacm: bind physical port 0",
        Input::Bind {
            client: rdma_cm,
            ports: PortSet::single(PhysPort(0)),
        },
    );
    t.at(63_000);
    t.feed(
        "subnet manager: port 0 goes Active",
        Input::LinkChanged {
            device: HCA,
            port: PhysPort(0),
            state: LinkState::Active,
        },
    );
    t.at(64_000);
    t.feed(
        "subnet manager: port 0 goes Down",
        Input::LinkChanged {
            device: HCA,
            port: PhysPort(0),
            state: LinkState::Down,
        },
    );
    t.timer_fires("the timer fires: the callback deadline");
    t.at(68_005);
    t.feed(
        "rdmacm: its callback returns, too late",
        Input::CallbackDone { client: rdma_cm },
    );
    t.at(68_010);
    t.feed(
        "owner: rdmacm fenced (doorbells unmapped)",
        Input::FenceDone { client: rdma_cm },
    );
    t.feed(
        "rdmacm: calls in again",
        Input::Access {
            client: rdma_cm,
            epoch: Epoch(1),
            what: Access::QueryCounters(PhysPort(0)),
        },
    );

    say!(
        t,
        "\n-- a catastrophic-error interrupt, then driver unload while clients quiesce --"
    );
    t.at(70_000);
    t.race = Some(Recorder::new());
    let out = t.feed(
        "catastrophic error interrupt",
        Input::FatalError { device: HCA },
    );
    t.at(70_001);
    t.return_callbacks(&out);
    t.at(70_010);
    t.feed(
        "ipoib: reset_execute",
        Input::ResetExecute { client: ipoib },
    );
    t.at(70_020);
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
    t.at(70_030);
    t.feed("ipoib: detaches", Input::Unregister { client: ipoib });
    t.feed(
        "uverbs: context closes",
        Input::Unregister { client: uverbs },
    );
    t.feed(
        "rdmacm: context closes",
        Input::Unregister { client: rdma_cm },
    );
    t.feed("srp: detaches", Input::Unregister { client: srp });
    t.feed(
        "ipoib: detaches again (idempotent)",
        Input::Unregister { client: ipoib },
    );
    // The Removed callbacks return; the last one lets unload finish.
    t.at(70_040);
    t.return_callbacks(&removed);
    t.at(75_000);
    t.feed("anything after unload", Input::Timeout);
    assert_eq!(t.m.driver_phase(), DriverPhase::Unloaded);
    say!(
        t,
        "\nunload finished exactly once; the machine now refuses every input."
    );
    say!(
        t,
        "\n== the flight recorder (pnp_lifecycle::Recorder), its last {RECORDS} records ==\n"
    );
    let _ = write!(t.out, "{}", t.recorder);
    let race = t.race.take().unwrap_or_default();
    assert_eq!(race.dropped(), 0, "RACE_RECORDS is too small for the race");
    Demo {
        text: t.out,
        race,
        names: t.names,
    }
}
