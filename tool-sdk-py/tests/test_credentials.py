"""get_credential's AnimaWorks chain, in a subprocess with its own data dir; the vault through real sealed boxes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SDK_SRC, SHARED_FIXTURES, base_env

VAULT = SHARED_FIXTURES / "vault"


def lookup(tmp_path: Path, call: str, **env: str) -> str:
    code = ("import json\nfrom animaworks_tool_sdk import get_credential, CredentialError\n"
            f"try:\n    print(json.dumps(get_credential({call})))\n"
            "except CredentialError as e:\n    print(json.dumps({'code': e.code, 'message': e.message, 'hint': e.hint}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=base_env(tmp_path, PYTHONPATH=str(SDK_SRC), **env))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    (d / "shared").mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"credentials": {
        "svc": {"type": "api_key", "api_key": "from-config", "keys": {"other": "other-key"}},
        "empty": {"type": "api_key", "api_key": "", "keys": {}},
    }}))
    (d / "shared" / "credentials.json").write_text(json.dumps({"FLAT_TOKEN": "from-flat", "BOTH": "flat-both"}))
    return d


def test_order(tmp_path: Path, data: Path) -> None:
    assert lookup(tmp_path, "'svc', 't', env_var='FLAT_TOKEN'") == "from-config"
    assert lookup(tmp_path, "'svc', 't', key_name='other'") == "other-key"
    assert lookup(tmp_path, "'empty', 't', env_var='FLAT_TOKEN'") == "from-flat"
    assert lookup(tmp_path, "'empty', 't', env_var='BOTH'", BOTH="env-both") == "flat-both"
    assert lookup(tmp_path, "'empty', 't', env_var='ONLY_ENV'", ONLY_ENV="env") == "env"
    per = "'empty', 't', env_var='ONLY_ENV', per_anima=True"
    assert lookup(tmp_path, per, ONLY_ENV="env", ONLY_ENV__alice="alice-env", ANIMAWORKS_ANIMA_DIR="/x/alice") == "alice-env"
    assert lookup(tmp_path, per, ONLY_ENV="env", ANIMAWORKS_ANIMA_DIR="/x/alice") == "env"


def test_missing_names_every_place(tmp_path: Path, data: Path) -> None:
    got = lookup(tmp_path, "'nope', 'mytool', env_var='NOPE_KEY'")
    assert got["code"] == "missing_credential" and "mytool" in got["message"]
    assert "credentials.nope.api_key" in got["hint"] and "vault.json shared.NOPE_KEY" in got["hint"]
    assert "environment variable NOPE_KEY" in got["hint"]
    # Without env_var, steps 2-4 are skipped even when the variable exists.
    assert lookup(tmp_path, "'nope', 't'", NOPE_KEY="x")["code"] == "missing_credential"


@pytest.mark.skipif(not VAULT.is_dir(), reason=f"{VAULT} is absent")
def test_vault_sealed_boxes(tmp_path: Path, data: Path) -> None:
    vectors = json.loads((VAULT / "vault_vectors.json").read_text())
    (data / "vault.key").write_text(vectors["vault_key_file_text"])
    shared = {e["key"]: e["ciphertext_b64"] for e in vectors["entries"] if e["section"] == "shared"}
    shared["PLAIN"] = vectors["plaintext_passthrough_example"]["stored"]
    (data / "vault.json").write_text(json.dumps({"shared": shared}))
    (data / "config.json").write_text(json.dumps({"credentials": {"v": {"api_key": {"$vault": "UNICODE"}}}}))
    expected = {e["key"]: e["plaintext"] for e in vectors["entries"]}
    assert lookup(tmp_path, "'x', 't', env_var='DEMO_TOKEN'", DEMO_TOKEN="env-loses") == expected["DEMO_TOKEN"]
    assert lookup(tmp_path, "'v', 't'") == expected["UNICODE"]
    assert lookup(tmp_path, "'x', 't', env_var='PLAIN'") == vectors["plaintext_passthrough_example"]["decrypt_returns"]


def test_vault_open_round_trip() -> None:
    """Without the shared vectors: a box sealed here (same construction) opens, and a tampered one does not."""
    code = r'''
import hashlib, os
from animaworks_tool_sdk import _vault as v
sk, esk = os.urandom(32), os.urandom(32)
pk, epk = v.public_key(sk), v.public_key(esk)
nonce = hashlib.blake2b(epk + pk, digest_size=24).digest()
key = v._hsalsa20(v._x25519(esk, pk), bytes(16))
msg = "秘密-secret".encode()
stream = v._salsa20_stream(v._hsalsa20(key, nonce[:16]), nonce[16:], 32 + len(msg))
ct = bytes(a ^ b for a, b in zip(msg, stream[32:]))
box = epk + v._poly1305(stream[:32], ct) + ct
assert v.seal_open(box, sk) == msg
assert v.seal_open(box[:-1] + bytes([box[-1] ^ 1]), sk) is None
assert v.seal_open(box, os.urandom(32)) is None
'''
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=base_env(Path("/tmp"), PYTHONPATH=str(SDK_SRC)))
    assert proc.returncode == 0, proc.stderr
