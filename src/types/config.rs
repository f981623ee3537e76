//! The owner's timeouts: [`Config`].

use super::*;

value_type! {
    /// Timeouts and policies of the machine.
    pub struct Config {
        /// Ticks an untrusted voter has to answer `RESET` before it is revoked.
        pub untrusted_ack_timeout: u64,
        /// Ticks a trusted voter has to answer `RESET` before `trusted_policy` applies.
        pub trusted_ack_timeout: u64,
        /// What a trusted client that misses a deadline costs.
        pub trusted_policy: TrustedTimeoutPolicy,
        /// Ticks every client has to detach once removal begins (when it is told
        /// `Removed`, or queued `Removed` behind a callback still running) before it is
        /// revoked, and fenced if something of its is still in flight.
        pub detach_timeout: u64,
        /// Ticks a callback may run before its client is revoked and fenced (for a trusted
        /// client under [`TrustedTimeoutPolicy::FailDevice`], the device also fails if it
        /// runs or a reset cycle quiesces).
        pub callback_timeout: u64,
        /// Ticks a stop, a hardware reset or a power-down waits for hardware operations in
        /// flight before it revokes and fences the clients that hold them (and a fast-path
        /// close waits for its answer). A removal teardown waits for them within
        /// [`Config::detach_timeout`]: the client is told `Removed` and has that long to
        /// end its operations and detach.
        pub operation_timeout: u64,
    }
}

impl Config {
    /// Moderate defaults, in milliseconds if the owner ticks in milliseconds: 1 s for
    /// user space, 10 s for kernel clients (then revoke), 5 s to detach, 5 s a callback,
    /// 2 s for hardware operations to drain.
    pub const DEFAULT: Config = Config {
        untrusted_ack_timeout: 1_000,
        trusted_ack_timeout: 10_000,
        trusted_policy: TrustedTimeoutPolicy::Revoke,
        detach_timeout: 5_000,
        callback_timeout: 5_000,
        operation_timeout: 2_000,
    };
}

impl Config {
    /// The one deadline of a reset group's cycle, counted from the input that began it:
    /// the longest a member's voter may legitimately take (its `RESET` held behind a
    /// callback, then its answer), plus the drain of hardware operations. Reached before
    /// the hardware reset is commanded, the group's cycle ends without a reset
    /// ([`CannotResetReason::DeadlinePassed`]). Derived, so a `Config` stays as it was.
    #[must_use]
    pub const fn group_cycle_timeout(&self) -> u64 {
        let ack = if self.trusted_ack_timeout > self.untrusted_ack_timeout {
            self.trusted_ack_timeout
        } else {
            self.untrusted_ack_timeout
        };
        ack.saturating_add(self.callback_timeout)
            .saturating_add(self.operation_timeout)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::DEFAULT
    }
}
