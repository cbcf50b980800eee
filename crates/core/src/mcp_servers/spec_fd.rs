//! How the bridge gets its server's description: in a sealed-off memory file handed over as a descriptor, never
//! on its command line (which any process of the same user may read in `/proc/<pid>/cmdline`, and which carries
//! the server's declared `env`).
//!
//! Only the runner makes such a file, so only the runner starts a bridge: a description given any other way (an
//! argument, a file opened by a shell's `3<file`) is refused. The bridge starts whatever command it is told,
//! outside any sandbox of its own; a shell allowed to run `animaworks-tool` and nothing else must not make it a
//! way to run anything.

use rustix::fs::SealFlags;
use std::io::{self, Read, Seek, Write};
use std::os::fd::{OwnedFd, RawFd};

/// The bridge's argument that names the descriptor: `__mcp-bridge --spec-fd N [--schemas | --serve]`.
pub const FLAG: &str = "--spec-fd";
/// The largest description read.
const MAX_SPEC: u64 = 4 * 1024 * 1024;

/// The seals of a description: nothing may write, grow, shrink or unseal it once made.
fn sealed() -> SealFlags {
    SealFlags::SEAL | SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK
}

/// A sealed memory file holding `spec`, read from its start, for the bridge to be handed.
pub(crate) fn make(spec: &str) -> io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create(
        "animaworks-tool-mcp-spec",
        rustix::fs::MemfdFlags::CLOEXEC | rustix::fs::MemfdFlags::ALLOW_SEALING,
    )?;
    let mut f = std::fs::File::from(fd);
    f.write_all(spec.as_bytes())?;
    f.rewind()?;
    rustix::fs::fcntl_add_seals(&f, sealed())?;
    Ok(OwnedFd::from(f))
}

/// The description handed over as descriptor `fd`, read whole and closed; refused unless it is a sealed memory
/// file, as only `make` makes.
pub fn read(fd: RawFd) -> io::Result<String> {
    let owned = awt_sys::inherited::take(fd)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no descriptor {fd} was handed over")))?;
    let seals = rustix::fs::fcntl_get_seals(&owned).unwrap_or(SealFlags::empty());
    if !seals.contains(sealed()) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("descriptor {fd} is not a description the runner made (the bridge is started only by the runner, for a declared MCP server)"),
        ));
    }
    let mut s = String::new();
    std::fs::File::from(owned).take(MAX_SPEC).read_to_string(&mut s)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;

    #[test]
    fn only_a_sealed_description_is_read() {
        let fd = make("{\"name\": \"x\"}").unwrap().into_raw_fd();
        assert_eq!(read(fd).unwrap(), "{\"name\": \"x\"}");
        // What a shell can hand over (`3<spec.json`): a plain file, refused.
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"{\"name\": \"x\", \"command\": \"sh\"}").unwrap();
        f.rewind().unwrap();
        let e = read(f.into_raw_fd()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    }
}
