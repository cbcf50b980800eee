"""Opening AnimaWorks vault values (libsodium ``crypto_box_seal``) with the standard library alone.

A sealed box is ``ephemeral_pk (32) || mac (16) || ciphertext``: X25519 between the vault's private key and
the ephemeral public key, HSalsa20 to derive the box key, nonce = BLAKE2b-192(ephemeral_pk || recipient_pk),
then XSalsa20-Poly1305 (NaCl ``crypto_secretbox``). Pure Python is fast enough for a few short secrets.
Nothing here is constant-time; it only ever decrypts the local vault for the local user.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct

_P = 2**255 - 19
_A24 = 121665
_MASK32 = 0xFFFFFFFF


def _x25519(k: bytes, u: bytes) -> bytes:
    """RFC 7748 scalar multiplication (Montgomery ladder)."""
    kb = bytearray(k)
    kb[0] &= 248
    kb[31] &= 127
    kb[31] |= 64
    scalar = int.from_bytes(kb, "little")
    x1 = int.from_bytes(u, "little") & ((1 << 255) - 1)
    x2, z2, x3, z3, swap = 1, 0, x1, 1, 0
    for t in range(254, -1, -1):
        bit = (scalar >> t) & 1
        swap ^= bit
        if swap:
            x2, x3, z2, z3 = x3, x2, z3, z2
        swap = bit
        a, b = (x2 + z2) % _P, (x2 - z2) % _P
        aa, bb = a * a % _P, b * b % _P
        e = (aa - bb) % _P
        c, d = (x3 + z3) % _P, (x3 - z3) % _P
        da, cb = d * a % _P, c * b % _P
        x3 = (da + cb) ** 2 % _P
        z3 = x1 * (da - cb) ** 2 % _P
        x2 = aa * bb % _P
        z2 = e * (aa + _A24 * e) % _P
    if swap:
        x2, x3, z2, z3 = x3, x2, z3, z2
    return (x2 * pow(z2, _P - 2, _P) % _P).to_bytes(32, "little")


def _rotl(v: int, c: int) -> int:
    return ((v << c) & _MASK32) | (v >> (32 - c))


def _salsa_rounds(x: list[int]) -> list[int]:
    x = list(x)
    for _ in range(10):
        for a, b, c, d in ((0, 4, 8, 12), (5, 9, 13, 1), (10, 14, 2, 6), (15, 3, 7, 11)):
            x[b] ^= _rotl((x[a] + x[d]) & _MASK32, 7)
            x[c] ^= _rotl((x[b] + x[a]) & _MASK32, 9)
            x[d] ^= _rotl((x[c] + x[b]) & _MASK32, 13)
            x[a] ^= _rotl((x[d] + x[c]) & _MASK32, 18)
        for a, b, c, d in ((0, 1, 2, 3), (5, 6, 7, 4), (10, 11, 8, 9), (15, 12, 13, 14)):
            x[b] ^= _rotl((x[a] + x[d]) & _MASK32, 7)
            x[c] ^= _rotl((x[b] + x[a]) & _MASK32, 9)
            x[d] ^= _rotl((x[c] + x[b]) & _MASK32, 13)
            x[a] ^= _rotl((x[d] + x[c]) & _MASK32, 18)
    return x


_SIGMA = struct.unpack("<4I", b"expand 32-byte k")


def _state(key: bytes, sixteen: bytes) -> list[int]:
    k = struct.unpack("<8I", key)
    n = struct.unpack("<4I", sixteen)
    return [_SIGMA[0], *k[:4], _SIGMA[1], *n, _SIGMA[2], *k[4:], _SIGMA[3]]


def _hsalsa20(key: bytes, nonce16: bytes) -> bytes:
    x = _salsa_rounds(_state(key, nonce16))
    return struct.pack("<8I", *(x[i] for i in (0, 5, 10, 15, 6, 7, 8, 9)))


def _salsa20_stream(key: bytes, nonce8: bytes, length: int) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < length:
        init = _state(key, nonce8 + struct.pack("<Q", counter))
        x = _salsa_rounds(init)
        out += struct.pack("<16I", *((a + b) & _MASK32 for a, b in zip(x, init)))
        counter += 1
    return bytes(out[:length])


def _poly1305(key: bytes, msg: bytes) -> bytes:
    r = int.from_bytes(key[:16], "little") & 0x0FFFFFFC0FFFFFFC0FFFFFFC0FFFFFFF
    s = int.from_bytes(key[16:], "little")
    p = (1 << 130) - 5
    acc = 0
    for i in range(0, len(msg), 16):
        block = msg[i:i + 16] + b"\x01"
        acc = (acc + int.from_bytes(block, "little")) * r % p
    return ((acc + s) & ((1 << 128) - 1)).to_bytes(16, "little")


def public_key(secret_key: bytes) -> bytes:
    return _x25519(secret_key, (9).to_bytes(32, "little"))


def seal_open(sealed: bytes, secret_key: bytes) -> bytes | None:
    """``crypto_box_seal_open``: the plaintext, or None when ``sealed`` is not a box for this key."""
    if len(sealed) < 48 or len(secret_key) != 32:
        return None
    epk, mac, ciphertext = sealed[:32], sealed[32:48], sealed[48:]
    nonce = hashlib.blake2b(epk + public_key(secret_key), digest_size=24).digest()
    box_key = _hsalsa20(_x25519(secret_key, epk), bytes(16))
    subkey = _hsalsa20(box_key, nonce[:16])
    stream = _salsa20_stream(subkey, nonce[16:], 32 + len(ciphertext))
    if not hmac.compare_digest(_poly1305(stream[:32], ciphertext), mac):
        return None
    return bytes(c ^ s for c, s in zip(ciphertext, stream[32:]))


def decrypt_value(stored: str, secret_key: bytes | None) -> str | None:
    """A vault value as AnimaWorks reads it: a sealed box is opened; a value that is not valid base64 or not
    a sealed box is returned as it is (plaintext passthrough); None when it is a box this key cannot open."""
    try:
        raw = base64.b64decode(stored, validate=True)
    except (binascii.Error, ValueError):
        return stored
    if len(raw) < 48:
        return stored
    if secret_key is None:
        return None
    plain = seal_open(raw, secret_key)
    if plain is None:
        return stored  # not a sealed box (AnimaWorks' VaultManager passes such values through)
    return plain.decode("utf-8")


def load_secret_key(text: str) -> bytes | None:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return key if len(key) == 32 else None
