"""The runner's Python shim: runs AnimaWorks-style tool modules and tool-sdk-py tools under protocol v1.

Invocation (the runner embeds this package and starts ``_start.py``, which imports this module so that its byte
code is cached, with the same arguments; this file also runs as a plain script)::

    PYTHON .../animaworks_tool_sdk/_shim.py TOOL.py --schemas      # print the v1 document (protocol §2.1)
    PYTHON .../animaworks_tool_sdk/_shim.py TOOL.py                # one request on stdin, events on stdout
    PYTHON .../animaworks_tool_sdk/_shim.py TOOL.py --serve        # persistent worker (protocol §9)
    PYTHON .../animaworks_tool_sdk/_shim.py TOOL.py --cli ARG...   # the module's own cli_main([ARG...])

Exit codes: 0 done; 1 the tool reported an error; 2 misuse (bad arguments, no cli_main); 3 the module cannot
be imported (the last stderr line is then ``animaworks-tool: cannot import <path>: <ExcType>: <msg>``).

The module is imported once per process, registered in ``sys.modules`` (as ``animaworks_tool_<stem>``, never
as the bare stem, which could shadow a library of the same name) before it runs. A module that registers
tool-sdk-py actions is served by the SDK runtime; any other module follows the AnimaWorks convention.
Only os, sys and importlib are imported up front (and ``_wire``, which does JSON without the ``json`` package): this
file is on the path of every Python call. For the same reason annotations are strings rather than
``from __future__ import annotations``, which imports ``__future__``.
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# Run as a script, sys.path[0] is this package's own folder, which would make its private modules importable
# as top-level names. Put the package's parent first instead, so `animaworks_tool_sdk` is this embedded copy.
# (Imported by _start.py, the parent is first already.)
if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _HERE:
    sys.path[0] = os.path.dirname(_HERE)
elif not sys.path or os.path.abspath(sys.path[0] or os.curdir) != os.path.dirname(_HERE):
    sys.path.insert(0, os.path.dirname(_HERE))

import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402

from animaworks_tool_sdk import _wire  # noqa: E402

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

USAGE = "usage: _shim.py TOOL.py [--schemas | --serve | --cli ARG...]"
_PROFILE_FIELDS = ("expected_seconds", "background_eligible", "gated", "gated_as")


class ImportFailed(Exception):
    """The tool module raised while being imported; ``line`` is the stderr line that names it."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


def _cli_module_name(path: str, stem: str) -> str:
    """The name AnimaWorks' CLI imports a common or personal module under (its loggers are named after it):
    ``animaworks_personal_tool_<stem>`` for ``$ANIMAWORKS_ANIMA_DIR/tools``, ``animaworks_common_tool_<stem>`` for
    ``$ANIMAWORKS_DATA_DIR/common_tools``, else the runner's own name."""
    here = os.path.dirname(os.path.realpath(path))
    for var, sub, origin in (("ANIMAWORKS_ANIMA_DIR", "tools", "personal"),
                             ("ANIMAWORKS_DATA_DIR", "common_tools", "common")):
        base = os.environ.get(var)
        if base and os.path.realpath(os.path.join(base, sub)) == here:
            return f"animaworks_{origin}_tool_{stem}"
    return ""


def load_module(path: str, stem: str, modname: str = "") -> "ModuleType":
    """Import the tool file once, registered in sys.modules before it runs (dataclasses need that)."""
    safe = "".join(c if c.isalnum() or c == "_" else "_" for c in stem)
    modname = modname or "animaworks_tool_" + safe
    tool_dir = os.path.dirname(os.path.abspath(path))
    if tool_dir not in sys.path:
        sys.path.append(tool_dir)  # last, so that sibling helpers import but a tool never shadows a library
    try:
        loader = importlib.machinery.SourceFileLoader(modname, path)
        spec = importlib.util.spec_from_file_location(modname, path, loader=loader)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(modname, None)
        import traceback

        traceback.print_exc()
        raise ImportFailed(f"animaworks-tool: cannot import {path}: {type(exc).__name__}: {exc}") from None
    return module


# ---------------------------------------------------------------------------------------------------------
# The AnimaWorks ("legacy") convention


def _schemas(module: "ModuleType") -> "list[dict[str, Any]]":
    get = getattr(module, "get_tool_schemas", None)
    if not callable(get):
        return []
    schemas = get()
    if not isinstance(schemas, list) or not all(isinstance(s, dict) and isinstance(s.get("name"), str) for s in schemas):
        raise TypeError("get_tool_schemas() must return a list of objects with a string 'name'")
    return schemas


def _action_of(schema_name: str, stem: str) -> str:
    prefix = stem + "_"
    return schema_name[len(prefix):] if schema_name.startswith(prefix) and len(schema_name) > len(prefix) else schema_name


def _profile_for(profile: "Any", action: str) -> "dict[str, Any] | None":
    """EXECUTION_PROFILE entry for an action: key as written, then `_`→`-`, then `-`→`_` (CLI spelling).

    A gated entry found under another spelling gets ``gated_as`` = that key, so the grant is the one that
    works in AnimaWorks (``<tool>_delete-all``)."""
    if not isinstance(profile, dict):
        return None
    for key in (action, action.replace("_", "-"), action.replace("-", "_")):
        entry = profile.get(key)
        if isinstance(entry, dict):
            break
    else:
        return None
    out: dict[str, Any] = {}
    seconds = entry.get("expected_seconds")
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        out["expected_seconds"] = seconds
    if "background_eligible" in entry:
        out["background_eligible"] = bool(entry["background_eligible"])
    if "gated" in entry:
        out["gated"] = bool(entry["gated"])  # any truthy spelling gates: a gate must fail closed
    if isinstance(entry.get("gated_as"), str) and entry["gated_as"]:
        out["gated_as"] = entry["gated_as"]
    elif out.get("gated") and key != action:
        # AnimaWorks grants use the profile key as written (`github_create-issue`), so name the grant that way.
        out["gated_as"] = key
    return out


def _profile_problem(profile: "Any") -> "str | None":
    """Why an EXECUTION_PROFILE cannot be read (the runner then treats every action as gated), or None."""
    if profile is None:
        return None
    if not isinstance(profile, dict):
        return f"EXECUTION_PROFILE is a {type(profile).__name__}, not a dict of action -> profile"
    bad = [k for k, v in profile.items() if not isinstance(k, str) or not isinstance(v, dict)]
    if bad:
        return f"EXECUTION_PROFILE entries {bad[:5]!r} are not dicts"
    return None


def legacy_document(module: "ModuleType", stem: str) -> "dict[str, Any]":
    """The protocol v1 full-form document of an AnimaWorks module."""
    profile = getattr(module, "EXECUTION_PROFILE", None)
    actions = []
    for schema in _schemas(module):
        action = _action_of(schema["name"], stem)
        input_schema = schema.get("input_schema")
        if input_schema is None:
            input_schema = schema.get("parameters")
        entry: dict[str, Any] = {"name": action}
        if isinstance(schema.get("description"), str):
            entry["description"] = schema["description"]
        entry["input_schema"] = input_schema if input_schema is not None else {"type": "object"}
        prof = _profile_for(profile, action)
        if prof:
            entry["profile"] = prof
        actions.append(entry)
    doc: dict[str, Any] = {"protocol": 1, "name": stem}
    if isinstance(module.__doc__, str) and module.__doc__.strip():
        doc["description"] = module.__doc__.strip().split("\n\n")[0].replace("\n", " ")
    doc.update(events=True, persistent=True, cli=callable(getattr(module, "cli_main", None)), legacy=True)
    doc["actions"] = actions
    if isinstance(profile, dict):
        import json  # --schemas only, whose answer is cached

        # As written, made JSON-safe (str() for odd values, non-string keys dropped).
        doc["legacy_profile"] = json.loads(json.dumps(profile, default=str, skipkeys=True))
    problem = _profile_problem(profile)
    if problem:
        doc["legacy_profile_error"] = problem
    return doc


def _original_name(module: "ModuleType", stem: str, name: str, action: "Any") -> str:
    """Map the request's schema name back to the module's own (exact, then `<stem>_` + original)."""
    try:
        names = [s["name"] for s in _schemas(module)]
    except Exception:
        return name
    if name in names:
        return name
    for original in names:
        if f"{stem}_{original}" == name:
            return original
    if isinstance(action, str):
        wanted = {action, action.replace("-", "_"), action.replace("_", "-")}
        for original in names:
            if _action_of(original, stem) in wanted:
                return original
    return name  # no schema (e.g. get_tool_schemas() == []): dispatch() still gets the name, as AnimaWorks does


def _as_text(result: "Any") -> str:
    """The result text exactly as AnimaWorks makes it."""
    if isinstance(result, (dict, list)):
        return _wire.pretty(result)  # json.dumps(result, ensure_ascii=False, indent=2, default=str)
    if result is None:
        return "(no output)"
    return str(result)


def legacy_call(module: "ModuleType", stem: str, req: "dict[str, Any]", call_id: "str | None") -> bool:
    """Run one request through dispatch() or the function named like the schema; emit its final event."""
    context = req.get("context") if isinstance(req.get("context"), dict) else {}
    args = req.get("args") if req.get("args") is not None else {}
    if not isinstance(args, dict):
        _wire.emit(_wire.error_event("invalid_arguments", "args must be a JSON object"), call_id)
        return False
    original = _original_name(module, stem, req["name"], context.get("action"))
    args = dict(args)
    args["anima_dir"] = _wire.anima_dir_of(context)
    try:
        dispatch = getattr(module, "dispatch", None)
        if callable(dispatch):
            result = dispatch(original, args)
        else:
            func = getattr(module, original, None)
            if not callable(func):
                message = f"{stem} has no dispatch(name, args) and no function named {original}"
                _wire.emit(_wire.error_event("unknown_action", message), call_id)
                return False
            result = func(**args)
        text = _as_text(result)
    except Exception as exc:
        import traceback

        traceback.print_exc()
        _wire.emit(_wire.error_event(type(exc).__name__, f"Error executing {original}: {exc}"), call_id)
        return False
    _wire.emit({"type": "result", "result": text}, call_id)
    return True


# ---------------------------------------------------------------------------------------------------------


def _sdk_actions() -> "list[Any]":
    registry = sys.modules.get("animaworks_tool_sdk._action")
    return list(registry.REGISTRY) if registry is not None else []


def _import_failed(failure: "ImportFailed", mode: str) -> int:
    if mode != "schemas":
        call_id = None
        if mode == "serve":  # answer the first request, so the caller sees why, then stop
            for req, _ in _wire.read_requests(sys.stdin.buffer):
                ctx = req.get("context") if req else None
                call_id = ctx.get("call_id") if isinstance(ctx, dict) else None
                break
        _wire.emit(_wire.error_event("import_error", failure.line[len("animaworks-tool: "):]), call_id)
    sys.stderr.write(failure.line + "\n")
    sys.stderr.flush()
    return 3


def _refuse_gated_subcommands(stem: str, refused: "list[str]") -> None:
    """Refuse, before any handler runs, an argparse subcommand reached under any of its names (the name, an
    alias, an abbreviation) when one of those names is a gated key this anima may not run. The runner gates the
    argv words; only argparse knows which subparser a word selects (``add_parser("delete-all", aliases=["rmall"])``).
    """
    import argparse

    def canon(name: str) -> str:
        return name.replace("_", "-")

    gated = {canon(k): k for k in refused if isinstance(k, str)}
    original = argparse._SubParsersAction.__call__

    def guarded(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        name = values[0] if values else ""
        chosen = self._name_parser_map.get(name)
        if chosen is not None:
            names = [n for n, p in self._name_parser_map.items() if p is chosen]
        else:
            # Not a name argparse knows exactly: a prefix it might expand. Fail closed on any gated name it starts.
            names = [n for n in self._name_parser_map if isinstance(name, str) and name and n.startswith(name)]
        hit = next((gated[canon(n)] for n in names if canon(n) in gated), None)
        if hit is not None:
            sys.stdout.flush()
            sys.stderr.write(
                f"animaworks-tool: permission_denied: {stem}: subcommand {name!r} is the gated action {hit!r}; "
                f"its grant {stem}_{hit} is not in external_tools.allow of permissions.json\n"
            )
            sys.stderr.flush()
            os._exit(6)
        return original(self, parser, namespace, values, option_string)

    argparse._SubParsersAction.__call__ = guarded  # type: ignore[method-assign]


def _say_action_rules(stem: str, words: "list[str]") -> None:
    """AnimaWorks' `animaworks-tool` prints the [ACTION-RULE]s an anima keeps for a side-effect subcommand
    (`gmail send`, `chatwork send`, `call_human`, ...) on stderr before the module runs: so do we, through its own
    code. Only an anima with a `knowledge/` folder can hold one, and AnimaWorks' table of such subcommands is read
    from its file before the (slow) package is imported."""
    anima_dir = os.environ.get("ANIMAWORKS_ANIMA_DIR", "")
    if not anima_dir or not os.path.isdir(os.path.join(anima_dir, "knowledge")):
        return
    argv = [stem, *words]
    try:
        core = importlib.util.find_spec("core")
        dirs = (core.submodule_search_locations or []) if core else []
        where = [w for w in (os.path.join(d, "tooling", "action_gate.py") for d in dirs) if os.path.isfile(w)]
        if not where:
            return
        spec = importlib.util.spec_from_file_location("_animaworks_action_gate_table", where[0])
        table = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = table  # its dataclass looks itself up there
        try:
            spec.loader.exec_module(table)
        finally:
            sys.modules.pop(spec.name, None)
        name = table.action_tool_name_from_cli_argv(argv)
        if not name:
            return
        from pathlib import Path

        gate = importlib.import_module("core.tooling.action_gate")
        rendered = gate.format_action_rules(gate.find_action_rules(Path(anima_dir), name, {"argv": argv}))
    except Exception:  # as the original: a failed lookup never stops the call
        return
    if rendered:
        print(rendered, file=sys.stderr, flush=True)


def main(argv: "list[str]") -> int:
    if not argv or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    path, rest = argv[0], argv[1:]
    if rest == ["--schemas"]:
        mode = "schemas"
    elif not rest:
        mode = "call"
    elif rest == ["--serve"]:
        mode = "serve"
    elif rest[0] == "--cli":
        mode = "cli"
    else:
        print(USAGE, file=sys.stderr)
        return 2
    stem = os.path.splitext(os.path.basename(path))[0]
    if "ANIMAWORKS_TOOL_BROKER_FD" in os.environ:
        # Before the module is imported: its `from core... import get_credential` must bind the broker's.
        from animaworks_tool_sdk import _broker

        _broker.install_from_environment()
    # The module sees the argv it would see if run by itself; a cli_main the argv of AnimaWorks' CLI
    # (`animaworks-tool <tool> ARG...`: argparse names itself after it).
    sys.argv = ["animaworks-tool", stem, *rest[1:]] if mode == "cli" else [path, *rest]

    if mode == "cli":
        # stdout, stderr and the exit code belong to the module's own CLI; SystemExit passes through.
        _say_action_rules(stem, list(rest[1:]))
        try:
            module = load_module(path, stem, _cli_module_name(path, stem))
        except ImportFailed as failure:
            print(failure.line, file=sys.stderr)
            return 3
        cli_main = getattr(module, "cli_main", None)
        if not callable(cli_main):
            print(f"animaworks-tool: {stem} has no cli_main(argv); call its actions instead", file=sys.stderr)
            return 2
        refused = os.environ.pop("ANIMAWORKS_TOOL_CLI_REFUSE", None)
        if refused:
            import json

            try:
                keys = json.loads(refused)
            except ValueError:
                keys = None
            if not isinstance(keys, list):
                print("animaworks-tool: permission_denied: the runner's list of refused subcommands is unreadable",
                      file=sys.stderr)
                return 6
            _refuse_gated_subcommands(stem, keys)
        cli_main(list(rest[1:]))
        return 0

    _wire.take_stdout()  # from here on only protocol lines reach the real stdout
    try:
        module = load_module(path, stem)
    except ImportFailed as failure:
        return _import_failed(failure, mode)

    actions = _sdk_actions()
    if actions:
        from animaworks_tool_sdk import _runtime

        return _runtime.serve(mode, actions, module, stem)

    _wire.setup_logging()
    if mode == "schemas":
        try:
            doc = legacy_document(module, stem)
        except Exception as exc:
            import traceback

            traceback.print_exc()
            print(f"animaworks-tool: {path}: cannot describe the tool: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        _wire.write_line(_wire.dumps(doc))
        return 0
    ok = True
    for req, problem in _wire.read_requests(sys.stdin.buffer):
        ctx = req.get("context") if req else None
        call_id = ctx.get("call_id") if isinstance(ctx, dict) and mode == "serve" else None
        if req is None:
            _wire.emit(_wire.error_event("bad_request", problem))
            ok = False
        else:
            ok = legacy_call(module, stem, req, call_id)
        if mode == "call":
            break
    else:
        if mode == "call":
            _wire.emit(_wire.error_event("bad_request", "no request on stdin"))
            return 2
    return 0 if ok or mode == "serve" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
