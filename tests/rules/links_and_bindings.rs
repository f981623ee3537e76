//! DESIGN "Links and bindings": per-port link state forwarded to bound clients and never
//! a gate on the device; bindings of one protocol, capabilities per binding.

use crate::support::*;

#[test]
fn link_changes_go_to_bound_clients_only_and_never_change_the_device_state() {
    let (mut o, c) = running_with(&[
        ClientKind::Trusted,
        ClientKind::Untrusted,
        ClientKind::Trusted,
    ]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0),
    });
    o.ok(Input::Bind {
        client: c[1],
        ports: PortSet::single(P1),
    });
    for (port, state) in [
        (P0, LinkState::Init),
        (P0, LinkState::Armed),
        (P1, LinkState::Active),
        (P0, LinkState::Down),
    ] {
        let before = o.m.phase_detail(DEV);
        let out = o.ok(Input::LinkChanged {
            device: DEV,
            port,
            state,
        });
        let to = if port == P0 { c[0] } else { c[1] };
        assert_eq!(out, vec![notify(to, Event::LinkChanged { port, state })]);
        assert_eq!(o.m.phase_detail(DEV), before);
        assert_eq!(o.m.link(DEV, port), Some(state));
        o.return_callbacks(DEV);
    }
    assert!(o.events_of(c[2]).is_empty());
    // The same state again is no change: nothing to tell.
    assert!(o
        .ok(Input::LinkChanged {
            device: DEV,
            port: P0,
            state: LinkState::Down
        })
        .is_empty());
    // Links change during a reset cycle without disturbing it.
    o.ok(Input::ResetRequest { client: c[2] });
    o.ok(Input::LinkChanged {
        device: DEV,
        port: P1,
        state: LinkState::Down,
    });
    assert_eq!(o.phase(DEV), PhaseKind::Quiescing);
}

#[test]
fn queries_are_allowed_with_every_link_down() {
    let (mut o, c) = running_with(&[ClientKind::Untrusted]);
    o.ok(Input::Bind {
        client: c[0],
        ports: PortSet::single(P0).with(P1),
    });
    assert!(
        o.m.link(DEV, P0) == Some(LinkState::Down) && o.m.link(DEV, P1) == Some(LinkState::Down)
    );
    for port in [P0, P1] {
        assert_eq!(
            o.step(Input::Access {
                client: c[0],
                epoch: Epoch(0),
                what: Access::QueryCounters(port)
            })
            .0,
            Ok(Reply::AccessGranted)
        );
    }
    assert!(o.m.binding_caps(c[0]).is_ok());
}

#[test]
fn a_binding_that_mixes_protocols_is_refused_with_a_typed_error() {
    let mut o = owner();
    o.started(DEV, true); // P0 IB, P1 RoCE
    let c = o.register(DEV, ClientKind::Trusted);
    o.refused(
        Input::Bind {
            client: c,
            ports: PortSet::single(P0).with(P1),
        },
        Error::MixedProtocols {
            first: Protocol::Ib,
            other: Protocol::Roce,
        },
    );
    o.refused(
        Input::Bind {
            client: c,
            ports: PortSet::EMPTY,
        },
        Error::EmptyBinding,
    );
    o.refused(
        Input::Bind {
            client: c,
            ports: PortSet::single(PhysPort(5)),
        },
        Error::NoSuchPort,
    );
    assert_eq!(o.m.binding_caps(c), Err(Error::NotBound));
}

#[test]
fn capabilities_are_answered_per_binding() {
    let mut o = owner();
    o.ok(Input::AddDevice { device: DEV });
    let slow_ib = PortCaps {
        protocol: Protocol::Ib,
        max_mtu: 2048,
        atomics: false,
    };
    o.ok(Input::ConfigurePort {
        device: DEV,
        port: P0,
        caps: IB,
    });
    o.ok(Input::ConfigurePort {
        device: DEV,
        port: P1,
        caps: slow_ib,
    });
    let both = o.register(DEV, ClientKind::Trusted);
    let first = o.register(DEV, ClientKind::Trusted);
    o.ok(Input::Bind {
        client: both,
        ports: PortSet::single(P0).with(P1),
    });
    o.ok(Input::Bind {
        client: first,
        ports: PortSet::single(P0),
    });
    assert_eq!(
        o.m.binding_caps(both),
        Ok(BindingCaps {
            protocol: Protocol::Ib,
            ports: PortSet::single(P0).with(P1),
            max_mtu: 2048,
            atomics: false
        })
    );
    assert_eq!(
        o.m.binding_caps(first),
        Ok(BindingCaps {
            protocol: Protocol::Ib,
            ports: PortSet::single(P0),
            max_mtu: 4096,
            atomics: true
        })
    );
}

#[test]
fn port_sets_hold_ports_0_to_7_and_nothing_beyond() {
    let (p2, p7, p8) = (PhysPort(2), PhysPort(7), PhysPort(8));
    assert_eq!(PortSet::single(p8), PortSet::EMPTY);
    assert!(!PortSet(u8::MAX).contains(p8));
    let set = PortSet::single(P0).with(p2).with(p2).with(p7).with(p8);
    assert_eq!(set, PortSet(0b1000_0101));
    assert!(set.contains(p2) && set.contains(p7) && !set.contains(P1));
    assert_eq!(set.len(), 3);
    assert_eq!(PortSet::EMPTY.len(), 0);
    assert_eq!(set.iter().collect::<Vec<_>>(), vec![P0, p2, p7]);
    assert!(PortSet::EMPTY.is_empty() && !set.is_empty());
}
