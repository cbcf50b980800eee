"""The credential broker's client: ``get_credential`` asks the runner, over the descriptor the runner handed over
for this call (``$ANIMAWORKS_TOOL_BROKER_FD``), instead of reading config.json, the vault or shared/credentials.json,
which the sandbox hides. The runner checks each name against the anima's grants and audits it (docs/credentials.md).

:func:`install` also makes AnimaWorks' own ``get_credential`` (``core.integrations._base``, its alias
``core.tools._base``, and ``core.credentials`` as the tool-creator guide imports it) ask the broker, so an unedited
module works when its credential is granted and gets AnimaWorks' ``ToolConfigError`` naming the grant when not.
Where AnimaWorks is installed but has no ``core.credentials`` (0.15), that module stands in for it.
"""
import os
import sys
import threading

from . import _wire

_FD = None
_LOCK = threading.Lock()
_PATCHED = ("core.credentials", "core.integrations._base", "core.tools._base")


class BrokerAnswer(Exception):
    """The broker did not hand the value out: ``answer`` is ``refused``, ``missing`` or ``error``."""

    def __init__(self, answer: str, message: str, grant: "str | None") -> None:
        super().__init__(message)
        self.answer = answer
        self.grant = grant


def available() -> bool:
    return _FD is not None


def ask(name: str, key_name: str = "api_key", env_var: "str | None" = None, per_anima: bool = False) -> str:
    """The value of credential ``name``, or :class:`BrokerAnswer`."""
    req = {"name": name, "key": key_name, "env": env_var, "per_anima": bool(per_anima)}
    line = (_wire.dumps(req) + "\n").encode("utf-8")
    with _LOCK:
        view = memoryview(line)
        while view:
            n = os.write(_FD, view)
            view = view[n:]
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = os.read(_FD, 65536)
            if not chunk:
                raise BrokerAnswer("error", "the runner's credential broker went away", None)
            buf += chunk
    import json

    answer = json.loads(buf.decode("utf-8"))
    if answer.get("ok"):
        return answer["value"]
    raise BrokerAnswer(answer.get("answer", "error"), answer.get("message", "refused"), answer.get("grant"))


def _tool_config_error() -> type:
    try:
        from core.exceptions import ToolConfigError

        return ToolConfigError
    except Exception:  # AnimaWorks is not installed, or broken
        return _StandInToolConfigError


class _StandInToolConfigError(Exception):
    pass


_StandInToolConfigError.__name__ = "ToolConfigError"
_StandInToolConfigError.__qualname__ = "ToolConfigError"


def animaworks_get_credential(
    credential_name: str,
    tool_name: str,
    key_name: str = "api_key",
    env_var: "str | None" = None,
    **kwargs: "object",
) -> str:
    """AnimaWorks 0.15's ``get_credential``, answered by the runner's broker."""
    try:
        return ask(credential_name, key_name, env_var, bool(kwargs.get("per_anima", False)))
    except BrokerAnswer as refused:
        raise _tool_config_error()(f"Tool '{tool_name}' requires credential '{credential_name}': {refused}") from None


class _Patching:
    """Wraps a loader: once the module ran, its ``get_credential`` is the broker's."""

    def __init__(self, loader: "object") -> None:
        self._loader = loader

    def create_module(self, spec: "object") -> "object":
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create else None

    def exec_module(self, module: "object") -> None:
        self._loader.exec_module(module)
        module.get_credential = animaworks_get_credential


class _StandIn:
    """The loader of ``core.credentials``, which the tool-creator guide imports and AnimaWorks 0.15 lacks."""

    def create_module(self, spec: "object") -> None:
        return None

    def exec_module(self, module: "object") -> None:
        module.get_credential = animaworks_get_credential
        module.ToolConfigError = _tool_config_error()


class _Finder:
    """Patches AnimaWorks' modules as they are imported; stands in for nothing else (a module that finds no
    AnimaWorks in its interpreter fails as it would there)."""

    def find_spec(self, name: str, path: "object" = None, target: "object" = None) -> "object":
        if name not in _PATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Patching(spec.loader)
                return spec
        if name == "core.credentials" and "core" in sys.modules:
            import importlib.machinery

            return importlib.machinery.ModuleSpec(name, _StandIn())
        return None


def install(fd: int) -> None:
    """Use descriptor ``fd`` for every ``get_credential`` of this process (not of the processes it starts)."""
    global _FD
    try:
        os.set_inheritable(fd, False)
    except OSError:
        return
    _FD = fd
    sys.meta_path.insert(0, _Finder())


def install_from_environment() -> None:
    value = os.environ.pop("ANIMAWORKS_TOOL_BROKER_FD", None)
    if value and value.isdigit():
        install(int(value))
