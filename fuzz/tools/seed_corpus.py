#!/usr/bin/env python3
"""Writes fuzz/corpus/<target>/ from the project's test vectors.

Sources: every raw-string JSON literal (r#"..."#) in tests/ and src/ that
parses as JSON; examples/*.manifest.json; the webhook vectors the SDKs
share (sdk/typescript/test/fixtures/webhook-vectors.json); rpc/openrpc.json
for the catalogue's order (the `params` target's first byte). Rerun after
adding vectors: `python3 fuzz/tools/seed_corpus.py`.
"""
import glob
import hashlib
import json
import os
import re
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "fuzz", "corpus")
RAW = re.compile(r'r(#+)"(.*?)"\1', re.S)


def write(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def literals():
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "**", "*.rs"), recursive=True)
                       + glob.glob(os.path.join(ROOT, "src", "**", "*.rs"), recursive=True)):
        for m in RAW.finditer(open(path, encoding="utf-8").read()):
            text = m.group(2)
            if "{" in text and "{{" not in text:
                try:
                    yield text, json.loads(text)
                except ValueError:
                    pass
        yield from json_macros(open(path, encoding="utf-8").read())


def json_macros(text):
    """The `json!(...)` bodies that are plain JSON (no Rust expressions)."""
    start = 0
    while (i := text.find("json!(", start)) >= 0:
        depth, j = 0, i + 5
        while j < len(text):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            if depth == 0:
                break
            j += 1
        start = j
        body = re.sub(r",(\s*[}\]])", r"\1", text[i + 6:j])
        try:
            yield body, json.loads(body)
        except ValueError:
            pass


def b58(data):
    alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
    n, out = int.from_bytes(data, "big"), ""
    while n:
        n, r = divmod(n, 58)
        out = alphabet[r] + out
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + out


def signed_cards():
    """The card of tests/it/cards.rs with its package's files, signed with
    the key of seed bytes 0..31 (RFC 8785 form: ASCII text, sorted keys)."""
    import base64
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        return
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    public = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    files = {"README.md": b"# Werewolf\n", "persona.md": b"You are the moderator.\n",
             "scripts/moderator.js": b"export const night = true;\n"}
    card = {
        "schema": "muretai/app/1", "id": "werewolf", "name": "Werewolf",
        "tagline": "Who is the wolf?", "description": "A social deduction game for agents.",
        "version": "1.2.0", "category": "game",
        "primitives": ["send_message", "read_inbox", "persona", "rooms"],
        "entry": {"readme": "README.md", "persona": "persona.md", "kickoff": ["Night falls."],
                  "scripts": ["scripts/moderator.js"],
                  "integrity": {p: "sha256:" + hashlib.sha256(b).hexdigest() for p, b in files.items()}},
        "coreChanges": False,
        "author": "did:key:z" + b58(b"\xed\x01" + public),
    }
    canonical = json.dumps(card, sort_keys=True, separators=(",", ":")).encode()
    yield json.dumps(card, indent=2)
    card["sig"] = base64.b64encode(key.sign(canonical)).decode()
    yield json.dumps(card, indent=2)
    card["sig"] = base64.b64encode(bytes(64)).decode()
    yield json.dumps(card)


def main():
    catalogue = json.load(open(os.path.join(ROOT, "rpc", "openrpc.json")))["methods"]
    methods = [m["name"] for m in catalogue]
    members = [{p["name"] for p in m["params"]} for m in catalogue]
    per_method = [0] * len(methods)
    for card in signed_cards():
        write("card", card)
    for text, value in literals():
        write("frame", text)
        if isinstance(value, dict) and "method" in value:
            if value.get("method") in methods and isinstance(value.get("params"), dict):
                pick = methods.index(value["method"])
                write("params", bytes([pick]) + json.dumps(value["params"]).encode())
        # An object whose members are all one method's params members seeds
        # that method (a few each).
        if isinstance(value, dict) and value:
            for i, names in enumerate(members):
                if set(value) <= names and per_method[i] < 12:
                    per_method[i] += 1
                    write("params", bytes([i]) + text.encode())
        if isinstance(value, dict) and ("hooks" in value or "conversations" in value):
            write("manifest", text)
        if isinstance(value, dict) and "$schema" in value or "primitives" in str(value)[:2000]:
            write("card", text)
    for i in range(len(methods)):
        write("params", bytes([i]))
        write("params", bytes([i]) + b"{}")
    for path in glob.glob(os.path.join(ROOT, "examples", "*.manifest.json")):
        write("manifest", open(path, "rb").read())
    for path in glob.glob(os.path.join(ROOT, "examples", "**", "app.json"), recursive=True):
        write("card", open(path, "rb").read())
    vectors = json.load(open(os.path.join(ROOT, "sdk", "typescript", "test", "fixtures", "webhook-vectors.json")))
    for v in vectors["vectors"]:
        lines = [v["id"], v["timestamp"], v["signature"], " ".join(v["keys"]), str(v["now"])]
        write("webhook_signature", "\n".join(lines) + "\n" + v["body"])
    for q in ["", "after=0", "after=5&limit=2", "limit=1000&wait=30", "syncEpoch=abc&after=1",
              "after=9223372036854775807", "after=9223372036854775808", "limit=0", "wait=31",
              "after=5&after=0", "unknown=1", "limit=%31", "a%zz=1", "limit=-1", "after=1e3"]:
        write("events_query", q)


if __name__ == "__main__":
    main()
