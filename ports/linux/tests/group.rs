//! Reset groups in the Linux port (DESIGN.md "Reset groups", issue 23): the exact order of
//! client callbacks, the machine's one reset command and the driver's hardware hooks for
//! both anchors, on two functions declared one group.
//!
//! * mlx5's synchronised firmware reset (`fw_reset.c`): every function's clients hear the
//!   reset request and ack; every function unloads, the carrier resets once, every
//!   function reloads. A nack (a client's, or a function with `enable_remote_dev_reset`
//!   off) resets nothing. A function removed mid-cycle leaves it without blocking it.
//! * PCI error recovery across the functions of one slot: `error_detected` on each, one
//!   slot reset, `slot_reset` and `resume` on each; a function removed mid-cycle.

use std::sync::{Arc, Mutex};

use pnp_lifecycle::{
    ClientHandle, ClientKind, Config, DeviceId, Epoch, Event, GroupId, HardwareCommand, Input,
    PortCaps, Protocol, ResetResult, Tick,
};
use pnp_lifecycle_linux::*;
use pnp_lifecycle_runtime::{Completion, GroupReset, News, Os};

const F0: DeviceId = DeviceId(0);
const F1: DeviceId = DeviceId(1);
const CHIP: GroupId = GroupId(0);

type Trace = Arc<Mutex<Vec<String>>>;

fn push(trace: &Trace, line: String) {
    trace.lock().unwrap().push(line);
}

/// A kernel client that writes each callback into the trace and answers as set up.
struct Client {
    name: &'static str,
    trace: Trace,
    /// Its sync-reset answer on each function.
    sync: [SyncResetAnswer; 2],
    /// Its `error_detected` vote on each function.
    pci: [PciErsResult; 2],
}

impl IbClient for Client {
    fn add(&self, dev: DeviceId) {
        push(&self.trace, format!("{} add f{}", self.name, dev.0));
    }
    fn remove(&self, dev: DeviceId, _: RemoveCause) {
        push(&self.trace, format!("{} remove f{}", self.name, dev.0));
    }
    fn sync_reset_request(&self, dev: DeviceId) -> SyncResetAnswer {
        let answer = self.sync[usize::from(dev.0)];
        push(
            &self.trace,
            format!("{} reset request f{}: {answer:?}", self.name, dev.0),
        );
        answer
    }
    fn error_detected(&self, dev: DeviceId) -> PciErsResult {
        let vote = self.pci[usize::from(dev.0)];
        let name = vote.linux_name();
        push(
            &self.trace,
            format!("{} error_detected f{}: {name}", self.name, dev.0),
        );
        vote
    }
    fn event(&self, dev: DeviceId, event: IbEvent) {
        push(
            &self.trace,
            format!("{} event f{}: {}", self.name, dev.0, event.linux_name()),
        );
    }
    fn mmio_enabled(&self, dev: DeviceId) -> PciErsResult {
        push(
            &self.trace,
            format!("{} mmio_enabled f{}: RECOVERED", self.name, dev.0),
        );
        PciErsResult::Recovered
    }
    fn resume(&self, dev: DeviceId, epoch: Epoch) {
        push(
            &self.trace,
            format!("{} resume f{} epoch {}", self.name, dev.0, epoch.0),
        );
    }
}

/// The driver's hardware hooks, traced; the re-init of `fails` fails.
struct Chip(Trace, Option<DeviceId>);

impl Hardware for Chip {
    fn reset(&self, dev: DeviceId) -> ResetResult {
        push(&self.0, format!("hw reinit f{}", dev.0));
        match self.1 == Some(dev) {
            true => ResetResult::Failed,
            false => ResetResult::Succeeded,
        }
    }
    fn fw_reset_unload(&self, dev: DeviceId) {
        push(&self.0, format!("hw unload f{}", dev.0));
    }
    fn fw_reset_now(&self, dev: DeviceId) {
        push(&self.0, format!("hw reset now f{}", dev.0));
    }
}

/// [`LinuxOs`] with the machine's reset commands traced.
struct Spy {
    inner: LinuxOs,
    trace: Trace,
}

impl LinuxPort for Spy {
    fn linux(&self) -> &LinuxOs {
        &self.inner
    }
}

impl Os for Spy {
    type Callback = Arc<dyn IbClient>;
    type Request = Pending;
    type Job = Job;

    fn call(&self, cb: &Self::Callback, client: ClientHandle, event: Event) -> Option<Input> {
        self.inner.call(cb, client, event)
    }
    fn hardware(&self, device: DeviceId, command: HardwareCommand) -> Option<Input> {
        if command == HardwareCommand::Reset {
            push(&self.trace, format!("machine: reset f{}", device.0));
        }
        self.inner.hardware(device, command)
    }
    fn group_reset(&self, reset: &GroupReset) -> Option<Input> {
        let members: Vec<String> = reset.members.iter().map(|d| format!("f{}", d.0)).collect();
        let line = format!(
            "machine: group reset through f{} covering {}",
            reset.carrier.0,
            members.join(" ")
        );
        push(&self.trace, line);
        self.inner.group_reset(reset)
    }
    fn complete(&self, request: Pending, completion: Completion) {
        self.inner.complete(request, completion)
    }
    fn job(&self, job: Job) -> Option<Input> {
        self.inner.job(job)
    }
    fn job_client(job: &Job) -> Option<ClientHandle> {
        LinuxOs::job_client(job)
    }
    fn news(&self, news: News) {
        self.inner.news(news)
    }
}

type GroupDriver = Driver<StdKernel, Spy>;

const IB: PortCaps = PortCaps {
    protocol: Protocol::Ib,
    max_mtu: 4096,
    atomics: true,
};

/// Two probed functions of one chip, declared one reset group.
fn chip() -> (GroupDriver, Trace, Arc<ManualClock>) {
    chip_failing(None)
}

/// [`chip`] whose re-init of `fails` fails.
fn chip_failing(fails: Option<DeviceId>) -> (GroupDriver, Trace, Arc<ManualClock>) {
    let trace: Trace = Arc::default();
    let os = Spy {
        inner: LinuxOs::new(Arc::new(Chip(Arc::clone(&trace), fails))),
        trace: Arc::clone(&trace),
    };
    let clock = Arc::new(ManualClock::new(Tick(0)));
    let d = Driver::on(Config::DEFAULT, os, clock.clone(), Dispatch::Inline);
    for f in [F0, F1] {
        d.probe(f, &[IB]).unwrap();
        d.join_reset_group(f, CHIP).unwrap();
    }
    (d, trace, clock)
}

fn client(
    d: &GroupDriver,
    trace: &Trace,
    name: &'static str,
    sync: [SyncResetAnswer; 2],
    pci: [PciErsResult; 2],
) -> ClientId {
    let ops = Arc::new(Client {
        name,
        trace: Arc::clone(trace),
        sync,
        pci,
    });
    d.register_client(ops, ClientKind::Trusted).unwrap()
}

/// The trace since the last call.
fn take(trace: &Trace) -> Vec<String> {
    std::mem::take(&mut *trace.lock().unwrap())
}

use SyncResetAnswer::{Ack, Later, Nack};
const NEED: PciErsResult = PciErsResult::NeedReset;

#[test]
fn mlx5_sync_reset_unloads_every_function_resets_once_and_reloads_every_function() {
    let (d, trace, _) = chip();
    client(&d, &trace, "a", [Ack, Ack], [NEED; 2]);
    assert_eq!(take(&trace), ["a add f0", "a add f1"]);
    // devlink reload action fw_activate on the second function.
    d.fw_reset_sync(F1).unwrap();
    assert_eq!(
        take(&trace),
        [
            "a reset request f1: Ack",
            "a reset request f0: Ack",
            "machine: group reset through f0 covering f0 f1",
            "hw unload f0",
            "hw unload f1",
            "hw reset now f0",
            "hw reinit f0",
            "hw reinit f1",
            "a resume f0 epoch 1",
            "a resume f1 epoch 1",
        ]
    );
    assert_eq!((d.epoch(F0), d.epoch(F1)), (Some(Epoch(1)), Some(Epoch(1))));
    d.unload().unwrap();
}

#[test]
fn mlx5_a_nack_resets_no_function_and_answers_the_requester() {
    let (d, trace, _) = chip();
    client(&d, &trace, "a", [Ack, Ack], [NEED; 2]);
    client(&d, &trace, "b", [Ack, Nack], [NEED; 2]);
    take(&trace);
    let e = d.fw_reset_sync(F0).unwrap_err();
    assert_eq!(e.errno, Errno::EBUSY);
    assert_eq!(
        take(&trace),
        [
            "a reset request f0: Ack",
            "b reset request f0: Ack",
            "a reset request f1: Ack",
            "b reset request f1: Nack",
            "a resume f0 epoch 0",
            "b resume f0 epoch 0",
            "a resume f1 epoch 0",
            "b resume f1 epoch 0",
        ],
        "no unload, no reset, the same interface"
    );
    // `enable_remote_dev_reset` off on the first function: it nacks for its clients.
    d.set_enable_remote_dev_reset(F0, false);
    assert_eq!(d.fw_reset_sync(F1).unwrap_err().errno, Errno::EBUSY);
    let lines = take(&trace);
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("machine") || l.starts_with("hw")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("request f0")), "{lines:?}");
    assert_eq!((d.epoch(F0), d.epoch(F1)), (Some(Epoch(0)), Some(Epoch(0))));
    d.unload().unwrap();
}

#[test]
fn mlx5_a_function_removed_mid_cycle_leaves_it_and_the_other_resets_alone() {
    let (d, trace, _) = chip();
    client(&d, &trace, "a", [Ack, Ack], [NEED; 2]);
    client(&d, &trace, "b", [Ack, Later], [NEED; 2]);
    take(&trace);
    d.begin_fw_reset_sync(F0).unwrap();
    assert_eq!(d.fw_reset_sync_result(F0), None, "b on f1 has not answered");
    // The PCI core removes the second function (hot unplug, driver unbind).
    d.remove(F1).unwrap();
    assert_eq!(d.fw_reset_sync_result(F0), Some(Ok(())));
    assert_eq!(
        take(&trace),
        [
            "a reset request f0: Ack",
            "b reset request f0: Ack",
            "a reset request f1: Ack",
            "b reset request f1: Later",
            "a remove f1",
            "b remove f1",
            "machine: group reset through f0 covering f0",
            "hw unload f0",
            "hw reset now f0",
            "hw reinit f0",
            "a resume f0 epoch 1",
            "b resume f0 epoch 1",
        ],
        "nothing touches the removed function"
    );
    d.unload().unwrap();
}

#[test]
fn pci_slot_recovery_resets_the_slot_once_then_slot_reset_and_resume_on_each_function() {
    let (d, trace, _) = chip();
    client(&d, &trace, "a", [Ack; 2], [NEED; 2]);
    take(&trace);
    // The PCI core walks the slot's functions.
    assert_eq!(d.error_detected(F0, PciChannelState::Frozen), NEED);
    assert_eq!(d.error_detected(F1, PciChannelState::Frozen), NEED);
    assert_eq!(d.slot_reset(F0), PciErsResult::Recovered);
    assert_eq!(d.slot_reset(F1), PciErsResult::Recovered);
    d.resume(F0);
    d.resume(F1);
    assert_eq!(
        take(&trace),
        [
            "a error_detected f0: PCI_ERS_RESULT_NEED_RESET",
            "a error_detected f1: PCI_ERS_RESULT_NEED_RESET",
            "machine: group reset through f0 covering f0 f1",
            "hw reinit f0",
            "hw reinit f1",
            "a resume f0 epoch 1",
            "a resume f1 epoch 1",
        ]
    );
    assert_eq!((d.epoch(F0), d.epoch(F1)), (Some(Epoch(1)), Some(Epoch(1))));
    d.unload().unwrap();
}

#[test]
fn pci_slot_recovery_with_a_function_removed_mid_cycle() {
    let (d, trace, _) = chip();
    client(&d, &trace, "a", [Ack; 2], [NEED; 2]);
    client(&d, &trace, "b", [Ack; 2], [NEED, PciErsResult::None]);
    take(&trace);
    assert_eq!(d.error_detected(F0, PciChannelState::Frozen), NEED);
    d.remove(F1).unwrap();
    assert_eq!(d.slot_reset(F0), PciErsResult::Recovered);
    d.resume(F0);
    assert_eq!(
        take(&trace),
        [
            "a error_detected f0: PCI_ERS_RESULT_NEED_RESET",
            "b error_detected f0: PCI_ERS_RESULT_NEED_RESET",
            "a error_detected f1: PCI_ERS_RESULT_NEED_RESET",
            "b error_detected f1: PCI_ERS_RESULT_NONE",
            "a remove f1",
            "b remove f1",
            "machine: group reset through f0 covering f0",
            "hw reinit f0",
            "a resume f0 epoch 1",
            "b resume f0 epoch 1",
        ]
    );
    d.unload().unwrap();
}

#[test]
fn pci_slot_recovery_without_a_reset_when_every_function_can_recover() {
    let (d, trace, _) = chip();
    client(&d, &trace, "a", [Ack; 2], [PciErsResult::CanRecover; 2]);
    take(&trace);
    let can = PciErsResult::CanRecover;
    assert_eq!(d.error_detected(F0, PciChannelState::Normal), can);
    assert_eq!(d.error_detected(F1, PciChannelState::Normal), can);
    // The first function's clients can recover; the group still waits for the second's:
    // its own answer is RECOVERED, not NEED_RESET (which would make the PCI core reset
    // the slot behind the machine's back).
    assert_eq!(d.mmio_enabled(F0), PciErsResult::Recovered);
    assert_eq!(d.mmio_enabled(F1), PciErsResult::Recovered);
    d.resume(F0);
    d.resume(F1);
    assert_eq!(
        take(&trace),
        [
            "a error_detected f0: PCI_ERS_RESULT_CAN_RECOVER",
            "a error_detected f1: PCI_ERS_RESULT_CAN_RECOVER",
            "a mmio_enabled f0: RECOVERED",
            "a mmio_enabled f1: RECOVERED",
            "a resume f0 epoch 0",
            "a resume f1 epoch 0",
        ],
        "no reset: the same interface"
    );
    d.unload().unwrap();
}

#[test]
fn pci_slot_recovery_a_failed_reinit_of_another_function_fails_the_groups_reset() {
    let (d, trace, _) = chip_failing(Some(F1));
    client(&d, &trace, "a", [Ack; 2], [NEED; 2]);
    take(&trace);
    assert_eq!(d.error_detected(F0, PciChannelState::Frozen), NEED);
    assert_eq!(d.error_detected(F1, PciChannelState::Frozen), NEED);
    assert_eq!(d.slot_reset(F0), PciErsResult::Recovered);
    // The second function's report goes to the carrier: the one reset failed.
    assert_eq!(d.slot_reset(F1), PciErsResult::Disconnect);
    assert_eq!(
        take(&trace),
        [
            "a error_detected f0: PCI_ERS_RESULT_NEED_RESET",
            "a error_detected f1: PCI_ERS_RESULT_NEED_RESET",
            "machine: group reset through f0 covering f0 f1",
            "hw reinit f0",
            "hw reinit f1",
            "a event f0: IB_EVENT_DEVICE_FATAL",
            "a event f1: IB_EVENT_DEVICE_FATAL",
        ]
    );
    let failed = Some(pnp_lifecycle::FailureCause::ResetFailed);
    assert_eq!((d.failure(F0), d.failure(F1)), (failed, failed));
    d.unload().unwrap();
}

#[test]
fn mlx5_a_function_in_system_sleep_cannot_take_part_and_nothing_resets() {
    let (d, trace, _) = chip();
    client(&d, &trace, "a", [Ack, Ack], [NEED; 2]);
    d.pm(F1, PmOp::Suspend).unwrap();
    take(&trace);
    assert_eq!(d.fw_reset_sync(F0).unwrap_err().errno, Errno::EBUSY);
    let lines = take(&trace);
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("machine") || l.starts_with("hw")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("request f1")), "{lines:?}");
    d.pm(F1, PmOp::Resume).unwrap();
    take(&trace);
    // A later slot error speaks PCI on both functions: the sync reset is over.
    assert_eq!(d.error_detected(F0, PciChannelState::Frozen), NEED);
    assert_eq!(d.error_detected(F1, PciChannelState::Frozen), NEED);
    assert_eq!(
        take(&trace),
        [
            "a error_detected f0: PCI_ERS_RESULT_NEED_RESET",
            "a error_detected f1: PCI_ERS_RESULT_NEED_RESET",
            "machine: group reset through f0 covering f0 f1",
        ]
    );
    assert_eq!(d.slot_reset(F0), PciErsResult::Recovered);
    assert_eq!(d.slot_reset(F1), PciErsResult::Recovered);
    d.resume(F0);
    d.resume(F1);
    assert_eq!((d.epoch(F0), d.epoch(F1)), (Some(Epoch(1)), Some(Epoch(1))));
    d.unload().unwrap();
}

#[test]
fn mlx5_a_runtime_suspended_function_is_powered_up_and_takes_part() {
    let (d, trace, _) = chip();
    client(&d, &trace, "a", [Ack, Ack], [NEED; 2]);
    d.pm(F1, PmOp::RuntimeSuspend).unwrap();
    take(&trace);
    d.fw_reset_sync(F0).unwrap();
    let lines = take(&trace);
    for line in [
        "a reset request f1: Ack",
        "machine: group reset through f0 covering f0 f1",
        "hw reset now f0",
        "a resume f1 epoch 1",
    ] {
        assert!(lines.iter().any(|l| l == line), "{line}: {lines:?}");
    }
    assert_eq!((d.epoch(F0), d.epoch(F1)), (Some(Epoch(1)), Some(Epoch(1))));
    d.unload().unwrap();
}
