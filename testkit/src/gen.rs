//! The input generator: turns fuzzer bytes (`arbitrary::Unstructured`) into inputs with
//! small parameters — device ids below `DEVICES` (now and then one beyond), ports below
//! `PORTS` (now and then one beyond), handles drawn mostly from those actually issued plus
//! stale and forged ones, mostly-unique tokens — each with the owner's `now`: mostly the
//! owner's clock as it is, sometimes a small step, sometimes a huge jump, sometimes the next
//! deadline, rarely a step backwards (refused); `Timeout` mostly at `poll_timeout` — and,
//! now and then, a raw `Input::arbitrary`. `CallbackDone`, `FenceDone` and `AccessDone` go
//! mostly to clients with a callback, a fence or a hardware operation actually out.

use crate::sut::Sut;
use crate::world::{past_all_deadlines, World};
use arbitrary::{Arbitrary, Result, Unstructured};
use pnp_lifecycle::{
    Access, CallbackAnswer, ClientHandle, ClientKind, Config, DeviceId, Epoch, GroupId, Input,
    LinkState, PhysPort, PortCaps, PortSet, PowerDownKind, PowerUpResult, Protocol, RequestToken,
    ResetResult, StartResult, Tick, TrustedTimeoutPolicy,
};

/// Generator state: the next fresh token.
#[derive(Debug, Clone, Default)]
pub struct Generator {
    next_token: u32,
}

/// A small configuration drawn from the bytes: short, distinct-ish timeouts and either
/// trusted-timeout policy.
pub fn small_config(u: &mut Unstructured<'_>) -> Result<Config> {
    Ok(Config {
        untrusted_ack_timeout: u.int_in_range(1..=6)?,
        trusted_ack_timeout: u.int_in_range(1..=12)?,
        trusted_policy: if u.arbitrary::<bool>()? {
            TrustedTimeoutPolicy::Revoke
        } else {
            TrustedTimeoutPolicy::FailDevice
        },
        detach_timeout: u.int_in_range(1..=8)?,
        callback_timeout: u.int_in_range(1..=10)?,
        operation_timeout: u.int_in_range(1..=8)?,
    })
}

/// Two devices (0 and 1) added, started (tokens 100 and 101) and joined to reset group 0,
/// all at tick 0: where walks and explorations of reset groups begin.
pub fn two_devices_in_one_group() -> Vec<(Tick, Input)> {
    let t = Tick(0);
    let mut v = Vec::new();
    for (i, device) in [DeviceId(0), DeviceId(1)].into_iter().enumerate() {
        let token = RequestToken(100 + i as u32);
        v.push((t, Input::AddDevice { device }));
        v.push((t, Input::Start { device, token }));
        let result = StartResult::Started;
        v.push((t, Input::StartDone { device, result }));
        let group = GroupId(0);
        v.push((t, Input::JoinResetGroup { device, group }));
    }
    v
}

impl Generator {
    /// A generator whose first token is 1.
    pub fn new() -> Self {
        Generator { next_token: 1 }
    }

    fn token(&mut self, u: &mut Unstructured<'_>) -> Result<RequestToken> {
        // Mostly fresh; sometimes a reused one (the oracle counts owed completions).
        if u.ratio(1, 16)? {
            return Ok(RequestToken(u.int_in_range(1..=self.next_token.max(1))?));
        }
        self.next_token = self.next_token.wrapping_add(1);
        Ok(RequestToken(self.next_token))
    }

    fn device<S: Sut>(&self, u: &mut Unstructured<'_>) -> Result<DeviceId> {
        if u.ratio(1, 64)? {
            return Ok(DeviceId(S::DEVICES as u8));
        }
        Ok(DeviceId(u.int_in_range(0..=(S::DEVICES as u8 - 1))?))
    }

    /// Mostly a device whose query stop succeeded (a stop anywhere else is refused).
    fn pending_stop<S: Sut>(&self, u: &mut Unstructured<'_>, world: &World<S>) -> Result<DeviceId> {
        let pending: Vec<DeviceId> = (0..S::DEVICES as u8)
            .map(DeviceId)
            .filter(|d| world.sut.phase(*d) == Some(pnp_lifecycle::PhaseKind::StopPending))
            .collect();
        if !pending.is_empty() && !u.ratio(1, 4)? {
            return Ok(*u.choose(&pending)?);
        }
        self.device::<S>(u)
    }

    fn port<S: Sut>(&self, u: &mut Unstructured<'_>) -> Result<PhysPort> {
        if u.ratio(1, 32)? {
            return Ok(PhysPort(S::PORTS as u8));
        }
        Ok(PhysPort(
            u.int_in_range(0..=(S::PORTS as u8).saturating_sub(1))?,
        ))
    }

    fn handle<S: Sut>(&self, u: &mut Unstructured<'_>, world: &World<S>) -> Result<ClientHandle> {
        // Counted and picked by position in the oracle's books, without collecting them:
        // the same bytes pick the same handle as `u.choose` over the collected lists did
        // (`choose` is `choose_index` then indexing), with no allocation a step.
        let live = |(_, c): &(ClientHandle, &crate::oracle::ClientBook)| !c.gone;
        let all_count = world.oracle.handles().count();
        let live_count = world.oracle.handles().filter(live).count();
        let pick = u.int_in_range(0..=15u8)?;
        if pick < 12 && live_count > 0 {
            let i = u.choose_index(live_count)?;
            let chosen = world.oracle.handles().filter(live).nth(i);
            return chosen.map(|(h, _)| h).ok_or(arbitrary::Error::EmptyChoose);
        }
        if pick < 15 && all_count > 0 {
            let i = u.choose_index(all_count)?;
            let chosen = world.oracle.handles().nth(i);
            return chosen.map(|(h, _)| h).ok_or(arbitrary::Error::EmptyChoose);
        }
        Ok(ClientHandle {
            device: self.device::<S>(u)?,
            slot: u.int_in_range(0..=(S::CLIENTS as u8))?,
            generation: u.int_in_range(0..=3)?,
        })
    }

    /// The next input for `world`, with the owner's `now` for it.
    pub fn next<S: Sut>(
        &mut self,
        u: &mut Unstructured<'_>,
        world: &World<S>,
    ) -> Result<(Tick, Input)> {
        let clock = world.clock;
        let now = match u.int_in_range(0..=15u8)? {
            0..=9 => clock,
            10..=12 => clock.after(u.int_in_range(1..=3)?),
            13 => clock.after(u.int_in_range(1_000..=1_000_000_000)?),
            14 => world.sut.poll_timeout().map_or(clock, |t| t.max(clock)),
            _ => Tick(clock.0.saturating_sub(u.int_in_range(1..=2)?)),
        };
        let input = self.input(u, world)?;
        if input == Input::Timeout {
            let t = match u.int_in_range(0..=9u8)? {
                0..=5 => world.sut.poll_timeout().unwrap_or(clock).max(clock),
                6 => past_all_deadlines(&world.sut.config(), clock),
                7 => clock.after(u.int_in_range(0..=3)?),
                8 => clock,
                _ => Tick(clock.0.saturating_sub(u.int_in_range(1..=2)?)),
            };
            return Ok((t, input));
        }
        Ok((now, input))
    }

    /// A step that moves a device along its lifecycle (so that random bytes reach deep
    /// states: a client's operation in flight while a stop, a reset or a removal comes).
    fn driven<S: Sut>(&mut self, u: &mut Unstructured<'_>, world: &World<S>) -> Result<Input> {
        use pnp_lifecycle::PhaseKind as K;
        let device = DeviceId(u.int_in_range(0..=(S::DEVICES as u8 - 1))?);
        let token = self.token(u)?;
        let live: Vec<ClientHandle> = world
            .oracle
            .handles()
            .filter(|(h, c)| h.device == device && c.addressable() && !c.cut)
            .map(|(h, _)| h)
            .collect();
        let voters: Vec<ClientHandle> = world
            .oracle
            .handles()
            .filter(|(h, c)| h.device == device && c.voter && c.owed_end && !c.cut)
            .map(|(h, _)| h)
            .collect();
        let epoch = world.sut.epoch(device).unwrap_or(Epoch(0));
        Ok(match world.sut.phase(device) {
            Some(K::Absent) => Input::AddDevice { device },
            Some(K::Added | K::Stopped) => Input::Start { device, token },
            Some(K::Starting) => Input::StartDone {
                device,
                result: StartResult::Started,
            },
            Some(K::Running) => match u.int_in_range(0..=6u8)? {
                0 if live.len() < S::CLIENTS => Input::Register {
                    device,
                    kind: ClientKind::Untrusted,
                },
                0..=2 if !live.is_empty() => {
                    let client = *u.choose(&live)?;
                    if world.oracle.client(client).and_then(|c| c.interface) != Some(epoch) {
                        Input::AcquireInterface { client }
                    } else {
                        Input::Access {
                            client,
                            epoch,
                            what: Access::HardwareOp,
                        }
                    }
                }
                3 => Input::QueryStop { device, token },
                4 if !live.is_empty() => Input::ResetRequest {
                    client: *u.choose(&live)?,
                },
                5 => Input::PowerDown {
                    device,
                    kind: if u.arbitrary()? {
                        PowerDownKind::Idle
                    } else {
                        PowerDownKind::SystemSleep
                    },
                    token,
                },
                _ => Input::Remove { device, token },
            },
            Some(K::PoweringDown) => Input::PowerDownDone { device },
            Some(K::LowPower) => match (u.int_in_range(0..=2u8)?, live.first()) {
                (0, Some(&client)) => Input::Access {
                    client,
                    epoch,
                    what: Access::HardwareOp,
                },
                (1, Some(&client)) => Input::ResetRequest { client },
                _ => Input::PowerUp { device, token },
            },
            Some(K::PoweringUp) => Input::PowerUpDone {
                device,
                result: if u.ratio(1, 4)? {
                    PowerUpResult::LostState
                } else {
                    PowerUpResult::Powered
                },
            },
            Some(K::StopPending) => Input::Stop { device, token },
            Some(K::Quiescing) if !voters.is_empty() => {
                let client = *u.choose(&voters)?;
                if u.arbitrary()? {
                    Input::ResetExecute { client }
                } else {
                    Input::CanRecover { client }
                }
            }
            Some(K::Executing) => Input::ResetDone {
                device,
                result: ResetResult::Succeeded,
            },
            _ => Input::Timeout,
        })
    }

    fn input<S: Sut>(&mut self, u: &mut Unstructured<'_>, world: &World<S>) -> Result<Input> {
        let choice = u.int_in_range(0..=119u8)?;
        let input = match choice {
            0..=3 => Input::AddDevice {
                device: self.device::<S>(u)?,
            },
            4..=6 => {
                let protocol =
                    *u.choose(&[Protocol::Ib, Protocol::Ib, Protocol::Roce, Protocol::Iwarp])?;
                Input::ConfigurePort {
                    device: self.device::<S>(u)?,
                    port: self.port::<S>(u)?,
                    caps: PortCaps {
                        protocol,
                        max_mtu: *u.choose(&[256, 1024, 4096])?,
                        atomics: u.arbitrary()?,
                    },
                }
            }
            7..=9 => Input::Start {
                device: self.device::<S>(u)?,
                token: self.token(u)?,
            },
            10..=13 => {
                let device = self.device::<S>(u)?;
                let result = match u.int_in_range(0..=7u8)? {
                    0 => StartResult::FailedBeforeResources,
                    1 => StartResult::FailedAfterResources,
                    _ => StartResult::Started,
                };
                Input::StartDone { device, result }
            }
            14..=15 => Input::QueryStop {
                device: self.device::<S>(u)?,
                token: self.token(u)?,
            },
            16 => Input::CancelStop {
                device: self.device::<S>(u)?,
                token: self.token(u)?,
            },
            17 => Input::Stop {
                device: self.pending_stop::<S>(u, world)?,
                token: self.token(u)?,
            },
            18..=19 => Input::QueryRemove {
                device: self.device::<S>(u)?,
                token: self.token(u)?,
            },
            20 => Input::CancelRemove {
                device: self.device::<S>(u)?,
                token: self.token(u)?,
            },
            21..=23 => Input::Remove {
                device: self.device::<S>(u)?,
                token: self.token(u)?,
            },
            24..=25 => Input::SurpriseRemoval {
                device: self.device::<S>(u)?,
            },
            26..=27 => Input::FatalError {
                device: self.device::<S>(u)?,
            },
            28..=31 => Input::ResetDone {
                device: self.device::<S>(u)?,
                result: if u.ratio(1, 6)? {
                    ResetResult::Failed
                } else {
                    ResetResult::Succeeded
                },
            },
            32..=35 => Input::LinkChanged {
                device: self.device::<S>(u)?,
                port: self.port::<S>(u)?,
                state: *u.choose(&[
                    LinkState::Down,
                    LinkState::Init,
                    LinkState::Armed,
                    LinkState::Active,
                ])?,
            },
            36..=42 => Input::Register {
                device: self.device::<S>(u)?,
                kind: if u.arbitrary()? {
                    ClientKind::Trusted
                } else {
                    ClientKind::Untrusted
                },
            },
            43..=46 => Input::Unregister {
                client: self.handle(u, world)?,
            },
            47..=56 => {
                // Mostly a client with callbacks out.
                let out = world.callbacks_out();
                if !out.is_empty() && !u.ratio(1, 8)? {
                    let client = u.choose(&out)?.0;
                    if u.ratio(1, 4)? {
                        // The answer with the return (DESIGN "Cost"): any of them, so
                        // that the refused ones are tried too.
                        let answer = *u.choose(&[
                            CallbackAnswer::ResetExecute,
                            CallbackAnswer::CanRecover,
                            CallbackAnswer::CannotPause,
                            CallbackAnswer::AcquireInterface,
                        ])?;
                        Input::CallbackDoneWith { client, answer }
                    } else {
                        Input::CallbackDone { client }
                    }
                } else {
                    Input::CallbackDone {
                        client: self.handle(u, world)?,
                    }
                }
            }
            57..=59 => Input::AcquireInterface {
                client: self.handle(u, world)?,
            },
            60..=64 => Input::ResetRequest {
                client: self.handle(u, world)?,
            },
            65..=70 => Input::ResetExecute {
                client: self.handle(u, world)?,
            },
            71..=73 => {
                let client = self.handle(u, world)?;
                let mut ports = PortSet(u.int_in_range(0..=((1u16 << S::PORTS) - 1) as u8)?);
                if u.ratio(1, 32)? {
                    ports = ports.with(PhysPort(S::PORTS as u8));
                }
                Input::Bind { client, ports }
            }
            74..=75 => Input::Hold {
                client: self.handle(u, world)?,
            },
            76..=77 => Input::ReleaseHold {
                client: self.handle(u, world)?,
            },
            78..=83 => {
                let client = self.handle(u, world)?;
                let held = world
                    .oracle
                    .client(client)
                    .and_then(|c| c.interface)
                    .unwrap_or(Epoch(0));
                let epoch = match u.int_in_range(0..=5u8)? {
                    0 => world.sut.epoch(client.device).unwrap_or(Epoch(0)),
                    1 => Epoch(held.0.saturating_sub(1)),
                    _ => held,
                };
                let what = if u.arbitrary()? {
                    Access::HardwareOp
                } else {
                    Access::QueryCounters(self.port::<S>(u)?)
                };
                Input::Access {
                    client,
                    epoch,
                    what,
                }
            }
            84..=89 => Input::Timeout,
            90..=93 => self.driven(u, world)?,
            94..=96 => {
                // With the fast path on, the owner answers a close (an owner obligation
                // like a fence) with a few operations in flight. Draws nothing when no
                // close is out, so a machine without the fast path sees the same inputs.
                let closes = world.closes_out();
                let out = world.fences_out();
                if !closes.is_empty() && u.arbitrary()? {
                    Input::FastPathClosed {
                        client: *u.choose(&closes)?,
                        in_flight: u.int_in_range(0..=2)?,
                    }
                } else if !out.is_empty() && !u.ratio(1, 8)? {
                    Input::FenceDone {
                        client: *u.choose(&out)?,
                    }
                } else {
                    Input::FenceDone {
                        client: self.handle(u, world)?,
                    }
                }
            }
            97 => Input::Unload,
            98..=102 => {
                // Mostly a client with hardware operations out.
                let out = world.operations_out();
                if !out.is_empty() && !u.ratio(1, 8)? {
                    Input::AccessDone {
                        client: *u.choose(&out)?,
                    }
                } else {
                    Input::AccessDone {
                        client: self.handle(u, world)?,
                    }
                }
            }
            103..=106 => Input::CanRecover {
                client: self.handle(u, world)?,
            },
            107 => Input::CannotPause {
                client: self.handle(u, world)?,
            },
            108..=109 => Input::CanPause {
                client: self.handle(u, world)?,
            },
            110..=111 => Input::PowerDown {
                device: self.device::<S>(u)?,
                kind: if u.arbitrary()? {
                    PowerDownKind::Idle
                } else {
                    PowerDownKind::SystemSleep
                },
                token: self.token(u)?,
            },
            112..=113 => Input::PowerDownDone {
                device: self.device::<S>(u)?,
            },
            114 => Input::PowerUp {
                device: self.device::<S>(u)?,
                token: self.token(u)?,
            },
            115..=117 => Input::PowerUpDone {
                device: self.device::<S>(u)?,
                result: match u.int_in_range(0..=7u8)? {
                    0 => PowerUpResult::Failed,
                    1..=2 => PowerUpResult::LostState,
                    _ => PowerUpResult::Powered,
                },
            },
            // Reset groups now and then (a group id one beyond is refused), else a raw
            // input.
            _ => match u.int_in_range(0..=3u8)? {
                0 => Input::JoinResetGroup {
                    device: self.device::<S>(u)?,
                    group: GroupId(u.int_in_range(0..=S::DEVICES as u8)?),
                },
                1 => Input::LeaveResetGroup {
                    device: self.device::<S>(u)?,
                },
                2 => Input::ResetNack {
                    client: self.handle(u, world)?,
                },
                _ => Input::arbitrary(u)?,
            },
        };
        Ok(input)
    }
}
