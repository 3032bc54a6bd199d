//! Capture files as ports: [`PcapSource`] reads classic pcap and pcapng, [`PcapSink`] writes
//! classic pcap.
//!
//! Both formats are parsed by hand here (about 300 lines) rather than through a crate, so that
//! frames go straight from the file buffer into pool buffers with no per-packet allocation, and
//! so that an error can say at which byte and after how many packets the file went wrong.
//! (The `pcap-file` 2.0 crate, which the tests use as an independent writer and reader, reports
//! no byte offsets, allocates an 8 MB buffer per reader, and rejects records longer than the
//! file's snap length, which real captures contain.)
//!
//! **Classic pcap** (libpcap's format, described in draft-ietf-opsawg-pcap): a 24-byte file
//! header (`magic`, version, `snaplen`, `linktype`), then records of a 16-byte header
//! (`ts_sec`, `ts_frac`, `incl_len`, `orig_len`) and `incl_len` bytes. The magic gives the byte
//! order (`a1b2c3d4` read in either order) and the timestamp unit (`a1b2c3d4` µs,
//! `a1b23c4d` ns).
//!
//! **pcapng** (draft-ietf-opsawg-pcapng): a sequence of blocks
//! `type:u32 | total_len:u32 | body | total_len:u32`. A Section Header Block (`0x0A0D0D0A`)
//! starts each section and its byte-order magic `0x1A2B3C4D` sets the section's byte order;
//! Interface Description Blocks (1) declare link type, snap length and timestamp resolution
//! (option `if_tsresol`, code 9: `10^-n` or, with the top bit set, `2^-n` seconds; default µs);
//! packets come in Enhanced (6), Simple (3) and obsolete Packet (2) blocks. Other blocks are
//! skipped.
//!
//! **Damage.** A file that ends inside a record, or whose lengths cannot be right, stops the
//! source: every packet before the damage is delivered, then the source is exhausted and
//! [`PcapSource::error`] says what went wrong, e.g.
//! `in.pcap: truncated record at byte 1234 after 7 packets`. The CLI prints it and still writes
//! its outputs. Errors found while opening (not a capture file, a link type other than Ethernet,
//! a file header cut short) are returned by [`PcapSource::open`] instead.
//!
//! **Long frames.** Frames longer than [`MAX_FRAME`] are cut to it and counted
//! ([`PcapSource::snapped_pkts`]).
//!
//! Thread: a source or sink belongs to one worker. Reads and writes go through 256 KiB buffers,
//! so there is about one system call per 256 KiB, not one per packet.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use fastpath_packet::pool::MAX_FRAME;
use fastpath_packet::{Batch, PktId, Pool, BATCH_MAX, HEADROOM};

use crate::port::{Port, PortStats};

/// Link type of Ethernet (DLT_EN10MB), the only one fastpath reads.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Largest record length accepted before a record is called corrupt (libpcap's
/// `MAXIMUM_SNAPLEN`).
pub const MAX_RECORD_BYTES: u32 = 262_144;
/// Largest pcapng block accepted before it is called corrupt.
const MAX_BLOCK_BYTES: u32 = 16 << 20;
const IO_BUF_BYTES: usize = 256 << 10;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;
const NG_SHB: u32 = 0x0A0D_0D0A;
const NG_BOM: u32 = 0x1A2B_3C4D;
const NG_IDB: u32 = 1;
const NG_PB: u32 = 2;
const NG_SPB: u32 = 3;
const NG_EPB: u32 = 6;
const NG_OPT_END: u16 = 0;
const NG_OPT_IF_TSRESOL: u16 = 9;

/// A capture-file error: the file and what was wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", path.display())]
pub struct PcapError {
    /// The file (or the label given to [`PcapSource::from_reader`]).
    pub path: PathBuf,
    /// What was wrong.
    pub kind: PcapErrorKind,
}

/// What was wrong with a capture file.
#[derive(Debug, thiserror::Error)]
pub enum PcapErrorKind {
    /// Opening, reading or writing failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The first four bytes are no pcap or pcapng magic.
    #[error("not a pcap or pcapng file (magic 0x{0:08x})")]
    BadMagic(u32),
    /// The capture is not of Ethernet frames.
    #[error("link type {0} is not Ethernet (1)")]
    LinkType(u32),
    /// The file ends inside a header or record.
    #[error("truncated record at byte {at_byte} after {after_pkts} packets")]
    Truncated {
        /// Offset of the first byte of the record (or header) that is cut short.
        at_byte: u64,
        /// Packets delivered before it.
        after_pkts: u64,
    },
    /// A length or field that cannot be right.
    #[error("corrupt record at byte {at_byte} after {after_pkts} packets: {what}")]
    Corrupt {
        /// Offset of the first byte of the bad record.
        at_byte: u64,
        /// Packets delivered before it.
        after_pkts: u64,
        /// What is wrong, with the value found.
        what: String,
    },
}

/// Which format a [`PcapSource`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PcapFormat {
    /// Classic pcap.
    Classic {
        /// Big-endian file.
        big_endian: bool,
        /// Nanosecond timestamps (magic `a1b23c4d`) rather than microseconds.
        nanos: bool,
    },
    /// pcapng (byte order may change per section).
    Ng,
}

/// One interface of a pcapng section.
#[derive(Clone, Copy, Debug)]
struct Iface {
    snaplen: u32,
    /// Timestamp unit: `10^-n` s when `!pow2`, else `2^-n` s.
    tsresol: u8,
    pow2: bool,
}

impl Iface {
    fn ts_ns(&self, ts: u64) -> u64 {
        let ns = if self.pow2 {
            (u128::from(ts) * 1_000_000_000) >> self.tsresol.min(127)
        } else if self.tsresol <= 9 {
            u128::from(ts) * 10u128.pow(9 - u32::from(self.tsresol))
        } else {
            u128::from(ts) / 10u128.pow(u32::from(self.tsresol.min(38)) - 9)
        };
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// A frame's record, as read.
#[derive(Clone, Copy, Debug)]
struct Rec {
    /// Bytes written into the destination (≤ its length).
    len: usize,
    /// Bytes the record held (> `len` when snapped to the buffer).
    incl_len: usize,
    ts_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    Le,
    Be,
}

impl Order {
    fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            Order::Le => u16::from_le_bytes(b),
            Order::Be => u16::from_be_bytes(b),
        }
    }
    fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            Order::Le => u32::from_le_bytes(b),
            Order::Be => u32::from_be_bytes(b),
        }
    }
}

fn arr4(b: &[u8], at: usize) -> [u8; 4] {
    let mut o = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        o.copy_from_slice(s);
    }
    o
}

fn arr2(b: &[u8], at: usize) -> [u8; 2] {
    let mut o = [0u8; 2];
    if let Some(s) = b.get(at..at + 2) {
        o.copy_from_slice(s);
    }
    o
}

/// The byte-level reader: tracks the file offset and the packets delivered, for error messages.
struct Reader {
    r: BufReader<Box<dyn Read + Send>>,
    pos: u64,
    pkts: u64,
    format: PcapFormat,
    order: Order,
    /// Classic: timestamp fraction unit in ns (1000 or 1).
    frac_ns: u64,
    /// pcapng: the current section's interfaces.
    ifaces: Vec<Iface>,
    /// Scratch for skipping bytes and reading small blocks (allocated once).
    scratch: Vec<u8>,
}

impl Reader {
    /// Reads until `buf` is full or the file ends; returns the bytes read.
    fn fill(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match self.r.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.pos += got as u64;
        Ok(got)
    }

    /// Reads exactly `buf.len()` bytes, or reports the record starting at `start` as truncated.
    fn exact(&mut self, buf: &mut [u8], start: u64) -> Result<(), PcapErrorKind> {
        if self.fill(buf)? < buf.len() {
            return Err(self.truncated(start));
        }
        Ok(())
    }

    /// Skips `n` bytes, or reports the record starting at `start` as truncated.
    fn skip(&mut self, mut n: u64, start: u64) -> Result<(), PcapErrorKind> {
        let mut scratch = std::mem::take(&mut self.scratch);
        if scratch.len() < 4096 {
            scratch.resize(4096, 0);
        }
        let mut res = Ok(());
        while n > 0 {
            let k = n.min(scratch.len() as u64) as usize;
            match self.fill(&mut scratch[..k]) {
                Ok(got) if got == k => n -= k as u64,
                Ok(_) => {
                    res = Err(self.truncated(start));
                    break;
                }
                Err(e) => {
                    res = Err(e.into());
                    break;
                }
            }
        }
        self.scratch = scratch;
        res
    }

    fn truncated(&self, at_byte: u64) -> PcapErrorKind {
        PcapErrorKind::Truncated { at_byte, after_pkts: self.pkts }
    }

    fn corrupt(&self, at_byte: u64, what: String) -> PcapErrorKind {
        PcapErrorKind::Corrupt { at_byte, after_pkts: self.pkts, what }
    }

    /// Reads the file header (classic) or first section header (pcapng).
    fn open(r: Box<dyn Read + Send>) -> Result<Reader, PcapErrorKind> {
        let mut rd = Reader {
            r: BufReader::with_capacity(IO_BUF_BYTES, r),
            pos: 0,
            pkts: 0,
            format: PcapFormat::Ng,
            order: Order::Le,
            frac_ns: 1000,
            ifaces: Vec::new(),
            scratch: Vec::new(),
        };
        let mut magic = [0u8; 4];
        let got = rd.fill(&mut magic)?;
        if got < 4 {
            return Err(rd.truncated(0));
        }
        let le = u32::from_le_bytes(magic);
        let be = u32::from_be_bytes(magic);
        let classic = |m| m == MAGIC_US || m == MAGIC_NS;
        if classic(le) || classic(be) {
            let (order, m) = if classic(le) { (Order::Le, le) } else { (Order::Be, be) };
            let mut h = [0u8; 20];
            rd.exact(&mut h, 0)?;
            rd.order = order;
            rd.frac_ns = if m == MAGIC_NS { 1 } else { 1000 };
            rd.format = PcapFormat::Classic { big_endian: order == Order::Be, nanos: m == MAGIC_NS };
            // version(2+2) thiszone(4) sigfigs(4) snaplen(4) network(4); the link type is the
            // low 16 bits of `network` (the upper bits carry FCS information).
            let linktype = order.u32(arr4(&h, 16)) & 0xffff;
            if linktype != LINKTYPE_ETHERNET {
                return Err(PcapErrorKind::LinkType(linktype));
            }
            return Ok(rd);
        }
        if le == NG_SHB {
            rd.format = PcapFormat::Ng;
            let mut len = [0u8; 4];
            rd.exact(&mut len, 0)?;
            rd.section_header(0, len)?;
            return Ok(rd);
        }
        Err(PcapErrorKind::BadMagic(be))
    }

    /// Reads the rest of a Section Header Block whose type and length fields (`len`, byte
    /// order not yet known) started at `start`; the section's byte order comes from its magic.
    fn section_header(&mut self, start: u64, len: [u8; 4]) -> Result<(), PcapErrorKind> {
        let mut bom = [0u8; 4];
        self.exact(&mut bom, start)?;
        let order = if u32::from_le_bytes(bom) == NG_BOM {
            Order::Le
        } else if u32::from_be_bytes(bom) == NG_BOM {
            Order::Be
        } else {
            return Err(self.corrupt(start, format!("section header byte-order magic 0x{:08x}", u32::from_be_bytes(bom))));
        };
        self.order = order;
        self.ifaces.clear();
        let total = order.u32(len);
        self.check_block_len(start, total, 28)?;
        // Skip version, section length and options; then check the trailing length.
        self.skip(u64::from(total) - 16, start)?;
        self.trailer(start, total)
    }

    fn check_block_len(&self, start: u64, total: u32, min: u32) -> Result<(), PcapErrorKind> {
        if total < min || !total.is_multiple_of(4) || total > MAX_BLOCK_BYTES {
            return Err(self.corrupt(start, format!("block length {total}")));
        }
        Ok(())
    }

    fn trailer(&mut self, start: u64, total: u32) -> Result<(), PcapErrorKind> {
        let mut t = [0u8; 4];
        self.exact(&mut t, start)?;
        let t = self.order.u32(t);
        if t != total {
            return Err(self.corrupt(start, format!("block trailer length {t} differs from {total}")));
        }
        Ok(())
    }

    /// Reads the next frame into `dst`. `Ok(None)` at a clean end of file.
    fn next_into(&mut self, dst: &mut [u8]) -> Result<Option<Rec>, PcapErrorKind> {
        match self.format {
            PcapFormat::Classic { .. } => self.next_classic(dst),
            PcapFormat::Ng => self.next_ng(dst),
        }
    }

    fn next_classic(&mut self, dst: &mut [u8]) -> Result<Option<Rec>, PcapErrorKind> {
        let start = self.pos;
        let mut h = [0u8; 16];
        match self.fill(&mut h)? {
            0 => return Ok(None),
            16 => {}
            _ => return Err(self.truncated(start)),
        }
        let o = self.order;
        let (sec, frac) = (o.u32(arr4(&h, 0)), o.u32(arr4(&h, 4)));
        let incl = o.u32(arr4(&h, 8));
        if incl > MAX_RECORD_BYTES {
            return Err(self.corrupt(start, format!("captured length {incl} exceeds {MAX_RECORD_BYTES}")));
        }
        let ts_ns = u64::from(sec) * 1_000_000_000 + u64::from(frac) * self.frac_ns;
        let rec = self.data(dst, incl as usize, incl as usize, start, ts_ns)?;
        self.pkts += 1;
        Ok(Some(rec))
    }

    /// Reads a record's `incl` bytes of frame into `dst` and skips `body` − `incl` more.
    fn data(&mut self, dst: &mut [u8], incl: usize, body: usize, start: u64, ts_ns: u64) -> Result<Rec, PcapErrorKind> {
        let len = incl.min(dst.len());
        self.exact(&mut dst[..len], start)?;
        self.skip((body - len) as u64, start)?;
        Ok(Rec { len, incl_len: incl, ts_ns })
    }

    fn next_ng(&mut self, dst: &mut [u8]) -> Result<Option<Rec>, PcapErrorKind> {
        loop {
            let start = self.pos;
            let mut h = [0u8; 8];
            match self.fill(&mut h)? {
                0 => return Ok(None),
                8 => {}
                _ => return Err(self.truncated(start)),
            }
            let ty_bytes = arr4(&h, 0);
            if u32::from_le_bytes(ty_bytes) == NG_SHB {
                // The type is a palindrome: the same in either byte order.
                self.section_header(start, arr4(&h, 4))?;
                continue;
            }
            let o = self.order;
            let ty = o.u32(ty_bytes);
            let total = o.u32(arr4(&h, 4));
            self.check_block_len(start, total, 12)?;
            let body = (total - 12) as usize;
            match ty {
                NG_IDB => {
                    self.interface(start, body)?;
                    self.trailer(start, total)?;
                }
                NG_EPB | NG_PB => {
                    let mut f = [0u8; 20];
                    if body < f.len() {
                        return Err(self.corrupt(start, format!("packet block of {total} bytes")));
                    }
                    self.exact(&mut f, start)?;
                    let iface = if ty == NG_EPB { o.u32(arr4(&f, 0)) } else { u32::from(o.u16(arr2(&f, 0))) };
                    let ts = u64::from(o.u32(arr4(&f, 4))) << 32 | u64::from(o.u32(arr4(&f, 8)));
                    let cap = o.u32(arr4(&f, 12)) as usize;
                    if cap > body - f.len() {
                        return Err(self.corrupt(start, format!("captured length {cap} exceeds its block ({total} bytes)")));
                    }
                    let Some(ifc) = self.ifaces.get(iface as usize).copied() else {
                        return Err(self.corrupt(start, format!("interface {iface} not declared")));
                    };
                    let rec = self.data(dst, cap, body - f.len(), start, ifc.ts_ns(ts))?;
                    self.trailer(start, total)?;
                    self.pkts += 1;
                    return Ok(Some(rec));
                }
                NG_SPB => {
                    let mut f = [0u8; 4];
                    if body < f.len() {
                        return Err(self.corrupt(start, format!("packet block of {total} bytes")));
                    }
                    self.exact(&mut f, start)?;
                    let Some(ifc) = self.ifaces.first().copied() else {
                        return Err(self.corrupt(start, "interface 0 not declared".to_string()));
                    };
                    // RFC: captured length = min(original length, snaplen); the rest is padding.
                    let orig = o.u32(f) as usize;
                    let mut cap = orig.min(body - f.len());
                    if ifc.snaplen != 0 {
                        cap = cap.min(ifc.snaplen as usize);
                    }
                    let rec = self.data(dst, cap, body - f.len(), start, 0)?;
                    self.trailer(start, total)?;
                    self.pkts += 1;
                    return Ok(Some(rec));
                }
                _ => {
                    self.skip(body as u64, start)?;
                    self.trailer(start, total)?;
                }
            }
        }
    }

    /// Reads an Interface Description Block body.
    fn interface(&mut self, start: u64, body: usize) -> Result<(), PcapErrorKind> {
        if body < 8 {
            return Err(self.corrupt(start, format!("interface block body of {body} bytes")));
        }
        let mut b = std::mem::take(&mut self.scratch);
        b.resize(body, 0);
        let res = self.exact(&mut b, start);
        let out = res.and_then(|()| {
            let o = self.order;
            let linktype = u32::from(o.u16(arr2(&b, 0)));
            if linktype != LINKTYPE_ETHERNET {
                return Err(PcapErrorKind::LinkType(linktype));
            }
            let mut ifc = Iface { snaplen: o.u32(arr4(&b, 4)), tsresol: 6, pow2: false };
            // Options: code:u16 len:u16 value, padded to 4.
            let mut at = 8;
            while at + 4 <= b.len() {
                let code = o.u16(arr2(&b, at));
                let len = usize::from(o.u16(arr2(&b, at + 2)));
                if code == NG_OPT_END {
                    break;
                }
                if code == NG_OPT_IF_TSRESOL && len >= 1 {
                    if let Some(&v) = b.get(at + 4) {
                        ifc.pow2 = v & 0x80 != 0;
                        ifc.tsresol = v & 0x7f;
                    }
                }
                at += 4 + len.div_ceil(4) * 4;
            }
            self.ifaces.push(ifc);
            Ok(())
        });
        self.scratch = b;
        out
    }
}

/// A capture file as a receive port: each `rx_burst` reads the next frames into pool buffers.
pub struct PcapSource {
    name: String,
    path: PathBuf,
    rd: Reader,
    /// The first frame, read at open to surface pcapng interface errors early.
    first: Option<(Vec<u8>, Rec)>,
    exhausted: bool,
    error: Option<PcapError>,
    stats: PortStats,
    snapped: u64,
    ts_ns: Box<[u64; BATCH_MAX]>,
}

impl PcapSource {
    /// Opens a classic pcap or pcapng file of Ethernet frames.
    ///
    /// # Errors
    /// The file cannot be opened, is not a capture file, is not Ethernet, or its header is cut
    /// short. Damage further in is reported through [`PcapSource::error`] instead.
    pub fn open(name: &str, path: impl AsRef<Path>) -> Result<PcapSource, PcapError> {
        let path = path.as_ref().to_path_buf();
        match File::open(&path) {
            Ok(f) => Self::from_reader(name, path, f),
            Err(e) => Err(PcapError { path, kind: e.into() }),
        }
    }

    /// Reads a capture from any byte stream; `label` names it in errors.
    ///
    /// # Errors
    /// As [`PcapSource::open`].
    pub fn from_reader(name: &str, label: impl Into<PathBuf>, r: impl Read + Send + 'static) -> Result<PcapSource, PcapError> {
        let path = label.into();
        let mut rd = match Reader::open(Box::new(r)) {
            Ok(rd) => rd,
            Err(kind) => return Err(PcapError { path, kind }),
        };
        let (mut first, mut exhausted, mut error) = (None, false, None);
        if rd.format == PcapFormat::Ng {
            // Read up to the first packet now, so a non-Ethernet interface fails the open.
            let mut buf = vec![0u8; MAX_FRAME];
            match rd.next_into(&mut buf) {
                Ok(Some(rec)) => first = Some((buf, rec)),
                Ok(None) => exhausted = true,
                Err(kind @ PcapErrorKind::LinkType(_)) => return Err(PcapError { path, kind }),
                Err(kind) => {
                    exhausted = true;
                    error = Some(PcapError { path: path.clone(), kind });
                }
            }
        }
        Ok(PcapSource {
            name: name.to_string(),
            path,
            rd,
            first,
            exhausted,
            error,
            stats: PortStats::default(),
            snapped: 0,
            ts_ns: Box::new([0; BATCH_MAX]),
        })
    }

    /// What stopped the source early (a damaged file), once it is exhausted. `None` after a
    /// clean end of file.
    pub fn error(&self) -> Option<&PcapError> {
        self.error.as_ref()
    }

    /// The file's format.
    pub fn format(&self) -> PcapFormat {
        self.rd.format
    }

    /// Frames longer than [`MAX_FRAME`] that were cut to it.
    pub fn snapped_pkts(&self) -> u64 {
        self.snapped
    }

    /// Capture timestamp (ns since the Unix epoch; 0 for pcapng simple packets) of the packet
    /// this source put in batch slot `slot` during its last `rx_burst`.
    pub fn rx_timestamp_ns(&self, slot: usize) -> u64 {
        self.ts_ns.get(slot).copied().unwrap_or(0)
    }

    fn deliver(&mut self, pool: &mut Pool, batch: &mut Batch, port_id: u16, h: PktId, rec: Rec) {
        let slot = batch.len();
        if rec.incl_len > rec.len {
            self.snapped += 1;
        }
        let _fits = pool.set_bounds(h, HEADROOM, rec.len);
        debug_assert!(_fits);
        if let Some(t) = self.ts_ns.get_mut(slot) {
            *t = rec.ts_ns;
        }
        batch.push(h, port_id);
        self.stats.rx_pkts += 1;
        self.stats.rx_bytes += rec.len as u64;
    }
}

impl Port for PcapSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut Pool, batch: &mut Batch, port_id: u16) -> usize {
        let before = batch.len();
        while !self.exhausted && !batch.is_full() {
            let Some(h) = pool.alloc() else { break };
            if let Some((buf, rec)) = self.first.take() {
                pool.buffer_mut(h)[HEADROOM..HEADROOM + rec.len].copy_from_slice(&buf[..rec.len]);
                self.deliver(pool, batch, port_id, h, rec);
                continue;
            }
            let dst = &mut pool.buffer_mut(h)[HEADROOM..HEADROOM + MAX_FRAME];
            match self.rd.next_into(dst) {
                Ok(Some(rec)) => self.deliver(pool, batch, port_id, h, rec),
                Ok(None) => {
                    pool.free(h);
                    self.exhausted = true;
                }
                Err(kind) => {
                    pool.free(h);
                    self.exhausted = true;
                    if matches!(kind, PcapErrorKind::Io(_)) {
                        self.stats.errors += 1;
                    }
                    self.error = Some(PcapError { path: self.path.clone(), kind });
                }
            }
        }
        batch.len() - before
    }

    fn tx_burst(&mut self, _pool: &mut Pool, _pkts: &[PktId]) -> usize {
        0
    }

    fn is_exhausted(&self) -> bool {
        self.exhausted
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.as_ref().map(|e| e as _)
    }
}

/// How a [`PcapSink`] stamps the records it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkClock {
    /// Wall-clock time, read once per `tx_burst`.
    Wall,
    /// Record `k` (from 0) gets `k` µs after the epoch: byte-identical files run to run.
    Sequence,
}

/// A classic-pcap file (linktype Ethernet, µs timestamps, host byte order) as a transmit port.
///
/// Frames are written through a 256 KiB buffer; `flush` pushes it to the file (the worker calls
/// it when idle and at stop; dropping the sink flushes too, ignoring errors).
pub struct PcapSink {
    name: String,
    path: PathBuf,
    w: BufWriter<Box<dyn Write + Send>>,
    clock: SinkClock,
    error: Option<PcapError>,
    stats: PortStats,
}

impl PcapSink {
    /// Creates (truncates) `path` and writes the pcap file header.
    ///
    /// # Errors
    /// The file cannot be created or written.
    pub fn create(name: &str, path: impl AsRef<Path>) -> Result<PcapSink, PcapError> {
        let path = path.as_ref().to_path_buf();
        match File::create(&path) {
            Ok(f) => Self::from_writer(name, path, f),
            Err(e) => Err(PcapError { path, kind: e.into() }),
        }
    }

    /// Writes a capture to any byte sink; `label` names it in errors.
    ///
    /// # Errors
    /// The header cannot be written.
    pub fn from_writer(name: &str, label: impl Into<PathBuf>, w: impl Write + Send + 'static) -> Result<PcapSink, PcapError> {
        let path = label.into();
        let mut w: BufWriter<Box<dyn Write + Send>> = BufWriter::with_capacity(IO_BUF_BYTES, Box::new(w));
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&MAGIC_US.to_ne_bytes());
        h[4..6].copy_from_slice(&2u16.to_ne_bytes());
        h[6..8].copy_from_slice(&4u16.to_ne_bytes());
        h[16..20].copy_from_slice(&MAX_RECORD_BYTES.to_ne_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_ne_bytes());
        if let Err(e) = w.write_all(&h) {
            return Err(PcapError { path, kind: e.into() });
        }
        Ok(PcapSink { name: name.to_string(), path, w, clock: SinkClock::Wall, error: None, stats: PortStats::default() })
    }

    /// Chooses how records are stamped (default [`SinkClock::Wall`]).
    pub fn with_clock(mut self, clock: SinkClock) -> PcapSink {
        self.clock = clock;
        self
    }

    /// The first write error, after which the sink accepts nothing more.
    pub fn error(&self) -> Option<&PcapError> {
        self.error.as_ref()
    }

    fn fail(&mut self, e: io::Error) {
        self.stats.errors += 1;
        if self.error.is_none() {
            self.error = Some(PcapError { path: self.path.clone(), kind: e.into() });
        }
    }
}

impl Port for PcapSink {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, _pool: &mut Pool, _batch: &mut Batch, _port_id: u16) -> usize {
        0
    }

    fn tx_burst(&mut self, pool: &mut Pool, pkts: &[PktId]) -> usize {
        if self.error.is_some() {
            return 0;
        }
        let wall_ns = match self.clock {
            SinkClock::Wall => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64),
            SinkClock::Sequence => 0,
        };
        for (k, &h) in pkts.iter().enumerate() {
            let data = pool.data(h);
            let (sec, usec) = match self.clock {
                SinkClock::Wall => (wall_ns / 1_000_000_000, wall_ns % 1_000_000_000 / 1000),
                SinkClock::Sequence => (self.stats.tx_pkts / 1_000_000, self.stats.tx_pkts % 1_000_000),
            };
            let mut r = [0u8; 16];
            r[0..4].copy_from_slice(&(sec as u32).to_ne_bytes());
            r[4..8].copy_from_slice(&(usec as u32).to_ne_bytes());
            r[8..12].copy_from_slice(&(data.len() as u32).to_ne_bytes());
            r[12..16].copy_from_slice(&(data.len() as u32).to_ne_bytes());
            if let Err(e) = self.w.write_all(&r).and_then(|()| self.w.write_all(data)) {
                self.fail(e);
                pool.free_bulk(&pkts[..k]);
                return k;
            }
            self.stats.tx_pkts += 1;
            self.stats.tx_bytes += data.len() as u64;
        }
        pool.free_bulk(pkts);
        pkts.len()
    }

    fn flush(&mut self, _pool: &mut Pool) -> io::Result<()> {
        if let Err(e) = self.w.flush() {
            let kind = e.kind();
            self.fail(e);
            return Err(io::Error::new(kind, format!("{}: flush failed", self.path.display())));
        }
        Ok(())
    }

    fn is_exhausted(&self) -> bool {
        true
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.as_ref().map(|e| e as _)
    }
}

impl Drop for PcapSink {
    fn drop(&mut self) {
        let _ = self.w.flush();
    }
}
