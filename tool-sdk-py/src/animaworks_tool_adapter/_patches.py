"""The replacements: each keeps its original's signature, inputs and AnimaWorks' own texts, and asks the runner
where the original imports a tool module. None of them ever falls back to importing one."""
import functools
import json
import logging
import os
import sys

from animaworks_tool_adapter import _client
from animaworks_tool_adapter._client import RunnerUnavailable

log = logging.getLogger("animaworks.tool_adapter")
# What apply() replaced: "module.qualname" -> the original function.
ORIGINALS = {}
# Arguments AnimaWorks adds for its own dispatch; the runner gives the module its own anima_dir.
_OWN_ARGS = ("anima_dir", "_trigger")


class ProfileUnreadable(Exception):
    """The runner could not read the module's EXECUTION_PROFILE: the gate check fails closed."""


def _replace(owner, attr, modname, make):
    original = getattr(owner, attr)
    if getattr(original, "__animaworks_tool_adapter__", False):
        return
    new = functools.wraps(original)(make(original))
    new.__animaworks_tool_adapter__ = True
    ORIGINALS[f"{modname}.{getattr(original, '__qualname__', attr)}"] = original
    setattr(owner, attr, new)


def apply(name, module):
    if name == "core.tooling.schemas.loader":
        _replace(module, "load_personal_tool_schemas", name, lambda o: _load_personal_tool_schemas(module))
    elif name == "core.tooling.dispatch":
        _replace(module.ExternalToolDispatcher, "_dispatch_from_files", name, lambda o: _dispatch_from_files(module))
    elif name == "core.tooling.handler":
        _replace(module.ToolHandler, "_handle_use_tool", name, _handle_use_tool)
    elif name == "core.tooling.permissions":
        _replace(module, "_load_profile_from_file", name, lambda o: _load_profile_from_file)
    elif name == "core.tooling.handler_skills":
        _replace(module.SkillsToolsMixin, "_handle_refresh_tools", name, _forgetting)
        _replace(module.SkillsToolsMixin, "_handle_share_tool", name, _forgetting)


def _schema_entries(manifest):
    """AnimaWorks' normalised schemas (``_normalise_schema``) of one manifest, in the module's order."""
    return [
        {"name": a["schema_name"], "description": a.get("description", ""), "parameters": a.get("input_schema", {})}
        for a in manifest.get("actions", [])
    ]


def _load_personal_tool_schemas(loader):
    def load_personal_tool_schemas(personal_tools):
        logger = getattr(loader, "logger", log)
        schemas = []
        try:
            found = _client.manifests(personal_tools)
        except RunnerUnavailable as e:
            # As the original does for a module that fails: no schemas for it (here: for every file tool).
            log.warning("animaworks-tool adapter: no schemas for common and personal tools: %s", e)
            return schemas
        for tool_name in personal_tools:
            manifest, why = found.get(tool_name, (None, "not asked"))
            if manifest is None:
                logger.debug("Failed to load personal tool schemas: %s (%s)", tool_name, why)
                continue
            schemas.extend(_schema_entries(manifest))
        return schemas

    return load_personal_tool_schemas


def _call_args(args):
    return {k: v for k, v in args.items() if k not in _OWN_ARGS}


def _anima_for(args, path):
    given = args.get("anima_dir")
    return str(given) if given else _client.dirs_of(path)[0]


def _dispatch_from_files(dispatch):
    def _dispatch_from_files(self, name, args):
        logger = getattr(dispatch, "logger", log)
        if not self._personal_tools:
            return None
        tool_names = self._candidate_tool_names(name, self._personal_tools, set(self._personal_tools))
        if not tool_names:
            return None
        for tool_name in tool_names:
            file_path = self._personal_tools[tool_name]
            try:
                manifest, why = _client.manifest_of(tool_name, file_path)
                if manifest is None:
                    # The original: the module's import raised.
                    logger.warning("Tool %s (%s) failed: %s", tool_name, name, why)
                    return f"Error executing {name}: {why}"
                if name not in [a["schema_name"] for a in manifest.get("actions", [])]:
                    continue
                kind, answer = _client.call(
                    _anima_for(args, file_path), _client.data_dir(), {"name": name, "args": _call_args(args)}
                )
            except RunnerUnavailable as e:
                logger.warning("Tool %s (%s) failed: %s", tool_name, name, e)
                return f"Error executing {name}: {e}"
            if kind == "refused":
                return json.dumps(answer, ensure_ascii=False)
            return answer
        return None

    return _dispatch_from_files


def _handle_use_tool(original):
    def _handle_use_tool(self, args):
        tool_name = args.get("tool_name", "")
        action = args.get("action", "")
        personal_tools = self._external._personal_tools or {}
        try:
            from core.integrations import TOOL_MODULES
        except Exception:
            TOOL_MODULES = {}
        # Core tools, and every answer the original gives before it loads a module, stay the original's.
        if not tool_name or not action or tool_name not in personal_tools or tool_name in TOOL_MODULES:
            return original(self, args)
        handler = sys.modules["core.tooling.handler"]  # the original's own globals: its error helper, its logger
        _error_result = handler._error_result
        tool_args = args.get("args") or {}
        if not isinstance(tool_args, dict):
            tool_args = {}
        schema_name = f"{tool_name}_{action}"
        from pathlib import Path

        from core.tooling.permissions import check_tool_access

        decision = check_tool_access(
            self._anima_dir, tool_name, action, origin="personal", tool_file=Path(personal_tools[tool_name])
        )
        if not decision.allowed:
            return _error_result("PermissionDenied", decision.message)
        try:
            kind, answer = _client.call(
                str(self._anima_dir),
                _client.data_dir(),
                {"tool_name": tool_name, "action": action, "args": _call_args(tool_args)},
            )
        except RunnerUnavailable as e:
            from core.exceptions import ToolExecutionError

            handler.logger.warning("use_tool dispatch failed: %s %s – %s", tool_name, action, e)
            raise ToolExecutionError(f"use_tool execution failed: {tool_name}/{action}: {e}") from None
        if kind == "refused":
            return json.dumps(answer, ensure_ascii=False)
        return self._attach_action_rules(schema_name, tool_args, answer)

    return _handle_use_tool


def _load_profile_from_file(tool_file):
    if tool_file is None:
        return None
    manifest, _why = _client.manifest_of(os.path.splitext(os.path.basename(str(tool_file)))[0], tool_file)
    if manifest is None:
        return None  # the module cannot be loaded: as the original, no profile (its call fails in the runner)
    if manifest.get("legacy_profile_error"):
        raise ProfileUnreadable(manifest["legacy_profile_error"])
    return manifest.get("legacy_profile")


def _forgetting(original):
    def handle(self, args):
        try:
            return original(self, args)
        finally:
            _client.forget()

    return handle
