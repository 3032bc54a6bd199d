//! AF_PACKET (TPACKET_V3) ports.
