//! The traffic manager's classifier: `meta.tc` from the packet's DSCP or PCP, by the table of
//! `[tm] classify`. It runs right after the parser, so the ingress program can still override
//! the class with `set_queue`. Packets without the header keep class 0.

use crate::exec::{Stage, StageCx};
use crate::ir::Classify;
use fastpath_packet::{each_lane, Batch, Hdr, Lanes, Pool, Slot};

/// `meta.tc` ◂ `map[DSCP]` or `map[PCP]`.
pub struct ClassifyStage {
    /// What to read, and the table.
    pub how: Classify,
}

/// The DSCP of the packet's outer IP header, if it has one.
#[inline]
pub(crate) fn dscp(frame: &[u8], meta: &fastpath_packet::Meta) -> Option<usize> {
    let l3 = meta.offset(Slot::L3);
    if meta.valid.has(Hdr::Ipv4) {
        frame.get(l3 + 1).map(|tos| usize::from(tos >> 2))
    } else if meta.valid.has(Hdr::Ipv6) {
        let b = frame.get(l3..l3 + 2)?;
        Some(usize::from((b[0] & 0x0f) << 2 | b[1] >> 6))
    } else {
        None
    }
}

impl Stage for ClassifyStage {
    fn run(&mut self, pool: &mut Pool, b: &mut Batch, lanes: Lanes, _cx: &mut StageCx<'_>) {
        match &self.how {
            Classify::None => {}
            Classify::Dscp(map) => each_lane!(i in lanes => {
                let d = dscp(pool.data(b.handle(i)), b.meta(i));
                b.meta_mut(i).tc = d.map_or(0, |d| map[d & 63]);
            }),
            Classify::Pcp(map) => each_lane!(i in lanes => {
                let m = b.meta(i);
                let pcp = if m.valid.has(Hdr::Vlan) { pool.data(b.handle(i)).get(m.offset(Slot::Vlan0) + 2).map(|t| usize::from(t >> 5)) } else { None };
                b.meta_mut(i).tc = pcp.map_or(0, |p| map[p & 7]);
            }),
        }
    }

    fn describe(&self) -> String {
        match &self.how {
            Classify::None => "classify: none (ingress sets the class)".into(),
            Classify::Dscp(m) => format!("classify: meta.tc = dscp map {}", runs(m)),
            Classify::Pcp(m) => format!("classify: meta.tc = pcp map {}", runs(m)),
        }
    }
}

/// `0-7:0 8-15:1 …`: the map as runs of equal classes.
fn runs(m: &[u8]) -> String {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=m.len() {
        if i == m.len() || m[i] != m[start] {
            out.push(if i - 1 == start { format!("{start}:{}", m[start]) } else { format!("{start}-{}:{}", i - 1, m[start]) });
            start = i;
        }
    }
    out.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_collapse_equal_classes() {
        let m: Vec<u8> = (0..64).map(|d| (d >> 3) as u8).collect();
        assert!(runs(&m).starts_with("0-7:0 8-15:1"));
        assert_eq!(runs(&[0, 0, 5, 0]), "0-1:0 2:5 3:0");
    }
}
