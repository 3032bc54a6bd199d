//! Checksums: RFC 1071 Internet checksum, IPv4 header and UDP/TCP pseudo-header sums, RFC 1624 incremental update.
