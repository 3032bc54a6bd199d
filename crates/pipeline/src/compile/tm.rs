//! `[tm]`: the traffic manager's buffer, classes, schedulers, shapers, WRED profiles and the
//! DSCP / PCP ▸ class map become a [`TmDef`]; its classifier becomes a stage that runs before
//! the ingress program. Values are checked here with the traffic manager's own validation, and
//! every problem points at the value in the file.

use super::Compiler;
use crate::ir::{Classify, Program, StageDef, SymStep, TmDef};
use crate::spec::{SpecFile, TmPortSpec, TmProfileSpec, TmSpec};
use fastpath_tm::config::{BufferConfig, ClassConfig, ClassSched, FlatPortConfig, GroupConfig, HqosConfig, Loc, PipeProfile, CLASSES};
use fastpath_tm::shaper::ShaperConfig;
use fastpath_tm::wred::WredConfig;
use toml::Spanned;

/// The default shaper bucket: two 9216-byte jumbo frames, or 4 ms at the rate if that is more.
/// A software shaper is served when the worker polls, and a bucket shorter than the worker's
/// longest pause loses the tokens of the pause: the lab measured 89 of 100 Mbit/s with a 1.5 ms
/// bucket and 98 with 10 ms on a busy 2-core machine.
pub fn default_burst(rate_bps: u64) -> u64 {
    (2 * 9216).max(rate_bps / 8 / 250)
}

/// Parses a rate: bits per second as an integer, or a string with a unit (`500kbit`,
/// `200mbit`, `2.5gbit`, `1000bit`).
pub fn parse_rate(v: &toml::Value) -> Result<u64, String> {
    match v {
        toml::Value::Integer(n) if *n > 0 => Ok(*n as u64),
        toml::Value::String(s) => {
            let t = s.trim().to_ascii_lowercase();
            let (num, mult) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
                .iter()
                .find_map(|(u, m)| t.strip_suffix(u).map(|n| (n.trim().to_string(), *m)))
                .unwrap_or((t.clone(), 1.0));
            match num.parse::<f64>() {
                Ok(x) if x > 0.0 && x.is_finite() && x * mult >= 1.0 => Ok((x * mult).round() as u64),
                _ => Err(format!("rate \"{s}\" is not a positive number of bits/s with an optional kbit, mbit or gbit")),
            }
        }
        other => Err(format!("rate {other} is not a positive number of bits/s or a string like \"200mbit\"")),
    }
}

/// Parses one key of a `dscp` / `pcp` map: `46` or `"32-39"`, each end below `n`.
fn parse_codes(key: &str, n: usize) -> Option<std::ops::RangeInclusive<usize>> {
    let (a, b) = key.split_once('-').unwrap_or((key, key));
    let (a, b) = (a.trim().parse::<usize>().ok()?, b.trim().parse::<usize>().ok()?);
    (a <= b && b < n).then_some(a..=b)
}

impl Compiler<'_> {
    pub(super) fn tm(&mut self, spec: &SpecFile, p: &mut Program) {
        let Some(tm) = &spec.tm else { return };
        let at = tm.span().start;
        let t = tm.get_ref();
        let mut def = TmDef {
            buffer: BufferConfig::default(),
            seed: t.seed.unwrap_or(1),
            port: FlatPortConfig::default(),
            shapers: Vec::new(),
            hqos: Vec::new(),
            pipe: None,
            classify: Classify::Dscp(std::array::from_fn(|d| (d >> 3) as u8)),
        };
        if let Some(v) = &t.buffer_bytes {
            def.buffer.total_bytes = *v.get_ref();
        }
        if let Some(v) = &t.buffer_pkts {
            def.buffer.total_pkts = self.fit(v, u32::MAX.into(), "buffer_pkts").unwrap_or(0) as u32;
        }
        if let Some(v) = &t.drr_quantum_bytes {
            def.port.drr_quantum_bytes = self.fit(v, u32::MAX.into(), "drr_quantum_bytes").unwrap_or(0) as u32;
        }
        if let Some(a) = &t.alpha_log2 {
            let n = self.alpha(a);
            for c in &mut def.port.classes {
                c.alpha_log2 = n;
            }
        }
        self.classify(t, &mut def);
        self.classes(t, &mut def);
        let mut seen = Vec::new();
        for ps in &t.ports {
            let port = *ps.port.get_ref();
            if port > u64::from(u16::MAX - 1) {
                let e = self.err(ps.port.span().start, format!("port {port} is not a port id (0 to 65534)"));
                self.push(e);
                continue;
            }
            if seen.contains(&port) {
                let e = self.err(ps.port.span().start, format!("port {port} has a second [[tm.port]]"));
                self.push(e);
                continue;
            }
            seen.push(port);
            let shaper = self.shaper(&ps.rate, ps.burst_bytes.as_ref());
            if ps.pipes.is_some() {
                if let Some(h) = self.hqos_port(t, ps, shaper) {
                    def.hqos.push((port as u16, h));
                }
            } else if let Some(s) = shaper {
                def.shapers.push((port as u16, s));
            }
        }
        self.pipe_field(t, p, &mut def);
        // The traffic manager's own checks, on one port per shaper (and one with none).
        let ports = def.ports_named();
        if self.errs.is_empty() {
            if let Err(e) = def.config(ports).validate() {
                let pos = match e.loc {
                    Loc::Class { class, .. } => t.classes.iter().find(|c| *c.class.get_ref() == class as u64).map(|c| c.class.span().start),
                    Loc::Port(port) | Loc::Group { port, .. } | Loc::Profile { port, .. } => {
                        t.ports.iter().find(|c| *c.port.get_ref() == port as u64).map(|c| c.port.span().start)
                    }
                    _ => None,
                };
                let msg = match e.loc {
                    Loc::Class { class, .. } => format!("[tm] class {class}: {}", e.problem),
                    Loc::Port(port) => format!("[tm] port {port}: {}", e.problem),
                    _ => format!("[tm]: {}", e.problem),
                };
                let e = self.err(pos.unwrap_or(at), msg);
                self.push(e);
            }
        }
        if def.classify != Classify::None {
            p.stages.push(("classify".to_string(), StageDef::Classify(def.classify)));
            p.ingress.insert(0, SymStep::Run(0, p.stages.len() - 1));
        }
        p.tm = Some(def);
    }

    /// A `[[tm.port]]` with `pipes`: port ▸ group ▸ pipe ▸ class, with the `[[tm.profile]]`s.
    fn hqos_port(&mut self, t: &TmSpec, ps: &TmPortSpec, shaper: Option<ShaperConfig>) -> Option<HqosConfig> {
        let pipes = ps.pipes.as_ref().and_then(|v| self.fit(v, 1 << 24, "pipes"))?;
        let groups = ps.groups.as_ref().map_or(Some(1), |v| self.fit(v, pipes.max(1), "groups"))?.max(1);
        let classes = match &ps.classes {
            None => 4,
            Some(c) if matches!(*c.get_ref(), 4 | 8) => *c.get_ref() as u8,
            Some(c) => {
                let e = self.err(c.span().start, format!("classes {} is not 4 or 8", c.get_ref()));
                self.push(e);
                return None;
            }
        };
        if t.profiles.is_empty() {
            let e = self.err(ps.port.span().start, "a hierarchical port (pipes = …) needs at least one [[tm.profile]]");
            self.push(e);
            return None;
        }
        let group_shaper = match &ps.group_rate {
            Some(r) => Some(self.shaper(r, None)?),
            None => None,
        };
        let profile = ps.profile.as_ref().map_or(Some(0), |v| self.fit(v, t.profiles.len() as u64 - 1, "profile"))? as u16;
        let mut h = HqosConfig { classes, shaper, ..HqosConfig::default() };
        if let Some(q) = &ps.queue_bytes {
            let q = self.fit(q, u32::MAX.into(), "queue_bytes")? as u32;
            h.queues.iter_mut().for_each(|c| c.limit_bytes = q);
        }
        let (per, extra) = (pipes / groups, pipes % groups);
        h.groups = (0..groups).map(|g| GroupConfig { pipes: (per + u64::from(g < extra)) as u32, profile, shaper: group_shaper }).collect();
        h.profiles = t.profiles.iter().filter_map(|pr| self.profile(pr, classes)).collect();
        (h.profiles.len() == t.profiles.len()).then_some(h)
    }

    fn profile(&mut self, pr: &TmProfileSpec, classes: u8) -> Option<PipeProfile> {
        let shaper = match &pr.rate {
            Some(r) => Some(self.shaper(r, pr.burst_bytes.as_ref())?),
            None => None,
        };
        let top = usize::from(classes) - 1;
        let mut sched: [ClassSched; CLASSES] =
            std::array::from_fn(|c| if c == top { ClassSched::Strict } else { ClassSched::Drr { weight: 1 } });
        if let Some(list) = &pr.sched {
            if list.get_ref().len() != usize::from(classes) {
                let e = self.err(list.span().start, format!("sched lists {} classes; the port has {classes}", list.get_ref().len()));
                self.push(e);
                return None;
            }
            for (c, v) in list.get_ref().iter().enumerate() {
                sched[c] = match v {
                    toml::Value::String(s) if s == "strict" => ClassSched::Strict,
                    toml::Value::Integer(w) if (1..=i64::from(u16::MAX)).contains(w) => ClassSched::Drr { weight: *w as u32 },
                    other => {
                        let e = self
                            .err(list.span().start, format!("sched entry {other} of class {c} is not \"strict\" or a weight 1 to 65535"));
                        self.push(e);
                        return None;
                    }
                };
            }
        }
        Some(PipeProfile { shaper, sched })
    }

    /// `pipe = "meta.F"`: the metadata field a hierarchical port takes the pipe from.
    fn pipe_field(&mut self, t: &TmSpec, p: &Program, def: &mut TmDef) {
        match &t.pipe {
            Some(name) => match crate::ir::FieldRef::resolve(name.get_ref(), &p.user_meta).map(|f| f.loc) {
                Some(crate::ir::Loc::Meta(m)) => def.pipe = Some(m),
                _ => {
                    let e = self.err(
                        name.span().start,
                        format!("pipe \"{}\" is not a metadata field (e.g. meta.sub, declared in [metadata])", name.get_ref()),
                    );
                    self.push(e);
                }
            },
            None if t.ports.iter().any(|ps| ps.pipes.is_some()) => {
                let e = self.err(
                    t.ports.iter().find(|ps| ps.pipes.is_some()).map_or(0, |ps| ps.port.span().start),
                    "a hierarchical port needs [tm] pipe = \"meta.FIELD\": the metadata field that holds each packet's pipe",
                );
                self.push(e);
            }
            None => {}
        }
    }

    fn fit(&mut self, v: &Spanned<u64>, max: u64, what: &str) -> Option<u64> {
        let x = *v.get_ref();
        if x <= max {
            return Some(x);
        }
        let e = self.err(v.span().start, format!("{what} {x} is above {max}"));
        self.push(e);
        None
    }

    fn alpha(&mut self, a: &Spanned<i64>) -> i8 {
        let n = *a.get_ref();
        if (-4..=3).contains(&n) {
            return n as i8;
        }
        let e = self.err(a.span().start, format!("alpha_log2 {n} is out of range -4..=3 (alpha = 2^n)"));
        self.push(e.hint("3 lets one congested queue take 8/9 of the free buffer; 0 takes half"));
        0
    }

    fn shaper(&mut self, rate: &Spanned<toml::Value>, burst: Option<&Spanned<u64>>) -> Option<ShaperConfig> {
        match parse_rate(rate.get_ref()) {
            Ok(r) => Some(ShaperConfig::new(r, burst.map_or(default_burst(r), |b| *b.get_ref()))),
            Err(m) => {
                let e = self.err(rate.span().start, m);
                self.push(e);
                None
            }
        }
    }

    fn classify(&mut self, t: &TmSpec, def: &mut TmDef) {
        let how = t.classify.as_ref().map_or("dscp", |c| c.get_ref().as_str());
        let (map, n, name) = match how {
            "dscp" => (&t.dscp, 64, "dscp"),
            "pcp" => (&t.pcp, 8, "pcp"),
            "none" => {
                def.classify = Classify::None;
                return;
            }
            other => {
                let pos = t.classify.as_ref().map_or(0, |c| c.span().start);
                let e = self.err(pos, format!("classify \"{other}\" is not one of dscp, pcp, none"));
                self.push(e);
                return;
            }
        };
        // Defaults: DSCP class selector (DSCP >> 3), PCP as is.
        let mut table = [0u8; 64];
        for (d, c) in table.iter_mut().enumerate().take(n) {
            *c = if n == 64 { (d >> 3) as u8 } else { d as u8 };
        }
        for (other, other_name) in [(&t.dscp, "dscp"), (&t.pcp, "pcp")] {
            if let (Some(m), true) = (other, other_name != name) {
                let e = self.err(m.span().start, format!("[tm.{other_name}] is given but classify is \"{how}\""));
                self.push(e);
            }
        }
        if let Some(m) = map {
            for (k, v) in m.get_ref() {
                let Some(codes) = parse_codes(k, n) else {
                    let e = self.err(m.span().start, format!("[tm.{name}] key \"{k}\" is not a {name} value or range below {n}"));
                    self.push(e);
                    continue;
                };
                let Some(class) = v.as_integer().filter(|c| (0..CLASSES as i64).contains(c)) else {
                    let e = self.err(m.span().start, format!("[tm.{name}] \"{k}\" = {v}: the class must be 0 to 7"));
                    self.push(e);
                    continue;
                };
                for d in codes {
                    table[d] = class as u8;
                }
            }
        }
        def.classify = if n == 64 { Classify::Dscp(table) } else { Classify::Pcp(std::array::from_fn(|i| table[i])) };
    }

    fn classes(&mut self, t: &TmSpec, def: &mut TmDef) {
        let mut seen = Vec::new();
        for cs in &t.classes {
            let k = *cs.class.get_ref();
            if k >= CLASSES as u64 || seen.contains(&k) {
                let m =
                    if k >= CLASSES as u64 { format!("class {k} is not 0 to 7") } else { format!("class {k} has a second [[tm.class]]") };
                let e = self.err(cs.class.span().start, m);
                self.push(e);
                continue;
            }
            seen.push(k);
            let c: &mut ClassConfig = &mut def.port.classes[k as usize];
            let weight = match &cs.weight {
                Some(w) => self.fit(w, u32::MAX.into(), "weight").unwrap_or(1) as u32,
                None => 1,
            };
            let c_sched = match cs.sched.as_ref().map(|s| (s.get_ref().as_str(), s.span().start)) {
                None => match c.sched {
                    ClassSched::Drr { .. } => ClassSched::Drr { weight },
                    s => s,
                },
                Some(("strict", _)) => ClassSched::Strict,
                Some(("drr", _)) => ClassSched::Drr { weight },
                Some((other, pos)) => {
                    let e = self.err(pos, format!("sched \"{other}\" is not strict or drr"));
                    self.push(e);
                    c.sched
                }
            };
            let ring = cs.ring_pkts.as_ref().and_then(|r| self.fit(r, u32::MAX.into(), "ring_pkts"));
            let alpha = cs.alpha_log2.as_ref().map(|a| self.alpha(a));
            let shaper = match &cs.rate {
                Some(r) => self.shaper(r, cs.burst_bytes.as_ref()),
                None => None,
            };
            let wred = match &cs.wred {
                Some(w) => self.wred(t, w),
                None => None,
            };
            let c = &mut def.port.classes[k as usize];
            c.sched = c_sched;
            if let Some(r) = ring {
                c.ring_pkts = r as u32;
            }
            if let Some(m) = &cs.min_bytes {
                c.min_bytes = *m.get_ref();
            }
            if let Some(a) = alpha {
                c.alpha_log2 = a;
            }
            c.shaper = shaper;
            c.wred = wred;
        }
    }

    fn wred(&mut self, t: &TmSpec, name: &Spanned<String>) -> Option<WredConfig> {
        let Some(w) = t.wred.iter().find(|w| w.name.get_ref() == name.get_ref()) else {
            let names: Vec<&str> = t.wred.iter().map(|w| w.name.get_ref().as_str()).collect();
            let mut e = self.err(name.span().start, format!("no [[tm.wred]] profile \"{}\"", name.get_ref()));
            if let Some(s) = crate::spec::suggest(name.get_ref(), names) {
                e = e.hint(format!("did you mean \"{s}\"?"));
            }
            self.push(e);
            return None;
        };
        let (min, max) = (*w.min_bytes.get_ref(), *w.max_bytes.get_ref());
        if min > max {
            let e = self.err(w.min_bytes.span().start, format!("WRED \"{}\": min_bytes {min} is above max_bytes {max}", w.name.get_ref()));
            self.push(e);
            return None;
        }
        let maxp_inv = w.maxp_inv.as_ref().map_or(Some(10), |m| self.fit(m, u32::MAX.into(), "maxp_inv"))?;
        let weight_log2 = w.weight_log2.as_ref().map_or(Some(9), |m| self.fit(m, 16, "weight_log2"))?;
        if maxp_inv == 0 || weight_log2 == 0 {
            let e = self.err(w.name.span().start, format!("WRED \"{}\": maxp_inv and weight_log2 must be at least 1", w.name.get_ref()));
            self.push(e);
            return None;
        }
        Some(WredConfig { min_bytes: min, max_bytes: max, maxp_inv: maxp_inv as u32, weight_log2: weight_log2 as u8, ecn: w.ecn })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_with_and_without_units() {
        let s = |x: &str| parse_rate(&toml::Value::String(x.into()));
        assert_eq!(s("200mbit"), Ok(200_000_000));
        assert_eq!(s("2.5gbit"), Ok(2_500_000_000));
        assert_eq!(s("500 kbit"), Ok(500_000));
        assert_eq!(s("1000"), Ok(1000));
        assert_eq!(parse_rate(&toml::Value::Integer(64_000)), Ok(64_000));
        assert!(s("fast").is_err() && s("-3mbit").is_err() && s("0").is_err());
        assert!(parse_rate(&toml::Value::Integer(0)).is_err());
    }

    #[test]
    fn code_ranges() {
        assert_eq!(parse_codes("46", 64), Some(46..=46));
        assert_eq!(parse_codes("32-39", 64), Some(32..=39));
        assert_eq!(parse_codes("8", 8), None);
        assert_eq!(parse_codes("5-2", 8), None);
    }
}
