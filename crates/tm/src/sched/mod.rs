//! Schedulers between the classes of one port (or of one HQoS pipe): strict priority ([`sp`])
//! above deficit round robin ([`drr`]). A port marks each class `Strict` or `Drr { weight }`;
//! at each packet the highest non-empty strict class wins, and only when every strict class is
//! empty (or shaped out) does the DRR round continue among the others. Both choices are O(1):
//! a leading-zero count on an 8-bit mask and the head of an 8-entry active list.

pub mod drr;
pub mod sp;
