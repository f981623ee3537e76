//! Thread mode: acts on the machine's queued outputs outside the lock — client callbacks, the reset
//! pulse, the board's start and shutdown — and feeds their completions back.

use heapless::Deque;
use pnp_lifecycle::{
    Access, ClientHandle, DeviceId, Epoch, Error, Event, HardwareCommand, Input, Lifecycle, Output,
    PhaseKind, PowerDownKind, PowerUpResult, Reply, RequestToken, ResetResult, StartResult, Tick,
};

use crate::lock::{Busy, Lock};
use crate::reset::ResetControl;
use crate::shared::{FeedError, Shared};

/// The board's side of the machine's outputs (the firmware's vocabulary: what the
/// runtime's `Os` is to the hosted ports). Every method is called from thread mode,
/// outside any critical section.
pub trait Board {
    /// The platform's time now (a monotonic timer, in the unit of the machine's
    /// [`pnp_lifecycle::Config`]). Read inside the critical section for every input thread
    /// mode feeds.
    fn now(&mut self) -> Tick;

    /// A client callback ([`Output::Notify`]). When it returns the port feeds
    /// [`Input::CallbackDone`].
    fn notify(&mut self, client: ClientHandle, event: Event);

    /// A client callback that may answer from inside the notification: acknowledge `RESET`
    /// with [`Answers::reset_execute`] or [`Answers::can_recover`], acquire the interface
    /// on `RESET_END`, unregister on `Removed`. The port feeds the answers, in order,
    /// before the callback's [`Input::CallbackDone`], never losing one. Default:
    /// [`notify`](Self::notify), no answer.
    fn deliver(&mut self, client: ClientHandle, event: Event, answers: &mut Answers) {
        let _ = answers;
        self.notify(client, event);
    }

    /// Fence a revoked client ([`Output::Fence`]): mask its path to the hardware (doorbell
    /// page, DMA window, interrupt line), including a hardware operation of it still in
    /// flight, so the stop, reset or teardown waiting for it may go ahead. Must not block.
    /// The port has already cut off its callbacks and then feeds [`Input::FenceDone`]; the
    /// client's late `AccessDone` is not to be fed after that.
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

    /// Put the device in its low-power state ([`HardwareCommand::PowerDown`]: gate its
    /// clocks, switch its power domain off); the last touch of its hardware until
    /// [`power_up`](Self::power_up). Fed back as [`Input::PowerDownDone`]. Default: the
    /// hardware keeps its power.
    fn power_down(&mut self, device: DeviceId) {
        let _ = device;
    }

    /// Bring the device back to D0 ([`HardwareCommand::PowerUp`], the only hardware touch
    /// the core commands in a low-power state); the answer is fed as
    /// [`Input::PowerUpDone`]: `LostState` ends like a reset (epoch + 1), `Failed` like a
    /// surprise removal. Default: [`PowerUpResult::Powered`].
    fn power_up(&mut self, device: DeviceId) -> PowerUpResult {
        let _ = device;
        PowerUpResult::Powered
    }

    /// Every output, just before the port acts on it (completions, cycle results,
    /// `DeviceFailed`, `ClientGone`, `DeviceRemoved` and `UnloadMayFinish` reach the board
    /// only here). On [`Output::DeviceFailed`] the device is dead until removed: light the
    /// fault LED, ask the host to remove it; the cause stays in `m.failure(device)`.
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

    /// Answer `RESET`: quiesced, reset the hardware (`Input::ResetExecute`).
    pub fn reset_execute(&mut self) {
        self.answer(|client| Input::ResetExecute { client })
    }

    /// Answer `RESET`: quiesced, can recover without a reset (`Input::CanRecover`).
    pub fn can_recover(&mut self) {
        self.answer(|client| Input::CanRecover { client })
    }

    /// Fetch the new interface (`Input::AcquireInterface`, after `RESET_END`).
    pub fn acquire_interface(&mut self) {
        self.answer(|client| Input::AcquireInterface { client })
    }

    /// Detach (`Input::Unregister`, after `Removed`).
    pub fn unregister(&mut self) {
        self.answer(|client| Input::Unregister { client })
    }

    /// Ask for a soft reset (`Input::ResetRequest`).
    pub fn reset_request(&mut self) {
        self.answer(|client| Input::ResetRequest { client })
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

    fn answer(&mut self, input: fn(ClientHandle) -> Input) {
        self.push(input(self.client));
    }
}

/// A completion or answer thread mode owes the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owed {
    input: Input,
    /// `Some(client)`: that client's answer from inside its callback (may be refused).
    answer_of: Option<ClientHandle>,
}

/// How thread mode sleeps when it has nothing to do ([`Firmware::run`]).
///
/// `sleep` must check `ready` *with interrupts masked* and, if no work is waiting, sleep so
/// that an interrupt pended after the check still wakes it (on Cortex-M: `wfi` with PRIMASK
/// set wakes on a pending interrupt, taken once PRIMASK is restored): no lost wake-up.
pub trait Idle {
    /// Sleep until an interrupt, unless `ready()` (work waiting or a deadline due) is true.
    fn sleep(&mut self, ready: &mut dyn FnMut() -> bool);

    /// [`sleep`](Self::sleep) in the board's low-power mode: [`Firmware::run`] calls it when
    /// every device is in a low-power state or absent. The interrupt must still wake it.
    /// Default: `sleep`.
    fn sleep_low_power(&mut self, ready: &mut dyn FnMut() -> bool) {
        self.sleep(ready);
    }
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

/// [`WfiIdle`] that sleeps deep (`SCB.SLEEPDEEP` set around the same masked `wfi`) when
/// every device is in a low-power state. Any enabled interrupt still wakes it.
#[cfg(feature = "cortex-m")]
pub struct DeepSleepIdle(pub cortex_m::peripheral::SCB);

// SCB is not Debug: the name says it all.
#[cfg(feature = "cortex-m")]
impl core::fmt::Debug for DeepSleepIdle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("DeepSleepIdle")
    }
}

#[cfg(feature = "cortex-m")]
impl Idle for DeepSleepIdle {
    fn sleep(&mut self, ready: &mut dyn FnMut() -> bool) {
        WfiIdle.sleep(ready);
    }

    fn sleep_low_power(&mut self, ready: &mut dyn FnMut() -> bool) {
        self.0.set_sleepdeep();
        WfiIdle.sleep(ready);
        self.0.clear_sleepdeep();
    }
}

/// A refusal or failure seen by thread mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortError<E> {
    /// The machine refused the input; nothing changed.
    Refused(Error),
    /// The machine's output queue lacks room for the input: [`Firmware::pump`] first. Nothing
    /// changed.
    Backlog {
        /// Free entries the input needs.
        needed: usize,
    },
    /// A reset pulse failed; the machine was told [`ResetResult::Failed`].
    Reset {
        /// The device.
        device: DeviceId,
        /// What the reset control reported.
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
    /// The machine refused an answer a client gave from its callback ([`Answers`]), e.g.
    /// the client was revoked meanwhile. Nothing changed.
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
    /// [`Firmware::access`]: the device was not back from its idle power-down within the
    /// wait; the access was not granted (retry later).
    PowerUpTimedOut {
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
    /// A completion or answer the port owed was fed.
    Fed(Input),
    /// A buffered output was acted on.
    Acted(Output),
    /// A fatal error latched by the interrupt was fed, with the machine's answer.
    ReplayedFatal(DeviceId, Result<Reply, Error>),
    /// Nothing to do.
    Idle,
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
}

/// The completions thread mode owes and whether it holds an error; the lock, the reset
/// control and the board need not be `Debug`.
impl<L, R, B, const D: usize, const C: usize, const P: usize, const Q: usize> core::fmt::Debug
    for Firmware<'_, L, R, B, D, C, P, Q>
where
    L: Lock<Shared<D, C, P, Q>>,
    R: ResetControl,
    B: Board,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Firmware")
            .field("owed", &self.owed)
            .field("error", &self.error.is_some())
            .finish_non_exhaustive()
    }
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
        }
    }

    /// Feed an input from thread mode (a PnP event, a client call, a tick), acting on
    /// buffered outputs first if the buffer lacks room; meanwhile a fatal error is latched
    /// and fed after the input, so an interrupt storm cannot starve it. Does not act on the input's own
    /// outputs: call [`pump`](Self::pump) (a failed reset pulse met while making room is
    /// reported by the next `pump`). A client's hardware operation is a bracket: feed
    /// `Input::Access { what: Access::HardwareOp, .. }` before it and
    /// [`Input::AccessDone`] when it ends (not once the client was fenced).
    pub fn input(&mut self, input: Input) -> Result<Reply, PortError<R::Error>> {
        match self.submit(input) {
            Err(PortError::Backlog { .. }) => {
                // Until the input is in, fatal errors wait in the latch (fed right after
                // it): an interrupt storm cannot refill the queue ahead of it.
                self.shared.lock(|s| s.hold_fatal_errors(true))?;
                let result = self.pump_keeping_errors().and_then(|_| self.submit(input));
                self.shared.lock(|s| s.hold_fatal_errors(false))?;
                result
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

    /// Ask for a low-power state: an idle power-down or system sleep ([`Input::PowerDown`];
    /// the request completes once the hardware is down).
    pub fn power_down(
        &mut self,
        device: DeviceId,
        kind: PowerDownKind,
        token: RequestToken,
    ) -> Result<Reply, PortError<R::Error>> {
        self.input(Input::PowerDown {
            device,
            kind,
            token,
        })
    }

    /// Bring the device back to D0 ([`Input::PowerUp`]); the board's
    /// [`power_up`](Board::power_up) answers it.
    pub fn wake(
        &mut self,
        device: DeviceId,
        token: RequestToken,
    ) -> Result<Reply, PortError<R::Error>> {
        self.input(Input::PowerUp { device, token })
    }

    /// A client's access ([`Input::Access`]) from thread mode. After an idle power-down the
    /// core commands the power-up and the access waits for it ([`Reply::AccessWaitsForPowerUp`]):
    /// thread mode works (the power-up, the `Resumed` callbacks, deadlines) and retries
    /// until it is granted or refused, or `wait` ticks of the board's clock passed
    /// ([`PortError::PowerUpTimedOut`]). In system sleep it is refused
    /// ([`Error::Suspended`]).
    pub fn access(
        &mut self,
        client: ClientHandle,
        epoch: Epoch,
        what: Access,
        wait: u64,
    ) -> Result<Reply, PortError<R::Error>> {
        let deadline = self.board.now().0.saturating_add(wait);
        let input = Input::Access {
            client,
            epoch,
            what,
        };
        loop {
            match self.input(input)? {
                Reply::AccessWaitsForPowerUp if self.board.now().0 >= deadline => {
                    return Err(PortError::PowerUpTimedOut { client })
                }
                Reply::AccessWaitsForPowerUp => {
                    self.pump_keeping_errors()?;
                    let deadline = self.poll_timeout()?;
                    self.timeout_due(deadline)?;
                }
                reply => return Ok(reply),
            }
        }
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
                Err(error @ (PortError::Busy | PortError::Stalled)) => return Err(error),
                Err(error) => {
                    self.error.get_or_insert(error);
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
        let error = match self.feed_now(owed.input)? {
            Err(FeedError::Backlog { .. }) => return Ok(None),
            Ok(_) => None,
            Err(FeedError::Refused(error)) => Some(error),
        };
        self.owed.pop_front();
        let input = owed.input;
        match (error, owed.answer_of) {
            (None, _) => Ok(Some(Step::Fed(input))),
            (Some(error), Some(_)) => {
                fw_debug!("answer refused: {}", error);
                Err(PortError::AnswerRefused { input, error })
            }
            (Some(error), None) => {
                fw_warn!("completion refused: {}", error);
                Err(PortError::CompletionRefused { input, error })
            }
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
            self.board.observe(&output);
            if let Output::Hardware {
                device,
                command: HardwareCommand::Reset,
            } = output
            {
                return Ok(Work::Reset(output, device));
            }
            return self.act(output).map(|()| Work::Done(Step::Acted(output)));
        }
        if let Some(&owed) = self.owed.front() {
            // The buffer is empty now, so the completion fits.
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
                (ResetResult::Failed, Some(error))
            }
        };
        self.board.reset_finished(device, result);
        self.owe(Input::ResetDone { device, result }, None)?;
        match error {
            Some(error) => Err(PortError::Reset { device, error }),
            None => Ok(()),
        }
    }

    /// Whether thread mode has work: an owed completion, a buffered output or a latched
    /// fatal error.
    pub fn has_work(&self) -> Result<bool, Busy> {
        let owed = !self.owed.is_empty();
        self.shared.lock(|s| owed || s.has_work())
    }

    /// The owner loop, so that firmware does not write its own: act on every output (client
    /// callbacks through [`Board::deliver`], whose answers are fed before the callback's
    /// `CallbackDone`; the reset pulse; start, shutdown, fences), feed latched fatal errors,
    /// feed [`Input::Timeout`] once the board's clock reaches
    /// [`poll_timeout`](Self::poll_timeout), and sleep through `idle` when nothing is left.
    /// The readiness check (work waiting, the deadline due) runs inside `idle`'s critical
    /// section, so an interrupt just before the sleep is never missed.
    ///
    /// Returns `Ok(())` once `done` says so (checked whenever thread mode is idle), or the
    /// first error met; the work behind it went on, so calling `run` again resumes. Each
    /// client gets its events in order and none is lost: the machine keeps at most one
    /// callback in flight a client, and callbacks are made synchronously here.
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
            if self.timeout_due(deadline)? {
                continue;
            }
            if done(self) {
                return Ok(());
            }
            let low = self.with_machine(|m| {
                let mut phases = (0..D).filter_map(|d| m.phase(DeviceId(d as u8)));
                phases.clone().any(|p| p == PhaseKind::LowPower)
                    && phases.all(|p| matches!(p, PhaseKind::LowPower | PhaseKind::Absent))
            })?;
            let shared = self.shared;
            let owed = !self.owed.is_empty();
            let board = &mut self.board;
            let mut ready = || {
                owed || shared.lock(|s| s.has_work()).unwrap_or(true)
                    || deadline.is_some_and(|d| board.now() >= d)
            };
            if low {
                idle.sleep_low_power(&mut ready);
            } else {
                idle.sleep(&mut ready);
            }
        }
    }

    /// Feed [`Input::Timeout`] if the board's clock has reached `deadline`; `true` if fed
    /// (or the buffer was full: pump and come back).
    pub(crate) fn timeout_due(
        &mut self,
        deadline: Option<Tick>,
    ) -> Result<bool, PortError<R::Error>> {
        match deadline {
            Some(deadline) if self.board.now() >= deadline => match self.submit(Input::Timeout) {
                Ok(_) | Err(PortError::Backlog { .. }) => Ok(true),
                Err(error) => Err(error),
            },
            _ => Ok(false),
        }
    }

    fn owe(
        &mut self,
        input: Input,
        answer_of: Option<ClientHandle>,
    ) -> Result<(), PortError<R::Error>> {
        self.owed
            .push_back(Owed { input, answer_of })
            .map_err(|_| PortError::Stalled)
    }

    fn act(&mut self, output: Output) -> Result<(), PortError<R::Error>> {
        match output {
            Output::Notify { client, event } => {
                let mut answers = Answers::new(client);
                self.board.deliver(client, event, &mut answers);
                for &input in answers.inputs() {
                    self.owe(input, Some(client))?;
                }
                self.owe(Input::CallbackDone { client }, None)?;
                if answers.overflow {
                    return Err(PortError::TooManyAnswers { client });
                }
                Ok(())
            }
            Output::Hardware { device, command } => match command {
                HardwareCommand::Start => {
                    let result = self.board.start(device);
                    self.owe(Input::StartDone { device, result }, None)
                }
                HardwareCommand::Shutdown => {
                    self.board.shutdown(device);
                    Ok(())
                }
                HardwareCommand::ReleaseResources => {
                    self.board.release_resources(device);
                    Ok(())
                }
                // `work` hands resets to `step` (or the async front).
                HardwareCommand::Reset => Ok(()),
                HardwareCommand::PowerDown => {
                    self.board.power_down(device);
                    self.owe(Input::PowerDownDone { device }, None)
                }
                HardwareCommand::PowerUp => {
                    let result = self.board.power_up(device);
                    self.owe(Input::PowerUpDone { device, result }, None)
                }
            },
            Output::Fence { client } => {
                // Its callback, if made, has returned (thread mode makes them); the
                // `CallbackDone` still owed and its answers are superseded by the fence.
                let mut kept: Deque<Owed, Q> = Deque::new();
                while let Some(owed) = self.owed.pop_front() {
                    if owed.input != (Input::CallbackDone { client })
                        && owed.answer_of != Some(client)
                    {
                        // Cannot fail: `kept` holds no more than `owed` did.
                        let _ = kept.push_back(owed);
                    }
                }
                self.owed = kept;
                self.board.fence(client);
                self.owe(Input::FenceDone { client }, None)
            }
            Output::DeviceFailed { device, cause } => {
                fw_warn!("device {} failed: {}", device.0, cause);
                Ok(())
            }
            Output::Complete { .. }
            | Output::ResetCycleFinished { .. }
            | Output::ClientGone { .. }
            | Output::DeviceRemoved { .. }
            | Output::UnloadMayFinish => Ok(()),
            // By decision (issue 21, README "Hardware operations"): the firmware's machine
            // is built without `with_fast_path` (every operation is counted by the core,
            // in a critical section), so it never asks for a gate.
            Output::FastPath { .. } => Ok(()),
        }
    }

    /// Completions and answers owed to the machine.
    pub fn owed(&self) -> usize {
        self.owed.len()
    }

    /// When the machine next needs [`timeout`](Self::timeout).
    pub fn poll_timeout(&self) -> Result<Option<Tick>, Busy> {
        self.shared.lock(|s| s.machine().poll_timeout())
    }

    /// Run `f` on the machine, read-only, inside the lock (ask the core: phase, epoch,
    /// failure, clients).
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

    /// The reset control.
    pub fn reset_control(&self) -> &R {
        &self.reset
    }

    /// The reset control, mutably.
    pub fn reset_control_mut(&mut self) -> &mut R {
        &mut self.reset
    }

    /// Give the reset control and the board back.
    pub fn into_parts(self) -> (R, B) {
        (self.reset, self.board)
    }
}
