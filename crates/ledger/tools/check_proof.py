#!/usr/bin/env python3
"""Checks a Ledgermind inclusion proof (`ledgermind prove SEQ > p.json`).
Usage: check_proof.py p.json   -> exit 0 if the proof holds.
The Merkle path is checked with hashlib alone (RFC 9162 2.1.3.2); the tree
head signature too when PyNaCl or `cryptography` is installed."""
import hashlib, json, struct, sys
H = lambda *b: hashlib.sha256(b"".join(b)).digest()
def need(ok, why):
    if not ok: sys.exit("proof FAILED: " + why)
p = json.load(open(sys.argv[1])); x = bytes.fromhex
leaf = H(b"\0", x(p["event_hash"]))
need(leaf.hex() == p["leaf_hash"].lower() and p["leaf_index"] == p["seq"] - 1, "bad leaf")
fn, sn, r = p["leaf_index"], p["tree_size"] - 1, leaf
need(fn <= sn, "index out of range")
for s in map(x, p["audit_path"]):
    need(sn > 0, "path too long")
    if fn & 1 or fn == sn:
        r = H(b"\1", s, r)
        while fn and not fn & 1: fn, sn = fn >> 1, sn >> 1
    else:
        r = H(b"\1", r, s)
    fn, sn = fn >> 1, sn >> 1
need(sn == 0 and r == x(p["root"]), "path does not lead to the root")
msg = b"ledgermind/sth/v1\0" + struct.pack(">Q", p["tree_size"]) + r + p["sth_ts"].encode()
try:
    from nacl.signing import VerifyKey
    VerifyKey(x(p["public_key"])).verify(msg, x(p["sth_signature"]))
except ImportError:
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey as K
        K.from_public_bytes(x(p["public_key"])).verify(x(p["sth_signature"]), msg)
    except ImportError:
        print("warning: no Ed25519 library; tree head signature not checked", file=sys.stderr)
print("ok: event", p["seq"], "is in the signed tree of", p["tree_size"], "events")
