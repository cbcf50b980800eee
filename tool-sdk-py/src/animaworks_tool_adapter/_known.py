"""The AnimaWorks releases the adapter knows: each file it patches, by SHA-256, and the signatures it replaces.

The hashes decide, before any patch: a file that differs in one byte is another program, and the adapter
patches nothing at all (never half).
"""

KNOWN = {
    "0.15.0": {
        "files": {
            "core/tooling/schemas/loader.py": "cb8b730b24c48ed91a18d3ea06d5fa138a1b1c182e2fa01a134c1b19c11c8054",
            "core/tooling/dispatch.py": "e6f0daa8a316a137d240ea850f75e8874f7ca360d91b0c87efb5618d289dc6d5",
            "core/tooling/handler.py": "3ea63126edcbcc67f8d14409269ecdfbd64921c65df73571543fd76d2fa7fefc",
            "core/tooling/permissions.py": "47ddfc1ba58b4421cb6a338e2af905124db7307b5ce9e841c53975f39ff88c95",
            "core/tooling/handler_skills.py": "4677741a29afc7388919c1e0a053fa90af5f3fcda3d465d3c8802563f8ec5e77",
            "core/tooling/standalone.py": "c623f66c29b7ac3fbe0cda54678683bccd15f027f27ac18d36dce2a3c59170b5",
        },
        "signatures": {
            "core.tooling.schemas.loader.load_personal_tool_schemas":
                "(personal_tools: 'dict[str, str]') -> 'list[dict[str, Any]]'",
            "core.tooling.dispatch.ExternalToolDispatcher._dispatch_from_files":
                "(self, name: 'str', args: 'dict[str, Any]') -> 'str | None'",
            "core.tooling.handler.ToolHandler._handle_use_tool": "(self, args: 'dict[str, Any]') -> 'str'",
            "core.tooling.permissions._load_profile_from_file":
                "(tool_file: 'Path | None') -> 'dict[str, dict[str, object]] | None'",
            "core.tooling.handler_skills.SkillsToolsMixin._handle_refresh_tools":
                "(self, args: 'dict[str, Any]') -> 'str'",
            "core.tooling.handler_skills.SkillsToolsMixin._handle_share_tool": "(self, args: 'dict[str, Any]') -> 'str'",
        },
    },
}

# Each path of the server that imports tool modules, and what the adapter does with it (doctor, status).
PATHS = (
    ("schemas", "core.tooling.schemas.loader.load_personal_tool_schemas",
     "schemas of common and personal tools from the runner's cache (every agent cycle)"),
    ("dispatch", "core.tooling.dispatch.ExternalToolDispatcher._dispatch_from_files",
     "the dispatcher's fallback: the call through the runner"),
    ("use_tool", "core.tooling.handler.ToolHandler._handle_use_tool",
     "use_tool of a common or personal tool: the call through the runner"),
    ("gate", "core.tooling.permissions._load_profile_from_file",
     "gate checks: EXECUTION_PROFILE as the runner read it"),
    ("refresh", "core.tooling.handler_skills.SkillsToolsMixin._handle_refresh_tools",
     "refresh_tools: rediscovers names only; the adapter forgets what it asked"),
    ("share", "core.tooling.handler_skills.SkillsToolsMixin._handle_share_tool",
     "share_tool: copies a file only; the adapter forgets what it asked"),
    ("standalone", "core.tooling.standalone.build_standalone_tool_handler",
     "Mode S's ToolHandler: imports nothing itself; its calls take the paths above"),
)

MODULES = (
    "core.tooling.schemas.loader",
    "core.tooling.dispatch",
    "core.tooling.handler",
    "core.tooling.permissions",
    "core.tooling.handler_skills",
)
