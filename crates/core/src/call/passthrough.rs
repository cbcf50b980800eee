//! The caller's own streams for a legacy argv (`animaworks-tool TOOL ARGS…`, a module's `cli_main`): the tool's
//! stdout and stderr pass through the runner as they come, byte for byte, but with every secret of the call
//! masked, a secret split across writes too ([`StreamMasker`] holds back at most the longest secret's length
//! less one byte, and only bytes that may start one). The tool's stdin is the caller's own.

use crate::policy::Masker;
use crate::policy::mask::StreamMasker;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::task::JoinHandle;

/// How long the copies may go on once the call has ended.
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// The copies of one process's stdout and stderr to the runner's.
pub(crate) struct Passthrough(Vec<JoinHandle<()>>);

/// Start copying `child`'s piped stdout and stderr to the runner's, masked by `masker`.
pub(crate) fn start(child: &mut awt_sys::process::Child, masker: &Masker) -> Passthrough {
    let mut v = Vec::new();
    if let Some(r) = child.stdout.take() {
        v.push(tokio::spawn(copy(r, tokio::io::stdout(), StreamMasker::new(masker))));
    }
    if let Some(r) = child.stderr.take() {
        v.push(tokio::spawn(copy(r, tokio::io::stderr(), StreamMasker::new(masker))));
    }
    Passthrough(v)
}

impl Passthrough {
    /// Wait until both streams have ended, once the call has: for at most [`LINGER`] (a process that left the
    /// call's group may hold them open), then what is left is not copied.
    pub(crate) async fn finish(self) {
        let aborts: Vec<_> = self.0.iter().map(JoinHandle::abort_handle).collect();
        let all = async {
            for t in self.0 {
                let _ = t.await;
            }
        };
        if tokio::time::timeout(LINGER, all).await.is_err() {
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
        }
    }
}

async fn copy<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(mut r: R, mut w: W, mut m: StreamMasker) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(64 * 1024);
    let mut open = true;
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        out.clear();
        m.push(&buf[..n], &mut out);
        // Why go on reading after the caller's side closed: the tool is not to block on a full pipe (as with
        // its output going nowhere).
        if open && (w.write_all(&out).await.is_err() || w.flush().await.is_err()) {
            open = false;
        }
    }
    out.clear();
    m.finish(&mut out);
    if open {
        let _ = w.write_all(&out).await;
        let _ = w.flush().await;
    }
}
