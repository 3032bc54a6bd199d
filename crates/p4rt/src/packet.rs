//! Packet-in and packet-out between the workers and the P4Runtime server.
//!
//! ```text
//!  worker w: pipeline punts (to_control) ─▶ Exception::punt ─▶ bounded channel ─▶ server ─▶ primary's StreamChannel (PacketIn)
//!  primary's PacketOut ─▶ server ─▶ bounded channel ─▶ worker 0: Exception::packet_out ─▶ tx_burst on the named port
//!                                                              └▶ submit_to_ingress: Exception::packet_in_pipeline ─▶ the pipeline
//! ```
//! Each worker gets an [`Exception`] ([`PacketIo::exception`]). A punt copies the frame into
//! the channel (the exception path, not the forwarding path: one copy per punted packet) and
//! never blocks: when the channel is full the packet-in is counted lost. Packet-outs are sent by
//! worker 0 (every worker owns a socket on every port), at most [`OUT_PER_POLL`] per poll, out
//! of the port they name, as they are: they do not go through the pipeline — unless the
//! packet-out sets `submit_to_ingress`: then worker 0 runs it through the pipeline as if it had
//! arrived on the port it names (`Exception::packet_in_pipeline`), the switch-server's "process
//! on the CPU, then return to the data plane".

use fastpath_io::worker::{Exception, Punted};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};

/// Packet-ins waiting for the server, at most.
pub const IN_QUEUE: usize = 4096;
/// Packet-outs waiting for worker 0, at most.
pub const OUT_QUEUE: usize = 1024;
/// Packet-outs a worker sends per poll, at most (so a burst cannot stall forwarding).
pub const OUT_PER_POLL: usize = 64;

/// A punted packet on its way to the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PuntedFrame {
    /// The frame as the pipeline left it.
    pub frame: Vec<u8>,
    /// The port it came in on.
    pub in_port: u16,
    /// Why (`fastpath_packet::PuntReason`: 0 an action's `to_control`).
    pub reason: u16,
}

/// Counters of the exception path.
#[derive(Debug, Default)]
pub struct PacketStats {
    /// Punts handed to the server.
    pub punted: AtomicU64,
    /// Punts lost because the channel to the server was full.
    pub punt_lost: AtomicU64,
    /// Packet-ins sent to the primary.
    pub packet_ins: AtomicU64,
    /// Packet-ins dropped: no primary, or its stream was full.
    pub packet_in_dropped: AtomicU64,
    /// Packet-outs handed to worker 0.
    pub packet_outs: AtomicU64,
    /// Packet-outs the port took.
    pub packet_outs_sent: AtomicU64,
    /// Packet-outs the port refused (full ring, or no such port).
    pub packet_outs_failed: AtomicU64,
    /// Packet-outs run through the pipeline (`submit_to_ingress`).
    pub packet_outs_injected: AtomicU64,
}

impl PacketStats {
    /// One line for the run's final report.
    pub fn render(&self) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "p4rt: {} punts ({} lost, queue full), {} packet-ins sent to the primary ({} dropped: no primary or its stream full), {} packet-outs ({} sent, {} refused by the port, {} into the pipeline)",
            g(&self.punted),
            g(&self.punt_lost),
            g(&self.packet_ins),
            g(&self.packet_in_dropped),
            g(&self.packet_outs),
            g(&self.packet_outs_sent),
            g(&self.packet_outs_failed),
            g(&self.packet_outs_injected)
        )
    }
}

/// A packet-out: the port, whether it enters the pipeline (as arriving on that port) rather
/// than leaving through it, and the frame.
pub type Out = (u16, bool, Vec<u8>);

/// Both ends of the exception path, shared by the workers (which take their [`Exception`]s)
/// and the server (which takes the other ends once, [`PacketIo::server_end`]).
pub struct PacketIo {
    punt_tx: tokio::sync::mpsc::Sender<PuntedFrame>,
    punt_rx: Mutex<Option<tokio::sync::mpsc::Receiver<PuntedFrame>>>,
    out_tx: SyncSender<Out>,
    out_rx: Mutex<Option<Receiver<Out>>>,
    stats: Arc<PacketStats>,
}

/// The server's end: punts to forward, and where packet-outs go.
pub struct ServerEnd {
    /// Punted frames from every worker.
    pub punts: tokio::sync::mpsc::Receiver<PuntedFrame>,
    /// Packet-outs to worker 0.
    pub out: OutQueue,
    /// The shared counters.
    pub stats: Arc<PacketStats>,
}

impl Default for PacketIo {
    fn default() -> Self {
        PacketIo::new()
    }
}

impl PacketIo {
    /// Empty channels.
    pub fn new() -> PacketIo {
        let (punt_tx, punt_rx) = tokio::sync::mpsc::channel(IN_QUEUE);
        let (out_tx, out_rx) = std::sync::mpsc::sync_channel(OUT_QUEUE);
        PacketIo { punt_tx, punt_rx: Mutex::new(Some(punt_rx)), out_tx, out_rx: Mutex::new(Some(out_rx)), stats: Arc::default() }
    }

    /// The exception path of worker `w`: its punts go to the server; worker 0 (the first to ask)
    /// also sends the packet-outs.
    pub fn exception(&self, w: usize) -> Box<dyn Exception> {
        let out = if w == 0 { self.out_rx.lock().unwrap_or_else(PoisonError::into_inner).take() } else { None };
        Box::new(WorkerException {
            punts: self.punt_tx.clone(),
            out,
            inject: Vec::with_capacity(OUT_PER_POLL),
            stats: self.stats.clone(),
            taken: 0,
        })
    }

    /// The server's end (once; `None` afterwards).
    pub fn server_end(&self) -> Option<ServerEnd> {
        let punts = self.punt_rx.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        Some(ServerEnd { punts, out: OutQueue { tx: self.out_tx.clone(), stats: self.stats.clone() }, stats: self.stats.clone() })
    }

    /// The counters.
    pub fn stats(&self) -> &PacketStats {
        &self.stats
    }
}

/// One worker's exception path.
struct WorkerException {
    punts: tokio::sync::mpsc::Sender<PuntedFrame>,
    out: Option<Receiver<Out>>,
    /// Packet-outs for the pipeline, taken off the channel by `packet_out` and handed over by
    /// `packet_in_pipeline` (called right after it in the same poll; what the batch had no
    /// room for waits for the next poll). Holds at most [`OUT_PER_POLL`] once full.
    inject: Vec<(u16, Vec<u8>)>,
    stats: Arc<PacketStats>,
    /// Packet-outs taken off the channel: while `stats.packet_outs` (counted by the sender)
    /// is no more, a poll looks at no channel. An empty channel's `try_recv` costs a full
    /// memory fence, and this runs on every poll of worker 0.
    taken: u64,
}

impl Exception for WorkerException {
    fn punt(&mut self, frame: &[u8], p: &Punted) {
        let f = PuntedFrame { frame: frame.to_vec(), in_port: p.in_port, reason: p.reason.0 };
        match self.punts.try_send(f) {
            Ok(()) => self.stats.punted.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.stats.punt_lost.fetch_add(1, Ordering::Relaxed),
        };
    }

    fn packet_out(&mut self, send: &mut dyn FnMut(u16, &[u8]) -> bool) {
        let Some(rx) = &self.out else { return };
        // A packet-out is counted after it is queued: one counted and not taken is there.
        if self.stats.packet_outs.load(Ordering::Acquire) <= self.taken {
            return;
        }
        for _ in 0..OUT_PER_POLL {
            if self.inject.len() >= OUT_PER_POLL {
                return;
            }
            let got = rx.try_recv();
            if got.is_ok() {
                self.taken += 1;
            }
            match got {
                Ok((port, true, frame)) => self.inject.push((port, frame)),
                Ok((port, false, frame)) => {
                    if send(port, &frame) {
                        self.stats.packet_outs_sent.fetch_add(1, Ordering::Relaxed);
                    } else {
                        self.stats.packet_outs_failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return,
            }
        }
    }

    fn packet_in_pipeline(&mut self, inject: &mut dyn FnMut(u16, &[u8]) -> bool) {
        // Every poll comes here: no shared counter is touched when there is nothing to inject.
        if self.inject.is_empty() {
            return;
        }
        let mut taken = 0;
        for (port, frame) in &self.inject {
            if !inject(*port, frame) {
                break;
            }
            taken += 1;
        }
        self.inject.drain(..taken);
        self.stats.packet_outs_injected.fetch_add(taken as u64, Ordering::Relaxed);
    }
}

/// Where the server queues packet-outs for worker 0. Every packet-out is counted in
/// [`PacketStats::packet_outs`] as it is queued, which is what tells worker 0 that one waits
/// (`WorkerException::taken`): so this is the only way onto the channel.
#[derive(Clone)]
pub struct OutQueue {
    tx: SyncSender<Out>,
    stats: Arc<PacketStats>,
}

impl OutQueue {
    /// Queues a packet-out for worker 0.
    ///
    /// # Errors
    /// The queue is full (`true`) or the workers are gone (`false`).
    pub fn queue(&self, port: u16, to_pipeline: bool, frame: Vec<u8>) -> Result<(), bool> {
        match self.tx.try_send((port, to_pipeline, frame)) {
            Ok(()) => {
                self.stats.packet_outs.fetch_add(1, Ordering::Release);
                Ok(())
            }
            Err(TrySendError::Full(_)) => Err(true),
            Err(TrySendError::Disconnected(_)) => Err(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_packet::{PktId, PuntReason};

    #[test]
    fn packet_outs_submitted_to_ingress_enter_the_pipeline_in_order_and_wait_when_it_is_full() {
        let io = PacketIo::new();
        let mut w0 = io.exception(0);
        let end = io.server_end().unwrap();
        end.out.queue(1, true, vec![1; 60]).unwrap();
        end.out.queue(0, false, vec![2; 60]).unwrap();
        end.out.queue(1, true, vec![3; 60]).unwrap();
        let mut wire = Vec::new();
        w0.packet_out(&mut |p, f| {
            wire.push((p, f[0]));
            true
        });
        assert_eq!(wire, [(0, 2)], "only the plain packet-out leaves through a port");
        // The pipeline has room for one now, the other at the next poll.
        let mut into = Vec::new();
        w0.packet_in_pipeline(&mut |p, f| {
            if into.is_empty() {
                into.push((p, f[0]));
                true
            } else {
                false
            }
        });
        assert_eq!(into, [(1, 1)]);
        w0.packet_out(&mut |_, _| true);
        w0.packet_in_pipeline(&mut |p, f| {
            into.push((p, f[0]));
            true
        });
        assert_eq!(into, [(1, 1), (1, 3)]);
        assert_eq!(end.stats.packet_outs_injected.load(Ordering::Relaxed), 2);
        // Caught up: an idle poll passes nothing on; one queued later is taken at the next.
        let mut later = Vec::new();
        w0.packet_out(&mut |p, f| {
            later.push((p, f[0]));
            true
        });
        w0.packet_in_pipeline(&mut |_, _| panic!("nothing waits to be injected"));
        assert!(later.is_empty());
        end.out.queue(4, false, vec![4; 60]).unwrap();
        w0.packet_out(&mut |p, f| {
            later.push((p, f[0]));
            true
        });
        assert_eq!(later, [(4, 4)]);
    }

    #[test]
    fn punts_reach_the_server_and_packet_outs_reach_worker_zero_only() {
        let io = PacketIo::new();
        let mut w0 = io.exception(0);
        let mut w1 = io.exception(1);
        let mut end = io.server_end().expect("first take");
        assert!(io.server_end().is_none());
        w1.punt(&[1, 2, 3], &Punted { pkt: PktId(0), reason: PuntReason::ACTION, in_port: 4 });
        assert_eq!(end.punts.try_recv().unwrap(), PuntedFrame { frame: vec![1, 2, 3], in_port: 4, reason: 0 });
        end.out.queue(1, false, vec![9; 60]).unwrap();
        end.out.queue(7, false, vec![8; 60]).unwrap();
        let mut sent = Vec::new();
        w1.packet_out(&mut |p, f| {
            sent.push((p, f.len()));
            true
        });
        assert!(sent.is_empty(), "only worker 0 sends packet-outs");
        w0.packet_out(&mut |p, f| {
            sent.push((p, f.len()));
            p == 1
        });
        assert_eq!(sent, [(1, 60), (7, 60)]);
        let s = io.stats();
        assert_eq!(
            (
                s.packet_outs.load(Ordering::Relaxed),
                s.packet_outs_sent.load(Ordering::Relaxed),
                s.packet_outs_failed.load(Ordering::Relaxed)
            ),
            (2, 1, 1)
        );
    }

    #[test]
    fn a_full_channel_loses_punts_without_blocking() {
        let io = PacketIo::new();
        let mut w = io.exception(1);
        for _ in 0..IN_QUEUE + 5 {
            w.punt(&[0; 60], &Punted { pkt: PktId(0), reason: PuntReason::ACTION, in_port: 0 });
        }
        assert_eq!(io.stats().punt_lost.load(Ordering::Relaxed), 5);
        let end = io.server_end().unwrap();
        for _ in 0..OUT_QUEUE {
            end.out.queue(0, false, vec![0; 60]).unwrap();
        }
        assert_eq!(end.out.queue(0, false, vec![0; 60]), Err(true));
    }
}
