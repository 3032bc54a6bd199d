//! What happens to a packet after a stage: go on, drop (with a reason), transmit, punt, or wait in
//! the traffic manager.

use crate::drop::DropReason;

/// Why a packet goes to the control plane instead of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PuntReason(pub u16);

impl PuntReason {
    /// An action asked for it (`to_control`).
    pub const ACTION: PuntReason = PuntReason(0);
    /// A flow table had no entry and the first packet goes to the slow path.
    pub const NEW_FLOW: PuntReason = PuntReason(1);
    /// TTL or hop limit expired; the control plane may answer with ICMP time exceeded.
    pub const TTL_EXPIRED: PuntReason = PuntReason(2);
}

/// The fate of one packet in a batch. Stages only look at `Continue` packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Verdict {
    /// Still in the pipeline.
    #[default]
    Continue,
    /// Dropped; counted under the stage that dropped it and this reason.
    Drop(DropReason),
    /// Leaves through this port.
    Tx(u16),
    /// Goes to the control plane.
    Punt(PuntReason),
    /// Held by the traffic manager for this port: it leaves later, through the pipeline's
    /// egress. Whoever dispatches verdicts neither sends nor frees it.
    Queued(u16),
}
