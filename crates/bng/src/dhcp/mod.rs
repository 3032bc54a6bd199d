//! DHCPv4: the message codec ([`wire`]), the server state machine ([`server`]) and relay mode
//! ([`relay`]).

pub mod relay;
pub mod server;
pub mod wire;
