//! Reference twin of [`crate::lpm`]: a list of prefixes kept sorted longest-first and scanned
//! linearly; the first match is the longest. Addresses are right-aligned `u128`s (an IPv4
//! address is its `u32` value). Tests only.

/// Longest-prefix match, the obviously-correct way.
#[derive(Clone, Debug)]
pub struct RefLpm {
    width: u8,
    /// (prefix with host bits cleared, len, value), longest first.
    rules: Vec<(u128, u8, u32)>,
}

impl RefLpm {
    /// An empty IPv4 table (32-bit addresses).
    pub fn v4() -> Self {
        RefLpm { width: 32, rules: Vec::new() }
    }
    /// An empty IPv6 table (128-bit addresses).
    pub fn v6() -> Self {
        RefLpm { width: 128, rules: Vec::new() }
    }
    /// Number of routes.
    pub fn len(&self) -> usize {
        self.rules.len()
    }
    /// True when there is no route.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
    /// Bits of `addr` that a /len prefix compares (mask over the low `width` bits).
    fn net_mask(&self, len: u8) -> u128 {
        let all = if self.width == 128 { u128::MAX } else { (1u128 << self.width) - 1 };
        if len == 0 {
            0
        } else {
            all & !all.checked_shr(u32::from(len)).unwrap_or(0)
        }
    }
    /// Adds or replaces `prefix/len → value` (host bits ignored; `len` ≤ width).
    pub fn insert(&mut self, prefix: u128, len: u8, value: u32) {
        let p = prefix & self.net_mask(len);
        if let Some(r) = self.rules.iter_mut().find(|r| r.0 == p && r.1 == len) {
            r.2 = value;
            return;
        }
        self.rules.push((p, len, value));
        self.rules.sort_by_key(|r| core::cmp::Reverse(r.1));
    }
    /// Removes `prefix/len`, returning its value.
    pub fn remove(&mut self, prefix: u128, len: u8) -> Option<u32> {
        let p = prefix & self.net_mask(len);
        let i = self.rules.iter().position(|r| r.0 == p && r.1 == len)?;
        Some(self.rules.remove(i).2)
    }
    /// The value of the longest prefix containing `addr`.
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        self.rules.iter().find(|r| addr & self.net_mask(r.1) == r.0).map(|r| r.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_first() {
        let mut r = RefLpm::v4();
        r.insert(0x0a00_0000, 8, 1);
        r.insert(0x0a01_0000, 16, 2);
        r.insert(0, 0, 0);
        assert_eq!(r.lookup(0x0a01_0203), Some(2));
        assert_eq!(r.lookup(0x0a02_0203), Some(1));
        assert_eq!(r.lookup(0x0b00_0000), Some(0));
        assert_eq!(r.remove(0x0a01_ffff, 16), Some(2));
        assert_eq!(r.lookup(0x0a01_0203), Some(1));
        let mut r6 = RefLpm::v6();
        r6.insert(u128::MAX, 128, 5);
        r6.insert(1 << 127, 1, 6);
        assert_eq!(r6.lookup(u128::MAX), Some(5));
        assert_eq!(r6.lookup(u128::MAX - 1), Some(6));
        assert_eq!(r6.lookup(1), None);
    }
}
