//! How many confined starts, and cold probes, run at once: asked by the starter threads ([`crate::spawn`]), the
//! probe runtime ([`crate::probe`]) and the temp dirs kept for the next calls (`sandbox/tmp.rs`), none of which
//! imports the others for it.

/// How many confined starts, and cold probes (`probe::manifests`), run at once: `4 × cores`, at least 8. Why four
/// a core: a probe holds its slot off the CPU for much of its life (its pipes; its namespaces' teardown waits for
/// an RCU grace period), and with two a core a cold listing left the cores partly idle. Asked once: the answer
/// reads the process's cgroup files (its CPU quota), which would cost every sandboxed start several opens.
pub(crate) fn start_width() -> usize {
    static W: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *W.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get() * 4)
            .unwrap_or(8)
            .max(8)
    })
}
