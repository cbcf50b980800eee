"""``@action``: turn a plain typed function into a tool action, with its JSON Schema derived from its hints."""
from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import types
import typing
from typing import Any, Callable, Literal, TypeVar, Union, overload

F = TypeVar("F", bound=Callable[..., Any])

_NoneType = type(None)
_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_PROFILE_KEYS = ("expected_seconds", "timeout_s", "background_eligible", "gated", "gated_as")


@dataclasses.dataclass(frozen=True)
class Param:
    """Describe a parameter in ``Annotated[T, Param(...)]``: a description and any extra JSON Schema keywords.

    ``Annotated[int, Param("How many", minimum=1)]`` gives ``{"type": "integer", "description": "How many",
    "minimum": 1}``. A plain string in ``Annotated[T, "text"]`` is a description too.
    """

    description: str | None = None
    schema: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __init__(self, description: str | None = None, **schema: Any) -> None:
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "schema", schema)


@dataclasses.dataclass
class Action:
    """One registered action: the function, its protocol description and how to call it."""

    name: str
    func: Callable[..., Any]
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    profile: dict[str, Any]
    context_params: list[str]
    is_async: bool
    annotations: dict[str, bool] | None = None

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description, "input_schema": self.input_schema}
        if self.output_schema is not None:
            out["output_schema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        if self.profile:
            out["profile"] = self.profile
        return out


REGISTRY: list[Action] = []
"""Every action registered so far, in definition order (the shim looks here after importing a tool)."""

TOOL_INFO: dict[str, Any] = {}


def tool_info(
    *,
    version: str | None = None,
    description: str | None = None,
    persistent: bool | None = None,
    credentials: list[dict[str, Any]] | None = None,
) -> None:
    """Set tool-wide fields of the ``--schemas`` document; call it at module level.

    By default the description is the module docstring's first paragraph, the version the module's
    ``__version__``, and the tool is ``persistent`` (the runner may send it many calls in one process; pass
    ``persistent=False`` if the tool keeps state that must not outlive a call). ``credentials`` are the
    credential objects of protocol §2.1 that every action needs.
    """
    for key, value in (("version", version), ("description", description), ("persistent", persistent), ("credentials", credentials)):
        if value is not None:
            TOOL_INFO[key] = value


class SignatureError(TypeError):
    """A function cannot be an action as written; the message names the function and the parameter."""


def _is_context(annotation: Any) -> bool:
    from ._context import Context

    return isinstance(annotation, type) and issubclass(annotation, Context)


def _schema_for(tp: Any, where: str) -> dict[str, Any]:
    """JSON Schema of a type hint; ``where`` names the function and parameter for error messages."""
    if tp is Any:
        return {}
    extra: dict[str, Any] = {}
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(tp)
        schema = _schema_for(base, where)
        for m in meta:
            if isinstance(m, str):
                extra["description"] = m
            elif isinstance(m, Param):
                if m.description is not None:
                    extra["description"] = m.description
                extra.update(m.schema)
        return {**schema, **extra}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if tp is _NoneType:
        return {"type": "null"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_schema([m.value for m in tp], where)
    if origin is Literal:
        return _enum_schema(list(typing.get_args(tp)), where)
    if origin in (Union, types.UnionType):
        members = typing.get_args(tp)
        rest = [m for m in members if m is not _NoneType]
        inner = [_schema_for(m, where) for m in rest]
        if len(rest) < len(members):  # Optional[...]
            if len(inner) == 1 and isinstance(inner[0].get("type"), str) and set(inner[0]) <= {"type", "items", "additionalProperties"}:
                return {**inner[0], "type": [inner[0]["type"], "null"]}
            inner.append({"type": "null"})
        return inner[0] if len(inner) == 1 else {"anyOf": inner}
    if tp in (list, tuple, set, frozenset) or origin in (list, set, frozenset, typing.get_origin(typing.Sequence[int])):
        args = typing.get_args(tp)
        return {"type": "array", "items": _schema_for(args[0], where)} if args else {"type": "array"}
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema_for(args[0], where)}
        raise SignatureError(f"{where}: fixed-length tuple hints are not supported; use list[...] or input_schema=")
    if tp is dict or origin in (dict, typing.get_origin(typing.Mapping[str, int])):
        args = typing.get_args(tp)
        if args and args[0] is not str:
            raise SignatureError(f"{where}: dict keys must be str (JSON object keys are strings)")
        return {"type": "object", "additionalProperties": _schema_for(args[1], where)} if args else {"type": "object"}
    raise SignatureError(f"{where}: cannot derive a JSON Schema from the type hint {tp!r}; give @action(input_schema=...)")


def _enum_schema(values: list[Any], where: str) -> dict[str, Any]:
    kinds = {_SCALARS.get(type(v)) for v in values}
    if None in kinds:
        raise SignatureError(f"{where}: enum values must be str, int, float or bool, got {values!r}")
    schema: dict[str, Any] = {"enum": values}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    return schema


def _split_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """The description (text before an ``Args:`` section) and per-parameter lines of a Google-style docstring."""
    text = inspect.cleandoc(doc) if doc else ""
    params: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            current = None
            for item in lines[i + 1:]:
                if item and not item.startswith(" "):
                    break  # the next section
                stripped = item.strip()
                head, sep, tail = stripped.partition(":")
                name = head.split(" ")[0]
                if sep and item.startswith("    ") and not item.startswith("        ") and name.isidentifier():
                    current = name
                    params[current] = tail.strip()
                elif current and stripped:
                    params[current] = (params[current] + " " + stripped).strip()
            text = "\n".join(lines[:i]).rstrip()
            break
    return text, params


def _build(func: Callable[..., Any], name: str | None, description: str | None, input_schema: dict[str, Any] | None,
           output_schema: dict[str, Any] | None, profile: dict[str, Any]) -> Action:
    fname = getattr(func, "__qualname__", repr(func))
    if not callable(func):
        raise SignatureError(f"@action() must decorate a function, got {func!r}")
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:
        raise SignatureError(f"{fname}: cannot resolve its type hints: {type(exc).__name__}: {exc}") from exc
    doc, param_docs = _split_docstring(func.__doc__)
    properties: dict[str, Any] = {}
    required: list[str] = []
    context_params: list[str] = []
    for p in inspect.signature(func).parameters.values():
        where = f"action {fname}, parameter {p.name!r}"
        annotation = hints.get(p.name, inspect.Parameter.empty)
        if annotation is not inspect.Parameter.empty and _is_context(annotation):
            context_params.append(p.name)
            continue
        if p.kind is p.VAR_KEYWORD and input_schema is not None:
            continue  # an explicit schema may hand arguments to **kwargs
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise SignatureError(f"{where}: *args, **kwargs and positional-only parameters cannot receive JSON arguments")
        if input_schema is not None:
            continue
        if annotation is inspect.Parameter.empty:
            raise SignatureError(f"{where} has no type hint; annotate it (e.g. `{p.name}: str`) or give input_schema=")
        schema = _schema_for(annotation, where)
        if p.name in param_docs and "description" not in schema:
            schema["description"] = param_docs[p.name]
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        elif p.default is not None:
            default = p.default.value if isinstance(p.default, enum.Enum) else p.default
            try:
                json.dumps(default, allow_nan=False)
                schema["default"] = default
            except (TypeError, ValueError):
                pass  # not JSON: the function's own default still applies
        properties[p.name] = schema
    if input_schema is None:
        input_schema = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            input_schema["required"] = required
    elif not isinstance(input_schema, dict):
        raise SignatureError(f"action {fname}: input_schema must be a dict (a JSON Schema object)")
    action_name = name or func.__name__
    return Action(
        name=action_name,
        func=func,
        description=description if description is not None else doc,
        input_schema=input_schema,
        output_schema=output_schema,
        profile=profile,
        context_params=context_params,
        is_async=inspect.iscoroutinefunction(func),
    )


def _check_sandbox(sandbox: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(sandbox, dict):
        raise TypeError("@action(sandbox=...): a dict with read, write, net, exec")
    unknown = set(sandbox) - {"read", "write", "net", "exec"}
    if unknown:
        raise TypeError(f"@action(sandbox=...): unknown key(s) {sorted(unknown)}")
    out: dict[str, Any] = {}
    for key in ("read", "write", "exec"):
        paths = sandbox.get(key) or []
        if not isinstance(paths, (list, tuple)) or not all(isinstance(p, str) for p in paths):
            raise TypeError(f"@action(sandbox=...): {key} must be a list of paths")
        if paths:
            out[key] = list(paths)
    net = sandbox.get("net", False)
    if isinstance(net, bool):
        if net:
            out["net"] = True
    elif isinstance(net, (list, tuple)) and all(isinstance(h, str) and ":" in h for h in net):
        out["net"] = list(net)
    else:
        raise TypeError("@action(sandbox=...): net must be true, false or a list of 'host:port'")
    return out


_ANNOTATION_KEYS = {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}


@overload
def action(func: F, /) -> F: ...


@overload
def action(
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    expected_seconds: float | None = None,
    timeout_s: float | None = None,
    background_eligible: bool | None = None,
    gated: bool | None = None,
    gated_as: str | None = None,
    hints: dict[str, bool] | None = None,
    credentials: list[dict[str, Any]] | None = None,
    sandbox: dict[str, Any] | None = None,
    annotations: dict[str, bool] | None = None,
) -> Callable[[F], F]: ...


def action(
    func: Any = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    expected_seconds: float | None = None,
    timeout_s: float | None = None,
    background_eligible: bool | None = None,
    gated: bool | None = None,
    gated_as: str | None = None,
    hints: dict[str, bool] | None = None,
    credentials: list[dict[str, Any]] | None = None,
    sandbox: dict[str, Any] | None = None,
    annotations: dict[str, bool] | None = None,
) -> Any:
    """Register a function as an action and return it unchanged (``@action`` or ``@action(...)``).

    The action's name is the function's name, its description the docstring (an ``Args:`` section describes
    the parameters), its input schema derived from the type hints unless ``input_schema`` is given. A
    parameter annotated ``Context`` receives the call's context instead of an argument. The profile fields
    (``expected_seconds``, ``timeout_s``, ``background_eligible``, ``gated``, ``gated_as``, ``hints`` — keys
    ``read_only``, ``destructive``, ``idempotent``, ``open_world`` — and ``credentials``) are protocol §2.1's;
    ``sandbox`` (``{"read": [...], "write": [...], "net": False | True | ["host:port"], "exec": [...]}``, paths
    with ``$ANIMA_DIR``, ``$DATA_DIR``, ``$TMP``, ``$TOOL_DIR``, ``$HOME``, ``$CWD``) is §2.4's: what the action may touch.
    ``annotations`` (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``: booleans) are
    the MCP tool annotations the runner announces, only those given (protocol §2.1).
    A signature that cannot be described raises ``TypeError`` here, at import, naming the function.
    """
    values = dict(expected_seconds=expected_seconds, timeout_s=timeout_s, background_eligible=background_eligible,
                  gated=gated, gated_as=gated_as)
    profile: dict[str, Any] = {k: values[k] for k in _PROFILE_KEYS if values[k] is not None}
    if hints:
        unknown = set(hints) - {"read_only", "destructive", "idempotent", "open_world"}
        if unknown:
            raise TypeError(f"@action(hints=...): unknown hint(s) {sorted(unknown)}")
        profile["hints"] = dict(hints)
    if annotations is not None:
        unknown = set(annotations) - _ANNOTATION_KEYS
        if unknown:
            raise TypeError(f"@action(annotations=...): unknown annotation(s) {sorted(unknown)}; "
                            f"MCP's are {sorted(_ANNOTATION_KEYS)}")
        if not all(isinstance(v, bool) for v in annotations.values()):
            raise TypeError("@action(annotations=...): every value must be True or False")
    if credentials:
        profile["credentials"] = list(credentials)
    if sandbox is not None:
        profile["sandbox"] = _check_sandbox(sandbox)

    def register(f: F) -> F:
        act = _build(f, name, description, input_schema, output_schema, profile)
        if annotations:
            act.annotations = dict(annotations)
        for i, old in enumerate(REGISTRY):
            if old.name == act.name:
                if getattr(old.func, "__module__", None) == getattr(f, "__module__", None):
                    raise SignatureError(f"action {act.name!r} is defined twice")
                REGISTRY[i] = act  # the same tool imported again (e.g. as __main__ and by name)
                return f
        REGISTRY.append(act)
        return f

    if func is not None:
        return register(func)
    return register
