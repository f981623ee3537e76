//! The owner loop's step, as one call: feed an input, drain every output into the owner's
//! sink, and say when to arm the timer. What the runtime's `Owner` and every port's glue
//! would otherwise write by hand, and where forgetting the drain showed up only at the
//! next input (an [`Error::OutputBacklog`] far from its cause).

use crate::machine::Lifecycle;
use crate::table::InputKind;
use crate::types::{ClientHandle, DeviceId, Error, Input, Output, Reply, Tick};

value_type! {
    /// What [`Lifecycle::feed`] gives back for an accepted input.
    pub struct Fed {
        /// The machine's answer to the input.
        pub reply: Reply,
        /// When to feed [`Input::Timeout`] next ([`Lifecycle::poll_timeout`] after the
        /// drain): arm the owner's timer at it, or disarm it on `None`. Each `feed`
        /// supersedes the one before.
        pub wake_at: Option<Tick>,
    }
}

value_type! {
    /// An input [`Lifecycle::feed`] refused, with what it concerned: the error, the input
    /// (so its device and client) and the time it was fed at. The machine is exactly as it
    /// was. `Display` names all three; `?` turns it into the bare [`Error`].
    ///
    /// ```
    /// use pnp_lifecycle::*;
    /// let mut m: Lifecycle<1, 2, 1, { queue_capacity(1, 2) }> = Lifecycle::new(Config::DEFAULT);
    /// let hca = DeviceId(0);
    /// let refusal = m.feed(Tick(7), Input::Start { device: hca, token: RequestToken(1) }, drop)
    ///     .unwrap_err();
    /// assert_eq!(refusal.device(), Some(hca));
    /// assert_eq!(refusal.error, Error::InvalidState { phase: PhaseKind::Absent, input: InputKind::Start });
    /// assert_eq!(
    ///     refusal.to_string(),
    ///     "Start for device 0 at tick 7 refused: Start is not accepted while the device is \
    ///      Absent (see the state table)"
    /// );
    /// ```
    pub struct Refusal {
        /// Why it was refused.
        pub error: Error,
        /// The input refused.
        pub input: Input,
        /// The `now` it was fed with.
        pub at: Tick,
    }
}

impl Refusal {
    /// The kind of input refused.
    #[must_use]
    pub const fn kind(&self) -> InputKind {
        self.input.kind()
    }

    /// The device the refused input concerned (`None` for a timeout or unload).
    #[must_use]
    pub const fn device(&self) -> Option<DeviceId> {
        self.input.device()
    }

    /// The client the refused input named, if it named one.
    #[must_use]
    pub const fn client(&self) -> Option<ClientHandle> {
        match self.input {
            Input::Unregister { client }
            | Input::CallbackDone { client }
            | Input::CallbackDoneWith { client, .. }
            | Input::FenceDone { client }
            | Input::AccessDone { client }
            | Input::CanRecover { client }
            | Input::CannotPause { client }
            | Input::CanPause { client }
            | Input::AcquireInterface { client }
            | Input::ResetRequest { client }
            | Input::ResetExecute { client }
            | Input::ResetNack { client }
            | Input::Bind { client, .. }
            | Input::Hold { client }
            | Input::ReleaseHold { client }
            | Input::Access { client, .. } => Some(client),
            _ => None,
        }
    }
}

impl From<Refusal> for Error {
    fn from(refusal: Refusal) -> Error {
        refusal.error
    }
}

impl core::error::Error for Refusal {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<const D: usize, const C: usize, const P: usize, const Q: usize> Lifecycle<D, C, P, Q> {
    /// The recommended owner loop's step: feed `input` at `now`, hand every output to
    /// `sink` in order, and say when to wake ([`Fed::wake_at`]).
    ///
    /// Outputs an earlier input left queued (a typed method or [`handle`](Self::handle)
    /// whose outputs were not drained) are handed to `sink` first, as they are older, so
    /// `feed` never meets [`Error::OutputBacklog`]. `sink` carries the outputs out or
    /// queues them as the owner's work; what carrying them out reports
    /// ([`Input::CallbackDone`], [`Input::StartDone`], ...) is fed with `feed` again.
    ///
    /// ```
    /// use pnp_lifecycle::*;
    /// use std::collections::VecDeque;
    ///
    /// let mut m: Lifecycle<1, 2, 1, { queue_capacity(1, 2) }> = Lifecycle::new(Config::DEFAULT);
    /// let hca = DeviceId(0);
    /// let mut work = VecDeque::new(); // the owner's work, in the machine's order
    /// m.feed(Tick(0), Input::AddDevice { device: hca }, |o| work.push_back(o))?;
    /// let fed = m.feed(Tick(0), Input::Start { device: hca, token: RequestToken(1) }, |o| {
    ///     work.push_back(o)
    /// })?;
    /// assert_eq!(fed.reply, Reply::Accepted);
    /// assert_eq!(work.pop_front(), Some(Output::Hardware { device: hca, command: HardwareCommand::Start }));
    /// let (client, _) = m.register(Tick(1), hca, ClientKind::Untrusted)?; // typed, not drained
    /// let fed = m.feed(Tick(1), Input::ResetRequest { client }, |o| work.push_back(o));
    /// // Refused (the device is still starting), naming the client and the time.
    /// let refusal = fed.unwrap_err();
    /// assert_eq!((refusal.client(), refusal.at), (Some(client), Tick(1)));
    /// # Ok::<(), Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// A [`Refusal`]: the input's [`Error`] (see [`handle`](Self::handle)) with the
    /// input and `now`. Nothing changed; the outputs of earlier inputs were handed to
    /// `sink` all the same.
    pub fn feed(
        &mut self,
        now: Tick,
        input: Input,
        mut sink: impl FnMut(Output),
    ) -> Result<Fed, Refusal> {
        self.drain_outputs(&mut sink);
        let result = self.handle(now, input);
        self.drain_outputs(&mut sink);
        match result {
            Ok(reply) => Ok(Fed {
                reply,
                wake_at: self.poll_timeout(),
            }),
            Err(error) => Err(Refusal {
                error,
                input,
                at: now,
            }),
        }
    }

    /// Hand every queued output to `sink`, oldest first, and say when to wake (as
    /// [`poll_timeout`](Self::poll_timeout)): the drain and the timer of the owner loop
    /// after a typed method.
    ///
    /// ```
    /// use pnp_lifecycle::*;
    /// let mut m: Lifecycle<1, 2, 1, { queue_capacity(1, 2) }> = Lifecycle::new(Config::DEFAULT);
    /// m.add_device(Tick(0), DeviceId(0))?;
    /// m.start(Tick(0), DeviceId(0), RequestToken(1))?;
    /// let mut seen = Vec::new();
    /// assert_eq!(m.drain(|o| seen.push(o)), None); // no deadline waits
    /// assert_eq!(seen, [Output::Hardware { device: DeviceId(0), command: HardwareCommand::Start }]);
    /// # Ok::<(), Error>(())
    /// ```
    #[must_use = "arm the owner's timer at the returned time (feed `Input::Timeout` then)"]
    pub fn drain(&mut self, sink: impl FnMut(Output)) -> Option<Tick> {
        self.drain_outputs(sink);
        self.poll_timeout()
    }
}
