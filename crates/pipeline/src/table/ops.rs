//! The control plane's view of a table: [`TableOps`] (insert, remove, commit, dump), its errors
//! and the shapes it reads back. The data path is [`super::TableStage`]; this file depends on
//! neither the executor nor the stage, so the executor can hand out `&mut dyn TableOps`.

use crate::ir::{TableDef, MAX_ARGS};
use crate::value::Match;
use fastpath_tables::acl::{Acl, FoldJob, Folded};
use std::sync::Arc;

/// A control-plane error on a table operation. Echoes what it rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The key does not fit the table's match kinds.
    #[error("table \"{table}\": {msg}")]
    BadKey {
        /// Table name.
        table: String,
        /// What is wrong.
        msg: String,
    },
    /// No room.
    #[error("table \"{table}\" is full ({size} entries)")]
    Full {
        /// Table name.
        table: String,
        /// Its capacity.
        size: usize,
    },
    /// The action is not allowed in this table or its arguments are wrong.
    #[error("table \"{table}\": {msg}")]
    BadAction {
        /// Table name.
        table: String,
        /// What is wrong.
        msg: String,
    },
    /// Removing a key that is not there.
    #[error("table \"{table}\": no entry with that key")]
    NotFound {
        /// Table name.
        table: String,
    },
    /// The classifier refused a rule (checked as it is added).
    #[error("table \"{table}\": {msg}")]
    Build {
        /// Table name.
        table: String,
        /// Why.
        msg: String,
    },
}

/// Control-plane operations on a table. Control thread only.
pub trait TableOps {
    /// The table's definition.
    fn def(&self) -> &TableDef;
    /// Adds or replaces the entry for `key` (one match per key field). `action` indexes
    /// `Program::actions`. `priority` orders classifier rules (lower wins).
    fn insert(&mut self, key: &[Match], priority: u32, action: usize, args: [u128; MAX_ARGS]) -> Result<(), TableError>;
    /// Removes the entry for `key`.
    fn remove(&mut self, key: &[Match]) -> Result<(), TableError>;
    /// Makes staged changes live. A classifier publishes its last full build plus the changes
    /// since (cost follows the change; see [`TableOps::fold_job`] for the full builds). A no-op
    /// for other engines.
    fn commit(&mut self) -> Result<(), TableError>;
    /// Makes staged changes live with a full classifier build and no delta: after a bulk load,
    /// so the steady state pays no delta. As [`TableOps::commit`] for other engines.
    fn commit_full(&mut self) -> Result<(), TableError> {
        self.commit()
    }
    /// A full build of the classifier's rules to run on another thread, once the changes
    /// committed since its last full build outgrow their bound (and none is under way; nothing
    /// is staged). `None` for other engines. Hand the result to [`TableOps::finish_fold`].
    fn fold_job(&mut self) -> Option<FoldJob> {
        None
    }
    /// Installs a finished fold as the classifier's new base, with the changes committed since
    /// its job was handed out on top, and makes it live (as a commit does). False, and nothing
    /// changes, when the fold is stale (the table was cleared or rebuilt since) or not a
    /// classifier's.
    fn finish_fold(&mut self, _f: Folded) -> bool {
        false
    }
    /// The classifier the last commit built, to share with replicas that staged the same
    /// changes ([`TableOps::adopt_classifier`]); `None` for other engines or while changes are
    /// staged.
    fn built_classifier(&self) -> Option<BuiltClassifier> {
        None
    }
    /// Makes `b` live instead of building a classifier: staged changes are committed with one
    /// built elsewhere from the same rules (the control thread's replica), so a worker swaps a
    /// pointer between two batches instead of stalling for a build. Refused (the caller then
    /// commits, i.e. builds) when this replica's action entries differ from those the
    /// classifier's rules point at. A no-op for other engines.
    fn adopt_classifier(&mut self, _b: &BuiltClassifier) -> Adopt {
        Adopt::Refused
    }
    /// Every entry, sorted by priority and key. Control thread.
    fn dump(&self) -> Vec<EntryView>;
    /// Removes every entry (live at once, also for the classifier).
    fn clear(&mut self);
    /// Number of entries.
    fn len(&self) -> usize;
    /// True when there are no entries.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Packets that hit and missed so far.
    fn hit_miss(&self) -> (u64, u64);
}

/// One entry as the control plane reads it back: one match per key field, the priority
/// (classifier tables; 0 for the others), the action (index into `Program::actions`) and its
/// arguments. Adding it again gives the same entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryView {
    /// One match per key field.
    pub key: Vec<Match>,
    /// Rule priority (lower wins; classifier tables only).
    pub priority: u32,
    /// Index into `Program::actions`.
    pub action: usize,
    /// The action's arguments.
    pub args: [u128; MAX_ARGS],
}

/// A classifier built by one replica, with a digest of the action entries its rules point at
/// (rules hold indices into the table's interned entries, so another replica may use it only
/// if its entries are the same).
#[derive(Clone, Debug)]
pub struct BuiltClassifier {
    /// The classifier, shared read-only.
    pub acl: Arc<Acl>,
    /// Digest of the action entries its rules point at.
    pub(crate) actions: u64,
}

/// What [`TableOps::adopt_classifier`] did.
#[derive(Debug)]
pub enum Adopt {
    /// Live now; the classifier it replaced, if any, for the caller to free off the packet path.
    Adopted(Option<Arc<Acl>>),
    /// Not adopted: not a classifier table, or its action entries differ.
    Refused,
}
