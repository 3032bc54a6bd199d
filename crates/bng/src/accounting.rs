//! Accounting: the usage reports the user planes send (periodic Session Report Requests, and
//! the final report of each Session Deletion Response) kept as records in the `usage` table of
//! the control plane's SQLite store, and summed per subscriber for the metrics.
//!
//! A record is keyed by (user plane, UP SEID, URR ID, UR-SEQN, start time). A user plane whose
//! report was not acknowledged sends it again, grown, under the same UR-SEQN and start: the
//! record is replaced, so nothing is counted twice. A restarted user plane hands out SEIDs and
//! UR-SEQNs from the start again, but its reports start later, so they are new records.
//!
//! The table lives in the store's one connection ([`Store::db`]), so a record written while a
//! batch is open (the PFCP group commit) is part of the batch's commit.
//!
//! Control thread only.

use std::net::Ipv4Addr;

use rusqlite::{params, Connection};

use crate::dhcp::server::Identity;
use crate::pfcp_cp::{UsageRecord, Volume};
use crate::store::{atomically, Store};

/// One subscriber's usage, summed over its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Total {
    /// The user plane.
    pub up_id: u16,
    /// The subscriber (its port is the CPRi TEID: user plane << 16 | port).
    pub identity: Identity,
    /// Bytes and packets, both directions.
    pub volume: Volume,
    /// How many records.
    pub records: u64,
}

/// The `usage` table of a [`Store`]. Control thread only.
#[derive(Debug, Clone, Copy)]
pub struct Accounting<'a> {
    db: &'a Connection,
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl<'a> Accounting<'a> {
    /// The `usage` table of `store`, created if needed.
    ///
    /// # Errors
    /// SQLite failed.
    pub fn open(store: &'a Store) -> Result<Accounting<'a>, rusqlite::Error> {
        let db = store.db();
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS usage (
                 up_id INTEGER NOT NULL, up_seid INTEGER NOT NULL, urr_id INTEGER NOT NULL,
                 ur_seqn INTEGER NOT NULL, start_ntp INTEGER NOT NULL, end_ntp INTEGER NOT NULL,
                 trigger INTEGER NOT NULL,
                 port INTEGER NOT NULL, svlan INTEGER NOT NULL, cvlan INTEGER NOT NULL, mac BLOB NOT NULL,
                 ip INTEGER NOT NULL,
                 ul_bytes INTEGER NOT NULL, dl_bytes INTEGER NOT NULL,
                 ul_pkts INTEGER NOT NULL, dl_pkts INTEGER NOT NULL,
                 PRIMARY KEY (up_id, up_seid, urr_id, ur_seqn, start_ntp));",
        )?;
        Ok(Accounting { db })
    }

    /// The `usage` table of `store`, which [`Accounting::open`] created before.
    pub fn new(store: &'a Store) -> Accounting<'a> {
        Accounting { db: store.db() }
    }

    /// Writes `reports` of a subscriber's session atomically (a transaction of its own, or part
    /// of the store's open batch), replacing a record with the same key (a report sent again).
    ///
    /// # Errors
    /// SQLite failed; nothing was written.
    pub fn record(&self, up_id: u16, up_seid: u64, id: &Identity, ip: Ipv4Addr, reports: &[UsageRecord]) -> Result<(), rusqlite::Error> {
        if reports.is_empty() {
            return Ok(());
        }
        atomically(self.db, |tx| {
            for r in reports {
                let v = r.volume;
                tx.prepare_cached(
                    "INSERT OR REPLACE INTO usage (up_id, up_seid, urr_id, ur_seqn, start_ntp, end_ntp, trigger,
                     port, svlan, cvlan, mac, ip, ul_bytes, dl_bytes, ul_pkts, dl_pkts)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                )?
                .execute(params![
                    up_id,
                    int(up_seid),
                    r.urr_id,
                    r.ur_seqn,
                    r.start_ntp,
                    r.end_ntp,
                    r.trigger,
                    id.port,
                    id.svlan,
                    id.cvlan,
                    &id.mac[..],
                    u32::from(ip),
                    int(v.ul_bytes),
                    int(v.dl_bytes),
                    int(v.ul_pkts),
                    int(v.dl_pkts)
                ])?;
            }
            Ok(())
        })
    }

    /// Usage per subscriber, summed over its records (ordered by user plane and identity).
    ///
    /// # Errors
    /// SQLite failed.
    pub fn totals(&self) -> Result<Vec<Total>, rusqlite::Error> {
        let mut st = self.db.prepare(
            "SELECT up_id, port, svlan, cvlan, mac, SUM(ul_bytes), SUM(dl_bytes), SUM(ul_pkts), SUM(dl_pkts), COUNT(*)
             FROM usage GROUP BY up_id, port, svlan, cvlan, mac ORDER BY up_id, port, svlan, cvlan, mac",
        )?;
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, u16>(0)?,
                r.get::<_, u32>(1)?,
                r.get::<_, u16>(2)?,
                r.get::<_, u16>(3)?,
                r.get::<_, Vec<u8>>(4)?,
                [r.get::<_, i64>(5)?, r.get::<_, i64>(6)?, r.get::<_, i64>(7)?, r.get::<_, i64>(8)?, r.get::<_, i64>(9)?],
            ))
        })?;
        let mut v = Vec::new();
        for row in rows {
            let (up_id, port, svlan, cvlan, mac, n) = row?;
            // A record that does not decode is left out of the sums, not fatal.
            let Ok(mac) = <[u8; 6]>::try_from(mac) else { continue };
            let u = |x: i64| u64::try_from(x).unwrap_or(0);
            v.push(Total {
                up_id,
                identity: Identity { port, svlan, cvlan, mac },
                volume: Volume { ul_bytes: u(n[0]), dl_bytes: u(n[1]), ul_pkts: u(n[2]), dl_pkts: u(n[3]) },
                records: u(n[4]),
            });
        }
        Ok(v)
    }

    /// Records stored.
    ///
    /// # Errors
    /// SQLite failed.
    pub fn records(&self) -> Result<u64, rusqlite::Error> {
        self.db.query_row("SELECT COUNT(*) FROM usage", [], |r| r.get::<_, i64>(0)).map(|n| u64::try_from(n).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use fastpath_pfcp::ie::Triggers;

    #[test]
    fn a_report_sent_again_replaces_the_first_and_totals_sum_per_subscriber() {
        let dir = std::env::temp_dir().join(format!("fastpath-bng-acct-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&dir.join("cp.db")).unwrap();
        let a = Accounting::open(&store).unwrap();
        let id = Identity { port: 1 << 16, svlan: 100, cvlan: 7, mac: [2, 0, 0, 0, 0, 7] };
        let ip = Ipv4Addr::new(100, 64, 0, 10);
        let rec = |seqn, start, ul| UsageRecord {
            urr_id: 1,
            ur_seqn: seqn,
            trigger: Triggers::PERIO,
            start_ntp: start,
            end_ntp: start + 10,
            volume: Volume { ul_bytes: ul, dl_bytes: 1, ul_pkts: 1, dl_pkts: 1 },
        };
        a.record(1, 9, &id, ip, &[rec(0, 100, 500)]).unwrap();
        // Not acknowledged: sent again, grown, same UR-SEQN and start.
        a.record(1, 9, &id, ip, &[rec(0, 100, 700)]).unwrap();
        a.record(1, 9, &id, ip, &[rec(1, 110, 300)]).unwrap();
        // A restarted user plane reuses SEID 9 and UR-SEQN 0, later.
        a.record(1, 9, &id, ip, &[rec(0, 500, 50)]).unwrap();
        assert_eq!(a.records().unwrap(), 3);
        let t = a.totals().unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!((t[0].identity, t[0].volume.ul_bytes, t[0].records), (id, 700 + 300 + 50, 3));
        drop(store);
        // Kept across a reopen.
        let store = Store::open(&dir.join("cp.db")).unwrap();
        assert_eq!(Accounting::open(&store).unwrap().totals().unwrap(), t);
        // Inside a batch, a record is part of the batch: rolled back with it.
        store.begin().unwrap();
        Accounting::open(&store).unwrap().record(1, 10, &id, ip, &[rec(0, 900, 1)]).unwrap();
        store.rollback();
        assert_eq!(Accounting::open(&store).unwrap().records().unwrap(), 3);
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
