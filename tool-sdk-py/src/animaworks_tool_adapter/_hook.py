"""Installed by the ``.pth`` line: patches AnimaWorks' functions right after their modules are imported.

Kept small: it runs at the start of every interpreter of the virtualenv. Nothing happens until a module the
adapter patches is imported, and nothing in a process the runner started for a tool (``ANIMAWORKS_TOOL_PROTOCOL``
is set there): a module run by the runner that imports AnimaWorks gets AnimaWorks as it is.
"""
import os
import sys

_decision = None  # None: not decided yet; else (ok, version, why)
_targets = frozenset()


def install():
    if os.environ.get("ANIMAWORKS_TOOL_PROTOCOL") or os.environ.get("ANIMAWORKS_TOOL_ADAPTER") == "off":
        return
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    global _targets
    from animaworks_tool_adapter._known import MODULES

    _targets = frozenset(MODULES)
    sys.meta_path.insert(0, _Finder())


def uninstall_finder():
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]


def decide(core_dir=None):
    """Whether this AnimaWorks is one the adapter knows, byte for byte: ``(ok, version, why)``. Imports nothing of
    AnimaWorks: the version from its metadata, the files by hash."""
    import hashlib

    from animaworks_tool_adapter._known import KNOWN

    try:
        from importlib.metadata import version

        found = version("animaworks")
    except Exception as e:  # no metadata: not an installed AnimaWorks
        return False, None, f"no installed animaworks distribution ({type(e).__name__})"
    known = KNOWN.get(found)
    if known is None:
        return False, found, f"AnimaWorks {found} is not a version the adapter knows ({', '.join(sorted(KNOWN))})"
    if core_dir is None:
        core_dir = _core_dir()
    if core_dir is None:
        return False, found, "AnimaWorks' core package cannot be found"
    for rel, want in known["files"].items():
        path = os.path.join(os.path.dirname(core_dir), rel)
        try:
            with open(path, "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
        except OSError as e:
            return False, found, f"{rel}: {e.strerror or e}"
        if got != want:
            return False, found, f"{rel} differs from AnimaWorks {found}'s (edited or another build)"
    return True, found, ""


def _core_dir():
    mod = sys.modules.get("core")
    paths = list(getattr(mod, "__path__", None) or [])
    if not paths:
        import importlib.util

        spec = importlib.util.find_spec("core")
        paths = list(spec.submodule_search_locations or []) if spec else []
    return paths[0] if paths else None


def _decided():
    global _decision
    if _decision is None:
        try:
            _decision = decide()
        except Exception as e:  # the check itself failed: patch nothing
            _decision = (False, None, f"the check failed: {type(e).__name__}: {e}")
        if not _decision[0]:
            import logging

            logging.getLogger("animaworks.tool_adapter").warning(
                "animaworks-tool adapter: not active, AnimaWorks left as it is: %s", _decision[2]
            )
    return _decision


class _Finder:
    """Finds nothing itself: for the modules the adapter patches, it wraps the loader the other finders give."""

    def find_spec(self, name, path=None, target=None):
        if name not in _targets:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, name)
                return spec
        return None


class _PatchingLoader:
    def __init__(self, loader, name):
        self._loader = loader
        self._name = name

    def __getattr__(self, attr):
        return getattr(self._loader, attr)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        if _decided()[0]:
            from animaworks_tool_adapter import _patches

            _patches.apply(self._name, module)
