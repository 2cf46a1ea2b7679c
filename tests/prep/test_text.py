#!/usr/bin/env python3
"""Text inputs in a prep spec (`text:`): tokenizers trained with the `tokenizers` library on
local text (WordPiece with BertNormalizer lowercase + stripped accents — also truncated and
padded on the left — and cased, GPT-2 and
RoBERTa byte-level BPE, BPE with Whitespace / prefixes / fused unknowns / Metaspace + byte
fallback, WordLevel) and a real tokenizer.json from a PyPI wheel (coqui-tts ships tortoise's),
through `ferry prep run`, compared EXACTLY with the library (ids, attention mask, type ids) on a
corpus with ASCII, accents, combining marks, CJK, emoji, Arabic/Hebrew, mixed white space,
control characters, long inputs and the empty string, and on every code point (runs of 64);
`ferry prep check`; and bad input (one error line, exit 3).

    .venv/bin/python tests/prep/test_text.py --ferry build/src/ferry --work DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from clilib import check, expect_error, ferry, summary  # noqa: E402
import text_cases  # noqa: E402

# A real tokenizer.json inside a PyPI wheel: tortoise-tts's BPE (Whitespace pre-tokenizer,
# [STOP] / [UNK] / [SPACE] added tokens) as coqui-tts ships it.
REAL_WHEELS = [("coqui-tts==0.28.0", "coqui_tts-0.28.0-py3-none-any.whl",
                "TTS/tts/utils/assets/tortoise/tokenizer.json", "coqui_tortoise")]

OUTPUTS = [("input_ids", "ids"), ("attention_mask", "attention_mask"),
           ("token_type_ids", "type_ids")]


def write_spec(path, tokenizer, extra=""):
    with open(path, "w") as f:
        f.write("inputs:\n  - name: input_ids\n    text: {tokenizer: %s%s}\n" % (tokenizer, extra))
        f.write("  - name: attention_mask\n    text: {from: input_ids, output: attention_mask}\n")
        f.write("  - name: token_type_ids\n    text: {from: input_ids, output: type_ids}\n")


def reference(tokenizer_path, texts, configure):
    from tokenizers import Tokenizer
    tk = Tokenizer.from_file(tokenizer_path)
    configure(tk)
    encs = tk.encode_batch(texts)
    return {"input_ids": np.array([e.ids for e in encs], np.int64),
            "attention_mask": np.array([e.attention_mask for e in encs], np.int64),
            "token_type_ids": np.array([e.type_ids for e in encs], np.int64)}


def compare(args, name, spec, data, want, stats):
    out = os.path.join(args.work, "out_" + name)
    shutil.rmtree(out, ignore_errors=True)
    rc, so, se = ferry(args, "prep", "run", spec, data, "-o", out)
    check(rc == 0, "%s: prep run exit 0 (%s)" % (name, se.strip()[:300]))
    if rc != 0:
        return
    for tensor, ref in want.items():
        got = np.load(os.path.join(out, tensor + ".npy"))
        same_shape = got.shape == ref.shape
        rows_bad = (len(ref) if not same_shape else
                    int(np.sum(np.any(got != ref, axis=1))) if ref.size else 0)
        stats["tensors"] += 1
        stats["rows"] += len(ref)
        stats["bad_rows"] += rows_bad
        check(same_shape and rows_bad == 0 and got.dtype == np.int64,
              "%s: %s equal to tokenizers (%s, %d rows, %d differ)" %
              (name, tensor, got.shape, len(ref), rows_bad))


def real_tokenizers(work):
    """Extracts tokenizer.json files from pinned wheels (pip download --no-deps); {} when pip
    cannot reach the index."""
    found = {}
    wheels = os.path.join(os.path.dirname(os.path.abspath(work)), "prep_text_wheels")  # kept
    os.makedirs(wheels, exist_ok=True)
    for req, whl, member, name in REAL_WHEELS:
        path = os.path.join(wheels, whl)
        if not os.path.exists(path):
            p = subprocess.run([sys.executable, "-m", "pip", "download", req, "--no-deps", "-d",
                                wheels], capture_output=True, text=True, timeout=300)
            if p.returncode != 0 or not os.path.exists(path):
                print("skip: %s not downloadable (%s)" % (req, p.stderr.strip()[-200:]))
                continue
        out = os.path.join(work, name + ".json")
        with zipfile.ZipFile(path) as z, open(out, "wb") as f:
            f.write(z.read(member))
        found[name] = out
    return found


def parity(args):
    models = os.path.join(args.work, "models")
    os.makedirs(models, exist_ok=True)
    paths = text_cases.train_all(models)
    paths.update(real_tokenizers(args.work))
    corpus = text_cases.corpus()
    data = os.path.join(args.work, "corpus.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        for t in corpus:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    stats = {"tensors": 0, "rows": 0, "bad_rows": 0}
    from tokenizers import Tokenizer
    for name, path in sorted(paths.items()):
        has_padding = Tokenizer.from_file(path).padding is not None
        spec = os.path.join(args.work, name + ".yaml")
        # The file's own truncation/padding; files without padding: padded to the longest.
        write_spec(spec, path, "" if has_padding else ", padding: longest")

        def own(tk):
            if tk.padding is None:
                tk.enable_padding(pad_id=0)
        compare(args, name, spec, data, reference(path, corpus, own), stats)
        # Overridden from the spec: max_length 24, padded to it, pad id 1 (the library's
        # enable_truncation / enable_padding(length=...), keeping the file's directions).
        spec2 = os.path.join(args.work, name + "_24.yaml")
        write_spec(spec2, path, ", max_length: 24, pad_id: 1")

        def fixed(tk):  # the spec's length, the file's directions
            tk.enable_truncation(max_length=24,
                                 direction=(tk.truncation or {}).get("direction", "right"))
            p = tk.padding or {}
            tk.enable_padding(length=24, pad_id=1, pad_type_id=p.get("pad_type_id", 0),
                              direction=p.get("direction", "right"))
        compare(args, name + "_24", spec2, data, reference(path, corpus, fixed), stats)
    # Without the special tokens (add_special_tokens: false), two tokenizers.
    for name in ("wordpiece_uncased", "bytelevel_roberta"):
        spec3 = os.path.join(args.work, name + "_nospecial.yaml")
        write_spec(spec3, paths[name], ", max_length: 24, add_special_tokens: false")

        def plain(tk):
            tk.enable_truncation(max_length=24)
            tk.enable_padding(length=24, pad_id=0)
        from tokenizers import Tokenizer as T
        tk = T.from_file(paths[name])
        plain(tk)
        encs = tk.encode_batch(corpus, add_special_tokens=False)
        want = {"input_ids": np.array([e.ids for e in encs], np.int64),
                "attention_mask": np.array([e.attention_mask for e in encs], np.int64),
                "token_type_ids": np.array([e.type_ids for e in encs], np.int64)}
        compare(args, name + "_nospecial", spec3, data, want, stats)
    # Plain text lines (.txt, one example a line), int32.
    lines = [t for t in corpus if "\n" not in t and "\r" not in t and "\x85" not in t
             and "\u2028" not in t and "\u2029" not in t]
    txt = os.path.join(args.work, "corpus.txt")
    with open(txt, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines) + "\n")
    spec = os.path.join(args.work, "txt.yaml")
    path = paths["wordpiece_uncased"]
    with open(spec, "w") as f:
        f.write("inputs:\n  - name: ids\n    text: {tokenizer: %s, max_length: 64, dtype: int32}\n"
                % path)
    out = os.path.join(args.work, "out_txt")
    rc, so, se = ferry(args, "prep", "run", spec, txt, "-o", out)
    check(rc == 0, "txt lines: exit 0 (%s)" % se.strip()[:200])
    if rc == 0:
        got = np.load(os.path.join(out, "ids.npy"))
        ref = reference(path, lines, lambda tk: (tk.enable_truncation(64),
                                                 tk.enable_padding(length=64)))["input_ids"]
        check(got.dtype == np.int32 and got.shape == ref.shape and np.array_equal(got, ref),
              "txt lines: %d examples, int32 ids equal to tokenizers" % len(lines))
    print("parity: %d tokenizers, %d examples each, %d tensors, %d rows compared, %d differ" %
          (len(paths), len(corpus), stats["tensors"], stats["rows"], stats["bad_rows"]))
    return paths, data


def sweep(args, paths):
    """Every code point (surrogates aside), in runs of 64 consecutive ones, through every
    tokenizer: where the library's crates use other Unicode versions than Ferry's tables."""
    chunks = []
    for start in range(0, 0x110000, 64):
        cs = [c for c in range(start, start + 64) if not 0xD800 <= c < 0xE000]
        if cs:
            chunks.append("".join(map(chr, cs)))
    data = os.path.join(args.work, "codepoints.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        for t in chunks:
            f.write(json.dumps(t) + "\n")
    stats = {"tensors": 0, "rows": 0, "bad_rows": 0}
    for name, path in sorted(paths.items()):
        spec = os.path.join(args.work, name + ".yaml")  # the file's settings, padded

        def own(tk):
            if tk.padding is None:
                tk.enable_padding(pad_id=0)
        compare(args, name + "_codepoints", spec, data, reference(path, chunks, own), stats)
    print("code points: %d tokenizers, %d strings each, %d rows compared, %d differ" %
          (len(paths), len(chunks), stats["rows"], stats["bad_rows"]))


def prep_check(args, paths, data):
    spec = os.path.join(args.work, "bytelevel_roberta.yaml")
    rc, so, se = ferry(args, "prep", "check", spec, "--data", data, "--json")
    check(rc == 0, "prep check: exit 0" + ("" if rc == 0 else " (%s)" % (se.strip()[:300] or
                                                                       so[-300:])))
    if rc == 0:
        r = json.loads(so)
        check(all(t["differing"] == 0 for t in r["tensors"]),
              "prep check: every tensor exact (%s)" % [(t["input"], t["differing"])
                                                     for t in r["tensors"]])


def run_with_prep(args, paths, data):
    """ferry run MODEL --prep SPEC: text files in, through a model (ids + 1000 * mask) out."""
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph(
        [helper.make_node("Mul", ["attention_mask", "k"], ["m"]),
         helper.make_node("Add", ["input_ids", "m"], ["out"])], "g",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["n", "l"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["n", "l"])],
        [helper.make_tensor_value_info("out", TensorProto.INT64, ["n", "l"])],
        [helper.make_tensor("k", TensorProto.INT64, [], [1000])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    mpath = os.path.join(args.work, "ids_mask.onnx")
    onnx.save(model, mpath)
    spec = os.path.join(args.work, "run_prep.yaml")
    with open(spec, "w") as f:
        f.write("inputs:\n  - name: input_ids\n    text: {tokenizer: %s, max_length: 32}\n"
                "  - name: attention_mask\n    text: {from: input_ids, output: attention_mask}\n"
                % paths["bytelevel_roberta"])
    out = os.path.join(args.work, "run_out")
    rc, so, se = ferry(args, "run", mpath, "--prep", spec, "--input", "input_ids=" + data,
                       "--input", "attention_mask=" + data, "-o", out)
    check(rc == 0, "ferry run --prep with text: exit 0" + ("" if rc == 0 else " (%s)" % se[-300:]))
    if rc == 0:
        from tokenizers import Tokenizer
        tk = Tokenizer.from_file(paths["bytelevel_roberta"])
        tk.enable_truncation(32)
        tk.enable_padding(length=32, pad_id=0)
        texts = [json.loads(l) for l in open(data, encoding="utf-8")]
        encs = tk.encode_batch(texts)
        want = (np.array([e.ids for e in encs], np.int64) +
                1000 * np.array([e.attention_mask for e in encs], np.int64))
        got = np.load(os.path.join(out, "out.npy"))
        check(got.shape == want.shape and np.array_equal(got, want),
              "ferry run --prep with text: the model saw the library's ids and mask")


def bad_inputs(args, paths):
    w = args.work
    good = paths["wordpiece_uncased"]
    txt = os.path.join(w, "two.txt")
    with open(txt, "w") as f:
        f.write("short\n" + "a long line " * 40 + "\n")

    def spec(name, body):
        p = os.path.join(w, name)
        with open(p, "w") as f:
            f.write(body)
        return p
    with open(good) as f:
        j = json.load(f)
    j["model"]["type"] = "Quantum"
    with open(os.path.join(w, "unknown_model.json"), "w") as f:
        json.dump(j, f)
    with open(good) as f:
        text = f.read()
    with open(os.path.join(w, "truncated.json"), "w") as f:
        f.write(text[:len(text) // 2])
    j = json.loads(text)
    j["normalizer"] = {"type": "Lowercase2"}
    with open(os.path.join(w, "unknown_normalizer.json"), "w") as f:
        json.dump(j, f)
    cases = [
        ("unknown model type", "inputs:\n  - name: x\n    text: {tokenizer: unknown_model.json}\n",
         3, ["inputs[0].text.tokenizer", "model.type", "Quantum"]),
        ("truncated JSON", "inputs:\n  - name: x\n    text: {tokenizer: truncated.json}\n", 3,
         ["truncated.json", "not valid JSON"]),
        ("unknown normalizer", "inputs:\n  - name: x\n    text: {tokenizer: unknown_normalizer.json}\n",
         3, ["normalizer.type", "Lowercase2"]),
        ("missing tokenizer file", "inputs:\n  - name: x\n    text: {tokenizer: nope.json}\n", 3,
         ["nope.json"]),
        ("unknown text key", "inputs:\n  - name: x\n    text:\n      tokenizer: %s\n      max_len: 8\n"
         % good, 3, [":5:", "inputs[0].text.max_len", "unknown key"]),
        ("bad output", "inputs:\n  - name: x\n    text: {tokenizer: %s}\n  - name: y\n"
         "    text: {from: x, output: logits}\n" % good, 3, ["inputs[1].text.output"]),
        ("bad dtype", "inputs:\n  - name: x\n    text: {tokenizer: %s, dtype: float32}\n" % good,
         3, ["inputs[0].text.dtype", "int64|int32"]),
        ("from nowhere", "inputs:\n  - name: x\n    text: {tokenizer: %s}\n  - name: y\n"
         "    text: {from: z}\n" % good, 3, [":4:", "inputs[1].text.from", "'z'"]),
        ("companion with max_length", "inputs:\n  - name: x\n    text: {tokenizer: %s}\n"
         "  - name: y\n    text: {from: x, max_length: 8}\n" % good, 3,
         ["inputs[1].text.max_length"]),
        ("max_length below specials", "inputs:\n  - name: x\n    text: {tokenizer: %s, "
         "max_length: 1}\n" % good, 3, ["inputs[0].text.max_length", "special tokens"]),
        ("bad truncation", "inputs:\n  - name: x\n    text: {tokenizer: %s, truncation: maybe}\n"
         % good, 3, ["inputs[0].text.truncation", "true|error"]),
        ("text and image mixed", "inputs:\n  - name: x\n    text: {tokenizer: %s}\n  - name: y\n"
         "    image: {decode: {exif: apply}, color: rgb}\n" % good, 3, ["inputs[1]", "all text"]),
    ]
    for i, (name, body, code, needles) in enumerate(cases):
        expect_error(args, name, code, needles, "prep", "run", spec("bad%d.yaml" % i, body), txt,
                     "-o", os.path.join(w, "bad_out"))
    # prep bench times images only.
    s = spec("bench.yaml", "inputs:\n  - name: x\n    text: {tokenizer: %s}\n" % good)
    expect_error(args, "prep bench on text", 3, ["'x' is a text input"], "prep", "bench", s, txt)
    # A text longer than max_length with truncation: error.
    s = spec("trunc_error.yaml", "inputs:\n  - name: x\n    text: {tokenizer: %s, max_length: 16, "
             "truncation: error}\n" % good)
    expect_error(args, "text longer than max_length", 3, ["example 2", "max_length 16",
                                                          "truncation: error"],
                 "prep", "run", s, txt, "-o", os.path.join(w, "bad_out"))
    check(not os.path.exists(os.path.join(w, "bad_out", "x.npy")), "no half-written output")
    # padding: none with examples of different lengths.
    s = spec("pad_none.yaml", "inputs:\n  - name: x\n    text: {tokenizer: %s, padding: none}\n"
             % good)
    expect_error(args, "padding none, unequal lengths", 3, ["equal lengths"], "prep", "run", s,
                 txt, "-o", os.path.join(w, "bad_out"))
    # Bad data: not UTF-8, a bad JSON line.
    bad_txt = os.path.join(w, "latin1.txt")
    with open(bad_txt, "wb") as f:
        f.write(b"ok\ncaf\xe9\n")
    s = spec("plain.yaml", "inputs:\n  - name: x\n    text: {tokenizer: %s, max_length: 16}\n" % good)
    expect_error(args, "not UTF-8", 3, ["latin1.txt:2", "UTF-8"], "prep", "run", s, bad_txt, "-o",
                 os.path.join(w, "bad_out"))
    bad_jsonl = os.path.join(w, "bad.jsonl")
    with open(bad_jsonl, "w") as f:
        f.write('"fine"\n{"text": 3}\n')
    expect_error(args, "bad JSON line", 3, ["bad.jsonl:2", "'text'"], "prep", "run", s, bad_jsonl,
                 "-o", os.path.join(w, "bad_out"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    paths, data = parity(args)
    sweep(args, paths)
    run_with_prep(args, paths, data)
    prep_check(args, paths, data)
    bad_inputs(args, paths)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
