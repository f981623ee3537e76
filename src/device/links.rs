//! Per-port link state and the clients bound to each port.

use super::*;

impl<const C: usize, const P: usize> Device<C, P> {
    // ---- links -------------------------------------------------------------------------

    /// [`Input::LinkChanged`]: a port's link state changed: every active client bound to it is
    /// told (a newer state replaces an older one still waiting in its mailbox, I11); after
    /// `DeviceFatal` nothing but `Removed`/`Revoked` follows (I4).
    #[inline(never)]
    pub(super) fn link_changed<const Q: usize>(
        &mut self,
        cx: &mut Ctx<'_, Q>,
        port: PhysPort,
        state: LinkState,
    ) -> Result<(), Error> {
        let entry = self
            .ports
            .get_mut(usize::from(port.0))
            .filter(|p| p.caps.is_some())
            .ok_or(Error::NoSuchPort)?;
        if entry.link == state {
            return Ok(());
        }
        entry.link = state;
        // I4: after `DeviceFatal` only `Removed` or `Revoked` follow (a failed
        // device, or one whose remove is pending from failed).
        if self.failure().is_some() {
            return Ok(());
        }
        for index in self.registry.occupied() {
            let bound = self
                .registry
                .slot(index)
                .is_some_and(|s| s.is_active() && s.ports.contains(port));
            if bound {
                self.notify(cx, index, Event::LinkChanged { port, state });
            }
        }
        Ok(())
    }
}
