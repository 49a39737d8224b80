#!/usr/bin/env python3
"""Converts a CTranslate2 Whisper model (model.bin, binary version 6,
WhisperSpec) into the safetensors layout candle-transformers' Whisper loads.

Standard library only (setup runs before any virtualenv exists). The weights
keep their stored dtype (fp16 in the registry packages): the fused
projections CTranslate2 uses are split by whole rows, which are contiguous
byte ranges, so no number is ever decoded or re-encoded. candle casts to f32
when it loads. Output is deterministic (sorted names), so its SHA-256 can be
pinned.

Usage: whisper-ct2-to-safetensors.py CT2_DIR OUT_DIR
  CT2_DIR holds model.bin, config.json and vocabulary.txt (or vocabulary.json).
"""
import json
import os
import re
import struct
import sys

# CT2 dtype codes -> (safetensors name, bytes per element)
DTYPES = {0: ("F32", 4), 1: ("I8", 1), 2: ("I16", 2), 3: ("I32", 4), 4: ("F16", 2), 5: ("BF16", 2)}


class Var:
    def __init__(self, dims, dtype, data):
        self.dims, self.dtype, self.data = list(dims), dtype, data

    def rows(self, start, end):
        """Rows [start, end) of the first dimension, as a new Var."""
        per_row = len(self.data) // self.dims[0]
        return Var([end - start] + self.dims[1:], self.dtype, self.data[start * per_row:end * per_row])


def read_ct2(path):
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(n):
        nonlocal pos
        out = buf[pos:pos + n]
        if len(out) != n:
            raise SystemExit(f"{path}: truncated at byte {pos}")
        pos += n
        return out

    def u(fmt):
        return struct.unpack("<" + fmt, take(struct.calcsize(fmt)))[0]

    def string():
        n = u("H")
        return take(n)[:-1].decode()

    version = u("I")
    if version != 6:
        raise SystemExit(f"{path}: CTranslate2 binary version {version}, expected 6")
    spec = string()
    if spec != "WhisperSpec":
        raise SystemExit(f"{path}: spec {spec!r}, expected WhisperSpec")
    u("I")  # spec revision
    out = {}
    for _ in range(u("I")):
        name = string()
        rank = u("B")
        dims = [u("I") for _ in range(rank)]
        dtype = u("B")
        nbytes = u("I")
        if dtype not in DTYPES:
            raise SystemExit(f"{path}: {name} has unknown dtype code {dtype}")
        out[name] = Var(dims, DTYPES[dtype][0], take(nbytes))
    return out


def scalar(var):
    fmt = {"I16": "<h", "I32": "<i", "I8": "<b"}[var.dtype]
    return struct.unpack(fmt, var.data)[0]


def convert(V):
    out = {}
    d = V["encoder/conv1/weight"].dims[0]
    enc_layers = len({k.split("/")[1] for k in V if re.match(r"encoder/layer_\d+/", k)})
    dec_layers = len({k.split("/")[1] for k in V if re.match(r"decoder/layer_\d+/", k)})

    def put(dst, var):
        out[dst] = var

    def ln(dst, src):
        put(dst + ".weight", V[src + "/gamma"])
        put(dst + ".bias", V[src + "/beta"])

    def lin(dst, src, rows=None, bias=True):
        w, b = V[src + "/weight"], V[src + "/bias"]
        if rows is not None:
            w, b = w.rows(*rows), b.rows(*rows)
        put(dst + ".weight", w)
        if bias:
            put(dst + ".bias", b)

    for c in ("conv1", "conv2"):
        put(f"model.encoder.{c}.weight", V[f"encoder/{c}/weight"])
        put(f"model.encoder.{c}.bias", V[f"encoder/{c}/bias"])
    put("model.encoder.embed_positions.weight", V["encoder/position_encodings/encodings"])
    ln("model.encoder.layer_norm", "encoder/layer_norm")
    put("model.decoder.embed_tokens.weight", V["decoder/embeddings/weight"])
    put("model.decoder.embed_positions.weight", V["decoder/position_encodings/encodings"])
    ln("model.decoder.layer_norm", "decoder/layer_norm")
    for side, n in (("encoder", enc_layers), ("decoder", dec_layers)):
        for i in range(n):
            p, s = f"model.{side}.layers.{i}", f"{side}/layer_{i}"
            # Self-attention: CT2 fuses q, k, v into linear_0 (3d x d); the k
            # slice of its bias is all zeros (Whisper's key has no bias).
            ln(p + ".self_attn_layer_norm", s + "/self_attention/layer_norm")
            lin(p + ".self_attn.q_proj", s + "/self_attention/linear_0", (0, d))
            lin(p + ".self_attn.k_proj", s + "/self_attention/linear_0", (d, 2 * d), bias=False)
            lin(p + ".self_attn.v_proj", s + "/self_attention/linear_0", (2 * d, 3 * d))
            lin(p + ".self_attn.out_proj", s + "/self_attention/linear_1")
            if side == "decoder":
                # Cross-attention: linear_0 = q, linear_1 = fused k, v (2d x d), linear_2 = out.
                ln(p + ".encoder_attn_layer_norm", s + "/attention/layer_norm")
                lin(p + ".encoder_attn.q_proj", s + "/attention/linear_0")
                lin(p + ".encoder_attn.k_proj", s + "/attention/linear_1", (0, d), bias=False)
                lin(p + ".encoder_attn.v_proj", s + "/attention/linear_1", (d, 2 * d))
                lin(p + ".encoder_attn.out_proj", s + "/attention/linear_2")
            ln(p + ".final_layer_norm", s + "/ffn/layer_norm")
            lin(p + ".fc1", s + "/ffn/linear_0")
            lin(p + ".fc2", s + "/ffn/linear_1")
    cfg = dict(
        num_mel_bins=V["encoder/conv1/weight"].dims[1],
        max_source_positions=V["encoder/position_encodings/encodings"].dims[0],
        d_model=d,
        encoder_attention_heads=scalar(V["encoder/num_heads"]),
        encoder_layers=enc_layers,
        vocab_size=V["decoder/embeddings/weight"].dims[0],
        max_target_positions=V["decoder/position_encodings/encodings"].dims[0],
        decoder_attention_heads=scalar(V["decoder/num_heads"]),
        decoder_layers=dec_layers,
    )
    return out, cfg


def write_safetensors(tensors, path):
    header, offset = {}, 0
    for name in sorted(tensors):
        t = tensors[name]
        header[name] = {"dtype": t.dtype, "shape": t.dims, "data_offsets": [offset, offset + len(t.data)]}
        offset += len(t.data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name in sorted(tensors):
            f.write(tensors[name].data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    V = read_ct2(os.path.join(src, "model.bin"))
    tensors, cfg = convert(V)
    ct2_cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["suppress_tokens"] = ct2_cfg.get("suppress_ids", [])
    cfg["suppress_tokens_begin"] = ct2_cfg.get("suppress_ids_begin", [])
    cfg["lang_ids"] = ct2_cfg.get("lang_ids", [])
    os.makedirs(dst, exist_ok=True)
    write_safetensors(tensors, os.path.join(dst, "model.safetensors"))
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1, sort_keys=True)
        f.write("\n")
    # One token per line, line number = id (some packages ship it as a JSON list).
    txt, js = os.path.join(src, "vocabulary.txt"), os.path.join(src, "vocabulary.json")
    if os.path.exists(txt):
        with open(txt, "rb") as f:
            vocab = f.read()
    else:
        tokens = json.load(open(js, encoding="utf-8"))
        if any("\n" in t or "\r" in t for t in tokens):
            raise SystemExit(f"{js}: a token holds a line break")
        vocab = ("\n".join(tokens) + "\n").encode("utf-8")
    with open(os.path.join(dst, "vocabulary.txt"), "wb") as f:
        f.write(vocab)
    print(f"{len(tensors)} tensors, d_model {cfg['d_model']}, vocab {cfg['vocab_size']} -> {dst}")


if __name__ == "__main__":
    main()
