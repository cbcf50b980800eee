"""The provider SDKs' own objects, for runner/tests/it/provider_shapes.rs.

`calls NAME`: prints the function calls a model's reply holds as each SDK hands them back (dumps of its classes),
under NAME with the arguments {"x": 7}.
`check FORMAT`: reads `schemas --format FORMAT` output on stdin and validates each tool with the SDK's own type;
prints {"ok": n} or fails with the SDK's error.
"""
import json
import sys


def calls(name):
    import openai
    from google import genai
    from google.genai import types
    from openai.types.chat import ChatCompletionMessageFunctionToolCall

    tool_call = ChatCompletionMessageFunctionToolCall(
        id="call_abc", type="function", function={"name": name, "arguments": json.dumps({"x": 7})}
    )
    part = types.Part(function_call=types.FunctionCall(id="fc_1", name=name, args={"x": 7}))
    return {
        "versions": {"openai": openai.__version__, "google-genai": genai.__version__},
        "openai": [tool_call.model_dump(), tool_call.to_dict()],
        "gemini": [
            part.model_dump(mode="json"),
            part.to_json_dict(),
            part.model_dump(mode="json", by_alias=True, exclude_none=True),
            types.Part.from_function_call(name=name, args={"x": 7}).to_json_dict(),
        ],
    }


def check(fmt, tools):
    from pydantic import TypeAdapter

    if fmt == "anthropic":
        import anthropic
        from anthropic.types import ToolParam

        adapter = TypeAdapter(ToolParam)
        for t in tools:
            adapter.validate_python(t, strict=True)
            unknown = set(t) - set(ToolParam.__annotations__)
            assert not unknown, f"not ToolParam fields: {unknown}"
        return {"ok": len(tools), "version": anthropic.__version__}
    if fmt == "gemini":
        from google.genai import types

        nullable = []
        for t in tools:
            d = types.FunctionDeclaration.model_validate(t)
            assert set(t) <= {"name", "description", "parameters", "parametersJsonSchema"}, t
            if d.parameters and d.parameters.properties:
                nullable += [k for k, p in d.parameters.properties.items() if p.nullable]
        return {"ok": len(tools), "nullable": sorted(nullable)}
    raise SystemExit(f"unknown format {fmt}")


if __name__ == "__main__":
    if sys.argv[1] == "calls":
        print(json.dumps(calls(sys.argv[2])))
    else:
        print(json.dumps(check(sys.argv[2], json.load(sys.stdin))))
