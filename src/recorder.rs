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
//! [`Recorder::write_sequence_diagram`] draws it as a Mermaid sequence diagram, with the
//! OS, the machine, each client and the hardware as lifelines.

use crate::types::{ClientHandle, Config, Error, Event, FastPathGate, Input, Output, Reply, Tick};
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

impl<const N: usize, const O: usize> Recorder<N, O> {
    /// Draw the trace as a Mermaid sequence diagram (`sequenceDiagram`). Lifelines: `OS`
    /// (the owner: PnP requests, its timer, fences, completions), `M` (the machine), one
    /// per client in order of first appearance (named from `names`, else `client <slot>`)
    /// and `HW` (the hardware: commands and their reports). Each input is an arrow into the
    /// machine from where it comes; a reply other than `Accepted` a dashed arrow back (a
    /// refusal ends in a cross, with the error's text); each output an arrow out of the
    /// machine. A note marks every change of the owner's clock.
    ///
    /// ```
    /// use pnp_lifecycle::*;
    ///
    /// let mut m: Lifecycle<1, 2, 1, { queue_capacity(1, 2) }> = Lifecycle::new(Config::DEFAULT);
    /// let mut recorder: Recorder<8, 8> = Recorder::new();
    /// let add = Input::AddDevice { device: DeviceId(0) };
    /// let reply = m.handle(Tick(0), add);
    /// recorder.record(Tick(0), add, reply, m.pending_outputs());
    /// let mut diagram = String::new();
    /// recorder.write_sequence_diagram(&mut diagram, &[]).unwrap();
    /// assert!(diagram.starts_with("sequenceDiagram\n"));
    /// assert!(diagram.contains("    OS->>M: AddDevice\n"));
    /// ```
    pub fn write_sequence_diagram(
        &self,
        w: &mut impl Write,
        names: &[(ClientHandle, &str)],
    ) -> fmt::Result {
        writeln!(w, "sequenceDiagram")?;
        writeln!(w, "    participant OS")?;
        writeln!(w, "    participant M as machine")?;
        for (i, r) in self.records.iter().enumerate() {
            for (j, client) in mentions(r).enumerate() {
                let seen = self
                    .records
                    .iter()
                    .take(i)
                    .any(|earlier| mentions(earlier).any(|c| c == client))
                    || mentions(r).take(j).any(|c| c == client);
                if !seen {
                    write!(w, "    participant {} as ", Lifeline::Client(client))?;
                    write_client_name(&mut Mermaid(w), client, names)?;
                    writeln!(w)?;
                }
            }
        }
        writeln!(w, "    participant HW as hardware")?;
        if self.dropped > 0 {
            writeln!(
                w,
                "    Note over OS,HW: {} older records dropped",
                self.dropped
            )?;
        }
        let mut clock = None;
        for r in self.records.iter() {
            if clock != Some(r.now) {
                writeln!(w, "    Note over OS,HW: t = {}", r.now.0)?;
                clock = Some(r.now);
            }
            let from = source(&r.input, &r.reply);
            write!(w, "    {from}->>M: ")?;
            write_input(&mut Mermaid(w), &r.input)?;
            writeln!(w)?;
            match &r.reply {
                Ok(Reply::Accepted) => {}
                Ok(Reply::Registered { epoch, .. }) => {
                    writeln!(w, "    M-->>{from}: Registered, epoch {}", epoch.0)?;
                }
                Ok(reply) => {
                    write!(w, "    M-->>{from}: ")?;
                    write!(Mermaid(w), "{reply:?}")?;
                    writeln!(w)?;
                }
                Err(error) => {
                    write!(w, "    M--x{from}: refused: ")?;
                    write!(Mermaid(w), "{error}")?;
                    writeln!(w)?;
                }
            }
            for output in r.outputs.iter() {
                write!(w, "    M->>{}: ", destination(output))?;
                write_output(&mut Mermaid(w), output, names)?;
                writeln!(w)?;
            }
            if r.truncated > 0 {
                writeln!(w, "    Note over M: +{} outputs not kept", r.truncated)?;
            }
        }
        Ok(())
    }
}

/// A lifeline of the sequence diagram.
#[derive(Clone, Copy)]
enum Lifeline {
    Os,
    Hardware,
    Client(ClientHandle),
}

impl fmt::Display for Lifeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lifeline::Os => f.write_str("OS"),
            Lifeline::Hardware => f.write_str("HW"),
            Lifeline::Client(c) => write!(f, "C{}_{}_{}", c.device.0, c.slot, c.generation),
        }
    }
}

/// The client an input comes from, if a client makes it.
fn client_of(input: &Input) -> Option<ClientHandle> {
    match *input {
        Input::Unregister { client }
        | Input::CallbackDone { client }
        | Input::AcquireInterface { client }
        | Input::ResetRequest { client }
        | Input::ResetExecute { client }
        | Input::ResetNack { client }
        | Input::Bind { client, .. }
        | Input::Hold { client }
        | Input::ReleaseHold { client }
        | Input::Access { client, .. }
        | Input::AccessDone { client }
        | Input::CanRecover { client }
        | Input::CannotPause { client }
        | Input::CanPause { client } => Some(client),
        _ => None,
    }
}

/// Every client a record names, in order (with repeats).
fn mentions<const O: usize>(r: &Record<O>) -> impl Iterator<Item = ClientHandle> + '_ {
    let registered = match r.reply {
        Ok(Reply::Registered { client, .. }) => Some(client),
        _ => None,
    };
    client_of(&r.input)
        .into_iter()
        .chain(registered)
        .chain(r.outputs.iter().filter_map(|o| match *o {
            Output::Notify { client, .. }
            | Output::Fence { client }
            | Output::ClientGone { client } => Some(client),
            _ => None,
        }))
}

/// Where an input comes from: a client's call from its client (a registration from the
/// client it registered), a hardware report from the hardware, the rest from the OS.
fn source(input: &Input, reply: &Result<Reply, Error>) -> Lifeline {
    if let Some(client) = client_of(input) {
        return Lifeline::Client(client);
    }
    match (input, reply) {
        (Input::Register { .. }, Ok(Reply::Registered { client, .. })) => Lifeline::Client(*client),
        (
            Input::StartDone { .. }
            | Input::ResetDone { .. }
            | Input::FatalError { .. }
            | Input::LinkChanged { .. }
            | Input::PowerDownDone { .. }
            | Input::PowerUpDone { .. },
            _,
        ) => Lifeline::Hardware,
        _ => Lifeline::Os,
    }
}

/// Where an output goes: an event or `ClientGone` to its client, a command to the
/// hardware, the rest (fences, completions, failures, removal, unload) to the OS.
fn destination(output: &Output) -> Lifeline {
    match *output {
        Output::Notify { client, .. } | Output::ClientGone { client } => Lifeline::Client(client),
        Output::Hardware { .. } => Lifeline::Hardware,
        _ => Lifeline::Os,
    }
}

fn write_client_name(
    w: &mut impl Write,
    client: ClientHandle,
    names: &[(ClientHandle, &str)],
) -> fmt::Result {
    match names.iter().find(|(c, _)| *c == client) {
        Some((_, name)) => w.write_str(name),
        None if client.device.0 == 0 => write!(w, "client {}", client.slot),
        None => write!(w, "client {} of device {}", client.slot, client.device.0),
    }
}

/// ` dev N` for a device other than the first (a one-device trace never shows it).
fn write_device(w: &mut impl Write, device: crate::types::DeviceId) -> fmt::Result {
    if device.0 != 0 {
        write!(w, " dev {}", device.0)?;
    }
    Ok(())
}

/// An input's arrow label: its kind and the data its lifelines do not already say.
fn write_input(w: &mut impl Write, input: &Input) -> fmt::Result {
    write!(w, "{}", input.kind())?;
    if let Some(device) = input.device() {
        write_device(w, device)?;
    }
    match *input {
        Input::ConfigurePort { port, .. } => write!(w, " port {}", port.0)?,
        Input::StartDone { result, .. } => write!(w, ": {result:?}")?,
        Input::ResetDone { result, .. } => write!(w, ": {result:?}")?,
        Input::PowerUpDone { result, .. } => write!(w, ": {result:?}")?,
        Input::LinkChanged { port, state, .. } => write!(w, " port {}: {state:?}", port.0)?,
        Input::Register { kind, .. } => write!(w, " {kind:?}")?,
        Input::PowerDown { kind, .. } => write!(w, " {kind:?}")?,
        Input::Access { epoch, what, .. } => write!(w, " {what:?}, epoch {}", epoch.0)?,
        _ => {}
    }
    if let Some(token) = input.token() {
        write!(w, " (request {})", token.0)?;
    }
    Ok(())
}

/// An output's arrow label.
fn write_output(
    w: &mut impl Write,
    output: &Output,
    names: &[(ClientHandle, &str)],
) -> fmt::Result {
    match *output {
        Output::Notify { event, .. } => write_event(w, &event),
        Output::Hardware { device, command } => {
            write!(w, "{command}")?;
            write_device(w, device)
        }
        Output::Complete {
            device,
            token,
            status,
        } => {
            write!(w, "Complete request {}", token.0)?;
            write_device(w, device)?;
            write!(w, ": {status:?}")
        }
        Output::ResetCycleFinished { device, outcome } => {
            w.write_str("ResetCycleFinished")?;
            write_device(w, device)?;
            write!(w, ": {outcome}")
        }
        Output::Fence { client } => {
            w.write_str("Fence ")?;
            write_client_name(w, client, names)
        }
        Output::ClientGone { .. } => w.write_str("ClientGone"),
        Output::DeviceFailed { device, cause } => {
            w.write_str("DeviceFailed")?;
            write_device(w, device)?;
            write!(w, ": {cause:?}")
        }
        Output::DeviceRemoved { device } => {
            w.write_str("DeviceRemoved")?;
            write_device(w, device)
        }
        Output::UnloadMayFinish => w.write_str("UnloadMayFinish"),
        Output::FastPath { client, gate } => {
            w.write_str("FastPath ")?;
            write_client_name(w, client, names)?;
            match gate {
                FastPathGate::Open { epoch } => write!(w, ": open, epoch {}", epoch.0),
                FastPathGate::Close => w.write_str(": close"),
            }
        }
    }
}

/// An event's arrow label.
fn write_event(w: &mut impl Write, event: &Event) -> fmt::Result {
    match *event {
        Event::DeviceStarted { epoch } => write!(w, "DeviceStarted, epoch {}", epoch.0),
        Event::ResetEnd { epoch } => write!(w, "ResetEnd, epoch {}", epoch.0),
        Event::Recovered { epoch } => write!(w, "Recovered, epoch {}", epoch.0),
        Event::LinkChanged { port, state } => write!(w, "LinkChanged port {}: {state:?}", port.0),
        Event::Suspending { kind } => write!(w, "Suspending {kind:?}"),
        Event::Resumed { epoch, state_lost } => write!(
            w,
            "Resumed, epoch {}{}",
            epoch.0,
            if state_lost { ", state lost" } else { "" }
        ),
        Event::Removed { surprise } => w.write_str(if surprise {
            "Removed (surprise)"
        } else {
            "Removed"
        }),
        other => write!(w, "{other:?}"),
    }
}

/// Text inside a Mermaid message: `;` and `#` as entity codes, line breaks as spaces.
struct Mermaid<'a, W: Write>(&'a mut W);

impl<W: Write> Write for Mermaid<'_, W> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for c in s.chars() {
            match c {
                ';' => self.0.write_str("#59;")?,
                '#' => self.0.write_str("#35;")?,
                '\n' | '\r' => self.0.write_char(' ')?,
                c => self.0.write_char(c)?,
            }
        }
        Ok(())
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
