"""Notes per anima, written the AnimaWorks way: runs under animaworks-tool unchanged.

Actions: add, list, purge_all (gated: the grant is `legacy_notes_purge-all`, the EXECUTION_PROFILE key as
written in CLI spelling). CLI: `animaworks-tool legacy_notes add TITLE [-j]`, `list [-j]`, `purge-all --yes [-j]`.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

EXECUTION_PROFILE: dict[str, dict[str, object]] = {
    "add": {"expected_seconds": 1, "background_eligible": False},
    "list": {"expected_seconds": 1, "background_eligible": False},
    "purge-all": {"expected_seconds": 1, "background_eligible": False, "gated": True},
}


def get_tool_schemas() -> list[dict]:
    return [
        {
            "name": "legacy_notes_add",
            "description": "Add a note.",
            "input_schema": {
                "type": "object",
                "properties": {"title": {"type": "string", "minLength": 1}},
                "required": ["title"],
            },
        },
        {"name": "legacy_notes_list", "description": "List the notes.", "input_schema": {"type": "object"}},
        {
            "name": "legacy_notes_purge_all",
            "description": "Delete every note (gated).",
            "input_schema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]},
        },
    ]


def _path(anima_dir: str | None) -> Path:
    return (Path(anima_dir) if anima_dir else Path.cwd()) / "state" / "legacy_notes.json"


def _load(path: Path) -> list[str]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else []


def _save(path: Path, notes: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notes, ensure_ascii=False), encoding="utf-8")


def dispatch(name: str, args: dict[str, Any]) -> Any:
    path = _path(args.pop("anima_dir", None))
    notes = _load(path)
    if name == "legacy_notes_add":
        notes.append(args["title"])
        _save(path, notes)
        logger.info("added %r", args["title"])
        return {"added": args["title"], "count": len(notes)}
    if name == "legacy_notes_list":
        return notes
    if name == "legacy_notes_purge_all":
        if not args.get("confirm"):
            raise ValueError("confirm must be true")
        _save(path, [])
        return {"purged": len(notes)}
    raise ValueError(f"Unknown tool: {name}")


def cli_main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="animaworks-tool legacy_notes")
    sub = parser.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add")
    add.add_argument("title")
    lst = sub.add_parser("list")
    purge = sub.add_parser("purge-all")
    purge.add_argument("--yes", action="store_true")
    for p in (add, lst, purge):
        p.add_argument("-j", "--json", action="store_true", help="print JSON")
    ns = parser.parse_args(argv)
    anima_dir = os.environ.get("ANIMAWORKS_ANIMA_DIR")
    if ns.action == "add":
        result = dispatch("legacy_notes_add", {"title": ns.title, "anima_dir": anima_dir})
    elif ns.action == "list":
        result = dispatch("legacy_notes_list", {"anima_dir": anima_dir})
    else:
        result = dispatch("legacy_notes_purge_all", {"confirm": ns.yes, "anima_dir": anima_dir})
    if ns.json:
        print(json.dumps(result, ensure_ascii=False))
    elif isinstance(result, list):
        print("\n".join(result) if result else "(no notes)")
    else:
        print(", ".join(f"{k}: {v}" for k, v in result.items()))
