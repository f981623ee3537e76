//! A flight recorder: the last inputs of a machine, with their time, reply and outputs.
//!
//! Fixed capacity, `no_std`, no heap: `N` records of at most `O` outputs each. The owner
//! records every input right after handling it, while its outputs are still queued:
//!
//! ```
//! use pnp_lifecycle::*;
//!
//! let mut m: Lifecycle<1, 2, 1, { queue_capacity(1, 2) }> = Lifecycle::new(Config::DEFAULT);
//! let mut recorder: Recorder<32, 8> = Recorder::new();
//! for (now, input) in [
//!     (Tick(0), Input::AddDevice { device: DeviceId(0) }),
//!     (Tick(0), Input::Start { device: DeviceId(0), token: RequestToken(1) }),
//! ] {
//!     let reply = m.handle(now, input);
//!     recorder.record(now, input, reply, m.pending_outputs());
//!     while let Some(_output) = m.poll_output() { /* carry it out */ }
//! }
//! assert_eq!(recorder.len(), 2);
//! // `{}` prints a readable timeline; `write_replay_test` writes it as a Rust test.
//! let timeline = format!("{recorder}");
//! assert!(timeline.contains("Start"));
//! ```
//!
//! Printed with `{}` it is a readable timeline (the one the demonstration shows).
//! [`Recorder::write_replay_test`] writes it as a Rust test that replays every input on a
//! new machine and asserts the same replies and outputs, so a field trace becomes a
//! regression test. A replay is exact while nothing was dropped ([`Recorder::dropped`]
//! is zero): size `N` for the whole life of the machine you want to replay.

use crate::types::{Config, Error, Input, Output, Reply, Tick};
use core::fmt::{self, Write};
use heapless::{Deque, Vec};

/// One recorded input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<const O: usize> {
    /// The owner's clock when the input happened.
    pub now: Tick,
    /// The input.
    pub input: Input,
    /// The machine's answer.
    pub reply: Result<Reply, Error>,
    /// Its outputs, oldest first (at most `O`; see [`Record::truncated`]).
    pub outputs: Vec<Output, O>,
    /// Outputs beyond `O` that were not kept.
    pub truncated: u16,
}

/// A ring of the last `N` inputs, each with up to `O` outputs.
#[derive(Debug, Clone)]
pub struct Recorder<const N: usize, const O: usize> {
    records: Deque<Record<O>, N>,
    dropped: u32,
}

impl<const N: usize, const O: usize> Default for Recorder<N, O> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize, const O: usize> Recorder<N, O> {
    /// An empty recorder.
    pub const fn new() -> Self {
        Recorder {
            records: Deque::new(),
            dropped: 0,
        }
    }

    /// Record `input`, handled at `now` with `reply`; `outputs` are the outputs it queued
    /// (pass [`crate::Lifecycle::pending_outputs`] before draining). When full, the oldest
    /// record makes room.
    pub fn record<'a>(
        &mut self,
        now: Tick,
        input: Input,
        reply: Result<Reply, Error>,
        outputs: impl IntoIterator<Item = &'a Output>,
    ) {
        let mut kept = Vec::new();
        let mut truncated: u16 = 0;
        for output in outputs {
            if kept.push(*output).is_err() {
                truncated = truncated.saturating_add(1);
            }
        }
        if self.records.is_full() {
            self.records.pop_front();
            self.dropped = self.dropped.saturating_add(1);
        }
        let _ = self.records.push_back(Record {
            now,
            input,
            reply,
            outputs: kept,
            truncated,
        });
    }

    /// The records kept, oldest first.
    pub fn records(&self) -> impl Iterator<Item = &Record<O>> {
        self.records.iter()
    }

    /// How many records are kept.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// How many of the oldest records were dropped to make room.
    pub const fn dropped(&self) -> u32 {
        self.dropped
    }

    /// Write the trace as a Rust test named `name` that builds `machine` (a type such as
    /// `Lifecycle<1, 4, 2, { queue_capacity(1, 4) }>`) with `config`, replays every input
    /// and asserts the recorded replies and outputs. Fails with [`fmt::Error`] if records
    /// were dropped or outputs truncated: such a trace cannot be replayed exactly.
    pub fn write_replay_test(
        &self,
        w: &mut impl Write,
        name: &str,
        machine: &str,
        config: &Config,
    ) -> fmt::Result {
        if self.dropped > 0 || self.records.iter().any(|r| r.truncated > 0) {
            return Err(fmt::Error);
        }
        writeln!(
            w,
            "// A trace recorded by pnp_lifecycle::Recorder, replayed."
        )?;
        writeln!(w, "use pnp_lifecycle::*;")?;
        writeln!(
            w,
            "#[allow(unused_imports)]\nuse pnp_lifecycle::{{Access::*, ClientKind::*, LinkState::*, \
             Protocol::*, ResetResult::*, StartResult::*, TrustedTimeoutPolicy::*}};"
        )?;
        writeln!(w)?;
        writeln!(w, "#[test]\nfn {name}() {{")?;
        writeln!(w, "    let mut m: {machine} = Lifecycle::new({config:?});")?;
        writeln!(w, "    let steps: &[(u64, Input, &str, &str)] = &[")?;
        for r in self.records.iter() {
            writeln!(
                w,
                "        ({}, Input::{:?}, {:?}, {:?}),",
                r.now.0,
                r.input,
                DebugText(&r.reply),
                DebugText(&r.outputs.as_slice())
            )?;
        }
        writeln!(w, "    ];")?;
        writeln!(w, "    for (now, input, reply, outputs) in steps {{")?;
        writeln!(w, "        let got = m.handle(Tick(*now), *input);")?;
        writeln!(
            w,
            "        let outs: Vec<Output> = core::iter::from_fn(|| m.poll_output()).collect();"
        )?;
        writeln!(
            w,
            "        assert_eq!(format!(\"{{got:?}}\"), *reply, \"reply to {{input:?}} at {{now}}\");"
        )?;
        writeln!(
            w,
            "        assert_eq!(format!(\"{{outs:?}}\"), *outputs, \"outputs of {{input:?}} at {{now}}\");"
        )?;
        writeln!(w, "    }}")?;
        writeln!(w, "}}")
    }
}

/// A value's `Debug` text, itself printed as a string literal by `{:?}`.
struct DebugText<'a, T: fmt::Debug>(&'a T);

impl<T: fmt::Debug> fmt::Debug for DebugText<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        write!(Escape(f), "{:?}", self.0)?;
        f.write_char('"')
    }
}

/// Escapes `"` and `\` so the text is a valid string literal.
struct Escape<'a, 'b>(&'a mut fmt::Formatter<'b>);

impl Write for Escape<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            if c == '"' || c == '\\' {
                self.0.write_char('\\')?;
            }
            self.0.write_char(c)?;
        }
        Ok(())
    }
}

impl<const N: usize, const O: usize> fmt::Display for Recorder<N, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.dropped > 0 {
            writeln!(f, "({} older records dropped)", self.dropped)?;
        }
        for r in self.records.iter() {
            write!(f, "t={:<8} {:?}", r.now.0, r.input)?;
            match &r.reply {
                Ok(reply) => writeln!(f, "  -> {reply:?}")?,
                Err(error) => writeln!(f, "  -> refused: {error}")?,
            }
            for output in r.outputs.iter() {
                writeln!(f, "{:11}{:?}", "", output)?;
            }
            if r.truncated > 0 {
                writeln!(f, "{:11}(+{} outputs not kept)", "", r.truncated)?;
            }
        }
        Ok(())
    }
}
