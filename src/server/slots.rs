//! Connection slots: a cap on open connections in all, and one per source
//! address, so that slow or idle clients can neither exhaust the descriptor
//! table nor, from one address, take every slot from the others. An
//! address is counted as `hub::throttle::source_of` says (an IPv6 host by
//! its /64), the same as the refused-key budget.

use std::net::IpAddr;
use std::sync::Arc;

use dashmap::mapref::entry::Entry;
use dashmap::DashMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::hub::throttle::source_of;

/// Why a connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `server.max_connections` are open.
    Full,
    /// `server.max_connections_per_address` are open from this address.
    AddressFull,
}

impl Refusal {
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Full => "max_connections",
            Refusal::AddressFull => "max_connections_per_address",
        }
    }
}

#[derive(Clone)]
pub struct Slots {
    total: Arc<Semaphore>,
    per_address: Arc<DashMap<IpAddr, usize>>,
    per_address_cap: usize,
}

/// One admitted connection's place; released when the connection (or the
/// WebSocket it became) is dropped.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
    address: IpAddr,
    per_address: Arc<DashMap<IpAddr, usize>>,
}

impl Slots {
    pub fn new(total: usize, per_address: usize) -> Slots {
        Slots {
            total: Arc::new(Semaphore::new(total)),
            per_address: Arc::new(DashMap::new()),
            per_address_cap: per_address,
        }
    }

    pub fn admit(&self, address: IpAddr) -> Result<Slot, Refusal> {
        let address = source_of(address);
        let permit = self
            .total
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refusal::Full)?;
        let mut count = self.per_address.entry(address).or_insert(0);
        if *count >= self.per_address_cap {
            return Err(Refusal::AddressFull);
        }
        *count += 1;
        Ok(Slot {
            _permit: permit,
            address,
            per_address: self.per_address.clone(),
        })
    }

    /// Connections open now from `address`.
    #[cfg(test)]
    fn open_from(&self, address: IpAddr) -> usize {
        self.per_address.get(&source_of(address)).map_or(0, |c| *c)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Entry::Occupied(mut count) = self.per_address.entry(self.address) {
            *count.get_mut() -= 1;
            if *count.get() == 0 {
                count.remove();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_hold_in_all_and_per_address_and_slots_come_back() {
        let slots = Slots::new(3, 2);
        let a: IpAddr = "127.0.0.2".parse().unwrap();
        let b: IpAddr = "127.0.0.3".parse().unwrap();
        let a1 = slots.admit(a).unwrap();
        let _a2 = slots.admit(a).unwrap();
        assert_eq!(slots.admit(a).err(), Some(Refusal::AddressFull));
        let b1 = slots.admit(b).unwrap();
        assert_eq!(slots.admit(b).err(), Some(Refusal::Full));
        drop(a1);
        assert_eq!(slots.open_from(a), 1);
        let b2 = slots.admit(b).unwrap();
        assert_eq!(slots.admit(a).err(), Some(Refusal::Full));
        drop(b1);
        assert_eq!(slots.open_from(b), 1);
        let _a3 = slots.admit(a).unwrap();
        drop(b2);
        assert_eq!(slots.admit(a).err(), Some(Refusal::AddressFull));
    }

    #[test]
    fn an_ipv6_64_shares_one_per_address_cap() {
        let slots = Slots::new(10, 2);
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::2:3".parse().unwrap();
        let elsewhere: IpAddr = "2001:db8:0:1::1".parse().unwrap();
        let _a = slots.admit(a).unwrap();
        let _b = slots.admit(b).unwrap();
        assert_eq!(
            slots.admit("2001:db8::9".parse().unwrap()).err(),
            Some(Refusal::AddressFull)
        );
        assert!(slots.admit(elsewhere).is_ok());
        let mapped: IpAddr = "::ffff:127.0.0.5".parse().unwrap();
        let _m = slots.admit(mapped).unwrap();
        assert_eq!(slots.open_from("127.0.0.5".parse().unwrap()), 1);
    }
}
