use pnp_lifecycle::*;
type M = Lifecycle<1, 4, 2, { queue_capacity(1, 4) }>;
const DEV: DeviceId = DeviceId(0);
fn drain(m: &mut M) -> Vec<Output> {
    core::iter::from_fn(|| m.poll_output()).collect()
}

#[test]
fn smoke_reset_cycle() {
    let mut m = M::new(Config::DEFAULT);
    m.handle(Input::AddDevice { device: DEV }).unwrap();
    m.handle(Input::Start {
        device: DEV,
        token: RequestToken(1),
    })
    .unwrap();
    drain(&mut m);
    m.handle(Input::StartDone {
        device: DEV,
        result: StartResult::Started,
    })
    .unwrap();
    drain(&mut m);
    let (a, _) = m.register(DEV, ClientKind::Trusted).unwrap();
    let (b, _) = m.register(DEV, ClientKind::Untrusted).unwrap();
    assert_eq!(m.reset_request(a).unwrap(), ResetAnswer::Started);
    let out = drain(&mut m);
    assert_eq!(
        out,
        vec![
            Output::Notify {
                client: a,
                event: Event::Reset
            },
            Output::Notify {
                client: b,
                event: Event::Reset
            },
        ]
    );
    m.handle(Input::CallbackDone { client: a }).unwrap();
    m.handle(Input::CallbackDone { client: b }).unwrap();
    m.handle(Input::ResetExecute { client: a }).unwrap();
    assert!(drain(&mut m).is_empty());
    assert_eq!(m.poll_timeout(), Some(Tick(1000)));
    m.handle(Input::Tick { now: Tick(1000) }).unwrap();
    assert_eq!(
        drain(&mut m),
        vec![
            Output::Notify {
                client: b,
                event: Event::Revoked
            },
            Output::Hardware {
                device: DEV,
                command: HardwareCommand::Reset
            },
        ]
    );
    m.handle(Input::ResetDone {
        device: DEV,
        result: ResetResult::Succeeded,
    })
    .unwrap();
    assert_eq!(
        drain(&mut m),
        vec![
            Output::Notify {
                client: a,
                event: Event::ResetEnd { epoch: Epoch(1) }
            },
            Output::ResetCycleFinished {
                device: DEV,
                outcome: CycleOutcome::Completed(Epoch(1))
            },
        ]
    );
    assert_eq!(
        m.handle(Input::Access {
            client: a,
            epoch: Epoch(0),
            what: Access::HardwareOp
        }),
        Err(Error::StaleEpoch { current: Epoch(1) })
    );
    m.handle(Input::CallbackDone { client: a }).unwrap();
    assert_eq!(m.acquire_interface(a), Ok(Epoch(1)));
    assert_eq!(
        m.handle(Input::Access {
            client: a,
            epoch: Epoch(1),
            what: Access::HardwareOp
        }),
        Ok(Reply::AccessGranted)
    );
    assert_eq!(
        m.handle(Input::Access {
            client: b,
            epoch: Epoch(1),
            what: Access::HardwareOp
        }),
        Err(Error::ClientRevoked)
    );
    m.handle(Input::Unload).unwrap();
    let out = drain(&mut m);
    assert_eq!(
        out,
        vec![Output::Notify {
            client: a,
            event: Event::Removed { surprise: false }
        }]
    );
    m.handle(Input::CallbackDone { client: a }).unwrap();
    m.handle(Input::CallbackDone { client: b }).unwrap();
    assert!(drain(&mut m).is_empty());
    assert_eq!(m.unregister(a), Ok(Unregistered::Now));
    let out = drain(&mut m);
    assert_eq!(
        out,
        vec![
            Output::ClientGone { client: a },
            Output::ClientGone { client: b },
            Output::Hardware {
                device: DEV,
                command: HardwareCommand::Shutdown
            },
            Output::Hardware {
                device: DEV,
                command: HardwareCommand::ReleaseResources
            },
            Output::DeviceRemoved { device: DEV },
            Output::UnloadMayFinish,
        ]
    );
    assert_eq!(
        m.handle(Input::Tick { now: Tick(5000) }),
        Err(Error::Unloaded)
    );
}
