//! `fastpath bench bng-cp`: PFCP session establishments per second, control plane to user
//! plane over UDP on 127.0.0.1, each acknowledged only once it is in effect.
//!
//! ```text
//!  DHCP server (DORA for N subscribers, before the clock starts) ─▶ N Bound lease events
//!  control plane (fastpath-bng pfcp_cp) ──UDP 127.0.0.1, up to 64 requests in flight──▶
//!  user plane endpoint (fastpath-control pfcp_up, one thread) ─▶ Control::apply_sessions ─▶
//!  the vbng pipeline's worker (a thread polling its mailbox) applies the entries, answers,
//!  and only then does the endpoint send its Session Establishment Response.
//! ```
//! Then every lease is released and the sessions are deleted the same way (deletions per
//! second, each with its usage report read from the worker's counters). At the end the
//! worker's tables are checked: N session entries after the establishments (the control
//! plane's count and the workers' agree), none after the deletions.

use crate::scenario::PIPELINES;
use fastpath_bng::dhcp::server::{Event, EventKind, Identity, Outcome as Dhcp, PoolConfig, ServerConfig};
use fastpath_bng::dhcp::wire::{DhcpRepr, MessageType, Op};
use fastpath_bng::pfcp_cp::{CpConfig, Outcome, PfcpCp};
use fastpath_control::mailbox::mailbox;
use fastpath_control::pfcp_up::{self, Endpoint, PfcpServer};
use fastpath_control::Control;
use fastpath_pipeline::Pipeline;
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Requests the control plane keeps in flight.
const WINDOW: usize = 64;

/// One run's figures.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct BngCpResult {
    /// Sessions established (and then deleted).
    pub sessions: u32,
    /// Session establishments per second, acknowledged and applied on the worker.
    pub established_per_s: f64,
    /// Session deletions per second.
    pub deleted_per_s: f64,
    /// Requests in flight.
    pub window: usize,
    /// Session entries in the worker's `up_session` table after the establishments.
    pub worker_sessions: usize,
}

fn vbng() -> Result<Pipeline, String> {
    let text = PIPELINES.iter().find(|(n, _)| *n == "vbng").map(|(_, t)| *t).ok_or("no vbng pipeline")?;
    let mut p = fastpath_pipeline::compile("vbng.toml", text).map_err(|e| e.to_string())?.instantiate();
    p.set_ports(2)?;
    Ok(p)
}

/// Bound lease events for `n` subscribers from the DHCP server: DISCOVER, OFFER, REQUEST, ACK.
fn leases(n: u32) -> Result<Vec<Event>, String> {
    let server_id = Ipv4Addr::new(100, 64, 0, 1);
    let mut server = ServerConfig {
        server_id,
        pools: vec![PoolConfig {
            name: "bench".into(),
            svlans: vec![],
            first: Ipv4Addr::new(100, 64, 0, 10),
            last: Ipv4Addr::new(100, 127, 255, 250),
            mask: Ipv4Addr::new(255, 192, 0, 0),
            gateway: server_id,
            dns: vec![],
            lease_time_s: 3600,
        }],
        offer_hold_s: 30,
        decline_quarantine_s: 600,
    }
    .build()
    .map_err(|e| format!("{e:?}"))?;
    let mut events = Vec::with_capacity(n as usize);
    for i in 0..n {
        let b = i.to_be_bytes();
        let id = Identity { port: 0, svlan: 100 + (i / 4000) as u16, cvlan: 1 + (i % 4000) as u16, mac: [2, 0xb, b[0], b[1], b[2], b[3]] };
        let mut req = DhcpRepr::empty(Op::BOOTREQUEST);
        req.chaddr[..6].copy_from_slice(&id.mac);
        req.options.message_type = Some(MessageType::DISCOVER);
        let Dhcp::Reply(offer) = server.handle(&req, id, 0) else { return Err(format!("DHCP: no offer for subscriber {i}")) };
        req.options.message_type = Some(MessageType::REQUEST);
        req.options.requested_ip = Some(offer.msg.yiaddr);
        req.options.server_id = Some(server_id);
        if !matches!(server.handle(&req, id, 0), Dhcp::Reply(_)) {
            return Err(format!("DHCP: no ack for subscriber {i}"));
        }
        events.extend(server.drain_events().into_iter().filter(|e| e.kind == EventKind::Bound));
    }
    if events.len() != n as usize {
        return Err(format!("DHCP: {} leases bound for {n} subscribers", events.len()));
    }
    Ok(events)
}

/// Sends the request of each event, `WINDOW` in flight, until every one is answered; returns
/// the time taken.
fn drive(cp: &mut PfcpCp, sock: &UdpSocket, events: &[Event], want: fn(&Outcome) -> bool) -> Result<Duration, String> {
    let mut buf = [0u8; 65_536];
    let mut next = events.iter();
    let (mut sent, mut done) = (0usize, 0usize);
    let t0 = Instant::now();
    while done < events.len() {
        while cp.pending() < WINDOW {
            let Some(ev) = next.next() else { break };
            let req = cp.on_event(ev).ok_or("a lease event made no request")?;
            sock.send(&req).map_err(|e| format!("sending to the user plane: {e}"))?;
            sent += 1;
        }
        let n = sock.recv(&mut buf).map_err(|e| format!("waiting for the user plane ({done} of {sent} answered): {e}"))?;
        let (outcome, follow_up) = cp.on_response(buf.get(..n).unwrap_or_default()).map_err(|e| e.to_string())?;
        if !want(&outcome) {
            return Err(format!("unexpected answer: {outcome:?}"));
        }
        if follow_up.is_some() {
            return Err("a deletion waited for its establishment".into());
        }
        done += 1;
    }
    Ok(t0.elapsed())
}

/// Runs the benchmark with `n` subscribers.
///
/// # Errors
/// A refused request, a lost answer (10 s), or tables that do not hold what was acknowledged.
pub fn measure(n: u32) -> Result<BngCpResult, String> {
    let events = leases(n)?;
    let shadow = vbng()?;
    let up_addr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let cfg = pfcp_up::Config::for_program(shadow.program(), up_addr, vec!["0".into(), "1".into()], pfcp_up::ntp_now())?;
    let mut server = PfcpServer::bind(SocketAddr::new(up_addr, 0), Endpoint::new(cfg))?;
    let addr = server.local_addr().ok_or("PFCP endpoint: no local address")?;
    let (end, mut wend) = mailbox();
    let control = Mutex::new(Control::new(shadow, Box::new(vbng), vec![end]));
    let (stop, worker_stop) = (AtomicBool::new(false), AtomicBool::new(false));
    let worker_len = AtomicUsize::new(0);
    let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| e.to_string())?;
    sock.connect(addr).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    std::thread::scope(|s| {
        // The worker publishes its session count after each poll; it returns the final one.
        let worker = s.spawn(|| -> Result<usize, String> {
            let mut p = vbng()?;
            let len = |p: &Pipeline| p.table("up_session").map_or(usize::MAX, |t| t.len());
            while !worker_stop.load(Ordering::Relaxed) {
                wend.poll(&mut p, |_| {});
                worker_len.store(len(&p), Ordering::Release);
                std::thread::yield_now();
            }
            Ok(len(&p))
        });
        let pfcp = s.spawn(|| server.serve_until(&control, &stop));
        let run = || -> Result<(Duration, Duration, usize, usize), String> {
            let mut cp = PfcpCp::new(CpConfig::new(Ipv4Addr::LOCALHOST));
            sock.send(&cp.association_setup()).map_err(|e| e.to_string())?;
            let mut buf = [0u8; 65_536];
            let k = sock.recv(&mut buf).map_err(|e| format!("association: {e}"))?;
            let (o, _) = cp.on_response(buf.get(..k).unwrap_or_default()).map_err(|e| e.to_string())?;
            if o != (Outcome::Associated { cause: 1 }) {
                return Err(format!("association refused: {o:?}"));
            }
            let est = drive(&mut cp, &sock, &events, |o| matches!(o, Outcome::Established { .. }))?;
            // Nothing is in flight now: the worker's count settles at what it holds.
            let installed = control.lock().map_err(|e| e.to_string())?.shadow().table("up_session").map_or(0, |t| t.len());
            let t = Instant::now();
            while worker_len.load(Ordering::Acquire) != installed && t.elapsed() < Duration::from_secs(5) {
                std::thread::yield_now();
            }
            let held = worker_len.load(Ordering::Acquire);
            let released: Vec<Event> = events.iter().map(|e| Event { kind: EventKind::Released, ..*e }).collect();
            let del = drive(&mut cp, &sock, &released, |o| matches!(o, Outcome::Deleted { usage: Some(_), .. }))?;
            Ok((est, del, installed, held))
        };
        let r = run();
        stop.store(true, Ordering::Relaxed);
        let _ = pfcp.join();
        worker_stop.store(true, Ordering::Relaxed);
        let last = worker.join().map_err(|_| "the worker panicked".to_string())??;
        let (est, del, installed, held) = r?;
        if installed != n as usize || held != installed || last != 0 {
            return Err(format!(
                "tables: {installed} sessions after the establishments (want {n}), the worker held {held} and ends with {last} (want 0)"
            ));
        }
        let rate = |d: Duration| f64::from(n) / d.as_secs_f64().max(1e-9);
        Ok(BngCpResult { sessions: n, established_per_s: rate(est), deleted_per_s: rate(del), window: WINDOW, worker_sessions: held })
    })
}

/// `fastpath bench bng-cp`.
///
/// # Errors
/// As [`measure`].
pub fn run(subscribers: u32, json: bool) -> Result<(), String> {
    let r = measure(subscribers)?;
    if json {
        println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    } else {
        println!(
            "bng-cp: {} PFCP sessions CP ▸ UP over 127.0.0.1 ({} in flight, each answered once its worker applied it): \
             {:.0} establishments/s, {:.0} deletions/s (with usage reports); the worker held {} sessions",
            r.sessions, r.window, r.established_per_s, r.deleted_per_s, r.worker_sessions
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The whole path on a few hundred subscribers: DHCP leases ▸ PFCP ▸ the worker's tables.
    #[test]
    fn sessions_from_leases_reach_the_worker_and_leave_it() {
        let r = super::measure(300).unwrap();
        assert_eq!((r.sessions, r.worker_sessions), (300, 300));
        assert!(r.established_per_s > 0.0 && r.deleted_per_s > 0.0);
    }
}
