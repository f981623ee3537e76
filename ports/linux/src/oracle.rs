//! The test oracle: a recording client and hardware, and a checker of invariants I1–I5
//! (DESIGN.md) on what the clients *actually received*, in order.

use crate::driver::{Hardware, IbClient, IbEvent, PciErsResult, RemoveCause};
use crate::sync::{self, Arc, Mutex};
use pnp_lifecycle::{DeviceId, Epoch, ResetResult};

/// What a callback was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// `add`.
    Add,
    /// `remove`.
    Remove(RemoveCause),
    /// `error_detected` (`RESET`) and the vote returned.
    Reset(PciErsResult),
    /// `resume` (`RESET_END`).
    ResetEnd(Epoch),
    /// An IB event.
    Event(IbEvent),
    /// `disassociate` (revoked).
    Disassociate,
}

/// One log entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// A callback of client `c` for `dev` started.
    Enter {
        /// The recorder's number.
        c: u32,
        /// The device.
        dev: DeviceId,
        /// What.
        what: What,
    },
    /// Client `c`'s callback returned.
    Exit {
        /// The recorder's number.
        c: u32,
    },
    /// Client `c` is about to call `reset_ack` for `dev`.
    AckAttempt {
        /// The recorder's number.
        c: u32,
        /// The device.
        dev: DeviceId,
    },
    /// Client `c`'s `reset_ack` returned (`ok`: accepted).
    AckResult {
        /// The recorder's number.
        c: u32,
        /// Whether the core took the vote.
        ok: bool,
    },
    /// Client `c` is about to call `unregister_client`.
    UnregisterBegin {
        /// The recorder's number.
        c: u32,
    },
    /// `unregister_client` of client `c` returned.
    Unregistered {
        /// The recorder's number.
        c: u32,
    },
    /// The hardware was reset (in `slot_reset`).
    HwReset {
        /// The device.
        dev: DeviceId,
    },
    /// The port fenced client `c` on `dev` (a revocation with a callback in flight; no
    /// callback follows).
    Fenced {
        /// The recorder's number.
        c: u32,
        /// The device.
        dev: DeviceId,
        /// The callback in flight still ran past the fence's grace: its `Enter` may
        /// still come (it began before the fence), but nothing after it.
        overran: bool,
    },
    /// `unload` returned.
    UnloadDone,
}

/// A shared, ordered log.
pub type Log = Arc<Mutex<Vec<Entry>>>;

/// A new empty log.
pub fn new_log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

/// Append to a log.
pub fn push(log: &Log, e: Entry) {
    sync::lock(log).push(e);
}

/// A snapshot of a log.
pub fn snapshot(log: &Log) -> Vec<Entry> {
    sync::lock(log).clone()
}

/// A client that records every callback (enter and exit) and votes `vote` on `RESET`.
#[derive(Debug)]
pub struct Recorder {
    /// Its number in the log.
    pub c: u32,
    /// The vote its `error_detected` returns.
    pub vote: PciErsResult,
    /// The log.
    pub log: Log,
}

impl Recorder {
    /// A recorder.
    pub fn new(c: u32, vote: PciErsResult, log: &Log) -> Arc<Self> {
        Arc::new(Recorder {
            c,
            vote,
            log: log.clone(),
        })
    }

    fn rec(&self, dev: DeviceId, what: What) {
        push(
            &self.log,
            Entry::Enter {
                c: self.c,
                dev,
                what,
            },
        );
        // Two lock acquisitions: under shuttle each is a scheduling point, so a racing
        // thread can run "during" the callback.
        push(&self.log, Entry::Exit { c: self.c });
    }
}

impl IbClient for Recorder {
    fn add(&self, dev: DeviceId) {
        self.rec(dev, What::Add)
    }
    fn remove(&self, dev: DeviceId, cause: RemoveCause) {
        self.rec(dev, What::Remove(cause))
    }
    fn error_detected(&self, dev: DeviceId) -> PciErsResult {
        self.rec(dev, What::Reset(self.vote));
        self.vote
    }
    fn resume(&self, dev: DeviceId, epoch: Epoch) {
        self.rec(dev, What::ResetEnd(epoch))
    }
    fn event(&self, dev: DeviceId, event: IbEvent) {
        self.rec(dev, What::Event(event))
    }
    fn disassociate(&self, dev: DeviceId) {
        self.rec(dev, What::Disassociate)
    }
    fn disassociated(&self, dev: DeviceId, overran: bool) {
        push(
            &self.log,
            Entry::Fenced {
                c: self.c,
                dev,
                overran,
            },
        );
    }
}

/// Hardware that logs every reset it performs.
#[derive(Debug)]
pub struct RecordingHardware {
    /// The log.
    pub log: Log,
}

impl Hardware for RecordingHardware {
    fn reset(&self, dev: DeviceId) -> ResetResult {
        push(&self.log, Entry::HwReset { dev });
        ResetResult::Succeeded
    }
}

/// What the oracle knows of one client on one device.
#[derive(Default, Clone, Copy)]
struct PerDev {
    /// Told its last event (`remove`, `disassociate`, a `DISCONNECT` vote) until re-added.
    closed: bool,
    /// Told `RESET`, not yet `RESET_END` / `remove` / `disassociate`.
    open_reset: bool,
    /// Voted in the open `RESET`: by the callback's return value, or by a `reset_ack`
    /// the core accepted (before or after the callback was delivered).
    voted: bool,
    /// A `reset_ack` the core accepted before this client was told the cycle's `RESET`
    /// (possibly even before its `add` was delivered); consumed by that `RESET`.
    pre_ack: bool,
    /// Fenced while its callback overran the grace and may not have logged its `Enter`
    /// yet: that one callback may still appear, nothing else.
    overran: bool,
}

/// Check I1–I5 on a finished log. `ended`: the scenario ran to completion (unload
/// returned), so every `RESET` must have been answered.
pub fn check(log: &[Entry], ended: bool) -> Result<(), String> {
    const C: usize = 16;
    const D: usize = crate::driver::MAX_DEVICES;
    let mut running = [false; C];
    let mut gone = [false; C];
    let mut leaving = [false; C];
    let mut st = [[PerDev::default(); D]; C];
    let mut unloaded = false;
    for (pos, e) in log.iter().enumerate() {
        if unloaded && matches!(e, Entry::Enter { .. } | Entry::HwReset { .. }) {
            return Err(format!("I2: {e:?} at {pos} after unload returned"));
        }
        match *e {
            Entry::Enter { c, dev, what } => {
                let (ci, d) = (c as usize % C, usize::from(dev.0) % D);
                if gone[ci] {
                    return Err(format!(
                        "I1: client {c} got {what:?} at {pos} after unregister returned"
                    ));
                }
                if running[ci] {
                    return Err(format!("client {c}: two callbacks at once at {pos}"));
                }
                running[ci] = true;
                let s = &mut st[ci][d];
                if s.closed && s.overran && !matches!(what, What::Add) {
                    // The callback that was in flight when the fence overran: it began
                    // before the fence. Exactly one is allowed.
                    s.overran = false;
                    continue;
                }
                if s.closed && what != What::Add {
                    return Err(format!(
                        "I1: client {c} got {what:?} on dev {} at {pos} after its last event",
                        dev.0
                    ));
                }
                match what {
                    // A fresh attachment, but an ack the core already took stays: the
                    // client is a voter from the moment the cycle begins, so its
                    // `reset_ack` can be accepted before its `add` (queued earlier) is
                    // delivered; that vote belongs to the `RESET` that follows the `add`.
                    What::Add => {
                        *s = PerDev {
                            pre_ack: s.pre_ack,
                            ..PerDev::default()
                        }
                    }
                    What::Reset(v) => {
                        if s.open_reset {
                            return Err(format!("I4: client {c} told RESET twice at {pos}"));
                        }
                        s.open_reset = true;
                        s.voted = v != PciErsResult::None || s.pre_ack;
                        s.pre_ack = false;
                        if v == PciErsResult::Disconnect {
                            s.closed = true;
                            s.open_reset = false;
                        }
                    }
                    What::ResetEnd(_) => {
                        s.open_reset = false;
                        s.pre_ack = false;
                    }
                    What::Remove(_) | What::Disassociate => {
                        // The attachment is over: no earlier ack carries into a later one.
                        s.open_reset = false;
                        s.pre_ack = false;
                        s.closed = true;
                    }
                    What::Event(_) => {}
                }
            }
            Entry::Exit { c } => running[c as usize % C] = false,
            Entry::AckAttempt { c, dev } => {
                // Counts from the attempt on if the core took it (its result comes later;
                // the vote may precede the queued RESET callback).
                let ok = log[pos..].iter().find_map(|x| match x {
                    Entry::AckResult { c: xc, ok } if *xc == c => Some(*ok),
                    _ => None,
                });
                let s = &mut st[c as usize % C][usize::from(dev.0) % D];
                if ok == Some(true) {
                    if s.open_reset {
                        s.voted = true;
                    } else {
                        s.pre_ack = true;
                    }
                }
            }
            Entry::AckResult { .. } => {}
            Entry::UnregisterBegin { c } => leaving[c as usize % C] = true,
            Entry::Unregistered { c } => {
                let ci = c as usize % C;
                if running[ci] {
                    return Err(format!(
                        "I1: unregister of client {c} returned at {pos} while its callback runs"
                    ));
                }
                gone[ci] = true;
            }
            Entry::HwReset { dev } => {
                let d = usize::from(dev.0) % D;
                for ci in 0..C {
                    let s = st[ci][d];
                    if s.open_reset && !s.voted && !leaving[ci] {
                        // Only a revocation (its disassociate, later) excuses it.
                        let revoked_later = log[pos..].iter().any(|x| {
                            matches!(x, Entry::Enter { c, dev: xd, what: What::Disassociate }
                                if *c as usize % C == ci && usize::from(xd.0) % D == d)
                                || matches!(x, Entry::Fenced { c, dev: xd, .. }
                                if *c as usize % C == ci && usize::from(xd.0) % D == d)
                        });
                        if !revoked_later {
                            return Err(format!(
                                "I3: reset at {pos} while client {ci} had not voted"
                            ));
                        }
                    }
                }
            }
            Entry::Fenced { c, dev, overran } => {
                // A fenced client counts as revoked (I4 as revised); nothing follows.
                let ci = c as usize % C;
                let s = &mut st[ci][usize::from(dev.0) % D];
                s.open_reset = false;
                s.pre_ack = false;
                s.closed = true;
                // If its callback already entered (and still runs), none is owed.
                s.overran = overran && !running[ci];
            }
            Entry::UnloadDone => unloaded = true,
        }
    }
    if ended {
        for (ci, per) in st.iter().enumerate() {
            for (d, s) in per.iter().enumerate() {
                if s.open_reset && !leaving[ci] {
                    return Err(format!(
                        "I4: client {ci} told RESET on dev {d} and never RESET_END/Removed/Revoked"
                    ));
                }
            }
        }
    }
    Ok(())
}
