//! Daemons' pathname UNIX sockets, hidden from confined tools. Neither seccomp (it sees no path) nor Landlock
//! (its scoping covers abstract sockets only; `connect` to a pathname socket needs no file system right it
//! governs) can refuse a `connect` to them, so they are hidden by mounts like the deny list: the usual daemons'
//! sockets and socket folders, and the folder of the task database's socket when its URL names one (a tool
//! reaching it would read every anima's rows). A grant that names such a path (or a path inside it) keeps it.

use std::path::{Path, PathBuf};

/// The usual daemons' sockets and the folders that hold them.
pub const DAEMON_SOCKETS: &[&str] = &[
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd",
    "/run/podman",
    "/run/crio",
    "/run/postgresql",
    "/var/run/postgresql",
    "/run/mysqld",
    "/var/run/mysqld",
    "/run/redis",
    "/var/run/redis",
    "/run/dbus",
    "/var/run/dbus",
    "/run/user",
    "/run/snapd.socket",
    "/run/snapd-snap.socket",
    "/run/systemd/private",
    "/run/systemd/io.systemd.ManagedOOM",
    "/tmp/.X11-unix",
];

/// The socket folders a Postgres URL names: a host that is a path (`host=/dir` in the query or a key-value
/// string, or a percent-encoded `%2Fdir` host).
pub fn postgres_socket_dirs(url: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut take = |v: &str| {
        for h in awt_sys::percent::decode(v).split(',') {
            if h.starts_with('/') {
                out.push(PathBuf::from(h));
            }
        }
    };
    for part in url.split(['?', '&', ' ']) {
        if let Some(v) = part.strip_prefix("host=") {
            take(v.trim_matches('\''));
        }
    }
    if let Some((_, rest)) = url.split_once("://") {
        let authority = rest.split(['/', '?']).next().unwrap_or("");
        let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        take(hosts);
    }
    out
}

/// The task database's URL: `$ANIMAWORKS_TOOL_TASKS_URL`, else the settings' `"tasks"."url"`.
fn task_db_url(data: &Path) -> Option<String> {
    crate::env_vars::TASKS_URL
        .get()
        .or_else(|| crate::settings::Settings::load(data).ok()?.tasks?.url)
}

/// Every socket path to hide from a call in deployment `data`, but those a grant names (`granted`, expanded).
pub fn hidden(data: &Path, granted: &[PathBuf]) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = DAEMON_SOCKETS.iter().map(PathBuf::from).collect();
    if let Some(url) = task_db_url(data) {
        all.extend(postgres_socket_dirs(&url));
    }
    all.retain(|p| !granted.iter().any(|g| g.starts_with(p)));
    all
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_folders_of_postgres_urls() {
        let dirs = |u: &str| postgres_socket_dirs(u);
        assert_eq!(dirs("postgres:///tasks?host=/run/pg"), vec![PathBuf::from("/run/pg")]);
        assert_eq!(dirs("postgresql://u@%2Fsrv%2Fpg/tasks"), vec![PathBuf::from("/srv/pg")]);
        assert_eq!(dirs("host=/tmp/pgs dbname=tasks"), vec![PathBuf::from("/tmp/pgs")]);
        assert_eq!(dirs("postgres://u:p@db.test:5432/tasks"), Vec::<PathBuf>::new());
        assert_eq!(
            dirs("postgres://u@localhost/tasks?sslmode=disable"),
            Vec::<PathBuf>::new()
        );
    }

    #[test]
    fn a_grant_keeps_what_it_names() {
        let h = hidden(
            Path::new("/nonexistent"),
            &[PathBuf::from("/run/postgresql/.s.PGSQL.5432")],
        );
        assert!(!h.contains(&PathBuf::from("/run/postgresql")));
        assert!(h.contains(&PathBuf::from("/run/docker.sock")));
    }
}
