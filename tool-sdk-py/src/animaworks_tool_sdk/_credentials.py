"""``get_credential``: find a secret the way AnimaWorks does, so existing config, vault and env keep working."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ._errors import ToolError


class CredentialError(ToolError):
    """A credential was not found; the message says where to set it. Raised from an action, the call ends
    with a tool error whose code is ``missing_credential``."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message, code="missing_credential", hint=hint)


def data_dir() -> Path:
    """``$ANIMAWORKS_DATA_DIR`` (with ``~`` expanded), else ``~/.animaworks``."""
    value = os.environ.get("ANIMAWORKS_DATA_DIR")
    return Path(value).expanduser() if value else Path.home() / ".animaworks"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


class _Sources:
    """The files of one data dir, each read at most once per lookup."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._cache: dict[str, Any] = {}

    def get(self, name: str) -> Any:
        if name not in self._cache:
            self._cache[name] = _read_json(self.base / name)
        return self._cache[name]

    def vault_shared(self, key: str) -> str | None:
        vault = self.get("vault.json")
        section = vault.get("shared") if isinstance(vault, dict) else None
        stored = section.get(key) if isinstance(section, dict) else None
        if not isinstance(stored, str) or not stored:
            return None
        from . import _vault

        if "vault.key" not in self._cache:
            try:
                self._cache["vault.key"] = _vault.load_secret_key((self.base / "vault.key").read_text(encoding="utf-8"))
            except OSError:
                self._cache["vault.key"] = None
        return _vault.decrypt_value(stored, self._cache["vault.key"]) or None

    def config_value(self, value: Any) -> str | None:
        if isinstance(value, dict) and isinstance(value.get("$vault"), str):
            return self.vault_shared(value["$vault"])
        return value if isinstance(value, str) and value else None


def _anima_name() -> str | None:
    name = os.environ.get("ANIMAWORKS_ANIMA_NAME")
    if name:
        return name
    anima_dir = os.environ.get("ANIMAWORKS_ANIMA_DIR")
    return os.path.basename(os.path.normpath(anima_dir)) if anima_dir else None


def get_credential(
    credential_name: str,
    tool_name: str,
    key_name: str = "api_key",
    env_var: str | None = None,
    *,
    per_anima: bool = False,
) -> str:
    """Return a secret, looked up in this order (AnimaWorks 0.15's ``get_credential``):

    1. ``<data dir>/config.json`` → ``credentials.<credential_name>.api_key`` (or ``.keys.<key_name>`` when
       ``key_name`` is not ``api_key``); a value ``{"$vault": "KEY"}`` there means ``vault.json`` ``shared.KEY``;
    2. ``<data dir>/vault.json`` → ``shared.<env_var>``, opened with ``<data dir>/vault.key``;
    3. ``<data dir>/shared/credentials.json`` → ``<env_var>``;
    4. the environment variable ``<env_var>``.

    Steps 2–4 run only when ``env_var`` is given. With ``per_anima=True`` and a calling anima (from
    ``$ANIMAWORKS_ANIMA_NAME``, else the base name of ``$ANIMAWORKS_ANIMA_DIR``), steps 2–4 are first tried
    with ``<env_var>__<anima name>``. Empty values count as absent. The data dir is ``$ANIMAWORKS_DATA_DIR``,
    else ``~/.animaworks``. Raises :class:`CredentialError` naming every place it can be set.

    The runner resolves the credentials a tool declares in ``--schemas`` and puts them in its environment, so
    a declared credential is found at step 4 even when the tool cannot read the data dir. Run by the runner, the
    lookup is the runner's credential broker's instead (the same chain, checked against the anima's grants): a
    credential that is not granted raises :class:`CredentialError` naming the grant to add.
    """
    from . import _broker

    if _broker.available():
        try:
            return _broker.ask(credential_name, key_name, env_var, per_anima)
        except _broker.BrokerAnswer as refused:
            hint = f"add {refused.grant} to the anima's permissions.json" if refused.grant else None
            raise CredentialError(f"{tool_name}: {refused}", hint=hint) from None
    src = _Sources(data_dir())
    config = src.get("config.json")
    creds = config.get("credentials") if isinstance(config, dict) else None
    entry = creds.get(credential_name) if isinstance(creds, dict) else None
    if isinstance(entry, dict):
        if key_name == "api_key":
            found = src.config_value(entry.get("api_key"))
        else:
            keys = entry.get("keys")
            found = src.config_value(keys.get(key_name)) if isinstance(keys, dict) else None
        if found:
            return found
    if env_var:
        names = [env_var]
        anima = _anima_name() if per_anima else None
        if anima:
            names.insert(0, f"{env_var}__{anima}")
        for name in names:
            found = src.vault_shared(name)
            if found:
                return found
            flat = src.get("shared/credentials.json")
            value = flat.get(name) if isinstance(flat, dict) else None
            if isinstance(value, str) and value:
                return value
            value = os.environ.get(name)
            if value:
                return value
    key_path = "api_key" if key_name == "api_key" else f"keys.{key_name}"
    places = [f"{src.base / 'config.json'} credentials.{credential_name}.{key_path}"]
    if env_var:
        places += [f"{src.base / 'vault.json'} shared.{env_var}", f"the environment variable {env_var}"]
    raise CredentialError(
        f"{tool_name}: credential {credential_name!r} ({key_name}) is not set",
        hint="set it in " + ", or ".join(places),
    )
