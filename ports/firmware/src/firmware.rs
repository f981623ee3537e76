//! Thread mode: acts on the buffered outputs outside the lock — client callbacks, the reset
//! pulse, the board's start and shutdown — and feeds their completions back.

use heapless::Deque;
use pnp_lifecycle::{
    ClientHandle, DeviceId, Error, Event, FailureCause, HardwareCommand, Input, Lifecycle, Output,
    PowerUpResult, Reply, ResetResult, StartResult, Tick,
};

use crate::lock::{Busy, Lock};
use crate::reset::ResetControl;
use crate::shared::{FeedError, Shared};

/// The board's side of the machine's outputs. Every method is called from thread mode,
/// outside any critical section.
pub trait Board {
    /// The platform's time now (a monotonic timer, in the unit of the machine's
    /// [`pnp_lifecycle::Config`]). Read inside the critical section for every input thread
    /// mode feeds, so every input carries the time it is fed at.
    fn now(&mut self) -> Tick;

    /// A client callback ([`Output::Notify`]). When it returns the port feeds
    /// [`Input::CallbackDone`].
    fn notify(&mut self, client: ClientHandle, event: Event);

    /// A client callback that may answer from inside the notification (Linux's
    /// `error_detected` returning its vote): the client acknowledges `RESET` with
    /// [`Answers::reset_execute`] or [`Answers::can_recover`], acquires the interface on
    /// `RESET_END`, unregisters on `Removed`. The port feeds the answers, in order, before
    /// the callback's [`Input::CallbackDone`] (never losing one: they wait with the owed
    /// completions until the buffer has room). Default: [`notify`](Self::notify), no answer.
    fn deliver(&mut self, client: ClientHandle, event: Event, answers: &mut Answers) {
        let _ = answers;
        self.notify(client, event);
    }

    /// Fence a revoked client ([`Output::Fence`]): mask its path to the hardware (its
    /// doorbell page, DMA window, interrupt line), so nothing it left behind can reach the
    /// device, including a hardware operation of it still in flight (a granted
    /// [`pnp_lifecycle::Access::HardwareOp`] whose [`Input::AccessDone`] has not been fed:
    /// once masked it touches nothing, so the stop, reset or teardown waiting for it may
    /// go ahead). Must not block. Its callbacks are already cut off by the port (none is
    /// made after this); the port then feeds [`Input::FenceDone`]. The client's late
    /// `AccessDone` is not to be fed after that (the machine would refuse it, changing
    /// nothing).
    fn fence(&mut self, client: ClientHandle) {
        let _ = client;
    }

    /// Claim resources and start the hardware ([`HardwareCommand::Start`]); the answer is
    /// fed as [`Input::StartDone`].
    fn start(&mut self, device: DeviceId) -> StartResult {
        let _ = device;
        StartResult::Started
    }

    /// Quiesce the hardware ([`HardwareCommand::Shutdown`]).
    fn shutdown(&mut self, device: DeviceId) {
        let _ = device;
    }

    /// Release resources without touching registers ([`HardwareCommand::ReleaseResources`]).
    fn release_resources(&mut self, device: DeviceId) {
        let _ = device;
    }

    /// Every output, just before the port acts on it (completions, cycle results,
    /// `DeviceFailed`, `ClientGone`, `DeviceRemoved` and `UnloadMayFinish` only reach the
    /// board here). On [`Output::DeviceFailed`] the device is dead until removed (its clients
    /// are told [`Event::DeviceFatal`]): light the fault LED, record the cause, ask the host
    /// to remove it. The port also keeps the last cause ([`Firmware::last_failure`]).
    fn observe(&mut self, output: &Output) {
        let _ = output;
    }

    /// A hardware reset finished, with what is fed as [`Input::ResetDone`].
    fn reset_finished(&mut self, device: DeviceId, result: ResetResult) {
        let _ = (device, result);
    }
}

/// What a client answers from inside its callback ([`Board::deliver`]): inputs of that
/// client, fed in order right after the callback returns, before its `CallbackDone`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answers {
    client: ClientHandle,
    inputs: heapless::Vec<Input, { Answers::CAPACITY }>,
    overflow: bool,
}

impl Answers {
    /// Answers one callback can give.
    pub const CAPACITY: usize = 4;

    /// No answer yet, from `client`.
    pub fn new(client: ClientHandle) -> Self {
        Answers {
            client,
            inputs: heapless::Vec::new(),
            overflow: false,
        }
    }

    /// The client answering.
    pub fn client(&self) -> ClientHandle {
        self.client
    }

    /// Answer `RESET`: quiesced, reset the hardware (`Input::ResetExecute`).
    pub fn reset_execute(&mut self) {
        self.push(Input::ResetExecute {
            client: self.client,
        });
    }

    /// Answer `RESET`: quiesced, and can recover without a hardware reset
    /// (`Input::CanRecover`).
    pub fn can_recover(&mut self) {
        self.push(Input::CanRecover {
            client: self.client,
        });
    }

    /// Fetch the new interface (`Input::AcquireInterface`, after `RESET_END`).
    pub fn acquire_interface(&mut self) {
        self.push(Input::AcquireInterface {
            client: self.client,
        });
    }

    /// Detach (`Input::Unregister`, after `Removed`).
    pub fn unregister(&mut self) {
        self.push(Input::Unregister {
            client: self.client,
        });
    }

    /// Ask for a soft reset (`Input::ResetRequest`).
    pub fn reset_request(&mut self) {
        self.push(Input::ResetRequest {
            client: self.client,
        });
    }

    /// Any other input. Past [`CAPACITY`](Self::CAPACITY) answers the rest are dropped and
    /// reported ([`PortError::TooManyAnswers`]).
    pub fn push(&mut self, input: Input) {
        if self.inputs.push(input).is_err() {
            self.overflow = true;
        }
    }

    /// The answers, in order.
    pub fn inputs(&self) -> &[Input] {
        &self.inputs
    }
}

/// A completion or answer thread mode owes the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owed {
    input: Input,
    /// A client's answer from inside its callback (may be refused: reported, not a bug).
    answer: bool,
}

/// How thread mode sleeps when it has nothing to do ([`Firmware::run`]).
///
/// `sleep` must check `ready` *with interrupts masked* and, if it says no work is waiting,
/// sleep in a way that an interrupt pended after the check still wakes (on Cortex-M: `wfi`
/// with PRIMASK set wakes on a pending interrupt, which runs once PRIMASK is restored), so
/// an interrupt that lands between the check and the sleep is never lost.
pub trait Idle {
    /// Sleep until an interrupt, unless `ready()` (work waiting or a deadline due) is true.
    fn sleep(&mut self, ready: &mut dyn FnMut() -> bool);
}

/// The Cortex-M idle: `critical_section::with(|_| if !ready() { wfi })`. Correct with a
/// PRIMASK-based critical section (cortex-m's `critical-section-single-core`).
#[cfg(feature = "cortex-m")]
#[derive(Debug, Default, Clone, Copy)]
pub struct WfiIdle;

#[cfg(feature = "cortex-m")]
impl Idle for WfiIdle {
    fn sleep(&mut self, ready: &mut dyn FnMut() -> bool) {
        critical_section::with(|_| {
            if !ready() {
                cortex_m::asm::wfi();
            }
        });
    }
}

/// A refusal or failure seen by thread mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortError<E> {
    /// The machine refused the input; nothing changed.
    Refused(Error),
    /// The output buffer lacks room for the input: [`Firmware::pump`] first. Nothing
    /// changed.
    Backlog {
        /// Free entries the input needs.
        needed: usize,
    },
    /// A reset pulse failed; the machine was told [`ResetResult::Failed`].
    Reset {
        /// The device.
        device: DeviceId,
        /// What the reset line reported.
        error: E,
    },
    /// The machine refused a completion the port owed it (a core or port bug).
    CompletionRefused {
        /// The completion.
        input: Input,
        /// Why.
        error: Error,
    },
    /// The shared state was borrowed re-entrantly.
    Busy,
    /// Every completion slot is taken and the buffer has no room to feed one (never seen;
    /// see the README's bound).
    Stalled,
    /// The machine refused an answer a client gave from its callback ([`Answers`]), e.g. a
    /// client revoked meanwhile. Nothing changed.
    AnswerRefused {
        /// The answer.
        input: Input,
        /// Why.
        error: Error,
    },
    /// A callback gave more than [`Answers::CAPACITY`] answers; the rest were dropped.
    TooManyAnswers {
        /// The client.
        client: ClientHandle,
    },
}

impl<E> From<Busy> for PortError<E> {
    fn from(_: Busy) -> Self {
        PortError::Busy
    }
}

/// One unit of thread-mode work, as done by [`Firmware::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A completion the port owed (callback returned, reset or start done) was fed.
    Fed(Input),
    /// A buffered output was acted on.
    Acted(Output),
    /// A fatal error latched by the interrupt was fed, with the machine's answer.
    ReplayedFatal(DeviceId, Result<Reply, Error>),
    /// Nothing to do.
    Idle,
}

/// Thread-mode counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadStats {
    /// Outputs acted on.
    pub acted: u32,
    /// Client callbacks made.
    pub callbacks: u32,
    /// Reset pulses commanded.
    pub resets: u32,
    /// Reset pulses that failed.
    pub reset_failures: u32,
    /// Answers clients gave from inside their callbacks.
    pub answers: u32,
    /// Times [`Firmware::run`] slept.
    pub sleeps: u32,
    /// Timeouts fed by [`Firmware::run`].
    pub timeouts: u32,
    /// Devices the machine failed ([`Output::DeviceFailed`]).
    pub failures: u32,
}

/// One unit of work before the reset pulse, which the sync and async fronts run their way.
pub(crate) enum Work {
    Done(Step),
    Reset(Output, DeviceId),
}

/// The thread-mode half of the port: borrows the shared state, owns the reset control `R`
/// and the board `B`, and keeps the completions it owes the machine.
pub struct Firmware<'a, L, R, B, const D: usize, const C: usize, const P: usize, const Q: usize>
where
    L: Lock<Shared<D, C, P, Q>>,
    R: ResetControl,
    B: Board,
{
    shared: &'a L,
    reset: R,
    board: B,
    owed: Deque<Owed, Q>,
    error: Option<PortError<R::Error>>,
    stats: ThreadStats,
    last_failure: Option<(DeviceId, FailureCause)>,
}

impl<'a, L, R, B, const D: usize, const C: usize, const P: usize, const Q: usize>
    Firmware<'a, L, R, B, D, C, P, Q>
where
    L: Lock<Shared<D, C, P, Q>>,
    R: ResetControl,
    B: Board,
{
    /// Thread mode over `shared`.
    pub fn new(shared: &'a L, reset: R, board: B) -> Self {
        Firmware {
            shared,
            reset,
            board,
            owed: Deque::new(),
            error: None,
            stats: ThreadStats::default(),
            last_failure: None,
        }
    }

    /// Feed an input from thread mode (a PnP event, a client call, a tick), acting on
    /// buffered outputs first if the buffer lacks room. Does not act on the input's own
    /// outputs: call [`pump`](Self::pump) (a failed reset pulse met while making room is
    /// reported by the next `pump`). A client's hardware operation is a bracket: feed
    /// `Input::Access { what: Access::HardwareOp, .. }` before it and
    /// [`Input::AccessDone`] when it ends (not once the client was fenced: see
    /// [`Board::fence`]).
    pub fn input(&mut self, input: Input) -> Result<Reply, PortError<R::Error>> {
        match self.submit(input) {
            Err(PortError::Backlog { .. }) => {
                self.pump_keeping_errors()?;
                self.submit(input)
            }
            other => other,
        }
    }

    /// Feed an input without acting on anything: [`PortError::Backlog`] if the buffer lacks
    /// room (the stepwise form, for cooperative schedulers and harnesses).
    pub fn submit(&mut self, input: Input) -> Result<Reply, PortError<R::Error>> {
        match self.feed_now(input)? {
            Ok(reply) => Ok(reply),
            Err(FeedError::Backlog { needed }) => Err(PortError::Backlog { needed }),
            Err(FeedError::Refused(error)) => Err(PortError::Refused(error)),
        }
    }

    /// The timer fired: feed [`Input::Timeout`] at the board's `now` (due once the clock
    /// reaches [`poll_timeout`](Self::poll_timeout); early is harmless).
    pub fn timeout(&mut self) -> Result<Reply, PortError<R::Error>> {
        self.input(Input::Timeout)
    }

    fn feed_now(&mut self, input: Input) -> Result<Result<Reply, FeedError>, Busy> {
        let board = &mut self.board;
        self.shared.lock(|s| s.feed(board.now(), input))
    }

    /// Act on everything buffered, feed every completion and every latched fatal error,
    /// until there is nothing left. Returns how many steps it took, or the first error met
    /// (the work still went on: no completion is dropped).
    pub fn pump(&mut self) -> Result<usize, PortError<R::Error>> {
        let steps = self.pump_keeping_errors()?;
        match self.error.take() {
            Some(error) => Err(error),
            None => Ok(steps),
        }
    }

    fn pump_keeping_errors(&mut self) -> Result<usize, PortError<R::Error>> {
        let mut steps = 0usize;
        loop {
            match self.step() {
                Ok(Step::Idle) => return Ok(steps),
                Ok(_) => {}
                Err(PortError::Busy) => return Err(PortError::Busy),
                Err(PortError::Stalled) => return Err(PortError::Stalled),
                Err(error) => {
                    if self.error.is_none() {
                        self.error = Some(error);
                    }
                }
            }
            steps = steps.saturating_add(1);
        }
    }

    /// One unit of work: feed the oldest owed completion if the buffer has room, else act
    /// on the oldest buffered output, else replay a latched fatal error.
    pub fn step(&mut self) -> Result<Step, PortError<R::Error>> {
        match self.work()? {
            Work::Done(step) => Ok(step),
            Work::Reset(output, device) => {
                let result = self.reset.reset(device);
                self.finish_reset(device, result)
                    .map(|()| Step::Acted(output))
            }
        }
    }

    fn feed_owed(&mut self, owed: Owed) -> Result<Option<Step>, PortError<R::Error>> {
        match self.feed_now(owed.input)? {
            Ok(_) => {
                self.owed.pop_front();
                Ok(Some(Step::Fed(owed.input)))
            }
            Err(FeedError::Refused(error)) => {
                self.owed.pop_front();
                let input = owed.input;
                if owed.answer {
                    fw_debug!("answer refused: {}", error);
                    Err(PortError::AnswerRefused { input, error })
                } else {
                    fw_warn!("completion refused: {}", error);
                    Err(PortError::CompletionRefused { input, error })
                }
            }
            Err(FeedError::Backlog { .. }) => Ok(None),
        }
    }

    pub(crate) fn work(&mut self) -> Result<Work, PortError<R::Error>> {
        if let Some(&owed) = self.owed.front() {
            if let Some(step) = self.feed_owed(owed)? {
                return Ok(Work::Done(step));
            }
        }
        if self.owed.is_full() {
            return Err(PortError::Stalled);
        }
        if let Some(output) = self.shared.lock(Shared::pop)? {
            if let Output::Hardware {
                device,
                command: HardwareCommand::Reset,
            } = output
            {
                self.stats.acted = self.stats.acted.saturating_add(1);
                self.stats.resets = self.stats.resets.saturating_add(1);
                self.board.observe(&output);
                return Ok(Work::Reset(output, device));
            }
            return self.act(output).map(|()| Work::Done(Step::Acted(output)));
        }
        if let Some(&owed) = self.owed.front() {
            // The buffer is empty now (an interrupt may have emptied it since the first
            // try only under the planted fault), so the completion fits.
            return match self.feed_owed(owed)? {
                Some(step) => Ok(Work::Done(step)),
                None => Err(PortError::Stalled),
            };
        }
        let board = &mut self.board;
        if let Some((device, result)) = self.shared.lock(|s| s.replay_latched(board.now()))? {
            return Ok(Work::Done(Step::ReplayedFatal(device, result)));
        }
        Ok(Work::Done(Step::Idle))
    }

    /// Feed the outcome of a reset pulse (owed as `ResetDone`), reporting a failed pulse.
    pub(crate) fn finish_reset(
        &mut self,
        device: DeviceId,
        result: Result<(), R::Error>,
    ) -> Result<(), PortError<R::Error>> {
        let (result, error) = match result {
            Ok(()) => (ResetResult::Succeeded, None),
            Err(error) => {
                fw_warn!("device {} reset pulse failed", device.0);
                self.stats.reset_failures = self.stats.reset_failures.saturating_add(1);
                (ResetResult::Failed, Some(error))
            }
        };
        self.board.reset_finished(device, result);
        self.owe(Input::ResetDone { device, result })?;
        match error {
            Some(error) => Err(PortError::Reset { device, error }),
            None => Ok(()),
        }
    }

    /// Whether thread mode has work: an owed completion, a buffered output or a latched
    /// fatal error (the negation of [`is_idle`](Self::is_idle)).
    pub fn has_work(&self) -> Result<bool, Busy> {
        self.is_idle().map(|idle| !idle)
    }

    /// The owner loop, so that firmware does not write its own: act on every output (client
    /// callbacks through [`Board::deliver`], whose answers are fed before the callback's
    /// `CallbackDone`; the reset pulse; start, shutdown, fences), feed latched fatal errors,
    /// feed [`Input::Timeout`] once the board's clock reaches [`poll_timeout`](Self::poll_timeout),
    /// and sleep through `idle` when nothing is left — the readiness check (work waiting, the
    /// deadline due) runs inside `idle`'s critical section, so an interrupt that latches a
    /// fatal error or a timer tick just before the sleep is never missed.
    ///
    /// Returns `Ok(())` once `done` says so (checked whenever thread mode is idle), or the
    /// first error met; the work behind it went on (no completion dropped), so calling `run`
    /// again resumes. Every client gets its events in order and none is lost: the machine
    /// keeps at most one callback in flight a client, and a callback is made synchronously
    /// here, so no mailbox stands between the machine and the client.
    ///
    /// ```ignore
    /// let mut fw = Firmware::new(&MACHINE, reset_line, board);
    /// fw.run(&mut WfiIdle, |fw| fw.board().unloaded)?;
    /// ```
    pub fn run<I: Idle>(
        &mut self,
        idle: &mut I,
        mut done: impl FnMut(&mut Self) -> bool,
    ) -> Result<(), PortError<R::Error>> {
        loop {
            self.pump()?;
            let deadline = self.poll_timeout()?;
            if let Some(deadline) = deadline {
                if self.board.now() >= deadline {
                    self.stats.timeouts = self.stats.timeouts.saturating_add(1);
                    match self.submit(Input::Timeout) {
                        Ok(_) | Err(PortError::Backlog { .. }) => continue,
                        Err(error) => return Err(error),
                    }
                }
            }
            if done(self) {
                return Ok(());
            }
            self.stats.sleeps = self.stats.sleeps.saturating_add(1);
            let shared = self.shared;
            let owed = !self.owed.is_empty();
            let board = &mut self.board;
            idle.sleep(&mut || {
                owed || shared.lock(|s| s.has_work()).unwrap_or(true)
                    || deadline.is_some_and(|d| board.now() >= d)
            });
        }
    }

    fn owe(&mut self, input: Input) -> Result<(), PortError<R::Error>> {
        self.owe_as(input, false)
    }

    fn owe_as(&mut self, input: Input, answer: bool) -> Result<(), PortError<R::Error>> {
        self.owed
            .push_back(Owed { input, answer })
            .map_err(|_| PortError::Stalled)
    }

    fn act(&mut self, output: Output) -> Result<(), PortError<R::Error>> {
        self.stats.acted = self.stats.acted.saturating_add(1);
        self.board.observe(&output);
        match output {
            Output::Notify { client, event } => {
                self.stats.callbacks = self.stats.callbacks.saturating_add(1);
                let mut answers = Answers::new(client);
                self.board.deliver(client, event, &mut answers);
                for &input in answers.inputs() {
                    self.stats.answers = self.stats.answers.saturating_add(1);
                    self.owe_as(input, true)?;
                }
                self.owe(Input::CallbackDone { client })?;
                if answers.overflow {
                    return Err(PortError::TooManyAnswers { client });
                }
                Ok(())
            }
            Output::Hardware { device, command } => match command {
                HardwareCommand::Start => {
                    let result = self.board.start(device);
                    self.owe(Input::StartDone { device, result })
                }
                HardwareCommand::Reset => {
                    // `work` hands resets to `step` (or the async front) before `act`.
                    self.stats.resets = self.stats.resets.saturating_add(1);
                    let result = self.reset.reset(device);
                    self.finish_reset(device, result)
                }
                HardwareCommand::Shutdown => {
                    self.board.shutdown(device);
                    Ok(())
                }
                HardwareCommand::ReleaseResources => {
                    self.board.release_resources(device);
                    Ok(())
                }
                // Power (issue 15): no board hook yet; the command completes at once.
                HardwareCommand::PowerDown => self.owe(Input::PowerDownDone { device }),
                HardwareCommand::PowerUp => self.owe(Input::PowerUpDone {
                    device,
                    result: PowerUpResult::Powered,
                }),
            },
            Output::Fence { client } => {
                // Its callback, if made, has returned (thread mode makes them); the one
                // still owed is superseded by the fence, and so are its answers.
                let mut kept: Deque<Owed, Q> = Deque::new();
                while let Some(owed) = self.owed.pop_front() {
                    let its_answer = owed.answer && answer_client(&owed.input) == Some(client);
                    if owed.input != (Input::CallbackDone { client }) && !its_answer {
                        // Cannot fail: `kept` holds no more than `owed` did.
                        let _ = kept.push_back(owed);
                    }
                }
                self.owed = kept;
                self.board.fence(client);
                self.owe(Input::FenceDone { client })
            }
            Output::DeviceFailed { device, cause } => {
                fw_warn!("device {} failed: {}", device.0, cause);
                self.stats.failures = self.stats.failures.saturating_add(1);
                self.last_failure = Some((device, cause));
                Ok(())
            }
            Output::Complete { .. }
            | Output::ResetCycleFinished { .. }
            | Output::ClientGone { .. }
            | Output::DeviceRemoved { .. }
            | Output::UnloadMayFinish => Ok(()),
        }
    }

    /// Whether thread mode has nothing left to do: no buffered output, no owed completion,
    /// no latched fatal error.
    pub fn is_idle(&self) -> Result<bool, Busy> {
        let owed = self.owed.is_empty();
        self.shared
            .lock(|s| owed && s.pending_len() == 0 && !s.is_latched_any())
    }

    /// Completions owed to the machine.
    pub fn owed(&self) -> usize {
        self.owed.len()
    }

    /// When the machine next needs [`timeout`](Self::timeout).
    pub fn poll_timeout(&self) -> Result<Option<Tick>, Busy> {
        self.shared.lock(|s| s.machine().poll_timeout())
    }

    /// Run `f` on the machine, read-only, inside the lock.
    pub fn with_machine<T>(&self, f: impl FnOnce(&Lifecycle<D, C, P, Q>) -> T) -> Result<T, Busy> {
        self.shared.lock(|s| f(s.machine()))
    }

    /// The shared state.
    pub fn shared(&self) -> &'a L {
        self.shared
    }

    /// The board.
    pub fn board(&self) -> &B {
        &self.board
    }

    /// The board, mutably.
    pub fn board_mut(&mut self) -> &mut B {
        &mut self.board
    }

    #[allow(dead_code)] // used by the embassy front-end
    pub(crate) fn reset_mut(&mut self) -> &mut R {
        &mut self.reset
    }

    #[allow(dead_code)] // used by the embassy front-end
    pub(crate) fn note_timeout(&mut self) {
        self.stats.timeouts = self.stats.timeouts.saturating_add(1);
    }

    #[allow(dead_code)] // used by the embassy front-end
    pub(crate) fn note_sleep(&mut self) {
        self.stats.sleeps = self.stats.sleeps.saturating_add(1);
    }

    /// The reset control.
    pub fn reset_control(&self) -> &R {
        &self.reset
    }

    /// The last device the machine failed and why ([`Output::DeviceFailed`], as handed to
    /// [`Board::observe`]), kept after the device is removed. For a device's current state
    /// ask the machine: `fw.with_machine(|m| m.failure(device))`.
    pub fn last_failure(&self) -> Option<(DeviceId, FailureCause)> {
        self.last_failure
    }

    /// Thread-mode counters.
    pub fn stats(&self) -> ThreadStats {
        self.stats
    }

    /// Give the reset control and the board back.
    pub fn into_parts(self) -> (R, B) {
        (self.reset, self.board)
    }
}

/// The client an answer input belongs to.
fn answer_client(input: &Input) -> Option<ClientHandle> {
    match *input {
        Input::ResetExecute { client }
        | Input::CanRecover { client }
        | Input::AcquireInterface { client }
        | Input::Unregister { client }
        | Input::ResetRequest { client }
        | Input::CallbackDone { client }
        | Input::AccessDone { client }
        | Input::Hold { client }
        | Input::ReleaseHold { client }
        | Input::CannotPause { client }
        | Input::CanPause { client }
        | Input::FenceDone { client }
        | Input::Bind { client, .. }
        | Input::Access { client, .. } => Some(client),
        _ => None,
    }
}
