//! The owner's non-blocking half: the machine, the OS-side objects it names (client
//! callbacks, pending requests) and the work it ordered, in the machine's order. Every
//! method is called with the owner lock held and never blocks; [`crate::Runtime`] adds
//! the lock and the waits, and a cooperative schedule harness can drive it directly.

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::fast::{Gate, GateControl};
use crate::group::GroupReset;
use pnp_lifecycle::{
    AccessAnswer, ClientHandle, ClientKind, Config, CycleOutcome, DeviceId, Epoch, Error, Event,
    FailureCause, FastPathGate, HardwareCommand, Input, Lifecycle, Output, Reply, RequestToken,
    Status, Tick,
};

/// Who is running: a thread, or whatever the platform schedules (see
/// [`crate::Kernel::context`]). Two live contexts never share an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContextId(pub u64);

/// What an OS port supplies: the objects its vocabulary hands around and what to do, outside
/// the owner lock, for each piece of work the machine orders. No lifecycle rule lives here.
pub trait Os: Send + Sync + 'static {
    /// What a client registered to be called with (a closure, an `ib_client`).
    type Callback: Clone + Send + 'static;
    /// An OS request that completes later (an IRP).
    type Request: Send + 'static;
    /// The port's own work, ordered with the machine's (Linux: `ib_client.add`).
    type Job: Send + 'static;

    /// Call a client's callback with `event`. What it returns is fed before
    /// `CallbackDone` (a vote, a detach); a refusal of it changes nothing and is dropped.
    fn call(&self, callback: &Self::Callback, client: ClientHandle, event: Event) -> Option<Input>;
    /// Command the hardware. `Some(input)` is the completion, fed at once (`StartDone`,
    /// `ResetDone`); `None` if the OS reports it later or it needs none.
    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input>;
    /// Command a reset group's one hardware reset: reset every function of
    /// `reset.members` once, through `reset.carrier`. `Some(input)` is the completion
    /// (`ResetDone` for the carrier), fed at once. Default: [`Self::hardware`]'s `Reset`
    /// to the carrier (hardware whose reset of one function resets them all).
    fn group_reset(&self, reset: &GroupReset) -> Option<Input> {
        self.hardware(reset.carrier, HardwareCommand::Reset)
    }
    /// Complete an OS request.
    fn complete(&self, request: Self::Request, completion: Completion);
    /// Run one of the port's own jobs; `Some(input)` is fed after it.
    fn job(&self, job: Self::Job) -> Option<Input> {
        let _ = job;
        None
    }
    /// The client a job calls, if any (Linux: `ib_client.add`): the job then runs in that
    /// client's lane, in order with its callbacks and never beside one, and a fence
    /// cancels it like a queued callback. Default: none (the OS line).
    fn job_client(job: &Self::Job) -> Option<ClientHandle> {
        let _ = job;
        None
    }
    /// News the port may pass on (failed device, cycle end...). Default: nothing.
    fn news(&self, news: News) {
        let _ = news;
    }
}

/// How an OS request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The machine completed it.
    Done(Status),
    /// The machine refused it (nothing changed).
    Refused(Error),
}

/// Outputs that are news to the OS rather than work, delivered in the machine's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum News {
    /// A reset cycle ended.
    CycleFinished {
        /// The device.
        device: DeviceId,
        /// How.
        outcome: CycleOutcome,
    },
    /// The device failed; only removal leaves that state.
    DeviceFailed {
        /// The device.
        device: DeviceId,
        /// Why.
        cause: FailureCause,
    },
    /// A device finished removal.
    DeviceRemoved {
        /// The device.
        device: DeviceId,
    },
    /// A client's slot is free.
    ClientGone {
        /// The client.
        client: ClientHandle,
    },
    /// A client was fenced and `FenceDone` fed: it reaches nothing through the port any
    /// more. `overran`: its callback or operation was still running when the grace ended.
    Fenced {
        /// The client.
        client: ClientHandle,
        /// Whether the fence stopped waiting for something still running.
        overran: bool,
    },
    /// Driver unload may finish; the last news.
    UnloadMayFinish,
}

/// One piece of work, taken by the dispatcher in the machine's order and done outside the
/// owner lock.
pub enum Work<O: Os> {
    /// Call a client (`None`: a client registered without a callback; only its
    /// `CallbackDone` is fed).
    Callback {
        /// The client.
        client: ClientHandle,
        /// What it is told.
        event: Event,
        /// What it registered.
        callback: Option<O::Callback>,
    },
    /// Command the hardware.
    Hardware {
        /// The device.
        device: DeviceId,
        /// The command.
        command: HardwareCommand,
    },
    /// Command a reset group's one hardware reset (the machine's `Reset` to a member of
    /// a group, its carrier): see [`Os::group_reset`].
    GroupReset(GroupReset),
    /// Complete an OS request.
    Complete {
        /// The request.
        request: O::Request,
        /// How it ended.
        completion: Completion,
    },
    /// Pass news on.
    News(News),
    /// The port's own job.
    Job(O::Job),
}

impl<O: Os> core::fmt::Debug for Work<O> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Work::Callback { client, event, .. } => write!(f, "Callback({client:?}, {event:?})"),
            Work::Hardware { device, command } => write!(f, "Hardware({device:?}, {command:?})"),
            Work::GroupReset(reset) => write!(f, "{reset:?}"),
            Work::Complete { completion, .. } => write!(f, "Complete({completion:?})"),
            Work::News(n) => write!(f, "News({n:?})"),
            Work::Job(_) => f.write_str("Job"),
        }
    }
}

/// What a dispatcher did with a [`Work`] item, handed back with [`Owner::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// A callback returned; `answer` (a vote, a detach) is fed before `CallbackDone`.
    Callback {
        /// The client.
        client: ClientHandle,
        /// What it answered.
        answer: Option<Input>,
    },
    /// Anything else; `Some(input)` is its completion.
    Other(Option<Input>),
}

/// Work that must not overlap or overtake other work of the same lane: one client's
/// callbacks, one device's hardware commands (with the news that a client of it was
/// fenced, so the port hears it before the hardware commands the fence let go ahead), and
/// everything else (completions, news, the port's jobs) in one line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    Client(ClientHandle),
    Device(DeviceId),
    Os,
}

impl<O: Os> Work<O> {
    fn lane(&self) -> Lane {
        match self {
            Work::Callback { client, .. } => Lane::Client(*client),
            Work::Hardware { device, .. } => Lane::Device(*device),
            Work::GroupReset(reset) => Lane::Device(reset.carrier),
            Work::Job(job) => O::job_client(job).map_or(Lane::Os, Lane::Client),
            // The port hears a fence before the hardware commands it let go ahead.
            Work::News(News::Fenced { client, .. }) => Lane::Device(client.device),
            Work::Complete { .. } | Work::News(_) => Lane::Os,
        }
    }
}

/// Which device lanes an item waits for: it is not handed out while an item of such a
/// lane ordered before it is queued or running. A request's completion, `DeviceRemoved`
/// and `UnloadMayFinish` are the OS's "the driver is done" (after `IRP_MN_REMOVE_DEVICE`
/// completes or PCI `remove` returns no driver code may run for the device), so they wait
/// for the teardown the machine ordered before them. Client lanes never hold them up: a
/// stuck callback is bounded by the machine's deadlines and the fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Nothing,
    Device(DeviceId),
    EveryDevice,
}

impl After {
    fn waits_for(self, lane: Lane) -> bool {
        match (self, lane) {
            (After::Device(d), Lane::Device(l)) => d == l,
            (After::EveryDevice, Lane::Device(_)) => true,
            _ => false,
        }
    }

    /// `Some(device)`, or every device if the input names none.
    fn device(device: Option<DeviceId>) -> Self {
        device.map_or(After::EveryDevice, After::Device)
    }
}

/// A work item in the queue: its place in the machine's order and what it waits for.
struct Queued<O: Os> {
    seq: u64,
    after: After,
    work: Work<O>,
}

/// A work item being carried out.
#[derive(Debug, Clone, Copy)]
struct Running {
    lane: Lane,
    /// Its place in the machine's order (see [`After`]).
    seq: u64,
    context: ContextId,
    /// Its client's fence outran its grace: what it returns is not reported.
    abandoned: bool,
}

/// A fence waiting for what a revoked client still runs.
#[derive(Debug, Clone, Copy)]
struct FenceWait {
    client: ClientHandle,
    callback_running: bool,
    operations: u8,
    deadline: Tick,
}

/// The owner state behind the lock (see the crate docs for the calling order).
pub struct Owner<O: Os, const D: usize, const C: usize, const P: usize, const Q: usize> {
    machine: Lifecycle<D, C, P, Q>,
    callbacks: Vec<(ClientHandle, O::Callback)>,
    requests: Vec<(RequestToken, O::Request)>,
    last_token: u32,
    work: VecDeque<Queued<O>>,
    /// The order number of the next queued item.
    next_seq: u64,
    /// Work items being carried out, each by one context.
    running: Vec<Running>,
    fences: Vec<FenceWait>,
    fences_done: VecDeque<(ClientHandle, bool)>,
    /// Every client slot's fast-path gate (device-major, `device * C + slot`), shared
    /// with whoever begins operations outside the lock ([`crate::Runtime::client_gate`]).
    gates: Vec<Arc<dyn GateControl>>,
    /// Operations the owner's closes carried, per client, not yet reported to the machine.
    carried: Vec<(ClientHandle, u32)>,
    /// Gate closes the machine asked for, answered once the queue is drained.
    closes_asked: VecDeque<ClientHandle>,
    fence_grace: u64,
    /// Dispatcher threads waiting for work (kept by [`crate::Runtime`]).
    idle_dispatchers: u32,
    /// Deadlines of the port's own waits ([`Self::wake_at`]).
    wakeups: Vec<Tick>,
    unload_finished: bool,
    anomalies: u32,
    #[cfg(pnp_faults)]
    fault: crate::planted::Fault,
}

impl<O: Os, const D: usize, const C: usize, const P: usize, const Q: usize> core::fmt::Debug
    for Owner<O, D, C, P, Q>
{
    /// The machine, the work queue in order, and what is being carried out, waited for
    /// and counted (OS objects are opaque: shown by the client or request they belong to).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let work: Vec<&Work<O>> = self.work.iter().map(|q| &q.work).collect();
        let clients: Vec<ClientHandle> = self.callbacks.iter().map(|(c, _)| *c).collect();
        let requests: Vec<RequestToken> = self.requests.iter().map(|(t, _)| *t).collect();
        f.debug_struct("Owner")
            .field("machine", &self.machine)
            .field("clients_with_callbacks", &clients)
            .field("pending_requests", &requests)
            .field("work", &work)
            .field("running", &self.running)
            .field("fences", &self.fences)
            .field("fence_grace", &self.fence_grace)
            .field("idle_dispatchers", &self.idle_dispatchers)
            .field("wakeups", &self.wakeups)
            .field("unload_finished", &self.unload_finished)
            .field("anomalies", &self.anomalies)
            .finish_non_exhaustive()
    }
}

impl<O: Os, const D: usize, const C: usize, const P: usize, const Q: usize> Owner<O, D, C, P, Q> {
    /// An owner with no device. A fence waits for a running callback or operation for
    /// the longer of the config's callback and operation timeouts.
    pub fn new(config: Config) -> Self {
        Owner {
            machine: Lifecycle::new(config).with_fast_path(),
            callbacks: Vec::new(),
            requests: Vec::new(),
            last_token: 0,
            work: VecDeque::new(),
            next_seq: 0,
            running: Vec::new(),
            fences: Vec::new(),
            fences_done: VecDeque::new(),
            gates: (0..D * C)
                .map(|_| Arc::new(Gate::<core::sync::atomic::AtomicU64>::new()) as _)
                .collect(),
            carried: Vec::new(),
            closes_asked: VecDeque::new(),
            fence_grace: config.callback_timeout.max(config.operation_timeout),
            idle_dispatchers: 0,
            wakeups: Vec::new(),
            unload_finished: false,
            anomalies: 0,
            #[cfg(pnp_faults)]
            fault: crate::planted::Fault::None,
        }
    }

    /// The machine, to ask (never to feed: use [`Self::feed`]).
    pub fn machine(&self) -> &Lifecycle<D, C, P, Q> {
        &self.machine
    }

    /// Use `gates` (one a client slot, device-major: `device * C + slot`) as the fast
    /// path's gates: the runtime's, whose atomic word is its kernel's.
    pub(crate) fn use_gates(&mut self, gates: Vec<Arc<dyn GateControl>>) {
        self.gates = gates;
    }

    /// The hardware operations of `client` in flight, on either path: the machine's
    /// count (which includes what a close carried) and its open gate's.
    pub fn operations_in_flight(&self, client: ClientHandle) -> u32 {
        let counted = self
            .machine
            .client(client)
            .map_or(0, |v| u32::from(v.operations_in_flight));
        let open = self.gate(client).map_or(0, |g| g.in_flight());
        counted
            .saturating_add(open)
            .saturating_add(self.carried_of(client))
    }

    /// How long a fence waits out a running callback or operation.
    pub fn set_fence_grace(&mut self, ticks: u64) {
        self.fence_grace = ticks;
    }

    /// Feed one input at `now` and take every output into the work queue.
    ///
    /// # Errors
    ///
    /// The machine's refusal ([`Error`]); nothing changed then.
    pub fn feed(&mut self, now: Tick, input: Input) -> Result<Reply, Error> {
        let reply = self.machine.handle(now, input);
        self.drain(now);
        reply
    }

    /// Register a client whose events go to `callback`.
    ///
    /// # Errors
    ///
    /// The machine's refusal (no such device, no free slot, removal or unload begun);
    /// nothing changed and `callback` is dropped.
    pub fn register(
        &mut self,
        now: Tick,
        device: DeviceId,
        kind: ClientKind,
        callback: O::Callback,
    ) -> Result<(ClientHandle, Epoch), Error> {
        let registered = self.machine.register(now, device, kind);
        if let Ok((client, _)) = registered {
            self.callbacks.push((client, callback));
        }
        self.drain(now);
        registered
    }

    /// Feed a request that completes later: the token is minted here (never one a
    /// pending request holds, so OS requests are never confused), and `request` is
    /// completed through the work queue when the machine completes the token. Refused:
    /// nothing changed, and `request` is completed with the refusal through the work
    /// queue (behind what was ordered before it). Either completion is carried out only
    /// after every hardware command of the request's device ordered before it.
    ///
    /// # Errors
    ///
    /// The machine's refusal of the input (also handed to `request`'s completion).
    pub fn submit(
        &mut self,
        now: Tick,
        request: O::Request,
        input: impl FnOnce(RequestToken) -> Input,
    ) -> Result<RequestToken, Error> {
        let token = self.mint_token();
        self.requests.push((token, request));
        let input = input(token);
        match self.feed(now, input) {
            Ok(_) => Ok(token),
            Err(e) => {
                if let Some(pos) = self.requests.iter().position(|(t, _)| *t == token) {
                    let (_, request) = self.requests.swap_remove(pos);
                    let completion = Completion::Refused(e);
                    self.push(
                        After::device(input.device()),
                        Work::Complete {
                            request,
                            completion,
                        },
                    );
                }
                Err(e)
            }
        }
    }

    /// Feed an input that has no token and complete `request` behind every output it
    /// caused (`IRP_MN_SURPRISE_REMOVAL`): carried out only after every hardware command
    /// of the input's device (every device, if it names none) ordered before it.
    pub fn feed_then_complete(&mut self, now: Tick, input: Input, request: O::Request) {
        let completion = match self.feed(now, input) {
            Ok(_) => Completion::Done(Status::Success),
            Err(e) => Completion::Refused(e),
        };
        self.push(
            After::device(input.device()),
            Work::Complete {
                request,
                completion,
            },
        );
    }

    /// Queue one of the port's own jobs behind the work already ordered.
    pub fn push_job(&mut self, job: O::Job) {
        self.push(After::Nothing, Work::Job(job));
    }

    fn push(&mut self, after: After, work: Work<O>) {
        #[cfg(pnp_faults)]
        let after = match self.fault {
            crate::planted::Fault::CompletionOvertakesTeardown => After::Nothing,
            _ => after,
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        self.work.push_back(Queued { seq, after, work });
    }

    /// The planted `GroupResetCoversEveryMember`: every declared member.
    #[cfg(pnp_faults)]
    fn planted_group_reset(&self, mut reset: GroupReset) -> GroupReset {
        if self.fault == crate::planted::Fault::GroupResetCoversEveryMember {
            reset.members = self.reset_group_members(reset.group);
        }
        reset
    }

    /// Plant `fault` in this owner's decisions (tests only: `--cfg pnp_faults`).
    #[cfg(pnp_faults)]
    pub fn plant(&mut self, fault: crate::planted::Fault) {
        self.fault = fault;
    }

    /// A hardware operation of `client` through the interface of `epoch` asks to begin.
    /// [`AccessAnswer::Granted`]: it is in flight until [`Self::operation_done`].
    /// [`AccessAnswer::WaitForPowerUp`]: not in flight; the device was in an idle
    /// power-down and the machine commanded the power-up: the port waits (with its own
    /// deadline) for `Event::Resumed` and asks again.
    ///
    /// # Errors
    ///
    /// The machine's refusal of the access (a stale epoch, a reset cycle, system sleep,
    /// a revoked client...): not in flight, nothing changed.
    pub fn operation_begin(
        &mut self,
        now: Tick,
        client: ClientHandle,
        epoch: Epoch,
    ) -> Result<AccessAnswer, Error> {
        let what = pnp_lifecycle::Access::HardwareOp;
        match self.feed(
            now,
            Input::Access {
                client,
                epoch,
                what,
            },
        )? {
            Reply::AccessWaitsForPowerUp => Ok(AccessAnswer::WaitForPowerUp),
            _ => Ok(AccessAnswer::Granted),
        }
    }

    /// A granted hardware operation returned. For a fenced client it only ends the
    /// fence's wait for it.
    ///
    /// # Errors
    ///
    /// The machine's refusal of `AccessDone` (no operation of `client` in flight).
    pub fn operation_done(&mut self, now: Tick, client: ClientHandle) -> Result<(), Error> {
        if let Some(f) = self.fences.iter_mut().find(|f| f.client == client) {
            f.operations = f.operations.saturating_sub(1);
            self.release_fences(now);
            return Ok(());
        }
        self.feed(now, Input::AccessDone { client }).map(drop)
    }

    /// The timer: drop passed wake-ups, end fences whose grace passed, then feed `Timeout`.
    ///
    /// # Errors
    ///
    /// The machine's refusal of `Timeout` (only after unload finished).
    pub fn timeout(&mut self, now: Tick) -> Result<(), Error> {
        self.wakeups.retain(|at| *at > now);
        self.expire_fences(now);
        self.drain(now);
        self.feed(now, Input::Timeout).map(drop)
    }

    /// Have the timer fire at `at` (a port's own wait with a deadline, e.g. an access
    /// waiting for a power-up): [`Self::poll_timeout`] includes it until a
    /// [`Self::timeout`] at or after it, which wakes every waiter.
    pub fn wake_at(&mut self, at: Tick) {
        self.wakeups.push(at);
    }

    /// When [`Self::timeout`] is next due: the machine's deadline, a fence's grace or a
    /// port's wake-up.
    pub fn poll_timeout(&self) -> Option<Tick> {
        let fence = self
            .fences
            .iter()
            .map(|f| f.deadline)
            .chain(self.wakeups.iter().copied())
            .min();
        match (self.machine.poll_timeout(), fence) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Take the next work item `context` may carry out outside the lock: the first whose
    /// lane (its client, its device, or the OS line) has nothing running. So items of one
    /// lane run one at a time in the machine's order, and a callback that never returns
    /// holds up only its own client. A request's completion, `DeviceRemoved` and
    /// `UnloadMayFinish` also wait until the hardware commands of their device (every
    /// device, for unload) ordered before them were carried out: once the OS hears the
    /// driver is done with a device, none of its code runs for it. `None` if nothing is
    /// ready or `context` is already carrying out an item. Hand it back with
    /// [`Self::finish`].
    pub fn take(&mut self, context: ContextId) -> Option<Work<O>> {
        if self.running.iter().any(|r| r.context == context) {
            return None;
        }
        let index = self.ready_index()?;
        let Queued { seq, work, .. } = self.work.remove(index)?;
        self.running.push(Running {
            lane: work.lane(),
            seq,
            context,
            abandoned: false,
        });
        Some(work)
    }

    fn ready_index(&self) -> Option<usize> {
        // Lanes whose first queued item waits for a device lane: the rest of the lane
        // waits behind it (a lane never overtakes itself).
        let mut held: Vec<Lane> = Vec::new();
        for (index, item) in self.work.iter().enumerate() {
            let lane = item.work.lane();
            if held.contains(&lane) || self.running.iter().any(|r| r.lane == lane) {
                continue;
            }
            if self.waits(index, item) {
                held.push(lane);
                continue;
            }
            return Some(index);
        }
        None
    }

    /// Whether an item of a lane `item` waits for, ordered before it, is queued or running.
    fn waits(&self, index: usize, item: &Queued<O>) -> bool {
        if item.after == After::Nothing {
            return false;
        }
        let queued = self
            .work
            .iter()
            .take(index)
            .any(|w| item.after.waits_for(w.work.lane()));
        let running = self
            .running
            .iter()
            .any(|r| r.seq < item.seq && item.after.waits_for(r.lane));
        queued || running
    }

    /// Whether [`Self::take`] would hand out something now (to a context not busy).
    pub fn work_ready(&self) -> bool {
        self.ready_index().is_some()
    }

    /// `context` finished the item it took: feed what it returned. A callback whose
    /// client's fence outran its grace reports nothing (the fence already ended it).
    pub fn finish(&mut self, now: Tick, context: ContextId, done: Done) {
        let Some(pos) = self.running.iter().position(|r| r.context == context) else {
            self.anomalies += 1;
            return;
        };
        let running = self.running.swap_remove(pos);
        if running.abandoned {
            return;
        }
        if let Lane::Client(client) = running.lane {
            // A fenced client's callback or job returned: the fence stops waiting for it.
            if let Some(f) = self.fences.iter_mut().find(|f| f.client == client) {
                f.callback_running = false;
                self.release_fences(now);
                return;
            }
        }
        let fed = match done {
            Done::Callback { client, answer } => {
                if let Some(answer) = answer {
                    // A vote or detach the machine no longer wants changes nothing.
                    let _ = self.feed(now, answer);
                }
                self.feed(now, Input::CallbackDone { client })
            }
            Done::Other(Some(input)) => self.feed(now, input),
            Done::Other(None) => return,
        };
        if fed.is_err() {
            self.anomalies += 1;
        }
    }

    /// Whether `context` is carrying out a work item (a callback, a hardware command): a
    /// blocking wait there could wait for itself.
    pub fn in_dispatch(&self, context: ContextId) -> bool {
        self.running.iter().any(|r| r.context == context)
    }

    /// Whether `context` is inside a callback whose client's fence outran its grace.
    pub fn is_abandoned(&self, context: ContextId) -> bool {
        self.running
            .iter()
            .any(|r| r.context == context && r.abandoned)
    }

    /// Whether a callback (or job) of `client` is being called.
    pub fn callback_running(&self, client: ClientHandle) -> bool {
        self.running
            .iter()
            .any(|r| r.lane == Lane::Client(client) && !r.abandoned)
    }

    /// Whether any code of `client` still runs: a callback or job, an abandoned one
    /// included (what `ib_unregister_client` waits for).
    pub fn client_code_running(&self, client: ClientHandle) -> bool {
        self.running.iter().any(|r| r.lane == Lane::Client(client))
    }

    /// A dispatcher thread is about to wait for work.
    pub fn dispatcher_idle(&mut self) {
        self.idle_dispatchers += 1;
    }

    /// A waiting dispatcher thread took work or ended.
    pub fn dispatcher_busy(&mut self) {
        self.idle_dispatchers = self.idle_dispatchers.saturating_sub(1);
    }

    /// Whether ready work has no dispatcher thread waiting for it: start one (counted
    /// idle at once). At most one thread per lane with work is ever started.
    pub fn dispatcher_wanted(&mut self) -> bool {
        let wanted = self.idle_dispatchers == 0 && self.work_ready();
        if wanted {
            self.idle_dispatchers += 1;
        }
        wanted
    }

    /// Callbacks still running past their client's fence (their code is still running).
    pub fn abandoned(&self) -> usize {
        self.running.iter().filter(|r| r.abandoned).count()
    }

    /// Whether the machine emitted `UnloadMayFinish`.
    pub fn unload_finished(&self) -> bool {
        self.unload_finished
    }

    /// Whether unload finished and every work item was carried out.
    pub fn unload_complete(&self) -> bool {
        self.unload_finished && self.work.is_empty() && self.running.is_empty()
    }

    /// Work items waiting.
    pub fn backlog(&self) -> usize {
        self.work.len()
    }

    /// Completions the machine refused (a port that fed something out of turn), and
    /// outputs naming an OS object the owner never saw. Zero in a correct port.
    pub fn anomalies(&self) -> u32 {
        self.anomalies
    }

    fn mint_token(&mut self) -> RequestToken {
        loop {
            self.last_token = self.last_token.wrapping_add(1);
            let token = RequestToken(self.last_token);
            if !self.requests.iter().any(|(t, _)| *t == token) {
                return token;
            }
        }
    }

    fn drain(&mut self, now: Tick) {
        loop {
            while let Some(output) = self.machine.poll_output() {
                self.route(now, output);
            }
            // A gate close is answered at once: the operations it carried are the
            // machine's to count from here on (they end through `operation_done`).
            if let Some(client) = self.closes_asked.pop_front() {
                let in_flight = self.take_carried(client);
                let answer = Input::FastPathClosed { client, in_flight };
                if self.machine.handle(now, answer).is_err() {
                    self.anomalies += 1;
                }
                continue;
            }
            let Some((client, overran)) = self.fences_done.pop_front() else {
                return;
            };
            if self
                .machine
                .handle(now, Input::FenceDone { client })
                .is_err()
            {
                self.anomalies += 1;
            }
            self.push(After::Nothing, Work::News(News::Fenced { client, overran }));
        }
    }

    fn route(&mut self, now: Tick, output: Output) {
        let mut after = After::Nothing;
        let work = match output {
            Output::Notify { client, event } => Work::Callback {
                client,
                event,
                callback: self
                    .callbacks
                    .iter()
                    .find(|(c, _)| *c == client)
                    .map(|(_, cb)| cb.clone()),
            },
            Output::Hardware { device, command } => {
                let group_reset = match command {
                    HardwareCommand::Reset => GroupReset::of(&self.machine, device),
                    _ => None,
                };
                match group_reset {
                    Some(reset) => {
                        #[cfg(pnp_faults)]
                        let reset = self.planted_group_reset(reset);
                        // The machine commands it through a member that takes part.
                        if !reset.members.contains(&device) {
                            self.anomalies += 1;
                        }
                        Work::GroupReset(reset)
                    }
                    None => Work::Hardware { device, command },
                }
            }
            Output::Complete {
                device,
                token,
                status,
            } => {
                after = After::Device(device);
                match self.requests.iter().position(|(t, _)| *t == token) {
                    Some(pos) => Work::Complete {
                        request: self.requests.swap_remove(pos).1,
                        completion: Completion::Done(status),
                    },
                    None => {
                        self.anomalies += 1;
                        return;
                    }
                }
            }
            Output::ResetCycleFinished { device, outcome } => {
                Work::News(News::CycleFinished { device, outcome })
            }
            Output::Fence { client } => {
                self.fence(now, client);
                return;
            }
            Output::ClientGone { client } => {
                self.callbacks.retain(|(c, _)| *c != client);
                Work::News(News::ClientGone { client })
            }
            Output::DeviceFailed { device, cause } => {
                Work::News(News::DeviceFailed { device, cause })
            }
            Output::DeviceRemoved { device } => {
                after = After::Device(device);
                Work::News(News::DeviceRemoved { device })
            }
            Output::UnloadMayFinish => {
                self.unload_finished = true;
                after = After::EveryDevice;
                Work::News(News::UnloadMayFinish)
            }
            // Issue 21: the machine decides; the gate is set here, under the lock.
            Output::FastPath { client, gate } => {
                match gate {
                    FastPathGate::Open { epoch } => {
                        if let Some(g) = self.gate(client) {
                            // The machine opens only a gate it closed: shut, nothing to
                            // carry (else something opened it behind the machine's back).
                            let was_open = g.is_open();
                            if g.open(client.generation, epoch) != 0 || was_open {
                                self.anomalies += 1;
                            }
                        }
                    }
                    FastPathGate::Close => {
                        self.close_gate(client);
                        self.closes_asked.push_back(client);
                    }
                }
                return;
            }
        };
        self.push(after, work);
    }

    /// The machine asked for `client` to be fenced: a callback of it still queued is
    /// cancelled; a callback being called or operations in flight are waited out until
    /// they return or the grace passes; then `FenceDone`.
    fn fence(&mut self, now: Tick, client: ClientHandle) {
        self.work.retain(|w| w.work.lane() != Lane::Client(client));
        // Operations on the fast path count too: the gate is shut first (the machine's
        // own close of it, if it comes, then carries nothing more).
        self.close_gate(client);
        let carried = self.carried_of(client);
        let operations = self
            .machine
            .client(client)
            .map_or(0, |v| v.operations_in_flight)
            .saturating_add(u8::try_from(carried).unwrap_or(u8::MAX));
        let callback_running = self.callback_running(client);
        if callback_running || operations > 0 {
            self.fences.push(FenceWait {
                client,
                callback_running,
                operations,
                deadline: now.after(self.fence_grace),
            });
        } else {
            self.fences_done.push_back((client, false));
        }
    }

    /// `client`'s gate, if the client names a slot of this owner.
    fn gate(&self, client: ClientHandle) -> Option<&dyn GateControl> {
        self.gates.get(gate_index::<C>(client)?).map(|g| &**g)
    }

    /// Shut `client`'s gate; what it carried waits to be reported with the answer to the
    /// machine's close.
    fn close_gate(&mut self, client: ClientHandle) {
        let n = self.gate(client).map_or(0, |g| g.close());
        if n == 0 {
            return;
        }
        match self.carried.iter_mut().find(|(c, _)| *c == client) {
            Some((_, count)) => *count = count.saturating_add(n),
            None => self.carried.push((client, n)),
        }
    }

    fn carried_of(&self, client: ClientHandle) -> u32 {
        self.carried
            .iter()
            .find(|(c, _)| *c == client)
            .map_or(0, |(_, n)| *n)
    }

    fn take_carried(&mut self, client: ClientHandle) -> u32 {
        match self.carried.iter().position(|(c, _)| *c == client) {
            Some(pos) => self.carried.swap_remove(pos).1,
            None => 0,
        }
    }

    fn release_fences(&mut self, now: Tick) {
        let before = self.fences.len();
        let done = &mut self.fences_done;
        self.fences.retain(|f| {
            let idle = !f.callback_running && f.operations == 0;
            if idle {
                done.push_back((f.client, false));
            }
            !idle
        });
        if self.fences.len() != before {
            self.drain(now);
        }
    }

    /// Fences whose grace passed end now; a callback of the client still running is
    /// abandoned (its return reports nothing).
    fn expire_fences(&mut self, now: Tick) {
        let mut i = 0;
        while let Some(f) = self.fences.get(i).copied() {
            if f.deadline > now {
                i += 1;
                continue;
            }
            self.fences.swap_remove(i);
            if let Some(r) = self
                .running
                .iter_mut()
                .find(|r| r.lane == Lane::Client(f.client))
            {
                r.abandoned = true;
            }
            self.fences_done.push_back((f.client, true));
        }
    }
}

/// `client`'s place in a device-major table of `C` slots a device.
#[inline]
pub(crate) fn gate_index<const C: usize>(client: ClientHandle) -> Option<usize> {
    let slot = usize::from(client.slot);
    (slot < C).then(|| usize::from(client.device.0) * C + slot)
}
