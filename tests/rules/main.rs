//! One test per rule of `DESIGN.md`, one module per section, each test named after the
//! promise it checks and placed in the order of the section's bullets. Every step goes
//! through the test owner of `tests/common`, which also checks on each input that a
//! refused input changed nothing (I10), that nothing is addressed to a client after its
//! end (I1) and that a client has at most one callback in flight.
//!
//! DESIGN section → module here; other test files that cover it:
//!
//! - "Architecture: sans-IO core, thin OS ports" → `architecture`; `owner_loop.rs` (feed
//!   and drain, the owner loop), `typed_methods.rs` (a typed method per input, the output
//!   bound), `recorder.rs` and `recorded_trace.rs` (a recorded trace replayed).
//! - "Device lifecycle (Windows PnP vocabulary)" → `device_lifecycle`; `state_matrix.rs`
//!   (every input in every state against the table), `transitions.rs` (every state
//!   change), `scenarios.rs`.
//! - "Clients" → `clients`, and its bullet "Hardware operations are bracketed" →
//!   `operations`; `scenarios.rs` (a `RESET` held behind a callback gets its whole
//!   deadline, a deadline near the clock's end), `state_matrix.rs` (operations in flight
//!   racing stop, reset and removal).
//! - "Operations: the fast path" → `fast_path.rs`, `explore.rs` (`explore_fast_path`),
//!   `ports/runtime/tests/fast_gate.rs` (the gate under shuttle's schedules).
//! - "Cost" → `answer_with_return.rs` (an answer with the callback's return); instruction
//!   counts are measured by `compare/run.sh`, not asserted in tests.
//! - "The reset cycle" → `reset_cycle`; `scenarios.rs`.
//! - "Reset groups" → `groups.rs`.
//! - "Power (device low-power states and system sleep)" → `power`; `query_power.rs`
//!   (asking changes nothing), `power_while_query_pending.rs`, `scenarios.rs`.
//! - "Links and bindings" → `links_and_bindings`; `scenarios.rs`.
//! - "Errors" → `errors`; `state_matrix.rs` (refusals change nothing), `owner_loop.rs`
//!   (what a refusal names).
//! - "Invariants" → named in the comments of the tests above; checked on every step of
//!   random and exhaustive runs by `properties.rs`, `explore.rs`, `fuzz_replay.rs`,
//!   `race_replay.rs`; `planted_core_faults.rs` and `planted_faults.rs` show the oracle
//!   catches each planted fault.
//!
//! Helpers more than one module uses are in `support`.

#[path = "../common/mod.rs"]
mod common;
mod support;

mod architecture;
mod clients;
mod device_lifecycle;
mod errors;
mod links_and_bindings;
mod operations;
mod power;
mod reset_cycle;
