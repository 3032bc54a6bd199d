//! Stateful objects a pipeline instantiates: meter arrays (RFC 2697 srTCM / RFC 2698 trTCM) and
//! counter arrays. Actions reach them by index; the control plane configures and reads them.
//!
//! Meters start unconfigured; an unconfigured meter colours everything green (it polices nothing)
//! until `fastpath ctl` or an entries file sets its rates.

use crate::ir::Program;
use fastpath_tables::flow::{FlowConfig, FlowTable};
use fastpath_tables::meter::{Color, ColorMode, MeterError, SrTcm, SrTcmConfig, TrTcm, TrTcmConfig};

/// One meter of an array.
#[derive(Clone, Debug)]
pub enum Meter {
    /// Not configured: passes everything green.
    Unset,
    /// RFC 2697.
    Sr(SrTcm),
    /// RFC 2698.
    Tr(TrTcm),
}

impl Meter {
    /// The meter that rates `r` configure in an array of RFC 2698 (`two_rate`) or RFC 2697
    /// markers, colour-aware or blind: all zero is [`Meter::Unset`] (everything green).
    ///
    /// # Errors
    /// The marker's own: a rate or burst above its limit, PIR < CIR, both bursts zero.
    pub fn configured(two_rate: bool, color_aware: bool, r: &MeterRates) -> Result<Meter, MeterError> {
        if r.cir_bytes_per_s == 0 && r.pir_bytes_per_s == 0 && r.cbs_bytes == 0 && r.ebs_or_pbs_bytes == 0 {
            return Ok(Meter::Unset);
        }
        let mode = if color_aware { ColorMode::Aware } else { ColorMode::Blind };
        Ok(if two_rate {
            Meter::Tr(TrTcm::new(TrTcmConfig {
                cir_bytes_per_s: r.cir_bytes_per_s,
                cbs_bytes: r.cbs_bytes,
                pir_bytes_per_s: r.pir_bytes_per_s,
                pbs_bytes: r.ebs_or_pbs_bytes,
                mode,
            })?)
        } else {
            Meter::Sr(SrTcm::new(SrTcmConfig {
                cir_bytes_per_s: r.cir_bytes_per_s,
                cbs_bytes: r.cbs_bytes,
                ebs_bytes: r.ebs_or_pbs_bytes,
                mode,
            })?)
        })
    }

    /// Colours a packet of `len` bytes arriving with colour `pre` (RFC 2697 / 2698); an
    /// unconfigured meter passes it green.
    #[inline]
    pub fn mark(&mut self, now_ns: u64, len: u32, pre: Color) -> Color {
        match self {
            Meter::Unset => Color::Green,
            Meter::Sr(s) => s.mark(now_ns, len, pre),
            Meter::Tr(t) => t.mark(now_ns, len, pre),
        }
    }

    /// [`Meter::mark`] in a bank of RFC 2698 (`TWO`) or RFC 2697 markers, colour-aware
    /// (`AWARE`) or blind, for a packet whose metadata colour is `color`: the bank's kind is
    /// tested first, and a blind bank does not convert the colour it ignores (about 10
    /// instructions a packet of the overlay's policer).
    #[inline(always)]
    pub fn mark_in<const TWO: bool, const AWARE: bool>(&mut self, now_ns: u64, len: u32, color: u8) -> Color {
        let pre = if AWARE { Color::from_u8(color) } else { Color::Green };
        match self {
            Meter::Sr(s) if !TWO => s.mark(now_ns, len, pre),
            Meter::Tr(t) if TWO => t.mark(now_ns, len, pre),
            m => m.mark_other(now_ns, len, pre),
        }
    }

    /// [`Meter::mark`] out of line, for a meter not of its bank's kind (an unset one): inlined,
    /// its full match on the variant made every packet decode all three (about 6
    /// instructions a packet of the overlay's policer).
    #[cold]
    #[inline(never)]
    fn mark_other(&mut self, now_ns: u64, len: u32, pre: Color) -> Color {
        self.mark(now_ns, len, pre)
    }
}

/// A named array of meters.
#[derive(Clone, Debug)]
pub struct MeterBank {
    /// Name from the spec.
    pub name: String,
    /// RFC 2698 (true) or RFC 2697.
    pub two_rate: bool,
    /// Colour-aware.
    pub color_aware: bool,
    /// The meters.
    pub meters: Vec<Meter>,
}

/// A named array of packet and byte counters.
#[derive(Clone, Debug)]
pub struct CounterBank {
    /// Name from the spec.
    pub name: String,
    /// `(packets, bytes)` per index.
    pub values: Vec<(u64, u64)>,
}

impl CounterBank {
    /// Adds one packet of `bytes` to counter `idx` (an index out of range is ignored: packet
    /// data must not crash us).
    #[inline]
    pub fn count(&mut self, idx: usize, bytes: u64) {
        if let Some(v) = self.values.get_mut(idx) {
            v.0 += 1;
            v.1 += bytes;
        }
    }
}

/// Every stateful object of one pipeline instance (one per worker).
#[derive(Clone, Debug, Default)]
pub struct Objects {
    /// Meter arrays, in spec order.
    pub meters: Vec<MeterBank>,
    /// Counter arrays, in spec order.
    pub counters: Vec<CounterBank>,
    /// Connection-tracking tables, in spec order.
    pub conntracks: Vec<Conntrack>,
    /// Flows' cached verdicts written (`ct_commit`) and flows freed (ageing) since the batch
    /// began: while it is 0, every packet's `ct.verdict` is still its flow's cached verdict
    /// (conntrack loaded it), so a `ct_load` may skip the batch ([`crate::stages::prims::CtLoadStage`]).
    pub(crate) ct_changes: u64,
}

/// A named connection-tracking table (`[[conntrack]]`).
#[derive(Clone, Debug)]
pub struct Conntrack {
    /// Name from the spec.
    pub name: String,
    /// The flow table (entries pre-allocated).
    pub table: FlowTable,
}

/// Rates for one meter, as the control plane gives them (bytes/s and bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeterRates {
    /// Committed information rate.
    pub cir_bytes_per_s: u64,
    /// Committed burst size.
    pub cbs_bytes: u64,
    /// srTCM: excess burst size. trTCM: peak burst size.
    pub ebs_or_pbs_bytes: u64,
    /// trTCM only: peak information rate.
    pub pir_bytes_per_s: u64,
}

impl Objects {
    /// Zeroed objects for a program.
    pub fn new(p: &Program) -> Objects {
        Objects {
            meters: p
                .meters
                .iter()
                .map(|m| MeterBank {
                    name: m.name.clone(),
                    two_rate: m.two_rate,
                    color_aware: m.color_aware,
                    meters: vec![Meter::Unset; m.size],
                })
                .collect(),
            counters: p.counters.iter().map(|c| CounterBank { name: c.name.clone(), values: vec![(0, 0); c.size] }).collect(),
            conntracks: p
                .conntracks
                .iter()
                .map(|c| {
                    // The compiler checked the configuration; a refusal here is a bug, and the
                    // 1-flow fallback keeps the pipeline running (every new flow then counts
                    // `flow_table_full`).
                    let table =
                        FlowTable::new(c.config).unwrap_or_else(|_| FlowTable::new(FlowConfig::with_capacity(1)).expect("1-flow table"));
                    Conntrack { name: c.name.clone(), table }
                })
                .collect(),
            ct_changes: 0,
        }
    }

    /// Writes `verdict` as the cached action of flow `id` in conntrack table `ct` (out-of-range
    /// or free ids are ignored).
    #[inline]
    pub fn ct_commit(&mut self, ct: u16, id: u32, verdict: u32) {
        self.ct_changes += 1;
        if let Some(c) = self.conntracks.get_mut(usize::from(ct)) {
            c.table.set_action(id, verdict);
        }
    }

    /// The cached verdict of flow `id` in conntrack table `ct` (0 for none).
    #[inline]
    pub fn ct_verdict(&self, ct: u16, id: u32) -> u32 {
        self.conntracks.get(usize::from(ct)).and_then(|c| c.table.entry(id)).map_or(0, |e| e.action())
    }

    /// The conntrack table named `name`.
    pub fn conntrack(&self, name: &str) -> Option<&FlowTable> {
        self.conntracks.iter().find(|c| c.name == name).map(|c| &c.table)
    }

    /// Adds one packet of `bytes` to counter `idx` of array `c` (out-of-range indices are
    /// ignored: packet data must not crash us).
    #[inline]
    pub fn count(&mut self, c: u16, idx: usize, bytes: u64) {
        if let Some(bank) = self.counters.get_mut(usize::from(c)) {
            bank.count(idx, bytes);
        }
    }

    /// Colours a packet with meter `idx` of array `m`: 0 green, 1 yellow, 2 red. An index out of
    /// range or an unconfigured meter gives green.
    #[inline]
    pub fn meter(&mut self, m: u16, idx: usize, now_ns: u64, len: u32, pre_color: u8) -> u8 {
        let Some(mt) = self.meters.get_mut(usize::from(m)).and_then(|b| b.meters.get_mut(idx)) else { return 0 };
        mt.mark(now_ns, len, Color::from_u8(pre_color)) as u8
    }

    /// Configures meter `idx` of the array named `name`. Control thread only.
    pub fn set_meter(&mut self, name: &str, idx: usize, r: MeterRates) -> Result<(), String> {
        let Some(bank) = self.meters.iter_mut().find(|b| b.name == name) else {
            return Err(format!("no meter array \"{name}\""));
        };
        let n = bank.meters.len();
        let (two, aware) = (bank.two_rate, bank.color_aware);
        let Some(slot) = bank.meters.get_mut(idx) else {
            return Err(format!("meter index {idx} out of range (\"{name}\" has {n})"));
        };
        *slot = Meter::configured(two, aware, &r).map_err(|e| format!("meter {name}[{idx}]: {e:?}"))?;
        Ok(())
    }

    /// The counter array named `name`.
    pub fn counter(&self, name: &str) -> Option<&CounterBank> {
        self.counters.iter().find(|c| c.name == name)
    }
}
