//! Configuration: plain structs (no serde), checked by [`TmConfig::validate`] before anything is
//! built. A rejected value comes back as a [`ConfigError`] that names where it is ([`Loc`]) and
//! what is wrong with it ([`Problem`], carrying the value).
//!
//! ```
//! use fastpath_tm::config::{ClassSched, FlatPortConfig, Loc, Problem, PortConfig, TmConfig};
//! let mut port = FlatPortConfig::default();
//! port.classes[3].alpha_log2 = 5; // SAI SHARED_DYNAMIC_TH allows -4..=3
//! port.classes[2].sched = ClassSched::Drr { weight: 0 };
//! let cfg = TmConfig { ports: vec![PortConfig::Flat(port)], ..TmConfig::default() };
//! let err = cfg.validate().unwrap_err();
//! assert_eq!(err.loc, Loc::Class { port: 0, class: 2 }); // classes are checked 0..8
//! assert_eq!(err.problem, Problem::WeightZero);
//! assert_eq!(err.to_string(), "port 0 class 2: DRR weight is 0");
//! ```

use crate::shaper::ShaperConfig;
use crate::wred::WredConfig;

/// Traffic classes per flat port (and the most per HQoS pipe). Class 7 has the highest priority.
pub const CLASSES: usize = 8;
/// Dynamic-threshold exponents accepted: α = 2ⁿ, n in this range (SAI `SHARED_DYNAMIC_TH`).
pub const ALPHA_LOG2_RANGE: std::ops::RangeInclusive<i8> = -4..=3;
/// Largest ring per flat queue, packets.
pub const MAX_RING_PKTS: u32 = 1 << 20;
/// Most pipes per HQoS port.
pub const MAX_PIPES: u64 = 1 << 22;
/// Most ports.
pub const MAX_PORTS: usize = 1 << 12;

/// How a class is scheduled among its port's (or pipe's) classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassSched {
    /// Strict priority: served before every DRR class and every lower strict class.
    Strict,
    /// Deficit round robin among the port's non-strict classes; quantum = weight × the port's
    /// quantum unit, in bytes.
    Drr {
        /// Relative share, ≥ 1.
        weight: u32,
    },
}

/// One class (queue) of a flat port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassConfig {
    /// Strict or DRR.
    pub sched: ClassSched,
    /// Ring capacity, packets: a power of two, 1..=[`MAX_RING_PKTS`]. The ring is allocated at
    /// build time (16 bytes per slot).
    pub ring_pkts: u32,
    /// Bytes reserved for this queue out of the shared buffer (always admitted up to this).
    pub min_bytes: u64,
    /// Dynamic threshold: the queue may use shared buffer while its shared part is below
    /// 2^`alpha_log2` × the free shared buffer. In [`ALPHA_LOG2_RANGE`].
    pub alpha_log2: i8,
    /// WRED / ECN; `None` is tail drop only.
    pub wred: Option<WredConfig>,
    /// Queue shaper; `None` is unshaped.
    pub shaper: Option<ShaperConfig>,
}

impl Default for ClassConfig {
    /// DRR weight 1, a 1024-packet ring, no reservation, α = 1, no WRED, no shaper.
    fn default() -> ClassConfig {
        ClassConfig { sched: ClassSched::Drr { weight: 1 }, ring_pkts: 1024, min_bytes: 0, alpha_log2: 0, wred: None, shaper: None }
    }
}

/// A port with 8 classes, strict priority and DRR mixed per class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlatPortConfig {
    /// Class `i` is queue `i`; 7 is the highest strict priority.
    pub classes: [ClassConfig; CLASSES],
    /// DRR quantum per unit of weight, bytes (≥ 1; an MTU makes DRR O(1) per packet).
    pub drr_quantum_bytes: u32,
    /// Port shaper; `None` is line rate.
    pub shaper: Option<ShaperConfig>,
}

impl Default for FlatPortConfig {
    /// Classes 7 and 6 strict, 5..0 DRR with weight 1, quantum 1536 bytes, unshaped.
    fn default() -> FlatPortConfig {
        let mut classes = [ClassConfig::default(); CLASSES];
        classes[7].sched = ClassSched::Strict;
        classes[6].sched = ClassSched::Strict;
        FlatPortConfig { classes, drr_quantum_bytes: 1536, shaper: None }
    }
}

/// The shared buffer of a whole traffic manager (all ports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferConfig {
    /// Bytes of packet data that may be queued at once, reservations included.
    pub total_bytes: u64,
    /// Packet descriptors that may be queued at once (also the size of the HQoS descriptor slab).
    pub total_pkts: u32,
}

impl Default for BufferConfig {
    /// 16 MiB and 65,536 packets.
    fn default() -> BufferConfig {
        BufferConfig { total_bytes: 16 << 20, total_pkts: 1 << 16 }
    }
}

/// Per-class queue limits of an HQoS port (the same for every pipe).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HqosQueueConfig {
    /// Longest queue, bytes (tail drop above it: `TmDrop::QueueFull`), ≥ 1.
    pub limit_bytes: u32,
    /// Bytes reserved per queue (× every pipe) out of the shared buffer.
    pub min_bytes: u32,
    /// Dynamic threshold exponent, in [`ALPHA_LOG2_RANGE`].
    pub alpha_log2: i8,
}

impl Default for HqosQueueConfig {
    /// 64 KiB per queue, no reservation, α = 1.
    fn default() -> HqosQueueConfig {
        HqosQueueConfig { limit_bytes: 64 << 10, min_bytes: 0, alpha_log2: 0 }
    }
}

/// A group of pipes (rte_sched's subport).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    /// Pipes in the group. Pipes are numbered across the port: group 0 has pipes `0..n0`,
    /// group 1 `n0..n0+n1`, and so on.
    pub pipes: u32,
    /// Profile of every pipe of the group at start (see `Tm::set_pipe_profile`).
    pub profile: u16,
    /// Group shaper; `None` is unshaped.
    pub shaper: Option<ShaperConfig>,
}

/// What pipes that share a service plan have in common.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipeProfile {
    /// Pipe shaper; `None` is unshaped.
    pub shaper: Option<ShaperConfig>,
    /// Per class: strict priority, or a weight for the byte-weighted round robin among the
    /// pipe's non-strict classes (quantum = weight × the port's quantum unit).
    pub sched: [ClassSched; CLASSES],
}

impl Default for PipeProfile {
    /// Unshaped, every class strict.
    fn default() -> PipeProfile {
        PipeProfile { shaper: None, sched: [ClassSched::Strict; CLASSES] }
    }
}

/// A hierarchical port: port ▸ group ▸ pipe ▸ class (one queue per class).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HqosConfig {
    /// Classes per pipe: 4 or 8.
    pub classes: u8,
    /// Port shaper; `None` is line rate.
    pub shaper: Option<ShaperConfig>,
    /// Per class queue limits (the first `classes` entries are used).
    pub queues: [HqosQueueConfig; CLASSES],
    /// The groups, in pipe order.
    pub groups: Vec<GroupConfig>,
    /// Pipe profiles (at least one; at most 65,536).
    pub profiles: Vec<PipeProfile>,
    /// Round-robin quantum between groups and between the pipes of a group, and the unit of
    /// class weights, bytes (≥ 1).
    pub quantum_bytes: u32,
    /// Shaped-out pipes sleep on a timer wheel of 4096 slots of 2^`wheel_tick_log2` ns
    /// (0..=30). 10 (≈1 µs) suits pipes of a few Mbit/s and more.
    pub wheel_tick_log2: u8,
}

impl Default for HqosConfig {
    /// 8 classes, one group of 4096 pipes, one unshaped all-strict profile, quantum 1536,
    /// ≈1 µs wheel ticks.
    fn default() -> HqosConfig {
        HqosConfig {
            classes: 8,
            shaper: None,
            queues: [HqosQueueConfig::default(); CLASSES],
            groups: vec![GroupConfig { pipes: 4096, profile: 0, shaper: None }],
            profiles: vec![PipeProfile::default()],
            quantum_bytes: 1536,
            wheel_tick_log2: 10,
        }
    }
}

/// One port of the traffic manager.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)] // built once; a Box would only make configs harder to write
pub enum PortConfig {
    /// 8 classes, SP + DRR.
    Flat(FlatPortConfig),
    /// Hierarchical QoS.
    Hqos(HqosConfig),
}

/// The whole traffic manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmConfig {
    /// The shared buffer.
    pub buffer: BufferConfig,
    /// Seed of the WRED random generator (0 is replaced by a fixed non-zero constant).
    pub seed: u64,
    /// Ports, numbered from 0.
    pub ports: Vec<PortConfig>,
}

impl Default for TmConfig {
    /// The default buffer, seed 1, one default flat port.
    fn default() -> TmConfig {
        TmConfig { buffer: BufferConfig::default(), seed: 1, ports: vec![PortConfig::Flat(FlatPortConfig::default())] }
    }
}

/// Where a bad value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    /// The shared buffer or the port list.
    Buffer,
    /// A port as a whole.
    Port(usize),
    /// A class (queue) of a port, or a class's queue limits on an HQoS port.
    Class {
        /// Port.
        port: usize,
        /// Class.
        class: usize,
    },
    /// An HQoS group.
    Group {
        /// Port.
        port: usize,
        /// Group.
        group: usize,
    },
    /// An HQoS pipe profile (class `class` of it when the problem is a class's).
    Profile {
        /// Port.
        port: usize,
        /// Profile.
        profile: usize,
    },
}

/// What is wrong with a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// α exponent outside [`ALPHA_LOG2_RANGE`].
    AlphaOutOfRange(i8),
    /// A DRR / WRR weight of 0.
    WeightZero,
    /// A quantum of 0 bytes.
    QuantumZero,
    /// A ring size that is 0, not a power of two or above [`MAX_RING_PKTS`].
    BadRing(u32),
    /// WRED min threshold above max.
    WredMinAboveMax {
        /// Min threshold, bytes.
        min: u64,
        /// Max threshold, bytes.
        max: u64,
    },
    /// WRED 1/maxp of 0.
    WredMaxpInvZero,
    /// WRED EWMA weight exponent outside 1..=16.
    WredWeightOutOfRange(u8),
    /// A shaper rate of 0.
    RateZero,
    /// A shaper rate above `shaper::MAX_RATE_BPS`.
    RateTooHigh(u64),
    /// A shaper burst of 0.
    BurstZero,
    /// A shaper burst above `shaper::MAX_BURST_BYTES`.
    BurstTooLarge(u64),
    /// Reservations add up to more than the buffer.
    ReservationsExceedBuffer {
        /// Sum of the reservations, bytes.
        reserved: u64,
        /// Buffer size, bytes.
        total: u64,
    },
    /// A buffer of 0 bytes or 0 packets.
    BufferEmpty,
    /// No ports, or more than [`MAX_PORTS`].
    PortCount(usize),
    /// HQoS classes per pipe not 4 or 8.
    ClassesNot4Or8(u8),
    /// No groups, or no pipes at all.
    NoPipes,
    /// More than [`MAX_PIPES`] pipes, or more than 65,536 groups.
    TooManyPipes(u64),
    /// A profile number with no profile (or no profiles at all, or more than 65,536).
    ProfileOutOfRange(u16),
    /// A queue limit of 0 bytes.
    QueueLimitZero,
    /// A wheel tick exponent above 30.
    WheelTickOutOfRange(u8),
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Loc::Buffer => write!(f, "buffer"),
            Loc::Port(p) => write!(f, "port {p}"),
            Loc::Class { port, class } => write!(f, "port {port} class {class}"),
            Loc::Group { port, group } => write!(f, "port {port} group {group}"),
            Loc::Profile { port, profile } => write!(f, "port {port} pipe profile {profile}"),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Problem::AlphaOutOfRange(n) => write!(f, "alpha exponent {n} out of range -4..=3 (alpha = 2^n)"),
            Problem::WeightZero => write!(f, "DRR weight is 0"),
            Problem::QuantumZero => write!(f, "quantum is 0 bytes"),
            Problem::BadRing(n) => write!(f, "ring of {n} packets is not a power of two in 1..=2^20"),
            Problem::WredMinAboveMax { min, max } => write!(f, "WRED min threshold {min} bytes is above max {max}"),
            Problem::WredMaxpInvZero => write!(f, "WRED 1/maxp is 0"),
            Problem::WredWeightOutOfRange(n) => write!(f, "WRED weight exponent {n} out of range 1..=16 (weight = 2^-n)"),
            Problem::RateZero => write!(f, "shaper rate is 0 bit/s"),
            Problem::RateTooHigh(r) => write!(f, "shaper rate {r} bit/s above 1.6e12"),
            Problem::BurstZero => write!(f, "shaper burst is 0 bytes"),
            Problem::BurstTooLarge(b) => write!(f, "shaper burst {b} bytes above 2^30"),
            Problem::ReservationsExceedBuffer { reserved, total } => {
                write!(f, "reservations of {reserved} bytes exceed the {total}-byte buffer")
            }
            Problem::BufferEmpty => write!(f, "buffer has 0 bytes or 0 packets"),
            Problem::PortCount(n) => write!(f, "{n} ports (1..=4096 allowed)"),
            Problem::ClassesNot4Or8(n) => write!(f, "{n} classes per pipe (4 or 8 allowed)"),
            Problem::NoPipes => write!(f, "no groups or no pipes"),
            Problem::TooManyPipes(n) => write!(f, "{n} pipes or groups (at most 2^22 pipes, 65536 groups)"),
            Problem::ProfileOutOfRange(p) => write!(f, "pipe profile {p} does not exist"),
            Problem::QueueLimitZero => write!(f, "queue limit is 0 bytes"),
            Problem::WheelTickOutOfRange(n) => write!(f, "wheel tick exponent {n} above 30"),
        }
    }
}

/// A rejected configuration value: where and what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Where the value is.
    pub loc: Loc,
    /// What is wrong with it.
    pub problem: Problem,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.loc, self.problem)
    }
}

impl std::error::Error for ConfigError {}

fn at(loc: Loc) -> impl Fn(Problem) -> ConfigError {
    move |problem| ConfigError { loc, problem }
}

fn check_alpha(n: i8) -> Result<(), Problem> {
    if ALPHA_LOG2_RANGE.contains(&n) {
        Ok(())
    } else {
        Err(Problem::AlphaOutOfRange(n))
    }
}

fn check_sched(s: ClassSched) -> Result<(), Problem> {
    match s {
        ClassSched::Drr { weight: 0 } => Err(Problem::WeightZero),
        _ => Ok(()),
    }
}

impl FlatPortConfig {
    /// Checks every class and the port shaper; returns the bytes this port reserves.
    ///
    /// # Errors
    /// The first bad value, with its location (`port` is this port's number).
    pub fn validate(&self, port: usize) -> Result<u64, ConfigError> {
        if self.drr_quantum_bytes == 0 {
            return Err(ConfigError { loc: Loc::Port(port), problem: Problem::QuantumZero });
        }
        if let Some(s) = &self.shaper {
            s.validate().map_err(at(Loc::Port(port)))?;
        }
        let mut reserved = 0u64;
        for (class, c) in self.classes.iter().enumerate() {
            let e = at(Loc::Class { port, class });
            check_sched(c.sched).map_err(&e)?;
            if c.ring_pkts == 0 || !c.ring_pkts.is_power_of_two() || c.ring_pkts > MAX_RING_PKTS {
                return Err(e(Problem::BadRing(c.ring_pkts)));
            }
            check_alpha(c.alpha_log2).map_err(&e)?;
            if let Some(w) = &c.wred {
                w.validate().map_err(&e)?;
            }
            if let Some(s) = &c.shaper {
                s.validate().map_err(&e)?;
            }
            reserved = reserved.saturating_add(c.min_bytes);
        }
        Ok(reserved)
    }
}

impl HqosConfig {
    /// Total pipes of the port.
    pub fn pipes(&self) -> u64 {
        self.groups.iter().map(|g| u64::from(g.pipes)).sum()
    }

    /// Checks the port; returns the bytes its queues reserve.
    ///
    /// # Errors
    /// The first bad value, with its location.
    pub fn validate(&self, port: usize) -> Result<u64, ConfigError> {
        let e = at(Loc::Port(port));
        if self.classes != 4 && self.classes != 8 {
            return Err(e(Problem::ClassesNot4Or8(self.classes)));
        }
        if self.quantum_bytes == 0 {
            return Err(e(Problem::QuantumZero));
        }
        if self.wheel_tick_log2 > 30 {
            return Err(e(Problem::WheelTickOutOfRange(self.wheel_tick_log2)));
        }
        if let Some(s) = &self.shaper {
            s.validate().map_err(&e)?;
        }
        let pipes = self.pipes();
        if self.groups.is_empty() || pipes == 0 {
            return Err(e(Problem::NoPipes));
        }
        if pipes > MAX_PIPES || self.groups.len() > 1 << 16 {
            return Err(e(Problem::TooManyPipes(pipes.max(self.groups.len() as u64))));
        }
        if self.profiles.is_empty() || self.profiles.len() > 1 << 16 {
            return Err(e(Problem::ProfileOutOfRange(0)));
        }
        let mut reserved = 0u64;
        for (class, q) in self.queues.iter().take(usize::from(self.classes)).enumerate() {
            let e = at(Loc::Class { port, class });
            if q.limit_bytes == 0 {
                return Err(e(Problem::QueueLimitZero));
            }
            check_alpha(q.alpha_log2).map_err(&e)?;
            reserved = reserved.saturating_add(u64::from(q.min_bytes).saturating_mul(pipes));
        }
        for (group, g) in self.groups.iter().enumerate() {
            let e = at(Loc::Group { port, group });
            if usize::from(g.profile) >= self.profiles.len() {
                return Err(e(Problem::ProfileOutOfRange(g.profile)));
            }
            if let Some(s) = &g.shaper {
                s.validate().map_err(&e)?;
            }
        }
        for (profile, p) in self.profiles.iter().enumerate() {
            let e = at(Loc::Profile { port, profile });
            if let Some(s) = &p.shaper {
                s.validate().map_err(&e)?;
            }
            for s in p.sched.iter().take(usize::from(self.classes)) {
                check_sched(*s).map_err(&e)?;
            }
        }
        Ok(reserved)
    }
}

impl TmConfig {
    /// Checks everything; returns the total reservation in bytes.
    ///
    /// # Errors
    /// The first bad value, with its location.
    pub fn validate(&self) -> Result<u64, ConfigError> {
        let e = at(Loc::Buffer);
        if self.buffer.total_bytes == 0 || self.buffer.total_pkts == 0 {
            return Err(e(Problem::BufferEmpty));
        }
        if self.ports.is_empty() || self.ports.len() > MAX_PORTS {
            return Err(e(Problem::PortCount(self.ports.len())));
        }
        let mut reserved = 0u64;
        for (i, p) in self.ports.iter().enumerate() {
            let r = match p {
                PortConfig::Flat(f) => f.validate(i)?,
                PortConfig::Hqos(h) => h.validate(i)?,
            };
            reserved = reserved.saturating_add(r);
        }
        if reserved > self.buffer.total_bytes {
            return Err(e(Problem::ReservationsExceedBuffer { reserved, total: self.buffer.total_bytes }));
        }
        Ok(reserved)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn one(port: FlatPortConfig) -> TmConfig {
        TmConfig { ports: vec![PortConfig::Flat(port)], ..TmConfig::default() }
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(TmConfig::default().validate(), Ok(0));
        let h = TmConfig { ports: vec![PortConfig::Hqos(HqosConfig::default())], ..TmConfig::default() };
        assert_eq!(h.validate(), Ok(0));
    }

    #[test]
    fn each_problem_is_named_where_it_is() {
        let mut p = FlatPortConfig::default();
        p.classes[5].alpha_log2 = -5;
        let e = one(p).validate().unwrap_err();
        assert_eq!(e, ConfigError { loc: Loc::Class { port: 0, class: 5 }, problem: Problem::AlphaOutOfRange(-5) });
        assert_eq!(e.to_string(), "port 0 class 5: alpha exponent -5 out of range -4..=3 (alpha = 2^n)");

        let mut p = FlatPortConfig::default();
        p.classes[1].ring_pkts = 1000;
        assert_eq!(one(p).validate().unwrap_err().problem, Problem::BadRing(1000));

        let mut p = FlatPortConfig::default();
        p.classes[0].wred = Some(WredConfig { min_bytes: 10, max_bytes: 5, ..WredConfig::default() });
        assert_eq!(one(p).validate().unwrap_err().problem, Problem::WredMinAboveMax { min: 10, max: 5 });

        let p = FlatPortConfig { shaper: Some(ShaperConfig::new(0, 100)), ..FlatPortConfig::default() };
        assert_eq!(one(p).validate().unwrap_err(), ConfigError { loc: Loc::Port(0), problem: Problem::RateZero });

        let mut p = FlatPortConfig::default();
        p.classes[2].min_bytes = 20 << 20;
        assert_eq!(one(p).validate().unwrap_err().problem, Problem::ReservationsExceedBuffer { reserved: 20 << 20, total: 16 << 20 });

        let mut h = HqosConfig { classes: 6, ..HqosConfig::default() };
        let cfg = |h: &HqosConfig| TmConfig { ports: vec![PortConfig::Hqos(h.clone())], ..TmConfig::default() };
        assert_eq!(cfg(&h).validate().unwrap_err().problem, Problem::ClassesNot4Or8(6));
        h.classes = 4;
        h.groups[0].profile = 3;
        assert_eq!(
            cfg(&h).validate().unwrap_err(),
            ConfigError { loc: Loc::Group { port: 0, group: 0 }, problem: Problem::ProfileOutOfRange(3) }
        );
        h.groups[0].profile = 0;
        h.profiles[0].sched[1] = ClassSched::Drr { weight: 0 };
        assert_eq!(
            cfg(&h).validate().unwrap_err(),
            ConfigError { loc: Loc::Profile { port: 0, profile: 0 }, problem: Problem::WeightZero }
        );
        // Classes past `classes` are not looked at.
        h.profiles[0].sched[1] = ClassSched::Strict;
        h.profiles[0].sched[6] = ClassSched::Drr { weight: 0 };
        assert!(cfg(&h).validate().is_ok());
    }
}
