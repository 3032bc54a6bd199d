//! pcap
