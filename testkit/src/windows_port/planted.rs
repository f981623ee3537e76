//! Planted port faults: substitute implementations of the seams the Windows port exposes
//! (its [`Kernel`] and its [`Os`] vocabulary), each a mistake a port author could make.
//! Never compiled into shipped code; `ports/windows/tests/planted.rs` shows each is caught.

use std::boxed::Box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pnp_lifecycle::{ClientHandle, DeviceId, Event, HardwareCommand, Input, ResetResult};
use pnp_lifecycle_runtime::{Completion, ContextId, Kernel, News, Os, ShuttleKernel};
use pnp_lifecycle_windows::{Driver, Irp, NtStatus, PnpMinor, WindowsOs, WindowsVocabulary};

/// shuttle's primitives with a `context()` that lies: a new identity on every call, so the
/// runtime never recognises its own notification thread, and a blocking wait from inside a
/// callback is not refused (it waits for itself: shuttle reports the deadlock).
#[derive(Debug, Clone, Copy, Default)]
pub struct LyingKernel;

static NEXT: AtomicU64 = AtomicU64::new(1 << 40);

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
        ShuttleKernel::join(thread);
    }
}

/// A queued work item runs a while later.
fn later() {
    for _ in 0..4 {
        shuttle::thread::yield_now();
    }
}

/// A vocabulary that queues each client callback to a work item of its own and reports it
/// returned at once (`IoQueueWorkItem` and return): the callback's return is reported
/// before it was called, so callbacks of one client overlap, or come after its detach
/// returned.
pub struct DeferredCallbacks<O>(Arc<O>);

impl<O> DeferredCallbacks<O> {
    /// Defer `inner`'s callbacks.
    pub fn new(inner: O) -> Self {
        DeferredCallbacks(Arc::new(inner))
    }
}

impl<K: Kernel, O: WindowsVocabulary<K>> WindowsVocabulary<K> for DeferredCallbacks<O> {
    fn windows(&self) -> &WindowsOs<K> {
        self.0.windows()
    }
}

impl<O: Os> Os for DeferredCallbacks<O> {
    type Callback = O::Callback;
    type Request = O::Request;
    type Job = O::Job;

    fn call(&self, callback: &O::Callback, client: ClientHandle, event: Event) -> Option<Input> {
        let (inner, callback) = (Arc::clone(&self.0), callback.clone());
        shuttle::thread::spawn(move || {
            later();
            inner.call(&callback, client, event);
        });
        None // PLANTED: CallbackDone is fed before the callback ran
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        self.0.hardware(device, command)
    }

    fn complete(&self, request: O::Request, completion: Completion) {
        self.0.complete(request, completion);
    }

    fn job(&self, job: O::Job) -> Option<Input> {
        self.0.job(job)
    }

    fn news(&self, news: News) {
        self.0.news(news);
    }
}

/// A vocabulary whose hardware reset runs on a worker of its own while `ResetDone` is
/// reported at once (the old separate reset worker, wired wrongly): the reset runs under
/// operations the clients begin after RESET_END.
pub struct EarlyResetDone<O>(Arc<O>);

impl<O> EarlyResetDone<O> {
    /// Report `inner`'s resets done early.
    pub fn new(inner: O) -> Self {
        EarlyResetDone(Arc::new(inner))
    }
}

impl<K: Kernel, O: WindowsVocabulary<K>> WindowsVocabulary<K> for EarlyResetDone<O> {
    fn windows(&self) -> &WindowsOs<K> {
        self.0.windows()
    }
}

impl<O: Os> Os for EarlyResetDone<O> {
    type Callback = O::Callback;
    type Request = O::Request;
    type Job = O::Job;

    fn call(&self, callback: &O::Callback, client: ClientHandle, event: Event) -> Option<Input> {
        self.0.call(callback, client, event)
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        if command != HardwareCommand::Reset {
            return self.0.hardware(device, command);
        }
        let inner = Arc::clone(&self.0);
        shuttle::thread::spawn(move || {
            inner.hardware(device, command);
        });
        // PLANTED: the reset is reported done before it ran
        Some(Input::ResetDone {
            device,
            result: ResetResult::Succeeded,
        })
    }

    fn complete(&self, request: O::Request, completion: Completion) {
        self.0.complete(request, completion);
    }

    fn job(&self, job: O::Job) -> Option<Input> {
        self.0.job(job)
    }

    fn news(&self, news: News) {
        self.0.news(news);
    }
}

/// A vocabulary that answers the power-up without carrying it out (the old "kept its
/// power" stub left in place: `D0Entry` is never called): clients are told `Resumed` and
/// granted operations while the device is still in D3 (I14).
pub struct PowerUpNotCarriedOut<O>(O);

impl<O> PowerUpNotCarriedOut<O> {
    /// Answer `inner`'s power-ups without carrying them out.
    pub fn new(inner: O) -> Self {
        PowerUpNotCarriedOut(inner)
    }
}

impl<K: Kernel, O: WindowsVocabulary<K>> WindowsVocabulary<K> for PowerUpNotCarriedOut<O> {
    fn windows(&self) -> &WindowsOs<K> {
        self.0.windows()
    }
}

impl<O: Os> Os for PowerUpNotCarriedOut<O> {
    type Callback = O::Callback;
    type Request = O::Request;
    type Job = O::Job;

    fn call(&self, callback: &O::Callback, client: ClientHandle, event: Event) -> Option<Input> {
        self.0.call(callback, client, event)
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        if command != HardwareCommand::PowerUp {
            return self.0.hardware(device, command);
        }
        // PLANTED: the power-up is reported done, and never carried out
        Some(Input::PowerUpDone {
            device,
            result: pnp_lifecycle::PowerUpResult::Powered,
        })
    }

    fn complete(&self, request: O::Request, completion: Completion) {
        self.0.complete(request, completion);
    }

    fn job(&self, job: O::Job) -> Option<Input> {
        self.0.job(job)
    }

    fn news(&self, news: News) {
        self.0.news(news);
    }
}

/// A vocabulary that drops the news of a fence (the port before issue 22: "ignores the
/// fenced news"): [`pnp_lifecycle_windows::Hal::cut_client`] is never called, so a revoked
/// client's operation that outran its fence's grace still reaches the hardware while the
/// reset the fence let go ahead runs.
pub struct FenceNotCut<O>(O);

impl<O> FenceNotCut<O> {
    /// Drop `inner`'s fence news.
    pub fn new(inner: O) -> Self {
        FenceNotCut(inner)
    }
}

impl<K: Kernel, O: WindowsVocabulary<K>> WindowsVocabulary<K> for FenceNotCut<O> {
    fn windows(&self) -> &WindowsOs<K> {
        self.0.windows()
    }
}

impl<O: Os> Os for FenceNotCut<O> {
    type Callback = O::Callback;
    type Request = O::Request;
    type Job = O::Job;

    fn call(&self, callback: &O::Callback, client: ClientHandle, event: Event) -> Option<Input> {
        self.0.call(callback, client, event)
    }

    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        self.0.hardware(device, command)
    }

    fn complete(&self, request: O::Request, completion: Completion) {
        self.0.complete(request, completion);
    }

    fn job(&self, job: O::Job) -> Option<Input> {
        self.0.job(job)
    }

    fn news(&self, news: News) {
        if matches!(news, News::Fenced { .. }) {
            return; // PLANTED: the fenced client's path is never cut
        }
        self.0.news(news);
    }
}

/// The `IRP_MN_REMOVE_DEVICE` dispatch before issue 22 (`IoReleaseRemoveLockAndWait` first):
/// wait, with no deadline, until no hardware operation of the device is in flight, and only
/// then hand the IRP to the port's dispatch. One stuck operation blocks the remove forever:
/// the core never sees it, so its deadline and fence never run. Other IRPs pass straight
/// through.
pub fn remove_after_holders_left<K: Kernel, O: WindowsVocabulary<K>>(
    driver: &Driver<K, O>,
    irp: &Arc<Irp<K>>,
) -> NtStatus {
    if irp.minor == PnpMinor::RemoveDevice {
        let device = irp.device;
        // PLANTED: a wait without a deadline, before the core sees the remove
        let _ = driver.runtime().wait_until(|owner, _| {
            // On either path: the machine's count and the clients' open gates.
            let busy = owner
                .machine()
                .clients(device)
                .any(|(client, _)| owner.operations_in_flight(client) > 0);
            (!busy).then_some(())
        });
    }
    driver.dispatch_pnp(irp)
}
