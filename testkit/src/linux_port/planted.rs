//! Planted faults of the Linux port: mistakes a port author could make in a decision of
//! the port or of the runtime beneath it, each a substitute for one seam (an [`Os`]
//! wrapper around [`LinuxOs`], a [`Kernel`]), never compiled into shipped code.
//! `ports/linux/tests/planted.rs` runs each and asserts it is caught.

use std::boxed::Box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use pnp_lifecycle::{ClientHandle, DeviceId, Event, HardwareCommand, Input};
use pnp_lifecycle_linux::{IbClient, IbEvent, Job, LinuxOs, LinuxPort, LinuxRuntime, Pending};
use pnp_lifecycle_runtime::{Completion, ContextId, Kernel, News, Os, ShuttleKernel};

/// Forwards every seam of [`Os`] to the [`LinuxOs`] inside, except `call`.
macro_rules! forward_os {
    () => {
        type Callback = Arc<dyn IbClient>;
        type Request = Pending;
        type Job = Job;
        fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
            self.inner.hardware(device, command)
        }
        fn complete(&self, request: Pending, completion: Completion) {
            self.inner.complete(request, completion)
        }
        fn job(&self, job: Job) -> Option<Input> {
            self.inner.job(job)
        }
        fn job_client(job: &Job) -> Option<ClientHandle> {
            <LinuxOs as Os>::job_client(job)
        }
        fn news(&self, news: News) {
            self.inner.news(news)
        }
    };
}

/// Fault: the port tells every client it ever called `IB_EVENT_DEVICE_FATAL` when the
/// device is removed (its own broadcast, beside the machine's events), so clients are
/// called after their `remove`, after their detach, or beside another callback.
pub struct FatalAfterRemove {
    /// The real port.
    pub inner: LinuxOs,
    /// Every client called, with its device.
    pub seen: Mutex<Vec<(ClientHandle, Arc<dyn IbClient>)>>,
}

impl std::fmt::Debug for FatalAfterRemove {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FatalAfterRemove")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl FatalAfterRemove {
    /// The fault around a real port over `hw`.
    pub fn new(hw: Arc<dyn pnp_lifecycle_linux::Hardware>) -> Self {
        FatalAfterRemove {
            inner: LinuxOs::new(hw),
            seen: Mutex::new(Vec::new()),
        }
    }
}

impl Os for FatalAfterRemove {
    type Callback = Arc<dyn IbClient>;
    type Request = Pending;
    type Job = Job;
    fn call(&self, cb: &Arc<dyn IbClient>, client: ClientHandle, event: Event) -> Option<Input> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if !seen.iter().any(|(h, _)| *h == client) {
            seen.push((client, cb.clone()));
        }
        drop(seen);
        self.inner.call(cb, client, event)
    }
    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        self.inner.hardware(device, command)
    }
    fn complete(&self, request: Pending, completion: Completion) {
        self.inner.complete(request, completion)
    }
    fn job(&self, job: Job) -> Option<Input> {
        self.inner.job(job)
    }
    fn job_client(job: &Job) -> Option<ClientHandle> {
        <LinuxOs as Os>::job_client(job)
    }
    fn news(&self, news: News) {
        if let News::DeviceRemoved { device } = news {
            let seen = self
                .seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            for (h, ops) in seen.iter().filter(|(h, _)| h.device == device) {
                ops.event(h.device, IbEvent::DeviceFatal);
            }
        }
        self.inner.news(news)
    }
}

impl LinuxPort for FatalAfterRemove {
    fn linux(&self) -> &LinuxOs {
        &self.inner
    }
}

/// Fault: the port feeds a client's `NEED_RESET` vote for it before calling its
/// `error_detected` (to save a round trip), so `slot_reset` may reset the hardware while
/// the client is still quiescing.
pub struct VoteFirst<K: Kernel> {
    /// The real port.
    pub inner: LinuxOs,
    /// The runtime, to feed the early vote (set once the driver exists).
    pub runtime: OnceLock<Weak<LinuxRuntime<K, VoteFirst<K>>>>,
}

impl<K: Kernel> std::fmt::Debug for VoteFirst<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VoteFirst")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<K: Kernel> Os for VoteFirst<K> {
    forward_os!();
    fn call(&self, cb: &Arc<dyn IbClient>, client: ClientHandle, event: Event) -> Option<Input> {
        if event == Event::Reset {
            if let Some(rt) = self.runtime.get().and_then(Weak::upgrade) {
                let _ = rt.feed(Input::ResetExecute { client });
            }
        }
        self.inner.call(cb, client, event)
    }
}

impl<K: Kernel> LinuxPort for VoteFirst<K> {
    fn linux(&self) -> &LinuxOs {
        &self.inner
    }
}

static NEXT: AtomicU64 = AtomicU64::new(1 << 40);

/// Fault: a kernel whose `context()` does not identify the running thread (a new id on
/// every call, like a per-CPU id read with preemption on), so a blocking call from
/// inside a callback is not refused with `EDEADLK` and waits for itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct LyingKernel;

impl Kernel for LyingKernel {
    type Monitor<T: Send + 'static> = <ShuttleKernel as Kernel>::Monitor<T>;
    type Thread = <ShuttleKernel as Kernel>::Thread;
    type Word = <ShuttleKernel as Kernel>::Word;
    fn context() -> ContextId {
        ContextId(NEXT.fetch_add(1, Ordering::Relaxed))
    }
    fn spawn(f: Box<dyn FnOnce() + Send + 'static>) -> Self::Thread {
        ShuttleKernel::spawn(f)
    }
    fn join(thread: Self::Thread) {
        ShuttleKernel::join(thread)
    }
}

/// Fault: the port's `dev_pm_ops` resume is the old stub ("the hardware kept its power"):
/// it reports the power-up done without calling [`pnp_lifecycle_linux::Hardware::power_up`],
/// so clients are told `resumed` and their verbs run against hardware still in D3.
#[derive(Debug)]
pub struct ResumeWithoutPowerUp {
    /// The real port.
    pub inner: LinuxOs,
}

impl Os for ResumeWithoutPowerUp {
    type Callback = Arc<dyn IbClient>;
    type Request = Pending;
    type Job = Job;
    fn call(&self, cb: &Arc<dyn IbClient>, client: ClientHandle, event: Event) -> Option<Input> {
        self.inner.call(cb, client, event)
    }
    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        match command {
            HardwareCommand::PowerUp => Some(Input::PowerUpDone {
                device,
                result: pnp_lifecycle::PowerUpResult::Powered,
            }),
            _ => self.inner.hardware(device, command),
        }
    }
    fn complete(&self, request: Pending, completion: Completion) {
        self.inner.complete(request, completion)
    }
    fn job(&self, job: Job) -> Option<Input> {
        self.inner.job(job)
    }
    fn job_client(job: &Job) -> Option<ClientHandle> {
        <LinuxOs as Os>::job_client(job)
    }
    fn news(&self, news: News) {
        self.inner.news(news)
    }
}

impl LinuxPort for ResumeWithoutPowerUp {
    fn linux(&self) -> &LinuxOs {
        &self.inner
    }
}
