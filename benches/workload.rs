//! Workloads shared by the criterion benchmark and the instruction-count example.
#![allow(dead_code)]

use pnp_lifecycle::*;

pub const DEV: DeviceId = DeviceId(0);

/// The owner's clock. The workloads return every callback at once, so no deadline is ever
/// due and the time may stand still: the cost measured is the machine's, not the timers'.
pub const NOW: Tick = Tick(0);

/// Feed one input and drain its outputs, as every owner must.
#[inline]
pub fn feed<const C: usize, const Q: usize>(m: &mut Lifecycle<1, C, 2, Q>, input: Input) {
    let _ = m.handle(NOW, input);
    while m.poll_output().is_some() {}
}

/// A running device with `n` trusted clients, every callback returned.
pub fn running<const C: usize, const Q: usize>(
    n: usize,
) -> (Lifecycle<1, C, 2, Q>, Vec<ClientHandle>) {
    let mut m = Lifecycle::new(Config::DEFAULT);
    feed(&mut m, Input::AddDevice { device: DEV });
    feed(
        &mut m,
        Input::Start {
            device: DEV,
            token: RequestToken(1),
        },
    );
    feed(
        &mut m,
        Input::StartDone {
            device: DEV,
            result: StartResult::Started,
        },
    );
    let mut clients = Vec::new();
    for _ in 0..n {
        if let Ok(Reply::Registered { client, .. }) = m.handle(
            NOW,
            Input::Register {
                device: DEV,
                kind: ClientKind::Trusted,
            },
        ) {
            clients.push(client);
        }
    }
    assert_eq!(clients.len(), n);
    (m, clients)
}

/// One simple transition pair: query stop, then cancel stop (two transitions).
#[inline]
pub fn stop_query_cancel<const C: usize, const Q: usize>(m: &mut Lifecycle<1, C, 2, Q>) {
    feed(
        m,
        Input::QueryStop {
            device: DEV,
            token: RequestToken(2),
        },
    );
    feed(
        m,
        Input::CancelStop {
            device: DEV,
            token: RequestToken(3),
        },
    );
}

/// One whole reset cycle: request, every RESET delivered and answered, hardware reset,
/// every RESET_END delivered, every client re-acquires its interface. Each client has one
/// callback at a time, so each `CallbackDone` returns exactly the notification before it.
pub fn reset_cycle<const C: usize, const Q: usize>(
    m: &mut Lifecycle<1, C, 2, Q>,
    clients: &[ClientHandle],
) {
    let Some(&first) = clients.first() else {
        return;
    };
    feed(m, Input::ResetRequest { client: first });
    for &c in clients {
        feed(m, Input::CallbackDone { client: c });
        feed(m, Input::ResetExecute { client: c });
    }
    feed(
        m,
        Input::ResetDone {
            device: DEV,
            result: ResetResult::Succeeded,
        },
    );
    for &c in clients {
        feed(m, Input::CallbackDone { client: c });
        feed(m, Input::AcquireInterface { client: c });
    }
    debug_assert!(m.clients(DEV).all(|(_, v)| !v.callback_in_flight));
    assert_eq!(m.phase(DEV), Some(PhaseKind::Running));
}
