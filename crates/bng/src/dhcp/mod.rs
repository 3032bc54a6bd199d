//! DHCPv4: the message codec ([`wire`]) and the server state machine ([`server`]).

pub mod server;
pub mod wire;
