//! The owner's blocking half: the lock around [`Owner`], the dispatcher that carries work
//! out of it, waits that refuse instead of deadlocking, and the clock.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

use pnp_lifecycle::{AccessAnswer, ClientHandle, Config, Epoch, Error, Input, Reply, Tick};

use crate::fast::{key_of_client, AtomicWord, End, Gate, GateControl, Ticket};
use crate::owner::{gate_index, ContextId, Done, Os, Owner, Work};

/// A source of the current time, in the unit of the machine's [`Config`]. Never goes
/// backwards.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Tick;
}

/// A lock with a condition: the platform's mutex and wait queue, as one object.
pub trait Monitor<T>: Send + Sync {
    /// A monitor guarding `value`.
    fn new(value: T) -> Self;
    /// Run `f` under the lock, then wake every waiter.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
    /// Under the lock, run `f` until it returns `Some`, sleeping between tries until
    /// woken by a [`Self::with`].
    fn wait_until<R>(&self, f: impl FnMut(&mut T) -> Option<R>) -> R;
}

/// The platform's primitives: a monitor, an identity for the running context, and (for
/// [`Dispatch::Thread`]) threads.
pub trait Kernel: Send + Sync + 'static {
    /// The lock-with-condition type.
    type Monitor<T: Send + 'static>: Monitor<T>;
    /// The atomic word of the fast path's gates (`core`'s; shuttle's under shuttle).
    type Word: AtomicWord + 'static;
    /// A started thread.
    type Thread: Send + 'static;
    /// The running context's identity.
    fn context() -> ContextId;
    /// Start a thread running `f`.
    fn spawn(f: Box<dyn FnOnce() + Send + 'static>) -> Self::Thread;
    /// Wait for a thread to end.
    fn join(thread: Self::Thread);
}

/// Who carries work out of the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatch {
    /// Dispatcher threads, started as work needs them: one per lane with work at most, so
    /// a callback that never returns holds up only its own client.
    Thread,
    /// The calling thread, after its own call, while no one else is dispatching (how
    /// Linux's `ib_core` calls clients). Blocking waits dispatch meanwhile.
    Inline,
}

/// A blocking call made where it would wait for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WouldDeadlock;

impl core::fmt::Display for WouldDeadlock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("a blocking call from inside a callback would wait for itself")
    }
}

impl core::error::Error for WouldDeadlock {}

/// Why [`Runtime::unload`] did not unload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnloadError {
    /// The machine refused `Unload` (nothing changed).
    Refused(Error),
    /// Called from inside a callback or a hardware command, where it would wait for
    /// itself (nothing changed).
    WouldDeadlock,
}

impl core::fmt::Display for UnloadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            UnloadError::Refused(e) => write!(f, "unload refused: {e}"),
            UnloadError::WouldDeadlock => WouldDeadlock.fmt(f),
        }
    }
}

impl core::error::Error for UnloadError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            UnloadError::Refused(e) => Some(e),
            UnloadError::WouldDeadlock => None,
        }
    }
}

impl From<WouldDeadlock> for UnloadError {
    fn from(_: WouldDeadlock) -> Self {
        UnloadError::WouldDeadlock
    }
}

/// The owner runtime: [`Owner`] behind the kernel's monitor, its work carried out by a
/// dispatcher outside the lock, every input stamped with the clock's `now` under the lock.
pub struct Runtime<O: Os, K: Kernel, const D: usize, const C: usize, const P: usize, const Q: usize>
{
    state: K::Monitor<Owner<O, D, C, P, Q>>,
    threads: K::Monitor<Vec<K::Thread>>,
    os: O,
    clock: Arc<dyn Clock>,
    dispatch: Dispatch,
    /// The owner's fast-path gates (device-major), read without the lock.
    gates: Vec<Arc<Gate<K::Word>>>,
}

/// A client's own fast-path gate, for the port to keep beside the client (obtained once,
/// at registration or re-acquire: [`Runtime::client_gate`]), so that
/// [`Runtime::operation_begin_on`] and [`Runtime::operation_end_on`] find the gate with
/// no lookup, no lock and no clock read. Holding one grants nothing: the machine opens
/// and closes the gate, for one client and epoch at a time, and every begin checks the
/// epoch it is given against the open's.
pub struct ClientGate<W: AtomicWord = core::sync::atomic::AtomicU64> {
    gate: Arc<Gate<W>>,
    client: ClientHandle,
    /// The client generation's half of the gate's key.
    key: u64,
    /// `client`, as [`packed`] packs it.
    packed: u32,
}

/// A client handle as one word, to compare in one instruction.
#[inline(always)]
fn packed(client: ClientHandle) -> u32 {
    u32::from(client.generation)
        | (u32::from(client.slot) << 16)
        | (u32::from(client.device.0) << 24)
}

/// The client handle [`packed`] packed.
fn unpacked(word: u32) -> ClientHandle {
    let [generation_low, generation_high, slot, device] = word.to_le_bytes();
    ClientHandle {
        device: pnp_lifecycle::DeviceId(device),
        slot,
        generation: u16::from_le_bytes([generation_low, generation_high]),
    }
}

impl<W: AtomicWord> Clone for ClientGate<W> {
    fn clone(&self) -> Self {
        ClientGate {
            gate: Arc::clone(&self.gate),
            client: self.client,
            key: self.key,
            packed: self.packed,
        }
    }
}

impl<W: AtomicWord> core::fmt::Debug for ClientGate<W> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ClientGate")
            .field("client", &self.client)
            .field("gate", &self.gate)
            .finish()
    }
}

impl<W: AtomicWord> ClientGate<W> {
    /// The client whose gate this is.
    pub fn client(&self) -> ClientHandle {
        self.client
    }
}

/// A client's hardware operation in flight, begun by [`Runtime::operation_begin`]; hand it
/// to [`Runtime::operation_end`] when the operation returned.
#[derive(Debug)]
#[must_use = "an operation in flight must be ended (Runtime::operation_end)"]
pub struct Operation {
    /// The client, [`packed`].
    client: u32,
    /// Granted on the fast path (its ticket), or by the machine.
    ticket: Option<Ticket>,
}

impl Operation {
    fn new(client: ClientHandle, ticket: Option<Ticket>) -> Self {
        Operation {
            client: packed(client),
            ticket,
        }
    }

    /// The client whose operation this is.
    pub fn client(&self) -> ClientHandle {
        unpacked(self.client)
    }

    /// Whether it was granted on the fast path, without the lock.
    pub fn on_fast_path(&self) -> bool {
        self.ticket.is_some()
    }
}

/// What [`Runtime::operation_begin`] answered.
#[derive(Debug)]
#[must_use = "a granted operation must be ended"]
pub enum Begin {
    /// In flight until [`Runtime::operation_end`].
    Granted(Operation),
    /// Not in flight: the device was in an idle power-down and the machine commanded the
    /// power-up; wait (with a deadline) for `Event::Resumed` and ask again.
    WaitForPowerUp,
}

impl<O: Os, K: Kernel, const D: usize, const C: usize, const P: usize, const Q: usize>
    core::fmt::Debug for Runtime<O, K, D, C, P, Q>
{
    /// The dispatch mode and the clock's `now`. It takes no lock (so it is safe inside
    /// [`Runtime::with`]): for the owner's state, `inspect(|o| format!("{o:?}"))`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Runtime")
            .field("dispatch", &self.dispatch)
            .field("now", &self.clock.now())
            .finish_non_exhaustive()
    }
}

impl<O: Os, K: Kernel, const D: usize, const C: usize, const P: usize, const Q: usize>
    Runtime<O, K, D, C, P, Q>
{
    /// A runtime over `os` with no device.
    pub fn new(config: Config, os: O, clock: Arc<dyn Clock>, dispatch: Dispatch) -> Arc<Self> {
        let mut owner = Owner::new(config);
        let gates: Vec<Arc<Gate<K::Word>>> = (0..D * C).map(|_| Arc::new(Gate::new())).collect();
        owner.use_gates(
            gates
                .iter()
                .map(|g| Arc::clone(g) as Arc<dyn GateControl>)
                .collect(),
        );
        Arc::new(Runtime {
            gates,
            state: K::Monitor::new(owner),
            threads: K::Monitor::new(Vec::new()),
            os,
            clock,
            dispatch,
        })
    }

    /// The port's vocabulary object.
    pub fn os(&self) -> &O {
        &self.os
    }

    /// The clock's current time.
    pub fn now(&self) -> Tick {
        self.clock.now()
    }

    /// Run `f` on the owner under the lock with the clock's `now`, then see the work it
    /// ordered carried out (inline, or by the dispatcher thread).
    pub fn with<R>(self: &Arc<Self>, f: impl FnOnce(&mut Owner<O, D, C, P, Q>, Tick) -> R) -> R {
        let result = self.state.with(|owner| f(owner, self.clock.now()));
        self.after();
        result
    }

    /// `client`'s own fast-path gate, for the port to keep (see [`ClientGate`]); `None`
    /// for a client that names no slot of this runtime.
    pub fn client_gate(&self, client: ClientHandle) -> Option<ClientGate<K::Word>> {
        let gate = self.gates.get(gate_index::<C>(client)?)?;
        Some(ClientGate {
            gate: Arc::clone(gate),
            client,
            key: key_of_client(client.generation),
            packed: packed(client),
        })
    }

    /// Begin a hardware operation of `client` through its interface of `epoch` (DESIGN r3,
    /// "Operations: the fast path"). While the machine keeps the client's gate open —
    /// the device running in D0 at the client's epoch, nothing to drain — this takes no
    /// lock and makes no system call: a load and a compare-exchange on the client's own
    /// cache line. Otherwise the machine decides under the lock, as
    /// [`Owner::operation_begin`]. A port that keeps the client's [`ClientGate`] calls
    /// [`Self::operation_begin_on`] instead, which skips the gate's lookup.
    ///
    /// # Errors
    ///
    /// The machine's refusal, by name (a stale epoch, a revoked client, system sleep,
    /// removal…); nothing changed.
    #[inline]
    pub fn operation_begin(
        self: &Arc<Self>,
        client: ClientHandle,
        epoch: Epoch,
    ) -> Result<Begin, Error> {
        if let Some(operation) = self.operation_begin_fast(client, epoch) {
            return Ok(Begin::Granted(operation));
        }
        match self.operation_begin_slow(client, epoch)? {
            AccessAnswer::Granted => Ok(Begin::Granted(Operation::new(client, None))),
            AccessAnswer::WaitForPowerUp => Ok(Begin::WaitForPowerUp),
        }
    }

    /// [`Self::operation_begin`] through the client's own gate: the fast path is a load,
    /// a comparison with the open's key and a compare-exchange on the client's cache line.
    /// The gate shut (or open for another epoch): the machine decides under the lock.
    ///
    /// # Errors
    ///
    /// The machine's refusal, by name, as [`Self::operation_begin`]; nothing changed.
    #[inline]
    pub fn operation_begin_on(
        self: &Arc<Self>,
        gate: &ClientGate<K::Word>,
        epoch: Epoch,
    ) -> Result<Begin, Error> {
        match gate.gate.begin_keyed(gate.key | u64::from(epoch.0)) {
            Some(ticket) => Ok(Begin::Granted(Operation {
                client: gate.packed,
                ticket: Some(ticket),
            })),
            None => match self.operation_begin_slow(gate.client, epoch)? {
                AccessAnswer::Granted => Ok(Begin::Granted(Operation {
                    client: gate.packed,
                    ticket: None,
                })),
                AccessAnswer::WaitForPowerUp => Ok(Begin::WaitForPowerUp),
            },
        }
    }

    /// The fast path alone through the client's own gate: `Some` if it is open for
    /// `epoch` (no lock, no system call, no lookup), `None` if the machine must decide
    /// (a port that holds a lock of its own around the machine's decision, as the
    /// Windows remove lock, asks it then).
    #[inline]
    pub fn operation_begin_fast_on(
        &self,
        gate: &ClientGate<K::Word>,
        epoch: Epoch,
    ) -> Option<Operation> {
        let ticket = gate.gate.begin_keyed(gate.key | u64::from(epoch.0))?;
        Some(Operation {
            client: gate.packed,
            ticket: Some(ticket),
        })
    }

    /// The machine decides, under the lock.
    #[cold]
    #[inline(never)]
    fn operation_begin_slow(
        self: &Arc<Self>,
        client: ClientHandle,
        epoch: Epoch,
    ) -> Result<AccessAnswer, Error> {
        self.with(|o, now| o.operation_begin(now, client, epoch))
    }

    /// The fast path alone: `Some` if the client's gate is open for `epoch` (no lock, no
    /// system call), `None` if the machine must decide ([`Self::operation_begin`]).
    #[inline]
    pub fn operation_begin_fast(&self, client: ClientHandle, epoch: Epoch) -> Option<Operation> {
        let gate = self.gates.get(gate_index::<C>(client)?)?;
        let ticket = gate.begin(client.generation, epoch)?;
        Some(Operation::new(client, Some(ticket)))
    }

    /// End an operation [`Self::operation_begin`] granted. On the fast path with the gate
    /// still open: no lock. Otherwise (granted by the machine, or carried by a close since)
    /// the machine hears `AccessDone` under the lock.
    ///
    /// # Errors
    ///
    /// The machine's refusal of `AccessDone` (a client it no longer counts: fenced); the
    /// operation is over either way.
    #[inline]
    pub fn operation_end(self: &Arc<Self>, operation: Operation) -> Result<(), Error> {
        let client = operation.client();
        if let Some(ticket) = operation.ticket {
            let gate = gate_index::<C>(client).and_then(|i| self.gates.get(i));
            if gate.is_some_and(|g| g.end(ticket) == End::Fast) {
                return Ok(());
            }
        }
        self.operation_end_slow(client)
    }

    /// [`Self::operation_end`] through the client's own gate (no lookup). An operation of
    /// another client is ended through its own gate, as [`Self::operation_end`] would.
    ///
    /// # Errors
    ///
    /// As [`Self::operation_end`]; the operation is over either way.
    #[inline]
    pub fn operation_end_on(
        self: &Arc<Self>,
        gate: &ClientGate<K::Word>,
        operation: Operation,
    ) -> Result<(), Error> {
        match operation.ticket {
            Some(ticket) if operation.client == gate.packed => {
                if gate.gate.end(ticket) == End::Fast {
                    return Ok(());
                }
                self.operation_end_slow(gate.client)
            }
            _ => self.operation_end(operation),
        }
    }

    /// The fast path's end alone, through the client's own gate: `true` if the operation
    /// ended there (no lock); `false` if the machine must hear `AccessDone`, because it
    /// granted the operation or a close carried it since (the port then calls
    /// [`Owner::operation_done`] under the lock, with its own checks around it).
    #[inline]
    pub fn operation_end_fast_on(&self, gate: &ClientGate<K::Word>, operation: Operation) -> bool {
        match operation.ticket {
            Some(ticket) if operation.client == gate.packed => gate.gate.end(ticket) == End::Fast,
            Some(ticket) => {
                let client = operation.client();
                let gate = gate_index::<C>(client).and_then(|i| self.gates.get(i));
                gate.is_some_and(|g| g.end(ticket) == End::Fast)
            }
            None => false,
        }
    }

    /// Granted by the machine, or carried by a close: `AccessDone` under the lock.
    #[cold]
    #[inline(never)]
    fn operation_end_slow(self: &Arc<Self>, client: ClientHandle) -> Result<(), Error> {
        self.with(|o, now| o.operation_done(now, client))
    }

    /// Plant a fault in every gate of this runtime (tests only: `--cfg pnp_faults`).
    #[cfg(pnp_faults)]
    pub fn plant_in_gates(&self, fault: crate::planted::Fault) {
        for g in &self.gates {
            g.plant_begin_after_close(fault == crate::planted::Fault::BeginAfterClose);
        }
    }

    /// Read the owner under the lock (no input fed).
    pub fn inspect<R>(&self, f: impl FnOnce(&Owner<O, D, C, P, Q>) -> R) -> R {
        self.state.with(|owner| f(owner))
    }

    /// Feed one input at the clock's `now`.
    ///
    /// # Errors
    ///
    /// The machine's refusal ([`Error`]); nothing changed then.
    pub fn feed(self: &Arc<Self>, input: Input) -> Result<Reply, Error> {
        self.with(|owner, now| owner.feed(now, input))
    }

    /// The timer fired: see [`Owner::timeout`]. The timer never carries out work itself
    /// (a callback that never returns would stop time): with [`Dispatch::Inline`] the
    /// work it ordered goes to a worker thread, as a kernel timer hands work to a
    /// workqueue.
    ///
    /// # Errors
    ///
    /// The machine's refusal of `Timeout` (only after unload finished): fences whose grace
    /// passed were ended all the same.
    pub fn timeout(self: &Arc<Self>) -> Result<(), Error> {
        let result = self.state.with(|owner| owner.timeout(self.clock.now()));
        match self.dispatch {
            Dispatch::Thread => self.after(),
            Dispatch::Inline => self.defer(),
        }
        result
    }

    /// Block until `f` returns `Some`, carrying out no work meanwhile (the body of a timer
    /// thread).
    ///
    /// # Errors
    ///
    /// [`WouldDeadlock`] where it would wait for itself, like [`Self::wait_until`].
    pub fn watch<R>(
        self: &Arc<Self>,
        mut f: impl FnMut(&mut Owner<O, D, C, P, Q>, Tick) -> Option<R>,
    ) -> Result<R, WouldDeadlock> {
        if self.in_dispatch() {
            return Err(WouldDeadlock);
        }
        Ok(self.state.wait_until(|owner| f(owner, self.clock.now())))
    }

    /// Hand ready work to a worker thread that carries it out and ends.
    fn defer(self: &Arc<Self>) {
        if self.state.with(|owner| owner.work_ready()) {
            let runtime = Arc::clone(self);
            let thread = K::spawn(Box::new(move || runtime.pump()));
            self.threads.with(|t| t.push(thread));
        }
    }

    /// When [`Self::timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Tick> {
        self.inspect(Owner::poll_timeout)
    }

    /// Whether the caller is carrying out a work item (inside a callback, or a hardware
    /// command), where a blocking wait could wait for itself.
    pub fn in_dispatch(&self) -> bool {
        let me = K::context();
        self.inspect(|owner| owner.in_dispatch(me))
    }

    /// Block until `f` returns `Some`, re-checked after every change. Called where it
    /// could wait for itself (inside a callback or a hardware command) it changes nothing
    /// and returns [`WouldDeadlock`]. With [`Dispatch::Inline`] the caller carries out
    /// work while it waits.
    ///
    /// # Errors
    ///
    /// [`WouldDeadlock`] from inside a callback or a hardware command; nothing changed.
    pub fn wait_until<R>(
        self: &Arc<Self>,
        mut f: impl FnMut(&mut Owner<O, D, C, P, Q>, Tick) -> Option<R>,
    ) -> Result<R, WouldDeadlock> {
        if self.in_dispatch() {
            return Err(WouldDeadlock);
        }
        match self.dispatch {
            Dispatch::Thread => Ok(self.state.wait_until(|owner| f(owner, self.clock.now()))),
            Dispatch::Inline => loop {
                self.pump();
                let ready = self.state.wait_until(|owner| {
                    if let Some(r) = f(owner, self.clock.now()) {
                        return Some(Some(r));
                    }
                    owner.work_ready().then_some(None)
                });
                if let Some(r) = ready {
                    return Ok(r);
                }
            },
        }
    }

    /// Carry out work on the calling context until none is ready (or someone else is
    /// carrying it out). Inline dispatch does this after every call.
    pub fn pump(self: &Arc<Self>) {
        let me = K::context();
        while let Some(work) = self.state.with(|owner| owner.take(me)) {
            let done = self.carry_out(work);
            self.state
                .with(|owner| owner.finish(self.clock.now(), me, done));
        }
    }

    /// Driver unload: feed `Unload`, then block until the machine emitted
    /// `UnloadMayFinish`, every work item was carried out and no callback of the module
    /// is still running (an abandoned dispatcher is still inside the module's code), and
    /// join the dispatcher threads. The unload waits as a driver writer expects: until
    /// the last client detached or its detach deadline passed (fed by [`Self::timeout`]).
    /// A second call (unloaded already) waits the same way and succeeds.
    ///
    /// # Errors
    ///
    /// [`UnloadError::WouldDeadlock`] from inside a callback or a hardware command;
    /// [`UnloadError::Refused`] if the machine refused `Unload`. Nothing changed then.
    pub fn unload(self: &Arc<Self>) -> Result<(), UnloadError> {
        if self.in_dispatch() {
            return Err(UnloadError::WouldDeadlock);
        }
        if let Err(e) = self.feed(Input::Unload) {
            if e != Error::Unloaded {
                return Err(UnloadError::Refused(e));
            }
        }
        self.wait_until(|owner, _| {
            (owner.unload_complete() && owner.abandoned() == 0).then_some(())
        })?;
        let threads = self.threads.with(core::mem::take);
        for t in threads {
            K::join(t);
        }
        Ok(())
    }

    fn after(self: &Arc<Self>) {
        match self.dispatch {
            Dispatch::Inline => self.pump(),
            Dispatch::Thread => {
                while self.state.with(Owner::dispatcher_wanted) {
                    let runtime = Arc::clone(self);
                    let thread = K::spawn(Box::new(move || runtime.dispatcher()));
                    self.threads.with(|t| t.push(thread));
                }
            }
        }
    }

    /// A dispatcher thread (started counted idle): carry work out until unload completed.
    /// Several run when one is held up in a callback, each on a different lane.
    fn dispatcher(self: &Arc<Self>) {
        let me = K::context();
        let mut idle = true;
        loop {
            let next = self.state.wait_until(|owner| {
                if !idle {
                    owner.dispatcher_idle();
                    idle = true;
                }
                if let Some(work) = owner.take(me) {
                    owner.dispatcher_busy();
                    idle = false;
                    return Some(Some(work));
                }
                if owner.unload_complete() {
                    owner.dispatcher_busy();
                    return Some(None);
                }
                None
            });
            let Some(work) = next else { return };
            let done = self.carry_out(work);
            self.state
                .with(|owner| owner.finish(self.clock.now(), me, done));
            self.after();
        }
    }

    /// Do one work item outside the lock.
    fn carry_out(&self, work: Work<O>) -> Done {
        carry_out(&self.os, work)
    }
}

/// Carry one work item out with `os`, outside any lock, and say what to hand back to
/// [`Owner::finish`]: what every dispatcher does, and what a cooperative schedule harness
/// calls after [`Owner::take`].
pub fn carry_out<O: Os>(os: &O, work: Work<O>) -> Done {
    match work {
        Work::Callback {
            client,
            event,
            callback,
        } => Done::Callback {
            client,
            answer: callback.and_then(|cb| os.call(&cb, client, event)),
        },
        Work::Hardware { device, command } => Done::Other(os.hardware(device, command)),
        Work::GroupReset(reset) => Done::Other(os.group_reset(&reset)),
        Work::Complete {
            request,
            completion,
        } => {
            os.complete(request, completion);
            Done::Other(None)
        }
        Work::News(news) => {
            os.news(news);
            Done::Other(None)
        }
        Work::Job(job) => Done::Other(os.job(job)),
    }
}
