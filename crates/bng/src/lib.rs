//! fastpath-bng: the broadband control plane.
//!
//! Owns the subscriber-facing protocols and state that sit beside the `vbng` user plane: today
//! the DHCPv4 server ([`dhcp::server`]) or relay ([`dhcp::relay`]) with their message codec
//! ([`dhcp::wire`]) and the lease store ([`store`]); the PFCP client ([`pfcp_cp`]); the CPRi's
//! frames ([`cpri`]) and the control plane that ties them together ([`cp`],
//! run by `fastpath bng-cp`, one or more user planes) and the usage records
//! ([`accounting`]; docs/bng.md). Depends on
//! `fastpath-packet` for wire types only; never on ports, threads or the pipeline.
//!
//! Invariants: decoding never panics on any bytes; the server and the relay are pure (time is
//! passed in as `now_s`, replies and lease events are returned, nothing here opens a socket);
//! every lease event can be written to the store, which survives a restart.
//!
//! ```
//! use std::net::Ipv4Addr;
//! use fastpath_bng::dhcp::server::{Identity, Outcome, PoolConfig, ServerConfig};
//! use fastpath_bng::dhcp::wire::{DhcpRepr, MessageType, Op};
//!
//! let mut server = ServerConfig {
//!     server_id: Ipv4Addr::new(198, 18, 0, 1),
//!     pools: vec![PoolConfig {
//!         name: "residential".into(),
//!         svlans: vec![],
//!         first: Ipv4Addr::new(198, 18, 0, 10),
//!         last: Ipv4Addr::new(198, 18, 0, 99),
//!         mask: Ipv4Addr::new(255, 255, 255, 0),
//!         gateway: Ipv4Addr::new(198, 18, 0, 1),
//!         dns: vec![],
//!         lease_time_s: 3600,
//!     }],
//!     offer_hold_s: 30,
//!     decline_quarantine_s: 600,
//! }
//! .build()
//! .unwrap();
//! let client = Identity { port: 1, svlan: 100, cvlan: 7, mac: [2, 0, 0, 0, 0, 1] };
//! let mut discover = DhcpRepr::empty(Op::BOOTREQUEST);
//! discover.chaddr[..6].copy_from_slice(&client.mac);
//! discover.options.message_type = Some(MessageType::DISCOVER);
//! let bytes = discover.to_bytes(); // as it would arrive
//! let Outcome::Reply(offer) = server.handle(&DhcpRepr::parse(&bytes).unwrap(), client, 0) else { panic!() };
//! assert_eq!(offer.msg.yiaddr, Ipv4Addr::new(198, 18, 0, 10));
//! assert_eq!(client.circuit_id(), "1/100/7");
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod accounting;
pub mod cp;
pub mod cpri;
pub mod dhcp;
pub mod pfcp_cp;
pub mod store;
