//! The lease store: every bound lease and quarantined address, kept in SQLite so a restarted
//! control plane gets them all back ([`Store::load`] then [`Server::restore`]).
//!
//! Why SQLite (through `rusqlite`, built from its bundled source) and not a journal of our own:
//! a commit is atomic and durable (`journal_mode=WAL`, `synchronous=FULL`: the commit returns
//! after its WAL frames are fsynced), a crash mid-write leaves the last committed state (a torn
//! WAL frame fails its checksum and is ignored on recovery), and compaction (checkpoints) is
//! SQLite's job. The cost is a C compiler at build time; docs/bng.md has the whole argument.
//!
//! One transaction per batch of server [`Event`]s: Bound and Renewed write the lease, Released
//! and Expired delete it, Declined deletes it and writes the quarantine.
//!
//! **One connection for every table.** The control plane keeps its PFCP sessions and usage
//! records in the same file ([`Store::db`]), through this one connection, and every write is a
//! savepoint ([`atomically`]): alone, it is a transaction with its own commit; inside a batch
//! ([`Store::begin`] … [`Store::commit`]) it is part of the batch's one commit. Two connections
//! to one file cannot share a batch: while one holds its write transaction open, the other's
//! writes fail as busy (the first try at a PFCP group commit did that, and was reverted).
//!
//! [`Server::restore`]: crate::dhcp::server::Server::restore

use std::net::Ipv4Addr;
use std::path::Path;

use rusqlite::{params, Connection};

use crate::dhcp::server::{Event, EventKind, Identity, Lease};

/// Schema version kept in SQLite's `user_version`.
const SCHEMA_VERSION: i64 = 1;

/// A store failure. Control thread only; these stop the control plane rather than lose a lease.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("lease store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("lease store: schema version {found}, this build knows {SCHEMA_VERSION}")]
    Schema { found: i64 },
    #[error("lease store: bad record for {ip}: {what}")]
    BadRecord { ip: Ipv4Addr, what: &'static str },
}

/// What [`Store::load`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Bound leases, in address order.
    pub leases: Vec<Lease>,
    /// Quarantined addresses and the end of their quarantine, in address order.
    pub quarantined: Vec<(Ipv4Addr, u64)>,
}

/// The lease store. Control thread only.
#[derive(Debug)]
pub struct Store {
    db: Connection,
}

impl Store {
    /// Opens (creating if needed) the store at `path`.
    ///
    /// # Errors
    /// The file cannot be opened, is not a store, or has another schema version.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let db = Connection::open(path)?;
        db.pragma_update(None, "journal_mode", "WAL")?;
        db.pragma_update(None, "synchronous", "FULL")?;
        let found: i64 = db.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        match found {
            0 => {
                db.execute_batch(
                    "BEGIN;
                     CREATE TABLE IF NOT EXISTS lease (
                         ip INTEGER PRIMARY KEY, port INTEGER NOT NULL, svlan INTEGER NOT NULL,
                         cvlan INTEGER NOT NULL, mac BLOB NOT NULL, expires_s INTEGER NOT NULL);
                     CREATE TABLE IF NOT EXISTS quarantine (
                         ip INTEGER PRIMARY KEY, until_s INTEGER NOT NULL);
                     PRAGMA user_version = 1;
                     COMMIT;",
                )?;
            }
            SCHEMA_VERSION => {}
            found => return Err(StoreError::Schema { found }),
        }
        // A bound lease deletes the line's other leases: without this index that is a scan of
        // every lease per event (quadratic under a load of new clients). Created on stores of
        // either age; the schema is otherwise unchanged.
        db.execute_batch("CREATE INDEX IF NOT EXISTS lease_line ON lease (port, svlan, cvlan, mac)")?;
        Ok(Store { db })
    }

    /// The connection, for the control plane's other tables (PFCP sessions, usage records):
    /// one connection for the whole file (module doc).
    pub fn db(&self) -> &Connection {
        &self.db
    }

    /// Starts a batch: every write until [`Store::commit`] is one transaction, made durable by
    /// one `fsync` (a group commit).
    ///
    /// # Errors
    /// SQLite failed, or a batch is already open.
    pub fn begin(&self) -> Result<(), StoreError> {
        self.db.execute_batch("BEGIN IMMEDIATE")?;
        Ok(())
    }

    /// Commits the batch [`Store::begin`] opened; when it returns, the batch is durable.
    ///
    /// # Errors
    /// SQLite failed: the batch is rolled back, nothing of it is stored.
    pub fn commit(&self) -> Result<(), StoreError> {
        if let Err(e) = self.db.execute_batch("COMMIT") {
            self.rollback();
            return Err(e.into());
        }
        Ok(())
    }

    /// Abandons the open batch, if any (after a failed write).
    pub fn rollback(&self) {
        if !self.db.is_autocommit() {
            let _ = self.db.execute_batch("ROLLBACK");
        }
    }

    /// Writes the effect of `events` atomically: a transaction of its own, or part of the open
    /// batch.
    ///
    /// # Errors
    /// SQLite failed; nothing of these events was written.
    pub fn apply(&mut self, events: &[Event]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        atomically(&self.db, |tx| apply_events(tx, events))?;
        Ok(())
    }

    /// Deletes quarantines that ended at or before `now_s`.
    ///
    /// # Errors
    /// SQLite failed.
    pub fn prune(&mut self, now_s: u64) -> Result<(), StoreError> {
        let now = i64::try_from(now_s).unwrap_or(i64::MAX);
        self.db.execute("DELETE FROM quarantine WHERE until_s <= ?1", params![now])?;
        Ok(())
    }

    /// Every stored lease (address order) and quarantine, for [`Server::restore`].
    ///
    /// [`Server::restore`]: crate::dhcp::server::Server::restore
    ///
    /// # Errors
    /// SQLite failed, or a record does not decode.
    pub fn load(&self) -> Result<Snapshot, StoreError> {
        let mut st = self.db.prepare("SELECT ip, port, svlan, cvlan, mac, expires_s FROM lease ORDER BY ip")?;
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, u32>(1)?,
                r.get::<_, u16>(2)?,
                r.get::<_, u16>(3)?,
                r.get::<_, Vec<u8>>(4)?,
                r.get::<_, i64>(5)?,
            ))
        })?;
        let mut leases = Vec::new();
        for row in rows {
            let (ip, port, svlan, cvlan, mac, expires) = row?;
            let ip = ip_of(ip)?;
            let mac: [u8; 6] = mac.try_into().map_err(|_| StoreError::BadRecord { ip, what: "mac is not 6 bytes" })?;
            let expires_s = u64::try_from(expires).map_err(|_| StoreError::BadRecord { ip, what: "negative expiry" })?;
            leases.push(Lease { identity: Identity { port, svlan, cvlan, mac }, ip, expires_s });
        }
        let mut st = self.db.prepare("SELECT ip, until_s FROM quarantine ORDER BY ip")?;
        let rows = st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
        let mut quarantined = Vec::new();
        for row in rows {
            let (ip, until) = row?;
            let ip = ip_of(ip)?;
            let until = u64::try_from(until).map_err(|_| StoreError::BadRecord { ip, what: "negative quarantine end" })?;
            quarantined.push((ip, until));
        }
        Ok(Snapshot { leases, quarantined })
    }
}

/// Runs `f` in a savepoint: a transaction of its own (committed, durable when it returns)
/// outside a batch, part of the batch inside one. On an error, what `f` wrote is undone.
///
/// # Errors
/// What `f` or SQLite returned.
pub fn atomically<T>(db: &Connection, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    db.execute_batch("SAVEPOINT fastpath_bng")?;
    match f(db) {
        Ok(v) => {
            // Releasing the outermost savepoint outside a transaction is a COMMIT.
            db.execute_batch("RELEASE fastpath_bng")?;
            Ok(v)
        }
        Err(e) => {
            let _ = db.execute_batch("ROLLBACK TO fastpath_bng; RELEASE fastpath_bng");
            Err(e)
        }
    }
}

fn apply_events(tx: &Connection, events: &[Event]) -> rusqlite::Result<()> {
    for e in events {
        let ip = i64::from(u32::from(e.ip));
        let expires = i64::try_from(e.expires_s).unwrap_or(i64::MAX);
        match e.kind {
            EventKind::Bound | EventKind::Renewed => {
                let id = &e.identity;
                // One lease per subscriber: a rebind to another address replaces the old one.
                tx.execute(
                    "DELETE FROM lease WHERE port = ?1 AND svlan = ?2 AND cvlan = ?3 AND mac = ?4 AND ip <> ?5",
                    params![id.port, id.svlan, id.cvlan, &id.mac[..], ip],
                )?;
                tx.execute(
                    "INSERT OR REPLACE INTO lease (ip, port, svlan, cvlan, mac, expires_s)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![ip, id.port, id.svlan, id.cvlan, &id.mac[..], expires],
                )?;
            }
            EventKind::Released | EventKind::Expired => {
                tx.execute("DELETE FROM lease WHERE ip = ?1", params![ip])?;
            }
            EventKind::Declined => {
                tx.execute("DELETE FROM lease WHERE ip = ?1", params![ip])?;
                tx.execute("INSERT OR REPLACE INTO quarantine (ip, until_s) VALUES (?1, ?2)", params![ip, expires])?;
            }
        }
    }
    Ok(())
}

fn ip_of(v: i64) -> Result<Ipv4Addr, StoreError> {
    u32::try_from(v).map(Ipv4Addr::from).map_err(|_| StoreError::BadRecord { ip: Ipv4Addr::UNSPECIFIED, what: "address out of range" })
}
