"""animaworks_tool_sdk: write animaworks-tool tools in Python, with no dependency beyond the standard library.

.. code-block:: python

    from animaworks_tool_sdk import Context, ToolError, action, run

    @action(expected_seconds=1)
    def greet(who: str, ctx: Context) -> dict:
        \"\"\"Say hello to someone.\"\"\"
        ctx.progress(1, 1, "greeting")
        return {"greeting": f"hello, {who}"}

    if __name__ == "__main__":
        run()

Names are loaded on first use (PEP 562), so that the runner's legacy shim, which imports only
``animaworks_tool_sdk._wire``, does not pay for ``inspect`` and friends.
"""
__version__ = "0.1.0"

__all__ = [
    "Context",
    "CredentialError",
    "Param",
    "ToolError",
    "action",
    "get_credential",
    "run",
    "tool_info",
    "use_tool",
]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._action import Param, action, tool_info
    from ._context import Context
    from ._credentials import CredentialError, get_credential
    from ._errors import ToolError
    from ._runtime import run
    from ._use_tool import use_tool

_WHERE = {
    "Context": "_context",
    "CredentialError": "_credentials",
    "Param": "_action",
    "ToolError": "_errors",
    "action": "_action",
    "get_credential": "_credentials",
    "run": "_runtime",
    "tool_info": "_action",
    "use_tool": "_use_tool",
}


def __getattr__(name: str) -> object:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'animaworks_tool_sdk' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{where}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> "list[str]":
    return sorted(set(globals()) | set(__all__))
