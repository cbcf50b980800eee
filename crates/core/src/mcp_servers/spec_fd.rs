//! How the bridge gets its server's description: in a sealed-off memory file handed over as a descriptor, never
//! on its command line (which any process of the same user may read in `/proc/<pid>/cmdline`, and which carries
//! the server's declared `env`).

use std::io::{self, Read, Seek, Write};
use std::os::fd::{OwnedFd, RawFd};

/// The bridge's argument that names the descriptor: `__mcp-bridge --spec-fd N [--schemas | --serve]`.
pub const FLAG: &str = "--spec-fd";
/// The largest description read.
const MAX_SPEC: u64 = 4 * 1024 * 1024;

/// A memory file holding `spec`, read from its start, for the bridge to be handed.
pub(crate) fn make(spec: &str) -> io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create("animaworks-tool-mcp-spec", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut f = std::fs::File::from(fd);
    f.write_all(spec.as_bytes())?;
    f.rewind()?;
    Ok(OwnedFd::from(f))
}

/// The description handed over as descriptor `fd`, read whole and closed.
pub fn read(fd: RawFd) -> io::Result<String> {
    let owned = awt_sys::inherited::take(fd)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no descriptor {fd} was handed over")))?;
    let mut s = String::new();
    std::fs::File::from(owned).take(MAX_SPEC).read_to_string(&mut s)?;
    Ok(s)
}
