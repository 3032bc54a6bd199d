//! The `vbng` scenario: N subscribers behind a hybrid port (port 0 carries access and core
//! traffic alike, as the published broadband test's ports do; the pipeline tells them apart by
//! their tags), 254 core endpoints, 8 downstream frames to every upstream one. Sessions are
//! created through the session API ([`fastpath_control::session`]), so the scenario also times
//! session creation; every subscriber's downstream pipe is shaped (tier 0) and policed upstream.
//!
//! The mix is `D:U` downstream to upstream frames (8:1 by default; `1:0` downstream only,
//! `0:1` upstream only). With `M = max(D, U)`, flow `f = (D+U)k + j` is, for `j < D`, a
//! downstream frame to subscriber `Mk + j`, else an upstream frame from subscriber
//! `Mk + (kU + j − D) mod M`: at 8:1 every subscriber receives and one in eight sends, and a run
//! visits every session.

use super::Scenario;
use fastpath_control::session::{Session, SessionCmd, Sessions};
use fastpath_lab::bng::plan::{self, Subscriber};
use fastpath_pipeline::Pipeline;
use std::time::Instant;

/// Upstream policer of every bench subscriber, bits/s (committed, peak): far above what one
/// subscriber sends in the bench, so the policer runs on every upstream packet and drops none.
const UP_RATES: (u64, u64) = (50_000_000, 100_000_000);

/// Downstream and upstream frames per round of the traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mix {
    /// Downstream frames.
    pub down: u32,
    /// Upstream frames.
    pub up: u32,
}

impl Mix {
    /// Parses `D:U` (`8:1`), `down` (1:0) or `up` (0:1).
    ///
    /// # Errors
    /// Anything else, or 0:0.
    pub fn parse(s: &str) -> Result<Mix, String> {
        let m = match s {
            "down" | "downstream" => Mix { down: 1, up: 0 },
            "up" | "upstream" => Mix { down: 0, up: 1 },
            _ => {
                let (d, u) = s.split_once(':').ok_or_else(|| format!("--mix {s}: expected D:U (e.g. 8:1), down or up"))?;
                let n = |x: &str| x.parse::<u32>().map_err(|_| format!("--mix {s}: '{x}' is not a number"));
                Mix { down: n(d)?, up: n(u)? }
            }
        };
        if m.down + m.up == 0 || m.down.max(m.up) > 64 {
            return Err(format!("--mix {s}: the two counts must be 0 to 64 and not both 0"));
        }
        Ok(m)
    }

    fn widest(self) -> u32 {
        self.down.max(self.up)
    }

    /// Flows for `subs` subscribers: enough rounds that every subscriber has its frame.
    pub fn flows(self, subs: u32) -> u32 {
        (self.down + self.up) * subs.div_ceil(self.widest())
    }

    /// Frame of flow `f` among `subs` subscribers, `len` bytes without the FCS.
    pub fn frame(self, subs: u32, f: u32, len: usize) -> Vec<u8> {
        let (k, j) = (f / (self.down + self.up), f % (self.down + self.up));
        let m = self.widest();
        let size = u16::try_from(len + 4).unwrap_or(u16::MAX); // RFC 2544 sizes count the FCS
        if j < self.down {
            let sub = Subscriber::nth((m * k + j) % subs);
            plan::downstream_frame(&plan::endpoint_for(sub.id, 0), &sub, size, 0)
        } else {
            let sub = Subscriber::nth((m * k + (k * self.up + j - self.down) % m) % subs);
            plan::upstream_frame(&sub, &plan::endpoint_for(sub.id, 0), size, 0)
        }
    }
}

/// Creates `subs` sessions through the session API (timed), the core routes, the gateway's
/// ARP entry and an allow-all ACL profile 0.
pub fn build(mut pipe: Pipeline, subs: u32, mix: Mix) -> Result<Scenario, String> {
    plan::check_count(subs).map_err(|e| e.to_string())?;
    pipe.set_ports(2)?;
    let fixed = format!(
        "{}table arp_gw add {} => arp_reply({})\ntable class_acl add 0/0xff * * priority 10 => no_action\n",
        plan::route_commands(),
        plan::GATEWAY_IP,
        plan::mac_text(plan::GATEWAY_MAC)
    );
    pipe.load_entries("vbng bench", &fixed).map_err(|e| e.to_string())?;
    let mut sessions = Sessions::fixed_seed(pipe.program())?;
    let t0 = Instant::now();
    let (mut ops, mut undo) = (Vec::with_capacity(4 * subs as usize), Vec::new());
    for i in 0..subs {
        let s = Subscriber::nth(i);
        let cmd = SessionCmd::Add(Session {
            id: s.id,
            port: s.port,
            svlan: s.svid,
            cvlan: s.cvid,
            mac: s.mac,
            ip: s.ipv4,
            tier: 0,
            acl: 0,
            up: Some(UP_RATES),
        });
        sessions.plan(&cmd, &mut ops, &mut undo)?;
    }
    pipe.apply_ops(&ops).map_err(|(k, m)| format!("session op {k}: {m}"))?;
    let setup = t0.elapsed().as_secs_f64();
    Ok(Scenario {
        pipe,
        frame: Box::new(move |f, len| mix.frame(subs, f, len)),
        config: serde_json::json!({
            "subscribers": subs,
            "mix": format!("{}:{} downstream:upstream", mix.down, mix.up),
            "hybrid_port": 0,
            "hqos": "port > 64 groups > pipe per subscriber (tier 0, 100 Mbit/s) > 4 classes",
            "upstream_policer_bps": [UP_RATES.0, UP_RATES.1],
            "session_setup_s": setup,
            "sessions_per_s": f64::from(subs) / setup.max(1e-9),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_packet::{Batch, Pool, Verdict};

    #[test]
    fn every_frame_of_the_mix_is_forwarded() {
        let text = super::super::PIPELINES.iter().find(|(n, _)| *n == "vbng").unwrap().1;
        let prog = fastpath_pipeline::compile("vbng.toml", text).unwrap();
        let subs = 1000;
        let mix = Mix::parse("8:1").unwrap();
        let s = build(prog.instantiate(), subs, mix).unwrap();
        assert!(s.config["sessions_per_s"].as_f64().unwrap() > 0.0);
        let mut pipe = s.pipe;
        let mut pool = Pool::new(512);
        let mut b = Batch::new();
        for f in 0..18 {
            let h = pool.alloc().unwrap();
            pool.set_data(h, &(s.frame)(f * 31, 1396));
            b.push(h, 0);
        }
        pipe.process(&mut pool, &mut b, 1);
        let v = b.verdicts().to_vec();
        // Downstream frames wait in port 0's HQoS, upstream ones in the core port's queues.
        assert_eq!(v.iter().filter(|x| **x == Verdict::Queued(0)).count(), 16, "{v:?}");
        assert_eq!(v.iter().filter(|x| **x == Verdict::Queued(1)).count(), 2, "{v:?}");
        assert_eq!(mix.flows(256_000), 288_000);
        assert_eq!(Mix::parse("up").unwrap().flows(1000), 1000);
        assert!(Mix::parse("0:0").is_err() && Mix::parse("8").is_err());
    }
}
