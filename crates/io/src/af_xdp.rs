//! AF_XDP ports.
