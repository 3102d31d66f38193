//! Files named by the user: bounded reads ([`read`]) and outputs replaced only where a regular
//! file or nothing is ([`write`]). Both refuse devices, FIFOs and links by the file's kind.

pub mod read;
pub mod write;
