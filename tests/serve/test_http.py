"""ferry serve over HTTP, driven by the real Triton client (tritonclient 2.73 from PyPI) and by
raw sockets for what a client library would never send.

Covers: health, server and model metadata, infer on every zoo model (binary and JSON tensors,
outputs compared with ONNX Runtime on the same inputs), encoded PNGs as BYTES through a model's
prep.yaml (equal to `ferry prep run`'s tensors), classification with labels, dynamic
batching (fewer executions than inferences), the repository extension (index, unload, load),
statistics, Prometheus metrics (promtool), signed artifacts (a wrong key or a changed golden
output is never served, with the reason in the index), bad requests (each a 4xx with one JSON
error), a stalled half request, API keys (401/403, revocation), hot reloads under load with
broken versions (0 failed requests), SIGTERM draining, and 10,000 mutated requests plus a flood
of oversized bodies (bounded RSS; under ASan in `make sanitize`).

usage: test_http.py --ferry build/src/ferry --zoo build/models/zoo --work DIR
"""
import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serving import Server, free_port, link_model, metric  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = ["digits_cnn", "gru_encoder", "bert_encoder", "mobilenet_v2", "resnet18_op17"]
FAILURES = []


DIGIT_NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def check(cond, what):
    if cond:
        print(f"ok   {what}")
    else:
        print(f"FAIL {what}")
        FAILURES.append(what)


def expect_error(fn, status, words, what):
    try:
        fn()
    except InferenceServerException as e:
        msg = e.message() or ""
        ok = str(e.status()) == str(status) and all(w in msg for w in words)
        check(ok, f"{what}: {e.status()} {msg!r}")
        return
    check(False, f"{what}: no error")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def read_inputs(model_dir):
    model = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    feeds = {}
    for k, name in enumerate(names):
        t = onnx.TensorProto()
        with open(os.path.join(model_dir, "test_data_set_0", f"input_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        feeds[name] = numpy_helper.to_array(t)
    return feeds, [o.name for o in model.graph.output]


def np_to_triton(a):
    return {np.float32: "FP32", np.int64: "INT64", np.int32: "INT32", np.bool_: "BOOL",
            np.float64: "FP64", np.uint8: "UINT8"}[a.dtype.type]


def infer(client, model, feeds, binary, outputs=None, **kw):
    inputs = []
    for name, a in feeds.items():
        i = httpclient.InferInput(name, list(a.shape), np_to_triton(a))
        i.set_data_from_numpy(a, binary_data=binary)
        inputs.append(i)
    outs = None
    if outputs is not None:
        outs = [httpclient.InferRequestedOutput(n, binary_data=binary) for n in outputs]
    return client.infer(model, inputs, outputs=outs, **kw)


def raw_http(port, data, timeout=30, half_close=False):
    """Sends raw bytes, returns (status, body) of the answer ('' when the server closed).
    half_close: shut the sending side after the bytes (the server reads EOF, not a stall)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    if half_close:
        s.shutdown(socket.SHUT_WR)
    chunks = []
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            chunks.append(c)
            text = b"".join(chunks)
            if b"\r\n\r\n" in text:
                head, body = text.split(b"\r\n\r\n", 1)
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if len(body) >= length:
                    break
    finally:
        s.close()
    text = b"".join(chunks)
    if not text:
        return 0, ""
    head, body = text.split(b"\r\n\r\n", 1)
    return int(head.split(b" ")[1]), body.decode(errors="replace")


def post(path, body, headers=None):
    h = {"Content-Length": str(len(body)), "Host": "x", "Connection": "close"}
    h.update(headers or {})
    req = f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return req.encode() + body


def build_artifact(ferry, work, key):
    art = os.path.join(work, "digits_artifact")
    run([ferry, "build", os.path.join(ROOT, "examples", "digits_cnn", "ferry.yaml"), "-o", art,
         "--force"])
    run([ferry, "sign", art, "--key", key])
    return art


def rewrite_manifest_entry(art, rel):
    """After changing `rel`, make the manifest agree (so only the signature or golden check
    can catch the change)."""
    path = os.path.join(art, "manifest.json")
    m = json.load(open(path))
    data = open(os.path.join(art, rel), "rb").read()
    for f in m["files"]:
        if f["path"] == rel:
            f["sha256"] = hashlib.sha256(data).hexdigest()
            f["bytes"] = len(data)
    json.dump(m, open(path, "w"), indent=2, sort_keys=True)


TEXTS = ["The quick brown fox jumps over the lazy dog.", "Café au lait, naïve résumé!",
         "serving models with ferry " * 6, ""]


def make_text_model(repo):
    """text_ids: a model of input_ids + 1000 * attention_mask ([N, L] int64) with a prep.yaml
    whose text input tokenizes with a WordPiece tokenizer.json trained here (tokenizers, venv);
    clients send raw texts as BYTES. Returns the tokenizer.json's path."""
    from onnx import TensorProto, helper
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    tk = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.train_from_iterator(TEXTS * 20, trainers.WordPieceTrainer(
        vocab_size=120, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    tk.post_processor = processors.BertProcessing(("[SEP]", tk.token_to_id("[SEP]")),
                                                  ("[CLS]", tk.token_to_id("[CLS]")))
    g = helper.make_graph(
        [helper.make_node("Mul", ["attention_mask", "k"], ["m"]),
         helper.make_node("Add", ["input_ids", "m"], ["out"])], "g",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["n", "l"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["n", "l"])],
        [helper.make_tensor_value_info("out", TensorProto.INT64, ["n", "l"])],
        [helper.make_tensor("k", TensorProto.INT64, [], [1000])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    d = os.path.join(repo, "text_ids", "1")
    os.makedirs(d)
    onnx.save(model, os.path.join(d, "model.onnx"))
    path = os.path.join(repo, "text_ids", "tokenizer.json")
    tk.save(path)
    with open(os.path.join(repo, "text_ids", "prep.yaml"), "w") as f:
        f.write("inputs:\n  - name: input_ids\n    text: {tokenizer: tokenizer.json, max_length: 16}\n"
                "  - name: attention_mask\n    text: {from: input_ids, output: attention_mask}\n")
    return path


def text_checks(c, tokenizer_path):
    """Texts as BYTES through the model's prep.yaml: the model sees the tokenizers library's ids
    and mask (truncated and padded to 16); the companion input is derived, never sent."""
    from tokenizers import Tokenizer
    tk = Tokenizer.from_file(tokenizer_path)
    tk.enable_truncation(16)
    tk.enable_padding(length=16, pad_id=0)
    encs = tk.encode_batch(TEXTS)
    want = (np.array([e.ids for e in encs], np.int64) +
            1000 * np.array([e.attention_mask for e in encs], np.int64))
    raw = httpclient.InferInput("input_ids", [len(TEXTS)], "BYTES")
    raw.set_data_from_numpy(np.array([t.encode() for t in TEXTS], dtype=object))
    got = c.infer("text_ids", [raw]).as_numpy("out")
    check(got is not None and got.shape == want.shape and np.array_equal(got, want),
          f"texts as BYTES through prep.yaml's tokenizer = the tokenizers library's ids and mask "
          f"({None if got is None else got.shape})")
    mask = httpclient.InferInput("attention_mask", [len(TEXTS), 16], "INT64")
    mask.set_data_from_numpy(np.ones((len(TEXTS), 16), np.int64))
    expect_error(lambda: c.infer("text_ids", [raw, mask]), 400, ["'attention_mask'", "text"],
                 "a companion input sent beside its text")
    bad = httpclient.InferInput("input_ids", [1], "BYTES")
    bad.set_data_from_numpy(np.array([b"caf\xe9"], dtype=object))
    expect_error(lambda: c.infer("text_ids", [bad]), 400, ["'input_ids'", "UTF-8"],
                 "a text that is not UTF-8")


def main_suite(args, work):
    ferry = args.ferry
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    key = os.path.join(work, "key.pem")
    run([ferry, "keys", "generate", "--out", key, "--force"])
    other = os.path.join(work, "other.pem")
    run([ferry, "keys", "generate", "--out", other, "--force"])
    art = build_artifact(ferry, work, key)

    # digits: the signed artifact (with its own prep.yaml and class names, labels.txt), dynamic
    # batching; a labels.txt beside serve.yaml loses to the artifact's.
    shutil.copytree(art, os.path.join(repo, "digits", "1"))
    with open(os.path.join(repo, "digits", "labels.txt"), "w") as f:
        f.write("\n".join(f"digit-{i}" for i in range(10)) + "\n")
    with open(os.path.join(repo, "digits", "serve.yaml"), "w") as f:
        f.write("max_batch_size: 16\ndynamic_batching:\n  max_queue_delay_us: 3000\n"
                "instances: 1\n")
    # wrongkey: signed by another key. badgolden: a golden output changed, re-signed.
    shutil.copytree(art, os.path.join(repo, "wrongkey", "1"))
    run([ferry, "sign", os.path.join(repo, "wrongkey", "1"), "--key", other])
    bad = os.path.join(repo, "badgolden", "1")
    shutil.copytree(art, bad)
    out0 = os.path.join(bad, "golden", "data", "test_data_set_0", "output_0.pb")
    t = onnx.TensorProto()
    t.ParseFromString(open(out0, "rb").read())
    a = numpy_helper.to_array(t).copy()
    a.flat[0] += 1.0
    open(out0, "wb").write(numpy_helper.from_array(a, t.name).SerializeToString())
    rewrite_manifest_entry(bad, "golden/data/test_data_set_0/output_0.pb")
    run([ferry, "sign", bad, "--key", key])
    # The zoo, plain ONNX in Triton's layout.
    for name in ZOO:
        link_model(repo, name, 1, os.path.join(args.zoo, name, "model.onnx"))
    # digits_raw: the digits CNN with a preprocessing spec: clients may send encoded images.
    link_model(repo, "digits_raw", 1, os.path.join(args.zoo, "digits_cnn", "model.onnx"))
    with open(os.path.join(repo, "digits_raw", "prep.yaml"), "w") as f:
        f.write("inputs:\n  - name: image\n    image:\n      decode: {exif: apply}\n"
                "      color: gray\n      resize: {size: [8, 8], filter: pil_box}\n"
                "      scale: 0.0627450980392157\n      layout: chw\n      batch: true\n")

    text_tokenizer = make_text_model(repo)

    with Server(ferry, repo, "--trusted-key", key.replace(".pem", ".pub.pem"),
                "--allow-unsigned", "--insecure-no-auth", "--max-body-mb", "64",
                "--read-timeout-s", "2", "--poll-interval-ms", "0") as srv:
        print("\n".join(srv.banner))
        c = httpclient.InferenceServerClient(srv.url, concurrency=8)
        check(c.is_server_live() and c.is_server_ready(), "server live and ready")
        meta = c.get_server_metadata()
        check(meta["name"] == "ferry" and "binary_tensor_data" in meta["extensions"],
              f"server metadata {meta}")
        md = c.get_model_metadata("digits")
        check(md["inputs"][0] == {"name": "image", "datatype": "FP32", "shape": [-1, 1, 8, 8]}
              and md["platform"] == "onnx_onnxv1" and md["versions"] == ["1"]
              and md["verified"] is True, f"digits metadata {md}")
        check(c.get_model_metadata("resnet18_op17")["verified"] is False,
              "plain ONNX is marked unverified")
        # The model configuration extension, Triton's vocabulary: digits batches (serve.yaml's
        # max_batch_size, dims without the batch axis), the zoo's GRU does not.
        check("model_configuration" in meta["extensions"], "model_configuration advertised")
        cfg = c.get_model_config("digits")
        check(cfg["max_batch_size"] == 16 and cfg["input"][0]["name"] == "image"
              and cfg["input"][0]["data_type"] == "TYPE_FP32" and cfg["input"][0]["dims"] == [1, 8, 8]
              and cfg["output"][0]["dims"] == [10] and cfg["output"][0]["label_filename"] == "labels.txt"
              and cfg["dynamic_batching"]["max_queue_delay_microseconds"] == 3000
              and cfg["instance_group"][0] == {"name": "digits", "kind": "KIND_CPU", "count": 1}
              and cfg["version_policy"] == {"latest": {"num_versions": 1}}
              and cfg["backend"] == "ferry", f"digits config {cfg}")
        g = c.get_model_config("gru_encoder", "1")
        check(g["max_batch_size"] == 0 and "dynamic_batching" not in g
              and [i["data_type"] for i in g["input"]] == ["TYPE_INT64"]
              and len(g["input"][0]["dims"]) == 2, f"gru_encoder config {g}")
        expect_error(lambda: c.get_model_config("nosuch"), "404", ["nosuch"],
                     "config of an unknown model")
        check(c.is_model_ready("digits") and c.is_model_ready("digits", "1"), "digits ready")
        check(not c.is_model_ready("wrongkey"), "artifact signed by another key: not ready")
        check(not c.is_model_ready("badgolden"), "artifact whose golden set fails: not ready")
        index = {(m["name"], m.get("version", "")): m for m in c.get_model_repository_index()}
        check("signature" in index[("wrongkey", "1")]["reason"].lower(),
              f"index says why wrongkey is refused: {index[('wrongkey', '1')]}")
        check("golden set" in index[("badgolden", "1")]["reason"],
              f"index says why badgolden is refused: {index[('badgolden', '1')]}")

        # Every zoo model, binary and JSON, against ONNX Runtime.
        for name in ZOO:
            feeds, out_names = read_inputs(os.path.join(args.zoo, name))
            sess = ort.InferenceSession(os.path.join(args.zoo, name, "model.onnx"),
                                       providers=["CPUExecutionProvider"])
            want = dict(zip(out_names, sess.run(None, feeds)))
            for binary in (True, False):
                r = infer(c, name, feeds, binary, outputs=None if binary else out_names,
                          request_id="req-7")
                worst = 0.0
                for o in out_names:
                    got = r.as_numpy(o)
                    ok = got.shape == want[o].shape
                    if ok:
                        worst = max(worst, float(np.max(np.abs(got - want[o])
                                                        / (1e-3 * np.abs(want[o]) + 1e-4))))
                    check(ok, f"{name} {o} shape {got.shape}")
                resp = r.get_response()
                check(worst <= 1.0 and resp["id"] == "req-7" and resp["model_version"] == "1",
                      f"{name} ({'binary' if binary else 'JSON'}) matches ONNX Runtime "
                      f"(worst |d|/(atol+rtol|x|) {worst:.3f})")

        # Classification with the artifact's class names (examples/digits_cnn/classes.txt).
        feeds, _ = read_inputs(os.path.join(args.zoo, "digits_cnn"))
        img = np.ascontiguousarray(np.concatenate([feeds["image"][:1],
                                                   feeds["image"][:1][..., ::-1]]))
        i = httpclient.InferInput("image", list(img.shape), "FP32")
        i.set_data_from_numpy(img)
        r = c.infer("digits", [i], outputs=[httpclient.InferRequestedOutput("logits",
                                                                            class_count=3)])
        cls = r.as_numpy("logits")
        logits = infer(c, "digits", {"image": img}, True).as_numpy("logits")
        top = np.argsort(-logits, axis=1)[:, :3]
        parsed = [[x.decode().split(":") for x in row] for row in cls]
        check(cls.shape == (2, 3) and all(int(p[1]) == top[b][k] and p[2] == DIGIT_NAMES[top[b][k]]
                                          and abs(float(p[0]) - logits[b][top[b][k]]) < 1e-5
                                          for b, row in enumerate(parsed)
                                          for k, p in enumerate(row)),
              f"classification top-3 with labels: {parsed} vs {top.tolist()}")

        # Raw inputs: PNG bytes through the model's prep.yaml give exactly what `ferry prep run`
        # makes of the same files, sent as tensors.
        from PIL import Image
        pngs = []
        for k, scale in enumerate((4, 3)):
            pixels = np.clip(feeds["image"][0, 0] * (255 / 16), 0, 255).astype(np.uint8)
            if k:
                pixels = pixels[:, ::-1]
            big = np.kron(pixels, np.ones((scale * 2, scale * 2), np.uint8))
            path = os.path.join(work, f"digit{k}.png")
            Image.fromarray(big).save(path)
            pngs.append(path)
        run([ferry, "prep", "run", os.path.join(repo, "digits_raw", "prep.yaml"), *pngs, "-o",
             os.path.join(work, "prep_out")])
        tensor = np.load(os.path.join(work, "prep_out", "image.npy"))
        raw = httpclient.InferInput("image", [2], "BYTES")
        raw.set_data_from_numpy(np.array([open(p, "rb").read() for p in pngs], dtype=object))
        got = c.infer("digits_raw", [raw]).as_numpy("logits")
        want = infer(c, "digits_raw", {"image": tensor.astype(np.float32)}, True).as_numpy("logits")
        check(tensor.shape == (2, 1, 8, 8) and got.shape == (2, 10) and np.array_equal(got, want),
              f"encoded PNGs as BYTES through prep.yaml = ferry prep run's tensors "
              f"({tensor.shape}, max |d| {np.max(np.abs(got - want)) if got.shape == want.shape else 'shape'})")
        # The artifact's own prep.yaml (ferry.yaml `prep`): PNGs sent to `digits` give what
        # `ferry prep run` makes of them with the spec inside the artifact.
        art_spec = os.path.join(repo, "digits", "1", "prep.yaml")
        run([ferry, "prep", "run", art_spec, *pngs, "-o", os.path.join(work, "prep_art")])
        tensor = np.load(os.path.join(work, "prep_art", "image.npy"))
        got = c.infer("digits", [raw]).as_numpy("logits")
        want = infer(c, "digits", {"image": tensor.astype(np.float32)}, True).as_numpy("logits")
        check(got.shape == (2, 10) and np.array_equal(got, want),
              "encoded PNGs through the artifact's own prep.yaml = ferry prep run's tensors")
        bad_png = httpclient.InferInput("image", [1], "BYTES")
        bad_png.set_data_from_numpy(np.array([b"\x89PNG\r\n\x1a\nbroken"], dtype=object))
        expect_error(lambda: c.infer("digits_raw", [bad_png]), 400, ["'image'"],
                     "a corrupt PNG sent to a model with prep.yaml")

        text_checks(c, text_tokenizer)

        # Dynamic batching: concurrent batch-1 requests share executions.
        before = c.get_inference_statistics("digits")["model_stats"][0]
        one = feeds["image"][:1]
        results, errors = [], []

        def client_loop():
            cc = httpclient.InferenceServerClient(srv.url)
            for _ in range(10):
                try:
                    results.append(infer(cc, "digits", {"image": one}, True).as_numpy("logits"))
                except Exception as e:  # noqa: BLE001
                    errors.append(str(e))
        threads = [threading.Thread(target=client_loop) for _ in range(12)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        after = c.get_inference_statistics("digits")["model_stats"][0]
        inferences = after["inference_count"] - before["inference_count"]
        executions = after["execution_count"] - before["execution_count"]
        check(not errors and inferences == 120 and executions < inferences,
              f"dynamic batching: {inferences} inferences in {executions} executions, "
              f"errors {errors[:1]}")
        check(all(np.allclose(r, results[0], atol=1e-5) for r in results),
              "batched answers equal the batch-1 answer")
        sizes = [b["batch_size"] for b in after["batch_stats"]]
        check(max(sizes) > 1, f"batch_stats sizes {sorted(sizes)}")

        # Errors the client library reports.
        expect_error(lambda: infer(c, "nosuch", {"image": one}, True), 404, ["nosuch"],
                     "unknown model")
        expect_error(lambda: infer(c, "digits", {"img": one}, True), 400, ["'img'"],
                     "wrong input name")
        expect_error(lambda: infer(c, "digits", {"image": one.astype(np.float64)}, True), 400,
                     ["'image'", "FP64", "FP32"], "wrong input dtype")
        expect_error(lambda: infer(c, "digits", {"image": np.zeros((1, 1, 8, 7), np.float32)},
                                   True), 400, ["'image'", "[-1,1,8,8]"], "wrong input shape")
        expect_error(lambda: infer(c, "digits", {"image": one}, True, model_version="9"), 404,
                     ["version 9"], "unknown version")

        # Raw requests a client library would not send.
        port = srv.ports["http"]
        st, body = raw_http(port, post("/v2/models/digits/infer", b"{not json"))
        check(st == 400 and "JSON" in json.loads(body)["error"], f"malformed JSON: {st} {body}")
        hdr = json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32",
                                      "parameters": {"binary_data_size": 256}}]}).encode()
        st, body = raw_http(port, post("/v2/models/digits/infer", hdr + b"\0" * 100,
                                       {"Inference-Header-Content-Length": len(hdr)}))
        check(st == 400 and "256" in body and "100" in body,
              f"binary part shorter than binary_data_size: {st} {body}")
        huge = json.dumps({"inputs": [{"name": "image", "shape": [1000000, 1000000],
                                       "datatype": "FP32", "data": [0]}]}).encode()
        st, body = raw_http(port, post("/v2/models/digits/infer", huge))
        check(st == 400 and "limit" in body, f"10^12 elements declared: {st} {body}")
        st, body = raw_http(port, post("/v2/models/digits/infer", b"x" * (65 << 20)))
        check(st == 413, f"body over --max-body-mb: {st} {body[:80]}")
        st, body = raw_http(port, b"GET /v2/nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        check(st == 404 and "error" in json.loads(body), f"unknown endpoint: {st} {body}")
        # A connection that sends half a request and stalls is closed (--read-timeout-s 2),
        # and the server answers others meanwhile.
        stalled = socket.create_connection(("127.0.0.1", port), timeout=30)
        stalled.sendall(b"POST /v2/models/digits/infer HTTP/1.1\r\nContent-Length: 1000\r\n\r\n{")
        check(c.is_model_ready("digits"), "served while a connection stalls")
        t0 = time.time()
        closed = stalled.recv(100)
        check(time.time() - t0 < 25, f"stalled connection closed by the server ({closed[:40]!r})")
        stalled.close()

        # Repository extension.
        c.unload_model("digits")
        check(not c.is_model_ready("digits"), "unloaded digits is not ready")
        expect_error(lambda: infer(c, "digits", {"image": one}, True), 503, ["digits"],
                     "infer on an unloaded model")
        c.load_model("digits")
        check(c.is_model_ready("digits"), "loaded again")
        expect_error(lambda: c.load_model("badgolden"), 400, ["golden set"],
                     "load of an artifact whose golden set fails")

        # Metrics: Triton's names, each success counted once, promtool clean but for the
        # naming remarks on the nv_* names.
        text = srv.metrics()
        stats = c.get_inference_statistics("digits")["model_stats"][0]
        check(metric(text, "nv_inference_request_success", model="digits") ==
              stats["inference_stats"]["success"]["count"],
              "nv_inference_request_success equals the statistics' success count")
        check(metric(text, "nv_inference_request_failure", model="digits", reason="OTHER") >= 3,
              "failed requests counted")
        # Summaries: every request of the version counted once; quantiles ordered.
        requests = (metric(text, "nv_inference_request_success", model="digits") +
                    metric(text, "nv_inference_request_failure", model="digits"))
        count = metric(text, "nv_inference_request_summary_us_count", model="digits")
        q = [metric(text, "nv_inference_request_summary_us", model="digits", quantile=x)
             for x in ("0.5", "0.9", "0.99")]
        qcount = metric(text, "nv_inference_queue_summary_us_count", model="digits")
        check(count == requests and count > 0 and q[0] <= q[1] <= q[2] and q[0] > 0 and
              qcount == metric(text, "nv_inference_request_success", model="digits"),
              f"summary metrics: count {count} = requests {requests}, p50/p90/p99 {q} us, "
              f"queue count {qcount}")
        promtool = shutil.which("promtool")
        if promtool:
            p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                               text=True)
            remarks = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
            other = [ln for ln in remarks if not ln.startswith("nv_")]
            check(not other and "error" not in (p.stdout + p.stderr).lower(),
                  f"promtool check metrics: {len(remarks)} naming remarks on nv_* only; "
                  f"other: {other[:3]}")
        else:
            check(False, "promtool is installed (Debian package prometheus)")

        # SIGTERM drains: a request in flight (seen in the pending gauge) finishes, exit 0.
        done = []
        f, _ = read_inputs(os.path.join(args.zoo, "resnet18_op17"))
        batch = np.ascontiguousarray(np.repeat(f["image"], 16, 0))
        cc = httpclient.InferenceServerClient(srv.url)

        def slow():
            try:
                done.append(infer(cc, "resnet18_op17", {"image": batch}, True)
                            .as_numpy("logits").shape)
            except Exception as e:  # noqa: BLE001
                done.append(str(e))
        th = threading.Thread(target=slow)
        th.start()
        for _ in range(2000):
            if metric(srv.metrics(), "nv_inference_pending_request_count",
                      model="resnet18_op17") > 0:
                break
            time.sleep(0.002)
        code = srv.terminate()
        th.join()
        check(code == 0 and done == [(16, 1000)], f"SIGTERM: exit {code}, in-flight {done}")


def auth_suite(args, work):
    repo = os.path.join(work, "repo-auth")
    for name in ("digits", "other"):
        link_model(repo, name, 1, os.path.join(args.zoo, "digits_cnn", "model.onnx"))
    keys = os.path.join(work, "keys.yaml")

    def write_keys(entries):
        tmp = keys + ".tmp"
        with open(tmp, "w") as f:
            f.write("keys:\n")
            for name, key, scopes in entries:
                h = subprocess.run([args.ferry, "keys", "hash-api-key"], input=key + "\n",
                                   capture_output=True, text=True, check=True).stdout.strip()
                f.write(f"  - name: {name}\n    sha256: {h}\n    scopes: {json.dumps(scopes)}\n")
        os.replace(tmp, keys)
    write_keys([("app", "app-secret", ["infer:dig*"]), ("ops", "ops-secret", ["admin"])])
    with Server(args.ferry, repo, "--allow-unsigned", "--keys", keys,
                "--poll-interval-ms", "0") as srv:
        feeds, _ = read_inputs(os.path.join(args.zoo, "digits_cnn"))
        one = {"image": feeds["image"][:1]}

        def client(key):
            h = {"Authorization": f"Bearer {key}"} if key else None
            return httpclient.InferenceServerClient(srv.url), h
        c, _ = client(None)
        check(c.is_server_live(), "health needs no key")
        expect_error(lambda: infer(c, "digits", one, True), 401, ["API key"], "no key: 401")
        c, h = client("wrong")
        expect_error(lambda: infer(c, "digits", one, True, headers=h), 401, ["unknown"],
                     "unknown key: 401")
        c, h = client("app-secret")
        check(infer(c, "digits", one, True, headers=h).as_numpy("logits").shape == (1, 10),
              "infer with a scoped key")
        expect_error(lambda: infer(c, "other", one, True, headers=h), 403, ["other"],
                     "key scoped to dig*: 403 on another model")
        expect_error(lambda: c.get_model_repository_index(headers=h), 403, ["admin"],
                     "infer key: 403 on the repository extension")
        c2, h2 = client("ops-secret")
        check(len(c2.get_model_repository_index(headers=h2)) == 2, "admin key lists the index")
        time.sleep(0.05)
        write_keys([("ops", "ops-secret", ["admin"])])  # revoke app
        expect_error(lambda: infer(c, "digits", one, True, headers=h), 401, ["unknown"],
                     "revoked key fails on its next request")


def reload_suite(args, work):
    """Ten hot reloads (good and broken versions alternating) under constant load."""
    repo = os.path.join(work, "repo-reload")
    good = os.path.join(args.zoo, "digits_cnn", "model.onnx")
    link_model(repo, "digits", 1, good)
    with open(os.path.join(repo, "digits", "serve.yaml"), "w") as f:
        f.write("instances: 2\n")
    with Server(args.ferry, repo, "--allow-unsigned", "--insecure-no-auth",
                "--poll-interval-ms", "100") as srv:
        feeds, _ = read_inputs(os.path.join(args.zoo, "digits_cnn"))
        one = {"image": feeds["image"][:1]}
        stop = threading.Event()
        ok, failed, versions = [0], [], set()
        lock = threading.Lock()

        def load():
            cc = httpclient.InferenceServerClient(srv.url)
            while not stop.is_set():
                try:
                    r = infer(cc, "digits", one, True)
                    with lock:
                        ok[0] += 1
                        versions.add(r.get_response()["model_version"])
                except Exception as e:  # noqa: BLE001
                    with lock:
                        failed.append(str(e))
        threads = [threading.Thread(target=load) for _ in range(4)]
        [t.start() for t in threads]
        c = httpclient.InferenceServerClient(srv.url)
        broken = set()
        for k in range(10):
            v = k + 2
            d = os.path.join(repo, "digits", str(v))
            tmp = os.path.join(repo, "digits", f".{v}.tmp")
            os.makedirs(tmp)
            if k % 2 == 0:
                shutil.copyfile(good, os.path.join(tmp, "model.onnx"))
            else:
                with open(os.path.join(tmp, "model.onnx"), "wb") as f:
                    f.write(open(good, "rb").read()[:500])  # truncated: refused
                broken.add(str(v))
            os.rename(tmp, d)
            for _ in range(600):
                idx = {m.get("version"): m for m in c.get_model_repository_index()
                       if m["name"] == "digits"}
                if idx.get(str(v), {}).get("state") in ("READY", "UNAVAILABLE"):
                    break
                time.sleep(0.05)
            state = idx.get(str(v), {}).get("state")
            check(state == ("UNAVAILABLE" if str(v) in broken else "READY"),
                  f"reload {k + 1}: version {v} {state} {idx.get(str(v), {}).get('reason', '')[:80]}")
            time.sleep(0.3)
        stop.set()
        [t.join() for t in threads]
        check(not failed, f"hot reloads under load: {ok[0]} requests, {len(failed)} failed "
                          f"{failed[:2]}")
        check(not (versions & broken), f"broken versions never served (served {sorted(versions)})")
        text = srv.metrics()
        counted = metric(text, "nv_inference_request_success", model="digits")
        check(counted == ok[0], f"metrics count every request once: {counted} vs {ok[0]}")


def renamed_artifact(ferry, work, key):
    """The example's artifact with its output renamed logits -> scores (a breaking change)."""
    proj = os.path.join(work, "proj_renamed")
    shutil.copytree(os.path.join(ROOT, "examples", "digits_cnn"), proj)
    path = os.path.join(proj, "model.onnx")
    old = hashlib.sha256(open(path, "rb").read()).hexdigest()
    m = onnx.load(path)
    for node in m.graph.node:
        node.output[:] = ["scores" if o == "logits" else o for o in node.output]
    m.graph.output[0].name = "scores"
    onnx.save(m, path)
    new = hashlib.sha256(open(path, "rb").read()).hexdigest()
    cfg = os.path.join(proj, "ferry.yaml")
    text = open(cfg).read().replace(old, new).replace("version: 1.0.0", "version: 2.0.0")
    open(cfg, "w").write(text)
    art = os.path.join(work, "renamed_artifact")
    run([ferry, "build", cfg, "-o", art, "--force", "--bench-runs", "0"])
    run([ferry, "sign", art, "--key", key])
    return art


def compat_suite(args, work):
    """A new artifact version is compared with the one it supersedes (artifact diff): with
    serve.yaml `breaking_changes: refuse` a renamed output is not served and the old version
    keeps serving; a compatible one replaces it; by default the breaking one serves, stated."""
    ferry = args.ferry
    key = os.path.join(work, "compat-key.pem")
    run([ferry, "keys", "generate", "--out", key, "--force"])
    os.makedirs(os.path.join(work, "compat"), exist_ok=True)
    art = build_artifact(ferry, os.path.join(work, "compat"), key)
    renamed = renamed_artifact(ferry, work, key)
    repo = os.path.join(work, "repo-compat")
    shutil.copytree(art, os.path.join(repo, "strict", "1"))
    with open(os.path.join(repo, "strict", "serve.yaml"), "w") as f:
        f.write("breaking_changes: refuse\n")
    shutil.copytree(art, os.path.join(repo, "lenient", "1"))
    with Server(ferry, repo, "--trusted-key", key.replace(".pem", ".pub.pem"),
                "--insecure-no-auth", "--poll-interval-ms", "0") as srv:
        c = httpclient.InferenceServerClient(srv.url)
        check(c.is_model_ready("strict", "1") and c.is_model_ready("lenient", "1"),
              "compat: both models serve version 1")
        shutil.copytree(renamed, os.path.join(repo, "strict", "2"))
        expect_error(lambda: c.load_model("strict"), 400,
                     ["breaking_changes: refuse", "output 'logits'", "renamed to 'scores'"],
                     "compat: a renamed output is refused under breaking_changes: refuse")
        idx = {(m["name"], m.get("version")): m for m in c.get_model_repository_index()}
        check(idx[("strict", "2")]["state"] == "UNAVAILABLE" and
              "breaks clients of version 1" in idx[("strict", "2")]["reason"],
              f"compat: the index says why version 2 is not served: {idx[('strict', '2')]}")
        feeds, _ = read_inputs(os.path.join(args.zoo, "digits_cnn"))
        r = infer(c, "strict", {"image": feeds["image"][:1]}, True)
        check(r.get_response()["model_version"] == "1" and r.as_numpy("logits").shape == (1, 10),
              "compat: version 1 keeps serving")
        # A compatible version 3 (the same interface) replaces version 1.
        shutil.copytree(art, os.path.join(repo, "strict", "3"))
        c.load_model("strict")
        r = infer(c, "strict", {"image": feeds["image"][:1]}, True)
        check(r.get_response()["model_version"] == "3", "compat: a compatible version 3 serves")
        check("version 3: READY" in srv.log() and "compatible with version 1" in srv.log(),
              "compat: the log states version 3 is compatible with version 1")
        # Without the key (breaking_changes: allow), the renamed output serves, stated.
        shutil.copytree(renamed, os.path.join(repo, "lenient", "2"))
        c.load_model("lenient")
        md = c.get_model_metadata("lenient")
        check(md["outputs"][0]["name"] == "scores" and c.is_model_ready("lenient", "2"),
              f"compat: breaking_changes allow (default) serves the renamed output {md['outputs']}")
        check("BREAKING against version 1: output 'logits'" in srv.log(),
              "compat: the log states the breaking change")


def decode_suite(args, work):
    """A detector whose prep.yaml has `outputs:`: the server offers `output0_decoded` (BYTES, one
    JSON per row, in the metadata); for PNGs sent as BYTES the boxes map back to each image, equal
    to what `ferry run --prep` prints for the same image and tensor."""
    from PIL import Image
    repo = os.path.join(work, "repo-decode")
    os.makedirs(os.path.join(repo, "det", "1"))
    model = os.path.join(repo, "det", "1", "model.onnx")
    import onnx.helper as oh
    from onnx import TensorProto as TP
    g = oh.make_graph(
        [oh.make_node("Identity", ["raw"], ["output0"]),
         oh.make_node("ReduceMean", ["images"], ["mean"], axes=[1, 2, 3], keepdims=0)],
        "det", [oh.make_tensor_value_info("images", TP.FLOAT, ["n", 3, 64, 64]),
                oh.make_tensor_value_info("raw", TP.FLOAT, ["n", 7, 50])],
        [oh.make_tensor_value_info("output0", TP.FLOAT, ["n", 7, 50]),
         oh.make_tensor_value_info("mean", TP.FLOAT, ["n"])])
    onnx.save(oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)]), model)
    spec = ("inputs:\n  - name: images\n    image:\n      decode: {exif: apply}\n"
            "      color: rgb\n      resize: {size: [64, 64], filter: cv2_linear, fit: letterbox}\n"
            "      scale: 0.00392156862745098\n"
            "outputs:\n  - name: output0\n    detect: {format: yolov8, score_threshold: 0.2, "
            "iou_threshold: 0.5, labels: [cat, dog, bird]}\n")
    with open(os.path.join(repo, "det", "prep.yaml"), "w") as f:
        f.write(spec)
    rng = np.random.RandomState(11)
    raw = np.zeros((2, 7, 50), np.float32)
    raw[:, 0:2] = rng.uniform(0, 64, (2, 2, 50))
    raw[:, 2:4] = rng.uniform(2, 30, (2, 2, 50))
    raw[:, 4:] = rng.uniform(0, 1, (2, 3, 50)) ** 2
    pngs = []
    for k, (h, w) in enumerate(((30, 50), (80, 40))):
        path = os.path.join(work, f"det{k}.png")
        Image.fromarray(rng.randint(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        pngs.append(path)
    with Server(args.ferry, repo, "--allow-unsigned", "--insecure-no-auth",
                "--poll-interval-ms", "0") as srv:
        c = httpclient.InferenceServerClient(srv.url)
        md = c.get_model_metadata("det")
        check({"name": "output0_decoded", "datatype": "BYTES", "shape": [-1]} in md["outputs"],
              f"decode: metadata lists output0_decoded ({md['outputs']})")
        img = httpclient.InferInput("images", [2], "BYTES")
        img.set_data_from_numpy(np.array([open(p, "rb").read() for p in pngs], dtype=object))
        rin = httpclient.InferInput("raw", list(raw.shape), "FP32")
        rin.set_data_from_numpy(raw)
        res = c.infer("det", [img, rin], outputs=[httpclient.InferRequestedOutput("output0_decoded"),
                                                  httpclient.InferRequestedOutput("output0")])
        decoded = [json.loads(x) for x in res.as_numpy("output0_decoded").reshape(-1)]
        ok = len(decoded) == 2
        spec_path = os.path.join(repo, "det", "prep.yaml")
        for k in range(2):
            np.save(os.path.join(work, f"raw{k}.npy"), raw[k:k + 1])
            r = subprocess.run([args.ferry, "run", model, "--prep", spec_path, "--input",
                                "images=" + pngs[k], "--input", f"raw={work}/raw{k}.npy", "--json"],
                               capture_output=True, text=True)
            want = json.loads(r.stdout)["outputs"][0] if r.returncode == 0 else {}
            ok = ok and decoded[k]["boxes_in"] == "original image" and \
                decoded[k]["detections"] == want.get("detections") and len(want["detections"]) > 0
        check(ok, f"decode: output0_decoded per image equals ferry run --prep "
                  f"({[len(d['detections']) for d in decoded]} detections)")
        check(res.as_numpy("output0").shape == (2, 7, 50), "decode: the raw output still comes")
        expect_error(lambda: c.infer("det", [img, rin], outputs=[
            httpclient.InferRequestedOutput("output0_decoded", class_count=2)]), 400,
            ["decoded"], "decode: classification of a decoded output is refused")


def table_suite(args, work):
    """A model whose prep.yaml has a table input: clients send CSV documents as BYTES (one per
    element, rows concatenated); the model sees what `ferry prep run` makes of the same files."""
    import onnx.helper as oh
    from onnx import TensorProto as TP
    repo = os.path.join(work, "repo-table")
    os.makedirs(os.path.join(repo, "tab", "1"))
    g = oh.make_graph([oh.make_node("Identity", ["x"], ["y"])], "tab",
                      [oh.make_tensor_value_info("x", TP.FLOAT, ["n", 4])],
                      [oh.make_tensor_value_info("y", TP.FLOAT, ["n", 4])])
    onnx.save(oh.make_model(g, opset_imports=[oh.make_opsetid("", 13)]),
              os.path.join(repo, "tab", "1", "model.onnx"))
    spec = os.path.join(repo, "tab", "prep.yaml")
    with open(spec, "w") as f:
        f.write("inputs:\n  - name: x\n    table:\n      columns:\n"
                "        - field: a\n          number: {missing: 0, mean: 1, std: 2}\n"
                "        - field: c\n          category: {vocabulary: [p, q, r], unknown: zeros}\n")
    docs = [b"a,c\n1.5,q\n,r\n", b'c,a\r\n"p",-3\r\n']
    paths = []
    for k, d in enumerate(docs):
        paths.append(os.path.join(work, f"t{k}.csv"))
        open(paths[-1], "wb").write(d)
    run([args.ferry, "prep", "run", spec, *paths, "-o", os.path.join(work, "tab_out")])
    want = np.load(os.path.join(work, "tab_out", "x.npy"))
    with Server(args.ferry, repo, "--allow-unsigned", "--insecure-no-auth",
                "--poll-interval-ms", "0") as srv:
        c = httpclient.InferenceServerClient(srv.url)
        i = httpclient.InferInput("x", [2], "BYTES")
        i.set_data_from_numpy(np.array(docs, dtype=object))
        got = c.infer("tab", [i]).as_numpy("y")
        check(got.shape == (3, 4) and np.array_equal(got, want),
              f"table: CSV documents as BYTES = ferry prep run's tensor ({got.tolist()})")
        bad = httpclient.InferInput("x", [1], "BYTES")
        bad.set_data_from_numpy(np.array([b"a,c\nnot-a-number,p\n"], dtype=object))
        expect_error(lambda: c.infer("tab", [bad]), 400, ["line 2", "not a number"],
                     "table: a bad field is a 400 naming line and field")


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def fuzz_suite(args, work, count):
    """`count` mutated infer requests (JSON and binary) over keep-alive connections: every
    answer is an HTTP status with a JSON error for 4xx, or the connection is closed; the
    server is alive at the end and its RSS bounded; then a flood of oversized bodies."""
    import random
    repo = os.path.join(work, "repo-fuzz")
    link_model(repo, "digits", 1, os.path.join(args.zoo, "digits_cnn", "model.onnx"))
    rng = random.Random(1)
    img = np.linspace(0, 1, 64, dtype=np.float32).reshape(1, 1, 8, 8)
    seeds = []
    js = json.dumps({"id": "f", "inputs": [{"name": "image", "shape": [1, 1, 8, 8],
                                            "datatype": "FP32",
                                            "data": img.flatten().tolist()}],
                     "outputs": [{"name": "logits", "parameters": {"classification": 3}}]})
    seeds.append((js.encode(), None))
    hdr = json.dumps({"inputs": [{"name": "image", "shape": [1, 1, 8, 8], "datatype": "FP32",
                                  "parameters": {"binary_data_size": 256}}],
                      "parameters": {"binary_data_output": True}}).encode()
    seeds.append((hdr + img.tobytes(), len(hdr)))
    tokens = [b"-1", b"1e999", b"[]", b"{}", b"null", b'"BYTES"', b'"FP16"', b"4294967296",
              b"99999999999999999999", b'"\ud800"', b"\xff", b"[[[[[[", b"true"]
    with Server(args.ferry, repo, "--allow-unsigned", "--insecure-no-auth",
                "--poll-interval-ms", "0", "--max-body-mb", "1", "--read-timeout-s", "2") as srv:
        port = srv.ports["http"]
        rss0 = rss_kb(srv.proc.pid)
        statuses = {}
        bad = []
        sock = None
        for i in range(count):
            body, hlen = seeds[rng.randrange(len(seeds))]
            b = bytearray(body)
            for _ in range(rng.randint(1, 4)):
                op = rng.randrange(5)
                pos = rng.randrange(len(b) + 1)
                if op == 0 and b:
                    b[min(pos, len(b) - 1)] = rng.randrange(256)
                elif op == 1:
                    del b[pos:pos + rng.randint(1, 16)]
                elif op == 2:
                    b[pos:pos] = tokens[rng.randrange(len(tokens))]
                elif op == 3:
                    b = b[:pos]
                else:
                    b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            headers = {"Content-Length": str(len(b)), "Host": "x"}
            if hlen is not None:
                headers["Inference-Header-Content-Length"] = str(
                    hlen if rng.random() < 0.7 else rng.randint(-5, len(b) + 5))
            req = ("POST /v2/models/digits/infer HTTP/1.1\r\n" +
                   "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode() + b
            try:
                if sock is None:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                    f = sock.makefile("rb")
                sock.sendall(req)
                status_line = f.readline()
                if not status_line:
                    raise ConnectionError("closed")
                st = int(status_line.split()[1])
                length = 0
                while True:
                    line = f.readline()
                    if line in (b"\r\n", b""):
                        break
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                payload = f.read(length)
                statuses[st] = statuses.get(st, 0) + 1
                if st >= 400:
                    try:
                        if not json.loads(payload)["error"]:
                            bad.append((i, st, payload[:100]))
                    except Exception:  # noqa: BLE001
                        bad.append((i, st, payload[:100]))
                elif st != 200:
                    bad.append((i, st, payload[:100]))
            except (ConnectionError, OSError, ValueError, IndexError):
                statuses["closed"] = statuses.get("closed", 0) + 1
                if sock:
                    sock.close()
                sock = None
        if sock:
            sock.close()
        rss1 = rss_kb(srv.proc.pid)
        check(srv.proc.poll() is None and not bad,
              f"{count} mutated requests: answers {statuses}, malformed answers {bad[:3]}")
        c = httpclient.InferenceServerClient(srv.url)
        check(infer(c, "digits", {"image": img}, True).as_numpy("logits").shape == (1, 10),
              "serves normally after the fuzzing")
        # Oversized bodies: refused by their Content-Length, memory stays put.
        for _ in range(200):
            st, _ = raw_http(port, b"POST /v2/models/digits/infer HTTP/1.1\r\nHost: x\r\n"
                                   b"Connection: close\r\nContent-Length: 4000000000\r\n\r\n{",
                             half_close=True)
        rss2 = rss_kb(srv.proc.pid)
        check(st in (0, 413), f"oversized body flood: refused ({st or 'connection closed'})")
        # ASan keeps freed memory in its quarantine (256 MiB by default) before reusing it.
        asan = "libasan" in open(f"/proc/{srv.proc.pid}/maps").read()
        slack = (64 + (256 if asan else 0)) * 1024
        check(rss2 < rss0 + slack,
              f"RSS bounded: {rss0 // 1024} MiB at start, {rss1 // 1024} after fuzzing, "
              f"{rss2 // 1024} after the flood")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--fuzz-requests", type=int, default=10000)
    args = ap.parse_args()
    args.ferry = os.path.abspath(args.ferry)
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    for suite in (main_suite, auth_suite, reload_suite, compat_suite, decode_suite, table_suite):
        t0 = time.time()
        suite(args, work)
        print(f"-- {suite.__name__}: {time.time() - t0:.1f} s")
    t0 = time.time()
    fuzz_suite(args, work, args.fuzz_requests)
    print(f"-- fuzz_suite: {time.time() - t0:.1f} s")
    if FAILURES:
        print(f"\n{len(FAILURES)} FAILED:\n  " + "\n  ".join(FAILURES))
        sys.exit(1)
    print("\nall passed")


if __name__ == "__main__":
    main()
