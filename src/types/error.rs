//! Why an input was refused: [`Error`] (the input changed nothing).

use super::*;

value_type! {
    /// A refused input. The machine is exactly as it was before the input. `Display` says
    /// what was refused and what to do; it implements [`core::error::Error`], so `?` works
    /// in a `main` returning `Box<dyn std::error::Error>`.
    ///
    /// ```
    /// use pnp_lifecycle::*;
    /// let mut m: Lifecycle<1, 2, 1, { queue_capacity(1, 2) }> = Lifecycle::new(Config::DEFAULT);
    /// m.handle(Tick(10), Input::AddDevice { device: DeviceId(0) }).unwrap();
    /// let before = m.clone();
    /// let error = m.handle(Tick(9), Input::Unload).unwrap_err();
    /// assert_eq!(error, Error::TimeWentBackwards { last: Tick(10) });
    /// assert_eq!(
    ///     error.to_string(),
    ///     "time went backwards: now is earlier than the last input's time 10"
    /// );
    /// assert!(m == before, "a refused input changes nothing");
    /// ```
    #[non_exhaustive]
    pub enum Error {
        /// Driver unload finished: the machine takes no more inputs.
        Unloaded,
        /// Driver unload began: no new device or registration.
        Unloading,
        /// Driver unload was already requested.
        UnloadAlreadyRequested,
        /// The device id is not below the `DEVICES` capacity.
        NoSuchDevice,
        /// The per-state table refuses this input in the device's state.
        InvalidState {
            /// The device's state.
            phase: PhaseKind,
            /// The input.
            input: InputKind,
        },
        /// Query remove or query stop was vetoed.
        Vetoed(VetoReason),
        /// The port index is not below the `PORTS` capacity, or the port is not configured.
        NoSuchPort,
        /// The port was configured already.
        PortAlreadyConfigured,
        /// A binding must not be empty.
        EmptyBinding,
        /// The binding mixes protocols.
        MixedProtocols {
            /// The protocol of the lowest port.
            first: Protocol,
            /// Another protocol in the set.
            other: Protocol,
        },
        /// The client has not bound any port.
        NotBound,
        /// Every client slot is taken.
        RegistryFull,
        /// The handle names no client: never issued, or its slot was reused.
        UnknownClient,
        /// The client was revoked: every call fails.
        ClientRevoked,
        /// The client was told `Removed` (or unregistered): it may only detach.
        ClientDetaching,
        /// The interface epoch is old: acquire the interface again.
        StaleEpoch {
            /// The device's current epoch.
            current: Epoch,
        },
        /// The client is not a voter of the quiescing cycle, or answered already.
        NotVoting,
        /// A hardware access by a client that has answered `RESET` or joined the cycle.
        ResetInProgress,
        /// A hardware access while the device is going to or in a low-power state that
        /// the access cannot end (system sleep, or a power-down under way): retry after
        /// [`Event::Resumed`].
        Suspended {
            /// Why the device is (going) down.
            kind: PowerDownKind,
        },
        /// The client already holds the device.
        AlreadyHolding,
        /// The client does not hold the device.
        NotHolding,
        /// A PnP request of this kind is already pending for the device.
        RequestPending,
        /// Removal was requested: no new reset request.
        RemoveInProgress,
        /// No callback to this client is in flight.
        NoCallbackInFlight,
        /// No hardware operation of this client is in flight.
        NoOperationInFlight,
        /// The client has the most hardware operations in flight it may have: finish one.
        TooManyOperations,
        /// The client already declared it cannot pause.
        AlreadyCannotPause,
        /// The client had not declared it cannot pause.
        NotCannotPause,
        /// The owner was not asked to fence this client (or reported it already).
        NoFenceRequested,
        /// [`Input::FastPathClosed`] for a client whose fast-path gate the machine is not
        /// waiting to see closed (never asked, answered already, or fenced meanwhile).
        FastPathNotClosing,
        /// The client answered a `RESET` it has not been called with yet: its previous
        /// callback has not returned, so the `RESET` still waits in its mailbox.
        ResetNotDelivered,
        /// The owner reported a hardware completion with no command of that kind in flight.
        NoHardwareCommandInFlight,
        /// An input's `now` is earlier than the last one accepted.
        TimeWentBackwards {
            /// The last time accepted.
            last: Tick,
        },
        /// The epoch counter is at its maximum: no more reset cycles.
        EpochExhausted,
        /// The device is already a member of a reset group: leave it first.
        AlreadyInResetGroup {
            /// The group it belongs to.
            group: GroupId,
        },
        /// The group id is not below the `DEVICES` capacity.
        NoSuchGroup,
        /// The device's reset group runs a cycle: membership changes wait for its end.
        GroupCycleInProgress {
            /// The group.
            group: GroupId,
        },
        /// The output queue lacks room for the worst case of this input: drain it first.
        OutputBacklog {
            /// Free entries needed.
            needed: u16,
        },
    }
}
