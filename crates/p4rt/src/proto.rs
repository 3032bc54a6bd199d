//! The P4Runtime v1 messages fastpath speaks, written from the public specification as prost
//! messages (no `.proto` file, no `protoc`): `p4/v1/p4runtime.proto` (package `p4.v1`),
//! `p4/config/v1/p4info.proto` (package `p4.config.v1`), `google/rpc/status.proto` and
//! `google/protobuf/any.proto`. Field numbers and types are those of P4Runtime 1.4.1, checked
//! against the message descriptors of the PyPI `p4runtime` 1.4.1 package when they were written,
//! and exercised against p4runtime-shell by `crates/fastpath/tests/live_p4rt.rs`.
//!
//! Only the messages fastpath uses are declared. Entities it does not support (action profiles,
//! registers, digests, value sets, the packet replication engine, direct counters and meters)
//! are declared as [`Opaque`] so a request that carries one decodes and is answered with a
//! clear `UNIMPLEMENTED`, not mistaken for an empty entity. Unknown fields are skipped by prost,
//! as protobuf requires.

#![allow(missing_docs)]

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `google.rpc.Status`: what `grpc-status-details-bin` carries.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<Any>,
}

/// A message fastpath does not interpret (its fields are skipped).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Opaque {}

// ---------------------------------------------------------------------------------------------
// p4.v1: the service's messages
// ---------------------------------------------------------------------------------------------

/// `p4.v1.Uint128`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, ::prost::Message)]
pub struct Uint128 {
    #[prost(uint64, tag = "1")]
    pub high: u64,
    #[prost(uint64, tag = "2")]
    pub low: u64,
}

/// `p4.v1.WriteRequest`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct WriteRequest {
    #[prost(uint64, tag = "1")]
    pub device_id: u64,
    #[prost(uint64, tag = "2")]
    pub role_id: u64,
    #[prost(string, tag = "6")]
    pub role: String,
    #[prost(message, optional, tag = "3")]
    pub election_id: Option<Uint128>,
    #[prost(message, repeated, tag = "4")]
    pub updates: Vec<Update>,
    #[prost(int32, tag = "5")]
    pub atomicity: i32,
}

/// `p4.v1.WriteRequest.Atomicity`.
pub mod atomicity {
    pub const CONTINUE_ON_ERROR: i32 = 0;
    pub const ROLLBACK_ON_ERROR: i32 = 1;
    pub const DATAPLANE_ATOMIC: i32 = 2;
}

/// `p4.v1.WriteResponse`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct WriteResponse {}

/// `p4.v1.ReadRequest`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReadRequest {
    #[prost(uint64, tag = "1")]
    pub device_id: u64,
    #[prost(string, tag = "3")]
    pub role: String,
    #[prost(message, repeated, tag = "2")]
    pub entities: Vec<Entity>,
}

/// `p4.v1.ReadResponse`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ReadResponse {
    #[prost(message, repeated, tag = "1")]
    pub entities: Vec<Entity>,
}

/// `p4.v1.Update`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Update {
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    #[prost(message, optional, tag = "2")]
    pub entity: Option<Entity>,
}

/// `p4.v1.Update.Type`.
pub mod update_type {
    pub const UNSPECIFIED: i32 = 0;
    pub const INSERT: i32 = 1;
    pub const MODIFY: i32 = 2;
    pub const DELETE: i32 = 3;
}

/// `p4.v1.Entity`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Entity {
    #[prost(oneof = "entity::Entity", tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12")]
    pub entity: Option<entity::Entity>,
}

pub mod entity {
    /// The `entity` oneof.
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Entity {
        #[prost(message, tag = "1")]
        ExternEntry(super::Opaque),
        #[prost(message, tag = "2")]
        TableEntry(super::TableEntry),
        #[prost(message, tag = "3")]
        ActionProfileMember(super::Opaque),
        #[prost(message, tag = "4")]
        ActionProfileGroup(super::Opaque),
        #[prost(message, tag = "5")]
        MeterEntry(super::MeterEntry),
        #[prost(message, tag = "6")]
        DirectMeterEntry(super::Opaque),
        #[prost(message, tag = "7")]
        CounterEntry(super::CounterEntry),
        #[prost(message, tag = "8")]
        DirectCounterEntry(super::Opaque),
        #[prost(message, tag = "9")]
        PacketReplicationEngineEntry(super::Opaque),
        #[prost(message, tag = "10")]
        ValueSetEntry(super::Opaque),
        #[prost(message, tag = "11")]
        RegisterEntry(super::Opaque),
        #[prost(message, tag = "12")]
        DigestEntry(super::Opaque),
    }
}

/// `p4.v1.TableEntry`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct TableEntry {
    #[prost(uint32, tag = "1")]
    pub table_id: u32,
    #[prost(message, repeated, tag = "2")]
    pub r#match: Vec<FieldMatch>,
    #[prost(message, optional, tag = "3")]
    pub action: Option<TableAction>,
    #[prost(int32, tag = "4")]
    pub priority: i32,
    #[prost(uint64, tag = "5")]
    pub controller_metadata: u64,
    #[prost(message, optional, tag = "6")]
    pub meter_config: Option<MeterConfig>,
    #[prost(message, optional, tag = "7")]
    pub counter_data: Option<CounterData>,
    #[prost(bool, tag = "8")]
    pub is_default_action: bool,
    #[prost(int64, tag = "9")]
    pub idle_timeout_ns: i64,
    #[prost(bytes = "vec", tag = "11")]
    pub metadata: Vec<u8>,
    #[prost(bool, tag = "13")]
    pub is_const: bool,
}

/// `p4.v1.FieldMatch`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct FieldMatch {
    #[prost(uint32, tag = "1")]
    pub field_id: u32,
    #[prost(oneof = "field_match::FieldMatchType", tags = "2, 3, 4, 6, 7, 100")]
    pub field_match_type: Option<field_match::FieldMatchType>,
}

pub mod field_match {
    /// `p4.v1.FieldMatch.Exact`.
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Exact {
        #[prost(bytes = "vec", tag = "1")]
        pub value: Vec<u8>,
    }
    /// `p4.v1.FieldMatch.Ternary`.
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Ternary {
        #[prost(bytes = "vec", tag = "1")]
        pub value: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub mask: Vec<u8>,
    }
    /// `p4.v1.FieldMatch.LPM`.
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Lpm {
        #[prost(bytes = "vec", tag = "1")]
        pub value: Vec<u8>,
        #[prost(int32, tag = "2")]
        pub prefix_len: i32,
    }
    /// `p4.v1.FieldMatch.Range`.
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Range {
        #[prost(bytes = "vec", tag = "1")]
        pub low: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub high: Vec<u8>,
    }
    /// `p4.v1.FieldMatch.Optional`.
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Optional {
        #[prost(bytes = "vec", tag = "1")]
        pub value: Vec<u8>,
    }
    /// The `field_match_type` oneof.
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum FieldMatchType {
        #[prost(message, tag = "2")]
        Exact(Exact),
        #[prost(message, tag = "3")]
        Ternary(Ternary),
        #[prost(message, tag = "4")]
        Lpm(Lpm),
        #[prost(message, tag = "6")]
        Range(Range),
        #[prost(message, tag = "7")]
        Optional(Optional),
        #[prost(message, tag = "100")]
        Other(super::Any),
    }
}

/// `p4.v1.TableAction`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct TableAction {
    #[prost(oneof = "table_action::Type", tags = "1, 2, 3, 4")]
    pub r#type: Option<table_action::Type>,
}

pub mod table_action {
    /// The `type` oneof.
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Type {
        #[prost(message, tag = "1")]
        Action(super::Action),
        #[prost(uint32, tag = "2")]
        ActionProfileMemberId(u32),
        #[prost(uint32, tag = "3")]
        ActionProfileGroupId(u32),
        #[prost(message, tag = "4")]
        ActionProfileActionSet(super::Opaque),
    }
}

/// `p4.v1.Action`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Action {
    #[prost(uint32, tag = "1")]
    pub action_id: u32,
    #[prost(message, repeated, tag = "4")]
    pub params: Vec<ActionParam>,
}

/// `p4.v1.Action.Param`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ActionParam {
    #[prost(uint32, tag = "2")]
    pub param_id: u32,
    #[prost(bytes = "vec", tag = "3")]
    pub value: Vec<u8>,
}

/// `p4.v1.Index`.
#[derive(Clone, Copy, PartialEq, ::prost::Message)]
pub struct Index {
    #[prost(int64, tag = "1")]
    pub index: i64,
}

/// `p4.v1.MeterEntry`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct MeterEntry {
    #[prost(uint32, tag = "1")]
    pub meter_id: u32,
    #[prost(message, optional, tag = "2")]
    pub index: Option<Index>,
    #[prost(message, optional, tag = "3")]
    pub config: Option<MeterConfig>,
}

/// `p4.v1.MeterConfig` (rates in the meter's unit per second, bursts in its unit).
#[derive(Clone, Copy, PartialEq, ::prost::Message)]
pub struct MeterConfig {
    #[prost(int64, tag = "1")]
    pub cir: i64,
    #[prost(int64, tag = "2")]
    pub cburst: i64,
    #[prost(int64, tag = "3")]
    pub pir: i64,
    #[prost(int64, tag = "4")]
    pub pburst: i64,
    #[prost(int64, tag = "5")]
    pub eburst: i64,
}

/// `p4.v1.CounterEntry`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CounterEntry {
    #[prost(uint32, tag = "1")]
    pub counter_id: u32,
    #[prost(message, optional, tag = "2")]
    pub index: Option<Index>,
    #[prost(message, optional, tag = "3")]
    pub data: Option<CounterData>,
}

/// `p4.v1.CounterData`.
#[derive(Clone, Copy, PartialEq, ::prost::Message)]
pub struct CounterData {
    #[prost(int64, tag = "1")]
    pub byte_count: i64,
    #[prost(int64, tag = "2")]
    pub packet_count: i64,
}

/// `p4.v1.StreamMessageRequest`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct StreamMessageRequest {
    #[prost(oneof = "stream_message_request::Update", tags = "1, 2, 3, 4")]
    pub update: Option<stream_message_request::Update>,
}

pub mod stream_message_request {
    /// The `update` oneof.
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Update {
        #[prost(message, tag = "1")]
        Arbitration(super::MasterArbitrationUpdate),
        #[prost(message, tag = "2")]
        Packet(super::PacketOut),
        #[prost(message, tag = "3")]
        DigestAck(super::Opaque),
        #[prost(message, tag = "4")]
        Other(super::Any),
    }
}

/// `p4.v1.StreamMessageResponse`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct StreamMessageResponse {
    #[prost(oneof = "stream_message_response::Update", tags = "1, 2, 6")]
    pub update: Option<stream_message_response::Update>,
}

pub mod stream_message_response {
    /// The `update` oneof (digests, idle timeouts and `other` are never sent).
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Update {
        #[prost(message, tag = "1")]
        Arbitration(super::MasterArbitrationUpdate),
        #[prost(message, tag = "2")]
        Packet(super::PacketIn),
        #[prost(message, tag = "6")]
        Error(super::StreamError),
    }
}

/// `p4.v1.PacketOut`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PacketOut {
    #[prost(bytes = "vec", tag = "1")]
    pub payload: Vec<u8>,
    #[prost(message, repeated, tag = "2")]
    pub metadata: Vec<PacketMetadata>,
}

/// `p4.v1.PacketIn`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PacketIn {
    #[prost(bytes = "vec", tag = "1")]
    pub payload: Vec<u8>,
    #[prost(message, repeated, tag = "2")]
    pub metadata: Vec<PacketMetadata>,
}

/// `p4.v1.PacketMetadata`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PacketMetadata {
    #[prost(uint32, tag = "1")]
    pub metadata_id: u32,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `p4.v1.MasterArbitrationUpdate`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct MasterArbitrationUpdate {
    #[prost(uint64, tag = "1")]
    pub device_id: u64,
    #[prost(message, optional, tag = "2")]
    pub role: Option<Role>,
    #[prost(message, optional, tag = "3")]
    pub election_id: Option<Uint128>,
    #[prost(message, optional, tag = "4")]
    pub status: Option<RpcStatus>,
}

/// `p4.v1.Role`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Role {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub config: Option<Any>,
}

/// `p4.v1.StreamError`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct StreamError {
    #[prost(int32, tag = "1")]
    pub canonical_code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(string, tag = "3")]
    pub space: String,
    #[prost(int32, tag = "4")]
    pub code: i32,
    #[prost(oneof = "stream_error::Details", tags = "5")]
    pub details: Option<stream_error::Details>,
}

pub mod stream_error {
    /// The `details` oneof (only packet-out errors are sent).
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Details {
        #[prost(message, tag = "5")]
        PacketOut(super::PacketOutError),
    }
}

/// `p4.v1.PacketOutError`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PacketOutError {
    #[prost(message, optional, tag = "1")]
    pub packet_out: Option<PacketOut>,
}

/// `p4.v1.SetForwardingPipelineConfigRequest`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SetForwardingPipelineConfigRequest {
    #[prost(uint64, tag = "1")]
    pub device_id: u64,
    #[prost(uint64, tag = "2")]
    pub role_id: u64,
    #[prost(string, tag = "6")]
    pub role: String,
    #[prost(message, optional, tag = "3")]
    pub election_id: Option<Uint128>,
    #[prost(int32, tag = "4")]
    pub action: i32,
    #[prost(message, optional, tag = "5")]
    pub config: Option<ForwardingPipelineConfig>,
}

/// `p4.v1.SetForwardingPipelineConfigRequest.Action`.
pub mod set_action {
    pub const UNSPECIFIED: i32 = 0;
    pub const VERIFY: i32 = 1;
    pub const VERIFY_AND_SAVE: i32 = 2;
    pub const VERIFY_AND_COMMIT: i32 = 3;
    pub const COMMIT: i32 = 4;
    pub const RECONCILE_AND_COMMIT: i32 = 5;
}

/// `p4.v1.SetForwardingPipelineConfigResponse`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct SetForwardingPipelineConfigResponse {}

/// `p4.v1.ForwardingPipelineConfig`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ForwardingPipelineConfig {
    #[prost(message, optional, tag = "1")]
    pub p4info: Option<P4Info>,
    #[prost(bytes = "vec", tag = "2")]
    pub p4_device_config: Vec<u8>,
    #[prost(message, optional, tag = "3")]
    pub cookie: Option<Cookie>,
}

/// `p4.v1.ForwardingPipelineConfig.Cookie`.
#[derive(Clone, Copy, PartialEq, ::prost::Message)]
pub struct Cookie {
    #[prost(uint64, tag = "1")]
    pub cookie: u64,
}

/// `p4.v1.GetForwardingPipelineConfigRequest`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct GetForwardingPipelineConfigRequest {
    #[prost(uint64, tag = "1")]
    pub device_id: u64,
    #[prost(int32, tag = "2")]
    pub response_type: i32,
}

/// `p4.v1.GetForwardingPipelineConfigRequest.ResponseType`.
pub mod response_type {
    pub const ALL: i32 = 0;
    pub const COOKIE_ONLY: i32 = 1;
    pub const P4INFO_AND_COOKIE: i32 = 2;
    pub const DEVICE_CONFIG_AND_COOKIE: i32 = 3;
}

/// `p4.v1.GetForwardingPipelineConfigResponse`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct GetForwardingPipelineConfigResponse {
    #[prost(message, optional, tag = "1")]
    pub config: Option<ForwardingPipelineConfig>,
}

/// `p4.v1.Error`: one per update in the details of a failed `Write`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Error {
    #[prost(int32, tag = "1")]
    pub canonical_code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(string, tag = "3")]
    pub space: String,
    #[prost(int32, tag = "4")]
    pub code: i32,
    #[prost(message, optional, tag = "5")]
    pub details: Option<Any>,
}

/// `p4.v1.CapabilitiesRequest`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CapabilitiesRequest {}

/// `p4.v1.CapabilitiesResponse`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct CapabilitiesResponse {
    #[prost(string, tag = "1")]
    pub p4runtime_api_version: String,
}

// ---------------------------------------------------------------------------------------------
// p4.config.v1: the P4Info
// ---------------------------------------------------------------------------------------------

/// `p4.config.v1.P4Info`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct P4Info {
    #[prost(message, optional, tag = "1")]
    pub pkg_info: Option<PkgInfo>,
    #[prost(message, repeated, tag = "2")]
    pub tables: Vec<Table>,
    #[prost(message, repeated, tag = "3")]
    pub actions: Vec<P4Action>,
    #[prost(message, repeated, tag = "5")]
    pub counters: Vec<Counter>,
    #[prost(message, repeated, tag = "7")]
    pub meters: Vec<Meter>,
    #[prost(message, repeated, tag = "9")]
    pub controller_packet_metadata: Vec<ControllerPacketMetadata>,
}

/// `p4.config.v1.Documentation`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Documentation {
    #[prost(string, tag = "1")]
    pub brief: String,
    #[prost(string, tag = "2")]
    pub description: String,
}

/// `p4.config.v1.PkgInfo`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PkgInfo {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
    #[prost(message, optional, tag = "3")]
    pub doc: Option<Documentation>,
    #[prost(string, tag = "5")]
    pub arch: String,
}

/// `p4.config.v1.Preamble`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Preamble {
    #[prost(uint32, tag = "1")]
    pub id: u32,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub alias: String,
    #[prost(message, optional, tag = "5")]
    pub doc: Option<Documentation>,
}

/// `p4.config.v1.MatchField`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct MatchField {
    #[prost(uint32, tag = "1")]
    pub id: u32,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(int32, tag = "4")]
    pub bitwidth: i32,
    #[prost(oneof = "match_field::Match", tags = "5, 7")]
    pub r#match: Option<match_field::Match>,
}

pub mod match_field {
    /// `p4.config.v1.MatchField.MatchType`.
    pub mod match_type {
        pub const UNSPECIFIED: i32 = 0;
        pub const EXACT: i32 = 2;
        pub const LPM: i32 = 3;
        pub const TERNARY: i32 = 4;
        pub const RANGE: i32 = 5;
        pub const OPTIONAL: i32 = 6;
    }
    /// The `match` oneof.
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Match {
        #[prost(int32, tag = "5")]
        MatchType(i32),
        #[prost(string, tag = "7")]
        OtherMatchType(String),
    }
}

/// `p4.config.v1.Table`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Table {
    #[prost(message, optional, tag = "1")]
    pub preamble: Option<Preamble>,
    #[prost(message, repeated, tag = "2")]
    pub match_fields: Vec<MatchField>,
    #[prost(message, repeated, tag = "3")]
    pub action_refs: Vec<ActionRef>,
    #[prost(uint32, tag = "4")]
    pub const_default_action_id: u32,
    #[prost(message, optional, tag = "5")]
    pub initial_default_action: Option<TableActionCall>,
    #[prost(int64, tag = "8")]
    pub size: i64,
    #[prost(bool, tag = "10")]
    pub is_const_table: bool,
}

/// `p4.config.v1.TableActionCall`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct TableActionCall {
    #[prost(uint32, tag = "1")]
    pub action_id: u32,
    #[prost(message, repeated, tag = "4")]
    pub arguments: Vec<TableActionCallArgument>,
}

/// `p4.config.v1.TableActionCall.Argument`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct TableActionCallArgument {
    #[prost(uint32, tag = "2")]
    pub param_id: u32,
    #[prost(bytes = "vec", tag = "3")]
    pub value: Vec<u8>,
}

/// `p4.config.v1.ActionRef`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ActionRef {
    #[prost(uint32, tag = "1")]
    pub id: u32,
    #[prost(int32, tag = "3")]
    pub scope: i32,
}

/// `p4.config.v1.ActionRef.Scope`.
pub mod scope {
    pub const TABLE_AND_DEFAULT: i32 = 0;
    pub const TABLE_ONLY: i32 = 1;
    pub const DEFAULT_ONLY: i32 = 2;
}

/// `p4.config.v1.Action`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct P4Action {
    #[prost(message, optional, tag = "1")]
    pub preamble: Option<Preamble>,
    #[prost(message, repeated, tag = "2")]
    pub params: Vec<P4ActionParam>,
}

/// `p4.config.v1.Action.Param`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct P4ActionParam {
    #[prost(uint32, tag = "1")]
    pub id: u32,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(int32, tag = "4")]
    pub bitwidth: i32,
}

/// `p4.config.v1.CounterSpec`.
#[derive(Clone, Copy, PartialEq, ::prost::Message)]
pub struct CounterSpec {
    #[prost(int32, tag = "1")]
    pub unit: i32,
}

/// `p4.config.v1.CounterSpec.Unit`.
pub mod counter_unit {
    pub const UNSPECIFIED: i32 = 0;
    pub const BYTES: i32 = 1;
    pub const PACKETS: i32 = 2;
    pub const BOTH: i32 = 3;
}

/// `p4.config.v1.Counter`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Counter {
    #[prost(message, optional, tag = "1")]
    pub preamble: Option<Preamble>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<CounterSpec>,
    #[prost(int64, tag = "3")]
    pub size: i64,
}

/// `p4.config.v1.MeterSpec`.
#[derive(Clone, Copy, PartialEq, ::prost::Message)]
pub struct MeterSpec {
    #[prost(int32, tag = "1")]
    pub unit: i32,
    #[prost(int32, tag = "2")]
    pub r#type: i32,
}

/// `p4.config.v1.MeterSpec.Unit` and `.Type`.
pub mod meter_spec {
    pub const UNIT_BYTES: i32 = 1;
    pub const UNIT_PACKETS: i32 = 2;
    pub const TWO_RATE_THREE_COLOR: i32 = 0;
    pub const SINGLE_RATE_THREE_COLOR: i32 = 1;
}

/// `p4.config.v1.Meter`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Meter {
    #[prost(message, optional, tag = "1")]
    pub preamble: Option<Preamble>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<MeterSpec>,
    #[prost(int64, tag = "3")]
    pub size: i64,
}

/// `p4.config.v1.ControllerPacketMetadata`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ControllerPacketMetadata {
    #[prost(message, optional, tag = "1")]
    pub preamble: Option<Preamble>,
    #[prost(message, repeated, tag = "2")]
    pub metadata: Vec<ControllerPacketMetadataField>,
}

/// `p4.config.v1.ControllerPacketMetadata.Metadata`.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ControllerPacketMetadataField {
    #[prost(uint32, tag = "1")]
    pub id: u32,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(int32, tag = "4")]
    pub bitwidth: i32,
}

/// Wraps `msg` as a `google.protobuf.Any` of type `p4.v1.<name>` etc.
pub fn to_any(type_name: &str, msg: &impl ::prost::Message) -> Any {
    Any { type_url: format!("type.googleapis.com/{type_name}"), value: msg.encode_to_vec() }
}
