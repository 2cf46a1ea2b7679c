#!/usr/bin/env python3
"""The reference side of `ferry prep check` for text inputs: the same examples through the
`tokenizers` library (pinned in scripts/requirements-peers.txt), with the spec's truncation and
padding expressed as the library's enable_truncation / enable_padding.

    prep_reference_text.py --spec SPEC.json --out DIR FILE...

SPEC.json is `SpecToJson` (every default filled in). Writes DIR/<input>.npy per input and
DIR/reference.json ({input: "tokenizers X.Y.Z"}). Exit 3 on bad data (as Ferry would).
"""
import argparse
import json
import os
import sys

import numpy as np
import tokenizers
from tokenizers import Tokenizer


def read_texts(path, field):
    """One example per line (.txt), or JSON Lines (.jsonl / .ndjson): as prep/text.cc reads."""
    with open(path, "rb") as f:
        data = f.read().decode("utf-8")
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [l[:-1] if l.endswith("\r") else l for l in lines]
    if not (path.endswith(".jsonl") or path.endswith(".ndjson")):
        return lines
    out = []
    for l in lines:
        if not l.strip(" \t"):
            continue
        v = json.loads(l)
        out.append(v[field] if isinstance(v, dict) else v)
    return out


def encode(text_spec, texts):
    tk = Tokenizer.from_file(text_spec["tokenizer"])
    file_pad = tk.padding
    max_length = text_spec["max_length"] or (tk.truncation or {}).get("max_length", 0)
    error = text_spec["truncation"] == "error"
    if text_spec["max_length"]:  # the spec's length, the file's direction
        tk.enable_truncation(max_length=max_length,
                             direction=(tk.truncation or {}).get("direction", "right"))
    if error:
        tk.no_truncation()
    pad_id = text_spec["pad_id"]
    if pad_id is None:
        pad_id = file_pad["pad_id"] if file_pad else 0
    pad_kw = {"pad_id": pad_id}
    if file_pad:
        pad_kw.update(pad_type_id=file_pad["pad_type_id"], direction=file_pad["direction"],
                      pad_token=file_pad["pad_token"])
    padding = text_spec["padding"]
    if padding == "max_length":
        tk.enable_padding(length=max_length, **pad_kw)
    elif padding == "longest":
        tk.enable_padding(**pad_kw)
    elif padding == "none":
        tk.no_padding()
    elif file_pad:  # the file's own, the pad id as given
        tk.enable_padding(length=file_pad["length"], pad_to_multiple_of=file_pad["pad_to_multiple_of"],
                          **pad_kw)
    encs = tk.encode_batch(texts, add_special_tokens=text_spec["add_special_tokens"])
    if error:
        for i, e in enumerate(encs):
            if len(e.ids) > max_length:
                print("example %d has %d tokens, more than max_length %d" %
                      (i + 1, len(e.ids), max_length), file=sys.stderr)
                sys.exit(3)
    key = {"ids": "ids", "attention_mask": "attention_mask", "type_ids": "type_ids"}
    rows = [getattr(e, key[text_spec["output"]]) for e in encs]
    if len({len(r) for r in rows}) > 1:
        print("examples of different lengths (padding: none)", file=sys.stderr)
        sys.exit(3)
    return np.array(rows, dtype=np.int64 if text_spec["dtype"] == "int64" else np.int32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    with open(args.spec) as f:
        spec = json.load(f)
    info = {}
    texts = None
    for inp in spec["inputs"]:
        t = inp["text"]
        if texts is None:
            texts = []
            for p in args.files:
                texts += read_texts(p, t["field"])
        arr = encode(t, texts)
        np.save(os.path.join(args.out, inp["name"].replace("/", "_").replace(":", "_") + ".npy"),
                arr)
        info[inp["name"]] = "tokenizers " + tokenizers.__version__
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(info, f)


if __name__ == "__main__":
    main()
