//! A throwaway Postgres cluster for tests: `initdb` and `postgres` from the distribution's package (found on PATH,
//! in /usr/local/bin or /usr/lib/postgresql/*/bin), on a free local port in a temporary folder, run as the
//! `postgres` user when the tests run as root (initdb refuses root). One shared cluster serves every test, each test
//! in a database of its own; a test that restarts the server starts its own cluster.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push("/usr/local/bin".into());
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| rd.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.extend(versions.into_iter().rev());
    dirs.into_iter()
        .find(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
        .map(|d| {
            std::fs::canonicalize(d.join("postgres"))
                .ok()
                .and_then(|p| p.parent().map(Path::to_path_buf))
                .unwrap_or(d)
        })
}

/// Why no test cluster can start here, if none can.
pub fn unavailable() -> Option<String> {
    match bin_dir() {
        Some(_) => None,
        None => Some(
            "no Postgres binaries (initdb, postgres) on PATH, in /usr/local/bin or /usr/lib/postgresql/*/bin; \
             install the distribution's postgresql package (.ci/run does) to run the Postgres tests"
                .into(),
        ),
    }
}

/// Skip the calling test, saying why, when no Postgres can run.
#[macro_export]
macro_rules! need_postgres {
    () => {
        if let Some(why) = $crate::pg_cluster::unavailable() {
            awt_sys::skipped!("{why}");
            return;
        }
    };
}

fn ids() -> Option<(u32, u32)> {
    // SAFETY: geteuid never fails.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let lookup = || {
        let o = Command::new("id").args(["-u", "postgres"]).output().ok()?;
        let uid: u32 = String::from_utf8_lossy(&o.stdout).trim().parse().ok()?;
        let o = Command::new("id").args(["-g", "postgres"]).output().ok()?;
        let gid: u32 = String::from_utf8_lossy(&o.stdout).trim().parse().ok()?;
        Some((uid, gid))
    };
    if let Some(x) = lookup() {
        return Some(x);
    }
    let _ = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            "postgres",
        ])
        .status();
    lookup()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub port: u16,
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    child: Mutex<Option<Child>>,
    next_db: AtomicU32,
}

impl Cluster {
    /// initdb and start a new cluster. `die_with_thread`: the server gets SIGINT when the spawning thread ends.
    pub fn start_new(die_with_thread: bool) -> Cluster {
        let bin = bin_dir().expect("need_postgres! first");
        let owner = ids();
        let dir = tempfile::Builder::new().prefix("awt-pg-").tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let data = dir.path().join("data");
        let sock = dir.path().join("sock");
        std::fs::create_dir(&sock).unwrap();
        std::fs::create_dir(&data).unwrap();
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&data, Some(uid), Some(gid)).unwrap();
            std::os::unix::fs::chown(&sock, Some(uid), Some(gid)).unwrap();
        }
        let mut init = Command::new(bin.join("initdb"));
        init.arg("-D")
            .arg(&data)
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-locale",
                "-E",
                "UTF8",
                "--no-sync",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some((uid, gid)) = owner {
            init.uid(uid).gid(gid);
        }
        let o = init.output().unwrap();
        assert!(
            o.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let c = Cluster {
            dir,
            port: free_port(),
            bin,
            owner,
            child: Mutex::new(None),
            next_db: AtomicU32::new(0),
        };
        c.start(die_with_thread);
        c
    }

    /// Start the server (again) on the same port and data.
    pub fn start(&self, die_with_thread: bool) {
        let mut cmd = Command::new(self.bin.join("postgres"));
        cmd.arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir.path().join("sock"))
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "max_connections=300",
                "-c",
                "fsync=off",
            ])
            .args(["-c", "full_page_writes=off", "-c", "logging_collector=off"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.path().join("server.log"))
                    .unwrap(),
            );
        if let Some((uid, gid)) = self.owner {
            cmd.uid(uid).gid(gid);
        }
        if die_with_thread {
            // SAFETY: prctl in the child before exec.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT);
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().unwrap();
        *self.child.lock().unwrap() = Some(child);
        let end = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < end, "postgres did not start: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        // Accepting TCP is not yet accepting queries (recovery may still run).
        let end = Instant::now() + Duration::from_secs(60);
        while query(&self.url("postgres"), "SELECT 1").is_err() {
            assert!(Instant::now() < end, "postgres does not answer: {}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Fast shutdown (SIGINT), waited for.
    pub fn stop(&self) {
        if let Some(mut c) = self.child.lock().unwrap().take() {
            // SAFETY: kill of our own child.
            unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
            let _ = c.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// A new empty database; its URL.
    pub fn new_db(&self) -> String {
        let n = self.next_db.fetch_add(1, Ordering::Relaxed);
        let name = format!("t{}_{n}", std::process::id());
        query(&self.url("postgres"), &format!("CREATE DATABASE {name}")).unwrap();
        self.url(&name)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Remove the folders of earlier shared clusters (they outlive their test process): those older than ten minutes
/// whose server is gone.
fn remove_stale() {
    let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("awt-pg-") {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(600));
        let server = std::fs::read_to_string(e.path().join("data/postmaster.pid"))
            .ok()
            .and_then(|t| t.lines().next().and_then(|l| l.trim().parse::<i32>().ok()));
        // SAFETY: kill with signal 0 only asks whether the process exists.
        let running = server.is_some_and(|pid| unsafe { libc::kill(pid, 0) } == 0);
        if old && !running {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The cluster every test shares (started on first use; stopped when the test process ends).
pub fn shared() -> &'static Cluster {
    static C: OnceLock<&'static Cluster> = OnceLock::new();
    C.get_or_init(|| {
        remove_stale();
        let (tx, rx) = std::sync::mpsc::channel();
        // Why a thread that never ends: the server's parent-death signal follows the thread that started it.
        std::thread::spawn(move || {
            let c: &'static Cluster = Box::leak(Box::new(Cluster::start_new(true)));
            tx.send(c).unwrap();
            loop {
                std::thread::park();
            }
        });
        rx.recv().unwrap()
    })
}

/// Run SQL; the rows as text.
pub fn query(url: &str, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .map_err(|e| e.to_string())?;
        let h = tokio::spawn(conn);
        let msgs = client.simple_query(sql).await.map_err(|e| format!("{e:?}"))?;
        drop(client);
        let _ = h.await;
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => {
                    Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
                }
                _ => None,
            })
            .collect())
    })
}

/// One value of a one-row query.
pub fn scalar(url: &str, sql: &str) -> String {
    query(url, sql).unwrap()[0][0].clone().unwrap_or_default()
}
