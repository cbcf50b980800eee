"""install, uninstall, status: run by the virtualenv's own interpreter (``animaworks-tool animaworks …``).

    python -m animaworks_tool_adapter._manage install --venv DIR --runner PATH [--replace-script]
    python -m animaworks_tool_adapter._manage uninstall --venv DIR
    python -m animaworks_tool_adapter._manage status --venv DIR [--json]
"""
import json
import os
import shutil
import subprocess
import sys
import sysconfig

PACKAGE = "animaworks_tool_adapter"
PTH = "animaworks_tool_adapter.pth"
PTH_LINE = "import animaworks_tool_adapter._hook as _awt_hook; _awt_hook.install()\n"
SCRIPT = "animaworks-tool"


def _paths(venv):
    site = sysconfig.get_paths()["purelib"]
    return {
        "site": site,
        "pth": os.path.join(site, PTH),
        "package": os.path.join(site, PACKAGE),
        "config": os.path.join(site, PACKAGE, "config.json"),
        "script": os.path.join(venv, "bin", SCRIPT),
        "orig": os.path.join(venv, "bin", SCRIPT + ".orig"),
    }


def _decision():
    import importlib.util

    from animaworks_tool_adapter import _hook

    spec = importlib.util.find_spec("core")
    core_dir = (list(spec.submodule_search_locations or []) or [None])[0] if spec else None
    if core_dir is None:
        return False, None, "AnimaWorks (its core package) is not installed in this virtualenv"
    return _hook.decide(core_dir)


def _same_venv(venv):
    return os.path.realpath(sys.prefix) == os.path.realpath(venv)


def install(venv, runner, replace_script):
    p = _paths(venv)
    ok, version, why = _decision()
    if not ok:
        print(f"animaworks-tool animaworks install: {why}; nothing was changed", file=sys.stderr)
        return 1
    if not (os.path.isfile(runner) and os.access(runner, os.X_OK)):
        print(f"animaworks-tool animaworks install: the runner {runner} is not an executable file", file=sys.stderr)
        return 2
    was = os.path.exists(p["pth"])
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.realpath(here) != os.path.realpath(p["package"]):
        shutil.rmtree(p["package"], ignore_errors=True)
        os.makedirs(p["package"])
        for name in sorted(os.listdir(here)):
            if name.endswith(".py"):
                shutil.copyfile(os.path.join(here, name), os.path.join(p["package"], name))
    if replace_script:
        script = p["script"]
        if not os.path.exists(p["orig"]):
            if os.path.lexists(script):
                os.replace(script, p["orig"])
        tmp = script + ".awt-tmp"
        shutil.copyfile(runner, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, script)
        runner = script
    with open(p["config"], "w", encoding="utf-8") as f:
        json.dump({"runner": os.path.abspath(runner), "animaworks": version}, f)
        f.write("\n")
    # The hook last: until it exists, nothing of the above is used.
    with open(p["pth"], "w", encoding="utf-8") as f:
        f.write(PTH_LINE)
    print(
        f"{'updated' if was else 'installed'}: the AnimaWorks adapter in {p['site']} for AnimaWorks {version}, "
        f"runner {os.path.abspath(runner)}"
        + (f"; {SCRIPT} replaced (the original is {p['orig']})" if replace_script else "")
    )
    print("restart the AnimaWorks server for it to take effect")
    return 0


def uninstall(venv):
    p = _paths(venv)
    done = []
    if os.path.exists(p["pth"]):
        os.remove(p["pth"])
        done.append(f"removed {p['pth']}")
    if os.path.isdir(p["package"]):
        shutil.rmtree(p["package"])
        done.append(f"removed {p['package']}")
    if os.path.lexists(p["orig"]):
        os.replace(p["orig"], p["script"])
        done.append(f"restored {p['script']}")
    print("; ".join(done) if done else f"the AnimaWorks adapter is not installed in {venv}: nothing to remove")
    return 0


def _runner_state(config_path):
    try:
        with open(config_path, encoding="utf-8") as f:
            runner = json.load(f).get("runner")
    except (OSError, ValueError, AttributeError) as e:
        return None, f"config.json cannot be read: {e}"
    if not isinstance(runner, str) or not (os.path.isfile(runner) and os.access(runner, os.X_OK)):
        return runner, "missing"
    try:
        out = subprocess.run([runner, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return runner, f"does not run: {e}"
    if out.returncode != 0:
        return runner, f"--version exited with {out.returncode}"
    return runner, "ok"


def status(venv, as_json, doctor=False):
    from animaworks_tool_adapter._known import PATHS

    p = _paths(venv)
    installed = os.path.exists(p["pth"]) and os.path.isdir(p["package"])
    ok, version, why = _decision()
    runner, runner_state = _runner_state(p["config"]) if installed else (None, None)
    replaced = os.path.lexists(p["orig"])
    active = installed and ok and runner_state == "ok"
    report = {
        "venv": os.path.abspath(venv),
        "installed": installed,
        "animaworks": version,
        "known": ok,
        "why": why or None,
        "runner": runner,
        "runner_state": runner_state,
        "script_replaced": replaced,
        "active": installed and ok,
        "paths": [{"path": k, "function": f, "what": w} for k, f, w in PATHS] if installed and ok else [],
    }
    if as_json:
        print(json.dumps(report))
        return 0
    head = f"AnimaWorks adapter: {os.path.abspath(venv)}"
    if doctor and not installed and version is None:
        return 0  # a virtualenv without AnimaWorks: nothing to say in doctor
    if not installed:
        state = "known" if ok else f"not known ({why})"
        print(f"{head}: not installed (AnimaWorks {version or 'absent'}: {state}; "
              f"`animaworks-tool animaworks install --venv {venv}`)")
        return 0
    if not ok:
        print(f"{head}: installed but NOT active, AnimaWorks runs as it is: {why}")
        return 0
    print(f"{head}: installed for AnimaWorks {version}; runner {runner} ({runner_state})"
          + ("; animaworks-tool script replaced" if replaced else ""))
    if not active:
        print("  the runner is not usable: rerouted paths fail closed (no file-tool schemas, error answers)")
    for k, f, w in PATHS:
        print(f"  rerouted {k}: {f}: {w}")
    return 0


def main(argv):
    import argparse

    ap = argparse.ArgumentParser(prog="animaworks-tool animaworks")
    sub = ap.add_subparsers(dest="verb", required=True)
    i = sub.add_parser("install")
    i.add_argument("--venv", required=True)
    i.add_argument("--runner", required=True)
    i.add_argument("--replace-script", action="store_true")
    u = sub.add_parser("uninstall")
    u.add_argument("--venv", required=True)
    s = sub.add_parser("status")
    s.add_argument("--venv", required=True)
    s.add_argument("--json", action="store_true")
    s.add_argument("--doctor", action="store_true", help="say nothing of a virtualenv without AnimaWorks")
    a = ap.parse_args(argv)
    if not _same_venv(a.venv):
        print(f"animaworks-tool animaworks {a.verb}: run by {sys.executable}, not {a.venv}'s interpreter",
              file=sys.stderr)
        return 2
    if a.verb == "install":
        return install(a.venv, a.runner, a.replace_script)
    if a.verb == "uninstall":
        return uninstall(a.venv)
    return status(a.venv, a.json, a.doctor)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
