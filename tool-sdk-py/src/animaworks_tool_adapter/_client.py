"""The adapter's side of the runner: its path, the tools' manifests (memoised by file), long-lived call servers.

Every failure to reach the runner is :class:`RunnerUnavailable`; the patches turn it into AnimaWorks' own error
texts. Nothing here ever imports a tool module.
"""
import json
import os
import subprocess
import sys
import threading

# Bounds on what is read from the runner (a manifest listing, an error tail).
_MAX_LISTING = 64 << 20
_TAIL = 2000


class RunnerUnavailable(Exception):
    """The runner is missing, does not start, or answers nothing usable."""


def runner_path():
    """``$ANIMAWORKS_TOOL_BIN``, else the runner ``install`` recorded in the adapter's config.json."""
    env = os.environ.get("ANIMAWORKS_TOOL_BIN")
    if env:
        return env
    cfg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.json")
    try:
        with open(cfg, encoding="utf-8") as f:
            runner = json.load(f).get("runner")
    except (OSError, ValueError, AttributeError) as e:
        raise RunnerUnavailable(f"the adapter's {cfg} cannot be read: {e}") from None
    if not isinstance(runner, str) or not runner:
        raise RunnerUnavailable(f"the adapter's {cfg} names no runner")
    return runner


def _python():
    return os.environ.get("ANIMAWORKS_PYTHON") or sys.executable


def data_dir():
    try:
        from core.paths import get_data_dir  # AnimaWorks' own rule

        return str(get_data_dir())
    except Exception:
        env = os.environ.get("ANIMAWORKS_DATA_DIR")
        return os.path.abspath(os.path.expanduser(env or "~/.animaworks"))


def dirs_of(path):
    """``(anima_dir or None, data_dir)`` of a tool file, from where AnimaWorks found it."""
    folder = os.path.dirname(os.path.abspath(path))
    top = os.path.dirname(folder)
    if os.path.basename(folder) == "common_tools":
        return None, top
    return top, data_dir()


def _argv(exe, anima_dir, data):
    argv = [exe, "--data-dir", data, "--python", _python()]
    if anima_dir:
        argv += ["--anima-dir", anima_dir]
    return argv


def _env(anima_dir):
    env = dict(os.environ)
    env.pop("ANIMAWORKS_TOOL_PROTOCOL", None)
    if not anima_dir:
        env.pop("ANIMAWORKS_ANIMA_DIR", None)
    return env


# ---------------------------------------------------------------------------------------------------------------
# Manifests

_lock = threading.Lock()
_memo = {}  # path -> (stat key, manifest or None, why)


def forget():
    """Drop every memoised manifest (refresh_tools, share_tool)."""
    with _lock:
        _memo.clear()


def _stat_key(path):
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def manifests(tools):
    """``{name: (manifest or None, why)}`` for ``{name: path}``; a file unchanged since it was last asked about is
    answered from memory. Raises :class:`RunnerUnavailable`."""
    out = {}
    missing = {}
    with _lock:
        for name, path in tools.items():
            path = str(path)
            try:
                key = _stat_key(path)
            except OSError as e:
                out[name] = (None, f"{path}: {e.strerror or e}")
                continue
            hit = _memo.get(path)
            if hit is not None and hit[0] == key:
                out[name] = hit[1:]
                continue
            missing.setdefault(dirs_of(path), {})[name] = (path, key)
    # Common tools asked with one anima's personal ones: one listing (the common tier is the same for every anima).
    for (anima_dir, data) in list(missing):
        common = missing.get((None, data))
        if anima_dir is not None and common is not None:
            missing[(anima_dir, data)].update(missing.pop((None, data)))
    for (anima_dir, data), group in missing.items():
        listing = _ask_manifests(anima_dir, data)
        by_path = {}
        for t in listing.get("tools", []):
            by_path[os.path.realpath(t.get("path", ""))] = t
        problems = {os.path.realpath(p.get("path", "")): p.get("message", "") for p in listing.get("problems", [])}
        with _lock:
            for name, (path, key) in group.items():
                real = os.path.realpath(path)
                t = by_path.get(real)
                if t is not None and t.get("name") == name:
                    res = (t, "")
                else:
                    res = (None, problems.get(real) or f"the runner does not list {path} as the tool {name}")
                _memo[path] = (key,) + res
                out[name] = res
    return out


def manifest_of(name, path):
    return manifests({name: path})[name]


def _ask_manifests(anima_dir, data):
    exe = runner_path()
    argv = _argv(exe, anima_dir, data) + ["animaworks", "manifests"]
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(anima_dir),
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise RunnerUnavailable(f"cannot run {exe}: {e}") from None
    if done.returncode != 0:
        tail = done.stderr[-_TAIL:].decode("utf-8", "replace").strip()
        raise RunnerUnavailable(f"{exe} animaworks manifests exited with {done.returncode}: {tail}")
    if len(done.stdout) > _MAX_LISTING:
        raise RunnerUnavailable(f"{exe} animaworks manifests: the listing is over {_MAX_LISTING} bytes")
    try:
        listing = json.loads(done.stdout)
    except ValueError as e:
        raise RunnerUnavailable(f"{exe} animaworks manifests: not JSON ({e})") from None
    if not isinstance(listing, dict):
        raise RunnerUnavailable(f"{exe} animaworks manifests: not a JSON object")
    return listing


# ---------------------------------------------------------------------------------------------------------------
# Calls: one `use-tool --serve` per anima, kept

_servers = {}
_servers_lock = threading.Lock()


class _Serve:
    def __init__(self, argv, env):
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        except OSError as e:
            raise RunnerUnavailable(f"cannot run {argv[0]}: {e}") from None
        self.lock = threading.Lock()  # the waiting calls; never held while blocked on the pipe
        self.write_lock = threading.Lock()
        self.waiting = {}
        self.count = 0
        self.dead = None
        threading.Thread(target=self._read, name="animaworks-tool-adapter", daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            if not isinstance(answer, dict):
                continue
            with self.lock:
                waiter = self.waiting.pop(str(answer.get("id")), None)
            if waiter is not None:
                waiter[1].append(answer)
                waiter[0].set()
        code = self.proc.wait()
        with self.lock:
            self.dead = f"the runner's use-tool --serve ended (exit code {code})"
            for event, _ in self.waiting.values():
                event.set()
            self.waiting.clear()

    def call(self, request):
        event, slot = threading.Event(), []
        with self.lock:
            if self.dead:
                raise RunnerUnavailable(self.dead)
            self.count += 1
            rid = f"aw{self.count}"
            self.waiting[rid] = (event, slot)
        line = json.dumps(dict(request, id=rid), ensure_ascii=False).encode("utf-8") + b"\n"
        try:
            with self.write_lock:
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
        except (OSError, ValueError) as e:
            with self.lock:
                self.waiting.pop(rid, None)
            raise RunnerUnavailable(f"the runner's use-tool --serve does not read: {e}") from None
        event.wait()
        if not slot:
            raise RunnerUnavailable(self.dead or "the runner's use-tool --serve gave no answer")
        return slot[0]

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass


def _server(anima_dir, data):
    exe = runner_path()
    key = (exe, anima_dir, data, _python())
    with _servers_lock:
        s = _servers.get(key)
        if s is None or s.dead:
            s = _Serve(_argv(exe, anima_dir, data) + ["use-tool", "--serve"], _env(anima_dir))
            _servers[key] = s
        return s


def call(anima_dir, data, request):
    """One call through the runner: ``("ok" | "tool_error", text)`` or ``("refused", error object)``."""
    answer = _server(anima_dir, data).call(request)
    answer.pop("id", None)
    if answer.get("status") == "ok" and isinstance(answer.get("result"), str):
        return "ok", answer["result"]
    if answer.get("code") == "tool_error" and isinstance(answer.get("result"), str):
        return "tool_error", answer["result"]
    if answer.get("status") == "error" and "error_type" in answer:
        return "refused", answer
    raise RunnerUnavailable(f"the runner's use-tool --serve answered {json.dumps(answer)[:_TAIL]}")


def _forget_servers_in_child():
    # A forked child shares the parent's pipes but not its reader threads: it starts servers of its own.
    global _servers, _servers_lock, _lock
    _servers = {}
    _servers_lock = threading.Lock()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_servers_in_child)


def close_all():
    with _servers_lock:
        for s in _servers.values():
            s.close()
        _servers.clear()
