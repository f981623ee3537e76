//! Boundaries the public API cannot reach in a test's lifetime: the last epoch (2^32 reset
//! cycles) and a queue filled to the brim (every input checks its worst case first). These
//! tests set that state directly, then drive the machine only through its public inputs.

use super::*;
use crate::{ClientKind, Event, HardwareCommand, RequestToken, ResetResult, StartResult};

const HCA: DeviceId = DeviceId(0);
type Machine = Lifecycle<1, 2, 1, { queue_capacity(1, 2) }>;

/// Drain, answering every notification.
fn drain(m: &mut Machine) -> heapless::Vec<Output, 32> {
    let mut seen = heapless::Vec::new();
    while let Some(output) = m.poll_output() {
        seen.push(output).unwrap();
    }
    for output in seen.iter() {
        if let Output::Notify { client, .. } = *output {
            m.handle(Tick(0), Input::CallbackDone { client }).unwrap();
        }
    }
    seen
}

fn running_with_one_client() -> (Machine, ClientHandle) {
    let mut m = Machine::new(Config::DEFAULT);
    m.handle(Tick(0), Input::AddDevice { device: HCA }).unwrap();
    m.handle(
        Tick(0),
        Input::Start {
            device: HCA,
            token: RequestToken(1),
        },
    )
    .unwrap();
    drain(&mut m);
    m.handle(
        Tick(0),
        Input::StartDone {
            device: HCA,
            result: StartResult::Started,
        },
    )
    .unwrap();
    drain(&mut m);
    let (client, _) = m.register(Tick(0), HCA, ClientKind::Trusted).unwrap();
    (m, client)
}

fn request(m: &mut Machine, client: ClientHandle) -> Result<Reply, Error> {
    m.handle(Tick(0), Input::ResetRequest { client })
}

/// Queue distinct completions until `free` slots remain; return how many were queued.
fn fill_until_free(m: &mut Machine, free: usize) -> u32 {
    let mut n = 0;
    while m.outputs.free() > free {
        m.outputs.push(filler(n));
        n += 1;
    }
    n
}

fn filler(n: u32) -> Output {
    Output::Complete {
        device: HCA,
        token: RequestToken(1_000 + n),
        status: Status::Success,
    }
}

#[test]
fn a_reset_that_would_pass_the_last_epoch_is_refused_and_changes_nothing() {
    let (mut m, client) = running_with_one_client();
    m.devices[0].epoch = Epoch(u32::MAX);
    let before = m.clone();
    assert_eq!(request(&mut m, client), Err(Error::EpochExhausted));
    assert!(m == before, "a refused reset request changed the machine");
    assert_eq!(m.poll_output(), None);
}

#[test]
fn a_follow_up_that_would_pass_the_last_epoch_is_refused_the_running_cycle_ends() {
    let (mut m, client) = running_with_one_client();
    m.devices[0].epoch = Epoch(u32::MAX - 1);
    assert_eq!(
        request(&mut m, client),
        Ok(Reply::Reset(ResetAnswer::Started))
    );
    let told = drain(&mut m);
    assert!(told.contains(&Output::Notify {
        client,
        event: Event::Reset
    }));
    m.handle(Tick(0), Input::ResetExecute { client }).unwrap();
    let told = drain(&mut m);
    assert!(told.contains(&Output::Hardware {
        device: HCA,
        command: HardwareCommand::Reset
    }));
    // This cycle ends at the last epoch; a follow-up would need one more.
    let before = m.clone();
    assert_eq!(request(&mut m, client), Err(Error::EpochExhausted));
    assert!(m == before, "a refused follow-up changed the machine");
    m.handle(
        Tick(0),
        Input::ResetDone {
            device: HCA,
            result: ResetResult::Succeeded,
        },
    )
    .unwrap();
    drain(&mut m);
    assert_eq!(m.epoch(HCA), Some(Epoch(u32::MAX)));
    assert_eq!(m.phase(HCA), Some(PhaseKind::Running));
    assert_eq!(request(&mut m, client), Err(Error::EpochExhausted));
}

/// Power the device down and up again, the power-up reporting `result`; every
/// callback returned. Returns the outputs of the `PowerUpDone`.
fn power_cycle(m: &mut Machine, result: crate::PowerUpResult) -> heapless::Vec<Output, 32> {
    let down = Input::PowerDown {
        device: HCA,
        kind: crate::PowerDownKind::Idle,
        token: RequestToken(2),
    };
    m.handle(Tick(0), down).unwrap();
    drain(m);
    m.handle(Tick(0), Input::PowerDownDone { device: HCA })
        .unwrap();
    drain(m);
    assert_eq!(m.phase(HCA), Some(PhaseKind::LowPower));
    let up = Input::PowerUp {
        device: HCA,
        token: RequestToken(3),
    };
    m.handle(Tick(0), up).unwrap();
    drain(m);
    m.handle(
        Tick(0),
        Input::PowerUpDone {
            device: HCA,
            result,
        },
    )
    .unwrap();
    drain(m)
}

#[test]
fn a_lost_state_power_up_at_the_last_epoch_fails_the_device_instead_of_wrapping() {
    let (mut m, _) = running_with_one_client();
    m.devices[0].epoch = Epoch(u32::MAX);
    let seen = power_cycle(&mut m, crate::PowerUpResult::LostState);
    assert_eq!(m.epoch(HCA), Some(Epoch(u32::MAX)));
    assert_eq!(m.phase(HCA), Some(PhaseKind::Failed));
    assert!(seen.contains(&Output::Complete {
        device: HCA,
        token: RequestToken(3),
        status: Status::HardwareFailed
    }));
}

#[test]
fn a_lost_state_power_up_one_before_the_last_epoch_reaches_it() {
    let (mut m, client) = running_with_one_client();
    m.devices[0].epoch = Epoch(u32::MAX - 1);
    let seen = power_cycle(&mut m, crate::PowerUpResult::LostState);
    assert_eq!(m.epoch(HCA), Some(Epoch(u32::MAX)));
    assert_eq!(m.phase(HCA), Some(PhaseKind::Running));
    assert!(seen.contains(&Output::Notify {
        client,
        event: Event::Resumed {
            epoch: Epoch(u32::MAX),
            state_lost: true
        }
    }));
}

#[test]
fn an_ignored_input_completes_into_the_last_free_slot_and_is_refused_without_one() {
    let (mut m, _) = running_with_one_client();
    fill_until_free(&mut m, 1);
    let cancel = |token| Input::CancelStop {
        device: HCA,
        token: RequestToken(token),
    };
    // CancelStop while running is ignored: it completes, and needs one slot for that.
    assert_eq!(m.handle(Tick(0), cancel(7)), Ok(Reply::Accepted));
    assert_eq!(m.outputs.free(), 0);
    let before = m.clone();
    assert_eq!(
        m.handle(Tick(0), cancel(8)),
        Err(Error::OutputBacklog { needed: 1 })
    );
    assert!(m == before, "a refused ignored input changed the machine");
    assert_eq!(m.lost_outputs(), 0);
    let last = m.pending_outputs().last().copied();
    assert_eq!(
        last,
        Some(Output::Complete {
            device: HCA,
            token: RequestToken(7),
            status: Status::Success
        })
    );
}

#[test]
fn an_output_pushed_into_a_full_queue_is_counted_as_lost() {
    let (mut m, _) = running_with_one_client();
    let n = fill_until_free(&mut m, 0);
    assert_eq!(m.lost_outputs(), 0);
    m.outputs.push(filler(n));
    assert_eq!(m.lost_outputs(), 1);
    assert_eq!(m.pending_output_count(), queue_capacity(1, 2));
}

/// A lost-state power-up asked while a query stop is pending (the device returns to the
/// query, `power_up_done_for_query`) at the last epoch fails the device instead of
/// wrapping, as one from Dx does.
#[test]
fn a_lost_state_power_up_for_a_pending_query_at_the_last_epoch_fails_the_device() {
    let (mut m, _) = running_with_one_client();
    m.devices[0].epoch = Epoch(u32::MAX);
    let down = Input::PowerDown {
        device: HCA,
        kind: crate::PowerDownKind::Idle,
        token: RequestToken(2),
    };
    m.handle(Tick(0), down).unwrap();
    drain(&mut m);
    m.handle(Tick(0), Input::PowerDownDone { device: HCA })
        .unwrap();
    drain(&mut m);
    let query = Input::QueryStop {
        device: HCA,
        token: RequestToken(3),
    };
    m.handle(Tick(0), query).unwrap();
    drain(&mut m);
    let up = Input::PowerUp {
        device: HCA,
        token: RequestToken(4),
    };
    m.handle(Tick(0), up).unwrap();
    drain(&mut m);
    assert_eq!(m.phase(HCA), Some(PhaseKind::PoweringUp));
    let done = Input::PowerUpDone {
        device: HCA,
        result: crate::PowerUpResult::LostState,
    };
    m.handle(Tick(0), done).unwrap();
    let seen = drain(&mut m);
    assert_eq!(m.epoch(HCA), Some(Epoch(u32::MAX)));
    assert_eq!(m.phase(HCA), Some(PhaseKind::Failed));
    assert!(seen.contains(&Output::Complete {
        device: HCA,
        token: RequestToken(4),
        status: Status::HardwareFailed
    }));
}
