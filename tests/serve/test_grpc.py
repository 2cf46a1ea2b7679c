#!/usr/bin/env python3
"""`ferry serve`'s gRPC front end driven by the real client, tritonclient.grpc 2.73 (venv).

A repository in Triton's layout is made in a temp folder: the digits CNN, a generated model
with INT64/BOOL/BYTES/FP16/UINT8 inputs, a broken model, and (with --zoo) the zoo's models.
Checked: health and metadata, model readiness (a model not loaded is not ready), inference
against ONNX Runtime on the same inputs (raw contents from the client; typed contents over a
raw gRPC channel with tritonclient's own service_pb2), the classification extension, errors
with their status codes and messages naming the input (unknown model, wrong input name, shape
and datatype, a raw content length that does not match the shape), statistics, the repository
index, load and unload. A second server with a keys file checks the `authorization` metadata:
health and server metadata without a key, UNAUTHENTICATED and PERMISSION_DENIED by scope.
With --proto, Ferry's .proto is compared field by field with the
client's (same numbers, types and method signatures).

The server is always killed in a finally block; nothing here asserts a time.
"""
import argparse
import hashlib
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import grpc
import tritonclient.grpc as tc
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from clilib import check, summary  # noqa: E402

ONNX_TO_TRITON = {
    T.FLOAT: "FP32", T.DOUBLE: "FP64", T.FLOAT16: "FP16", T.INT64: "INT64", T.INT32: "INT32",
    T.INT8: "INT8", T.UINT8: "UINT8", T.BOOL: "BOOL", T.STRING: "BYTES",
}


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def make_mixed(path, fp16=True):
    """Inputs a INT64[N,4], b BOOL[N,4], s BYTES[N], f FP16[N,2] (with fp16), u UINT8[N]."""
    nodes = [
        h.make_node("Add", ["a", "a"], ["a2"]),
        h.make_node("Mul", ["a2", "three"], ["sum"]),
        h.make_node("Not", ["b"], ["notb"]),
        h.make_node("Identity", ["s"], ["s_out"]),
        h.make_node("Cast", ["a"], ["af"], to=T.DOUBLE),
        h.make_node("Cast", ["f"], ["f32"], to=T.FLOAT),
        h.make_node("Cast", ["u"], ["ui"], to=T.INT32),
    ]
    g = h.make_graph(
        nodes, "mixed",
        [h.make_tensor_value_info("a", T.INT64, ["N", 4]),
         h.make_tensor_value_info("b", T.BOOL, ["N", 4]),
         h.make_tensor_value_info("s", T.STRING, ["N"]),
         h.make_tensor_value_info("f", T.FLOAT16, ["N", 2]),
         h.make_tensor_value_info("u", T.UINT8, ["N"])],
        [h.make_tensor_value_info("sum", T.INT64, ["N", 4]),
         h.make_tensor_value_info("notb", T.BOOL, ["N", 4]),
         h.make_tensor_value_info("s_out", T.STRING, ["N"]),
         h.make_tensor_value_info("af", T.DOUBLE, ["N", 4]),
         h.make_tensor_value_info("f32", T.FLOAT, ["N", 2]),
         h.make_tensor_value_info("ui", T.INT32, ["N"])],
        [h.make_tensor("three", T.INT64, [], [3])])
    if not fp16:
        del g.node[5]
        del g.input[3]
        del g.output[4]
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)


def mixed_inputs():
    return {
        "a": (np.arange(12, dtype=np.int64).reshape(3, 4) - 5) * 1000000007,
        "b": np.array([[True, False, True, False], [False, False, True, True], [True] * 4]),
        "s": np.array(["héllo".encode(), b"", "\x00 ∑ 😀".encode()], dtype=object),
        "f": np.array([[0.5, -2.25], [65504.0, 1e-3], [0.0, -0.0]], dtype=np.float16),
        "u": np.array([0, 7, 255], dtype=np.uint8),
    }


def ort_run(path, feeds):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    ort_feeds = {}
    for k, v in feeds.items():
        if v.dtype == object:
            v = np.array([x.decode() for x in v.ravel()], dtype=object).reshape(v.shape)
        ort_feeds[k] = v
    return dict(zip(names, sess.run(names, ort_feeds)))


def same_bytes(got, want):
    want_b = [x.encode() if isinstance(x, str) else bytes(x) for x in want.ravel()]
    return got.shape == want.shape and list(got.ravel()) == want_b


def infer_tc(client, model, feeds, outputs=None, **kw):
    ins = []
    for k, v in feeds.items():
        i = tc.InferInput(k, list(v.shape), np_to_triton_dtype(v.dtype))
        i.set_data_from_numpy(v)
        ins.append(i)
    outs = [tc.InferRequestedOutput(o) for o in outputs] if outputs else None
    return client.infer(model, ins, outputs=outs, **kw)


def expect_status(what, fn, code, needles=()):
    """fn() fails with the status `code` (or one of a tuple of codes), its message naming `needles`."""
    codes = code if isinstance(code, tuple) else (code,)
    try:
        fn()
    except InferenceServerException as e:
        check(e.status() in ["StatusCode." + c for c in codes], "%s: status %s (got %s: %s)" % (what, code, e.status(), e.message()))
        for n in needles:
            check(n in (e.message() or ""), "%s: message names %r (%r)" % (what, n, e.message()))
        return
    except grpc.RpcError as e:
        check(e.code().name in codes, "%s: status %s (got %s: %s)" % (what, code, e.code().name, e.details()))
        for n in needles:
            check(n in (e.details() or ""), "%s: message names %r (%r)" % (what, n, e.details()))
        return
    check(False, "%s: refused with %s (it succeeded)" % (what, code))


def check_proto(proto, protoc, work):
    """Ferry's inference.proto against tritonclient's service_pb2: every message Ferry declares
    has the client's field numbers, types and labels, every RPC its request/response types."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    out = os.path.join(work, "ours.pb")
    subprocess.run([protoc, "-I" + os.path.dirname(proto), "--descriptor_set_out=" + out, proto], check=True)
    fds = descriptor_pb2.FileDescriptorSet()
    with open(out, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    ours = pool.FindFileByName(os.path.basename(proto))
    bad = []

    def cmp(a, b):
        for f in a.fields:
            g = b.fields_by_name.get(f.name)
            if g is None or (g.number, g.type, g.is_repeated) != (f.number, f.type, f.is_repeated):
                bad.append("%s.%s" % (a.full_name, f.name))
            elif f.message_type is not None:
                cmp(f.message_type, g.message_type)

    theirs = service_pb2.DESCRIPTOR
    config = model_config_pb2.DESCRIPTOR  # ModelConfig and its parts live there
    for name, m in ours.message_types_by_name.items():
        if name in theirs.message_types_by_name:
            cmp(m, theirs.message_types_by_name[name])
        elif name in config.message_types_by_name:
            cmp(m, config.message_types_by_name[name])
        else:
            bad.append(name)
    for name, e in ours.enum_types_by_name.items():
        t = config.enum_types_by_name.get(name)
        if t is None or any(t.values_by_name.get(v.name) is None or t.values_by_name[v.name].number != v.number
                            for v in e.values):
            bad.append("enum " + name)
    svc = ours.services_by_name["GRPCInferenceService"]
    tsvc = theirs.services_by_name["GRPCInferenceService"]
    check(ours.package == "inference", "proto: package inference")
    for m in svc.methods:
        t = tsvc.methods_by_name[m.name]
        if (t.input_type.full_name, t.output_type.full_name) != (m.input_type.full_name, m.output_type.full_name):
            bad.append("rpc " + m.name)
    check(len(svc.methods) == 12, "proto: 12 RPCs (got %d)" % len(svc.methods))
    stream = svc.methods_by_name.get("ModelStreamInfer")
    check(stream is not None and stream.client_streaming and stream.server_streaming,
          "proto: ModelStreamInfer streams both ways")
    check(not bad, "proto: wire-compatible with tritonclient's service_pb2 (differs: %s)" % bad)


class Server:
    def __init__(self, ferry, models, work, tag, auth_args):
        self.grpc_port = free_port()
        self.stderr_path = os.path.join(work, "serve_%s.stderr" % tag)
        self.stderr = open(self.stderr_path, "w")
        self.lines = []
        # --poll-interval-ms 0: the repository changes only on load/unload (the test adds a model).
        cmd = [ferry, "serve", "--models", models, "--http-port", "0", "--grpc-port", str(self.grpc_port),
               "--metrics-port", "0", "--allow-unsigned", "--poll-interval-ms", "0"] + auth_args
        print("starting:", " ".join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.q = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            self.q.put(line)
        self.q.put(None)

    def wait_grpc(self):
        """The address of the `grpc: HOST:PORT` start-up line; None when the server exited first."""
        while True:
            line = self.q.get()
            if line is None:
                return None
            m = re.match(r"\s*grpc:\s*(\S+):(\d+)", line)
            if m:
                return "%s:%s" % (m.group(1), m.group(2))

    def stop(self):
        """SIGTERM (SIGKILL if it is still running a minute later); checks it exits 0."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            check(self.proc.returncode == 0, "serve exits 0 on SIGTERM (got %s)" % self.proc.returncode)
        self.stderr.close()
        with open(self.stderr_path) as f:
            err = f.read()
        if err.strip():
            print("--- server stderr (last 1500 chars) ---\n" + err[-1500:])

    def start(self):
        """The gRPC address once the server is ready; None when it exited first."""
        addr = self.wait_grpc()
        check(addr is not None, "serve prints 'grpc: HOST:PORT' (stdout ends %r)" % "".join(self.lines)[-300:])
        if addr is None:
            return None
        check(addr.endswith(":%d" % self.grpc_port), "grpc line names the port asked for (%s)" % addr)
        client = tc.InferenceServerClient(addr)
        # The server may still be scanning: readiness is polled while the process lives.
        ready = False
        while self.proc.poll() is None and not ready:
            try:
                ready = client.is_server_ready()
            except InferenceServerException:
                ready = False
            if not ready:
                threading.Event().wait(0.2)
        client.close()
        check(ready, "is_server_ready")
        return addr if ready else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--example", required=True, help="examples/digits_cnn")
    ap.add_argument("--zoo", default="", help="the zoo (tools/make_zoo.py): its models are served too")
    ap.add_argument("--proto", default="", help="src/serve/proto/inference.proto")
    ap.add_argument("--protoc", default=shutil.which("protoc") or "")
    ap.add_argument("--work", default="")
    args = ap.parse_args()

    work = args.work or tempfile.mkdtemp(prefix="ferry_grpc_")
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    if args.proto and args.protoc:
        check_proto(args.proto, args.protoc, work)

    repo = os.path.join(work, "models")
    digits_src = os.path.join(args.example, "model.onnx")
    os.makedirs(os.path.join(repo, "digits", "1"))
    shutil.copy(digits_src, os.path.join(repo, "digits", "1", "model.onnx"))
    os.makedirs(os.path.join(repo, "mixed", "1"))
    mixed_path = os.path.join(repo, "mixed", "1", "model.onnx")
    make_mixed(mixed_path)
    os.makedirs(os.path.join(repo, "typed", "1"))
    typed_path = os.path.join(repo, "typed", "1", "model.onnx")
    make_mixed(typed_path, fp16=False)
    os.makedirs(os.path.join(repo, "broken", "1"))
    with open(os.path.join(repo, "broken", "1", "model.onnx"), "wb") as f:
        f.write(b"this is not an ONNX model")
    zoo = []
    if args.zoo and os.path.isdir(args.zoo):
        for name in sorted(os.listdir(args.zoo)):
            src = os.path.join(args.zoo, name, "model.onnx")
            if os.path.isfile(src) and os.path.isdir(os.path.join(args.zoo, name, "test_data_set_0")):
                os.makedirs(os.path.join(repo, "zoo_" + name, "1"))
                dst = os.path.join(repo, "zoo_" + name, "1", "model.onnx")
                try:
                    os.link(src, dst)
                except OSError:
                    shutil.copy(src, dst)
                zoo.append(name)

    server = Server(args.ferry, repo, work, "open", ["--insecure-no-auth"])
    try:
        addr = server.start()
        if addr is not None:
            run_checks(args, addr, repo, mixed_path, typed_path, zoo)
            utf8_flood_check(addr, server.stderr_path)
    finally:
        server.stop()

    # API keys: the `authorization` metadata, scopes per model and admin.
    auth_repo = os.path.join(work, "auth_models")
    os.makedirs(os.path.join(auth_repo, "digits", "1"))
    shutil.copy(digits_src, os.path.join(auth_repo, "digits", "1", "model.onnx"))
    os.makedirs(os.path.join(auth_repo, "mixed", "1"))
    shutil.copy(mixed_path, os.path.join(auth_repo, "mixed", "1", "model.onnx"))
    keys = os.path.join(work, "keys.yaml")
    with open(keys, "w") as f:
        f.write("keys:\n"
                "  - name: digits-client\n    sha256: %s\n    scopes: [\"infer:digit*\"]\n"
                "  - name: operator\n    sha256: %s\n    scopes: [admin]\n"
                % (hashlib.sha256(INFER_KEY.encode()).hexdigest(), hashlib.sha256(ADMIN_KEY.encode()).hexdigest()))
    # --max-body-mb 1: the gRPC message limit follows the HTTP body limit.
    server = Server(args.ferry, auth_repo, work, "keys", ["--keys", keys, "--max-body-mb", "1"])
    try:
        addr = server.start()
        if addr is not None:
            auth_checks(args, addr)
            # A second server on the port in use: refused at start-up, naming the address.
            empty = os.path.join(work, "empty_models")
            os.makedirs(empty)
            p = subprocess.run([args.ferry, "serve", "--models", empty, "--http-port", "0", "--grpc-port",
                                str(server.grpc_port), "--metrics-port", "0", "--insecure-no-auth", "--allow-unsigned"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
            errors = [l for l in p.stderr.splitlines() if "error" in l.lower()]
            check(p.returncode == 3 and len(errors) == 1 and ":%d" % server.grpc_port in errors[0],
                  "a second server on the gRPC port in use: exit 3, one error line naming it (%d, %s)" %
                  (p.returncode, errors))
    finally:
        server.stop()
    return summary()


INFER_KEY = "infer-key-0123456789"
ADMIN_KEY = "admin-key-9876543210"


def auth_checks(args, addr):
    client = tc.InferenceServerClient(addr)
    x = digits_batch(args)
    infer_h = {"authorization": "Bearer " + INFER_KEY}
    admin_h = {"authorization": "Bearer " + ADMIN_KEY}
    check(client.is_server_live() and client.is_server_ready(), "keys: health needs no key")
    check(client.get_server_metadata().name != "", "keys: server metadata needs no key")
    expect_status("keys: infer without a key", lambda: infer_tc(client, "digits", {"image": x}), "UNAUTHENTICATED")
    expect_status("keys: model ready without a key", lambda: client.is_model_ready("digits"), "UNAUTHENTICATED")
    expect_status("keys: infer with an unknown key",
                  lambda: infer_tc(client, "digits", {"image": x}, headers={"authorization": "Bearer nope"}),
                  "UNAUTHENTICATED")
    expect_status("keys: infer with a Basic authorization",
                  lambda: infer_tc(client, "digits", {"image": x}, headers={"authorization": "Basic " + INFER_KEY}),
                  "UNAUTHENTICATED", ["Bearer"])
    r = infer_tc(client, "digits", {"image": x}, headers=infer_h)
    check(r.as_numpy("logits").shape == (x.shape[0], 10), "keys: infer with the infer:digit* key")
    check(client.is_model_ready("digits", headers=infer_h), "keys: model ready with the infer key")
    check(client.get_model_metadata("digits", headers=infer_h).name == "digits", "keys: metadata with the infer key")
    feeds = mixed_inputs()
    expect_status("keys: infer on a model outside the key's pattern",
                  lambda: infer_tc(client, "mixed", feeds, headers=infer_h), "PERMISSION_DENIED")
    expect_status("keys: repository index with the infer key",
                  lambda: client.get_model_repository_index(headers=infer_h), "PERMISSION_DENIED")
    expect_status("keys: statistics with the infer key",
                  lambda: client.get_inference_statistics("digits", headers=infer_h), "PERMISSION_DENIED")
    expect_status("keys: unload with the infer key",
                  lambda: client.unload_model("digits", headers=infer_h), "PERMISSION_DENIED")
    idx = client.get_model_repository_index(headers=admin_h)
    check({m.name for m in idx.models} == {"digits", "mixed"}, "keys: repository index with the admin key")
    st = client.get_inference_statistics("digits", headers=admin_h)
    check(len(st.model_stats) == 1 and st.model_stats[0].inference_count >= 1, "keys: statistics with the admin key")
    check(client.is_model_ready("digits", headers=infer_h), "keys: still ready (nothing was unloaded)")
    big = np.zeros((5000, 1, 8, 8), np.float32)  # 1.28 MB of raw contents, over --max-body-mb 1
    expect_status("a message over --max-body-mb",
                  lambda: infer_tc(client, "digits", {"image": big}, headers=infer_h), "RESOURCE_EXHAUSTED")
    check(infer_tc(client, "digits", {"image": x}, headers=infer_h).as_numpy("logits").shape == (x.shape[0], 10),
          "keys: serves after the oversized message")
    client.close()


def digits_batch(args):
    """The example's two test inputs and four seeded random digits: a batch of 6."""
    xs = [numpy_helper.to_array(onnx.load_tensor(os.path.join(args.example, "test_data_set_%d" % i, "input_0.pb")))
          for i in range(2)]
    rng = np.random.default_rng(7)
    xs.append((rng.random((4, 1, 8, 8)) * 16).astype(np.float32))
    return np.ascontiguousarray(np.concatenate(xs), dtype=np.float32)


def health_and_reflection_checks(addr):
    """grpc.health.v1 (what Kubernetes gRPC probes call) and server reflection, with raw grpcio
    calls and hand-encoded protobuf (no generated stubs): HealthCheckRequest{service=1},
    HealthCheckResponse{status=1}; ServerReflectionRequest{list_services=7}."""
    ch = grpc.insecure_channel(addr)
    ident = lambda b: b  # noqa: E731
    check_rpc = ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=ident,
                               response_deserializer=ident)

    def req(service):
        data = service.encode()
        return (b"\x0a" + bytes([len(data)]) + data) if data else b""
    check(check_rpc(req(""), timeout=10) == b"\x08\x01", "health Check(''): SERVING")
    check(check_rpc(req("inference.GRPCInferenceService"), timeout=10) == b"\x08\x01",
          "health Check('inference.GRPCInferenceService'): SERVING")
    expect_status("health Check of an unknown service", lambda: check_rpc(req("nosuch"), timeout=10),
                  "NOT_FOUND", ["nosuch"])
    watch = ch.unary_stream("/grpc.health.v1.Health/Watch", request_serializer=ident,
                            response_deserializer=ident)
    stream = watch(req(""), timeout=30)
    first = next(stream)
    stream.cancel()
    check(first == b"\x08\x01", "health Watch(''): first message SERVING (%r)" % first)
    unknown = watch(req("nosuch"), timeout=30)
    got = next(unknown)
    unknown.cancel()
    check(got == b"\x08\x03", "health Watch of an unknown service: SERVICE_UNKNOWN (%r)" % got)
    refl = ch.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                            request_serializer=ident, response_deserializer=ident)
    answers = list(refl(iter([b"\x3a\x00"]), timeout=10))
    blob = b"".join(answers)
    check(len(answers) == 1 and b"inference.GRPCInferenceService" in blob and
          b"grpc.health.v1.Health" in blob,
          "reflection list_services names inference.GRPCInferenceService and grpc.health.v1.Health")
    ch.close()


def utf8_flood_check(addr, stderr_path):
    """200 ModelInfer requests whose model_name is not UTF-8 (hand-encoded: field 1, bytes ff fe):
    each refused with a status, and protobuf's parse-failure log rate-limited (one line per
    second at most) so the server's stderr does not grow per request."""
    ch = grpc.insecure_channel(addr)
    ident = lambda b: b  # noqa: E731
    infer = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer", request_serializer=ident,
                           response_deserializer=ident)
    before = open(stderr_path, errors="replace").read().count("libprotobuf")
    codes = set()
    for _ in range(200):
        try:
            infer(b"\x0a\x02\xff\xfe", timeout=10)
            codes.add("OK")
        except grpc.RpcError as e:
            codes.add(e.code().name)
    ch.close()
    after = open(stderr_path, errors="replace").read().count("libprotobuf")
    check("OK" not in codes and after - before <= 10,
          "200 requests with a non-UTF-8 string field: refused (%s), %d protobuf log lines"
          % (sorted(codes), after - before))


def stream_checks(addr, x, want):
    """ModelStreamInfer through tritonclient's start_stream / async_stream_infer: 12 requests
    sent without waiting (batch sizes 1-3, one to an unknown model, one with a wrong input name)
    each answered once, in order, with its id; the errors arrive as the stream's errors and the
    stream goes on; a second stream on the same client after stop_stream works too."""
    import queue
    client = tc.InferenceServerClient(addr)
    got = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    sent = []
    for i in range(12):
        n = 1 + i % 3
        model, name = "digits", "image"
        if i == 5:
            model = "nosuch"
        if i == 8:
            name = "pixels"
        inp = tc.InferInput(name, [n] + list(x.shape[1:]), "FP32")
        inp.set_data_from_numpy(x[:n])
        client.async_stream_infer(model, [inp], request_id="s%d" % i)
        sent.append((i, n))
    answers = [got.get(timeout=60) for _ in sent]
    client.stop_stream()
    ok_ids, errs = [], []
    for (i, n), (result, error) in zip(sent, answers):
        if i in (5, 8):
            errs.append((i, error is not None and result is None,
                         "" if error is None else error.message()))
            continue
        r = result.as_numpy("logits") if result is not None else None
        good = error is None and r is not None and np.allclose(r, want[:n], rtol=1e-4, atol=1e-5)
        ok_ids.append(good and result.get_response().id == "s%d" % i)
    check(all(ok_ids) and len(ok_ids) == 10,
          "stream: 10 answers in order, each = ONNX Runtime with its request id (%s)" % ok_ids)
    check(all(e[1] for e in errs) and "nosuch" in errs[0][2] and "pixels" in errs[1][2],
          "stream: an unknown model and a wrong input name answered as errors naming them, "
          "the stream going on (%s)" % errs)
    got2 = queue.Queue()
    client.start_stream(callback=lambda result, error: got2.put((result, error)))
    inp = tc.InferInput("image", list(x[:2].shape), "FP32")
    inp.set_data_from_numpy(x[:2])
    client.async_stream_infer("digits", [inp], request_id="again")
    result, error = got2.get(timeout=60)
    client.stop_stream()
    check(error is None and np.allclose(result.as_numpy("logits"), want[:2], rtol=1e-4, atol=1e-5),
          "stream: a second stream on the same client answers")
    client.close()


def run_checks(args, addr, repo, mixed_path, typed_path, zoo):
    client = tc.InferenceServerClient(addr)
    check(client.is_server_live(), "is_server_live")
    health_and_reflection_checks(addr)

    md = client.get_server_metadata()
    check(md.name != "" and md.version != "", "server metadata: name %r version %r" % (md.name, md.version))
    check(len(md.extensions) > 0, "server metadata: extensions %s" % list(md.extensions))

    digits_model = onnx.load(os.path.join(args.example, "model.onnx"))
    mm = client.get_model_metadata("digits")
    check(mm.name == "digits" and "1" in list(mm.versions), "model metadata: name, versions %s" % list(mm.versions))
    check(mm.platform == "onnx_onnxv1", "model metadata: platform %r" % mm.platform)
    want_in = [(i.name, ONNX_TO_TRITON[i.type.tensor_type.elem_type]) for i in digits_model.graph.input]
    got_in = [(i.name, i.datatype) for i in mm.inputs]
    check(got_in == want_in, "model metadata: inputs %s" % got_in)
    check(list(mm.inputs[0].shape) == [-1, 1, 8, 8], "model metadata: input shape %s" % list(mm.inputs[0].shape))
    check([(o.name, o.datatype) for o in mm.outputs] == [("logits", "FP32")], "model metadata: outputs")
    mm = client.get_model_metadata("mixed", "1")
    check([(i.name, i.datatype) for i in mm.inputs] ==
          [("a", "INT64"), ("b", "BOOL"), ("s", "BYTES"), ("f", "FP16"), ("u", "UINT8")],
          "model metadata (mixed): datatypes %s" % [(i.name, i.datatype) for i in mm.inputs])
    expect_status("metadata of an unknown model", lambda: client.get_model_metadata("nosuch"), "NOT_FOUND")

    cfg = client.get_model_config("digits").config
    check(cfg.name == "digits" and cfg.backend == "ferry" and cfg.input[0].name == "image"
          and cfg.input[0].data_type == model_config_pb2.TYPE_FP32
          and cfg.output[0].data_type == model_config_pb2.TYPE_FP32
          and cfg.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_CPU
          and cfg.version_policy.latest.num_versions == 1,
          "model config: digits in Triton's vocabulary (%s)" % str(cfg).replace("\n", " ")[:300])
    check((cfg.max_batch_size > 0 and list(cfg.input[0].dims) == [1, 8, 8]) or
          (cfg.max_batch_size == 0 and list(cfg.input[0].dims) == [-1, 1, 8, 8]),
          "model config: dims without the batch axis exactly when max_batch_size > 0 (%d, %s)" % (
              cfg.max_batch_size, list(cfg.input[0].dims)))
    expect_status("model config of an unknown model", lambda: client.get_model_config("nosuch"),
                  "NOT_FOUND", ["nosuch"])
    check(client.is_model_ready("digits"), "is_model_ready digits")
    check(client.is_model_ready("digits", "1"), "is_model_ready digits v1")
    check(not client.is_model_ready("digits", "7"), "is_model_ready digits v7 (no such version) is false")
    check(not client.is_model_ready("nosuch"), "is_model_ready of an unknown model is false")
    check(not client.is_model_ready("broken"), "is_model_ready of a model that failed to load is false")

    # --- inference: digits against ONNX Runtime ---
    x = digits_batch(args)
    want = ort_run(digits_src_of(args), {"image": x})["logits"]
    r = infer_tc(client, "digits", {"image": x}, request_id="req-42")
    got = r.as_numpy("logits")
    check(got is not None and got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-5),
          "infer digits batch %d = ONNX Runtime (max diff %s)" % (
              x.shape[0], None if got is None or got.shape != want.shape else float(np.abs(got - want).max())))
    resp = r.get_response()
    check(resp.id == "req-42", "infer echoes the request id (%r)" % resp.id)
    check(resp.model_name == "digits" and resp.model_version == "1",
          "infer names model and version (%r, %r)" % (resp.model_name, resp.model_version))
    r = infer_tc(client, "digits", {"image": x[:1]}, model_version="1", priority=1, timeout=60000000)
    check(np.allclose(r.as_numpy("logits"), want[:1], rtol=1e-4, atol=1e-5),
          "infer digits with version, priority and timeout parameters")

    # classification: the top 3 as "score:index"
    outs = [tc.InferRequestedOutput("logits", class_count=3)]
    ins = [tc.InferInput("image", list(x.shape), "FP32")]
    ins[0].set_data_from_numpy(x)
    cls = client.infer("digits", ins, outputs=outs).as_numpy("logits")
    ok = cls is not None and cls.shape == (x.shape[0], 3)
    if ok:
        for n in range(x.shape[0]):
            order = np.argsort(-want[n], kind="stable")[:3]
            parts = [c.decode().split(":") for c in cls[n]]
            ok = ok and [int(p[1]) for p in parts] == list(order)
            ok = ok and np.allclose([float(p[0]) for p in parts], want[n][order], rtol=1e-4, atol=1e-3)
    check(ok, "classification class_count=3: top-3 'score:index' match ONNX Runtime (%s)" %
          (None if cls is None else cls[:1]))

    stream_checks(addr, x, want)

    # concurrent calls: 8 client threads x 10 requests of different batch sizes, each answer checked
    results = []

    def worker(t):
        c = tc.InferenceServerClient(addr)
        for k in range(10):
            n = 1 + (t + k) % x.shape[0]
            got = infer_tc(c, "digits", {"image": x[:n]}).as_numpy("logits")
            results.append(got.shape == (n, 10) and np.allclose(got, want[:n], rtol=1e-4, atol=1e-5))
        c.close()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    check(len(results) == 80 and all(results), "80 concurrent requests from 8 threads: every answer right (%d/%d)" %
          (sum(results), len(results)))

    # --- inference: INT64 / BOOL / BYTES / FP16 / UINT8 (raw contents) ---
    feeds = mixed_inputs()
    want_m = ort_run(mixed_path, feeds)
    r = infer_tc(client, "mixed", feeds)
    for name in ["sum", "notb", "af", "f32", "ui"]:
        got = r.as_numpy(name)
        check(got is not None and got.dtype == want_m[name].dtype and np.array_equal(got, want_m[name]),
              "infer mixed: %s %s equal to ONNX Runtime" % (name, want_m[name].dtype))
    check(same_bytes(r.as_numpy("s_out"), want_m["s_out"]), "infer mixed: BYTES s_out round trip (%r)" %
          (r.as_numpy("s_out"),))
    r = infer_tc(client, "mixed", feeds, outputs=["ui", "notb"])
    check([o.name for o in r.get_response().outputs] == ["ui", "notb"], "requested outputs only, in order")
    # an empty batch
    empty = {k: v[:0] for k, v in feeds.items()}
    try:
        r = infer_tc(client, "mixed", empty)
        check(r.as_numpy("sum").shape == (0, 4), "infer mixed with an empty batch: shape (0, 4)")
    except InferenceServerException as e:
        check(e.status() == "StatusCode.INVALID_ARGUMENT", "infer mixed empty batch: answered (%s)" % e)

    # --- typed contents over a raw channel with tritonclient's own messages ---
    channel = grpc.insecure_channel(addr)
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)

    def typed_request(model):
        req = service_pb2.ModelInferRequest(model_name=model)
        a = req.inputs.add(name="a", datatype="INT64", shape=[3, 4])
        a.contents.int64_contents.extend(feeds["a"].ravel().tolist())
        b = req.inputs.add(name="b", datatype="BOOL", shape=[3, 4])
        b.contents.bool_contents.extend(feeds["b"].ravel().tolist())
        s = req.inputs.add(name="s", datatype="BYTES", shape=[3])
        s.contents.bytes_contents.extend(list(feeds["s"]))
        u = req.inputs.add(name="u", datatype="UINT8", shape=[3])
        u.contents.uint_contents.extend(feeds["u"].tolist())
        return req

    # INT64 / BOOL / BYTES / UINT8 as typed contents (the model without the FP16 input)
    typed_feeds = {k: v for k, v in feeds.items() if k != "f"}
    want_t = ort_run(typed_path, typed_feeds)
    resp = stub.ModelInfer(typed_request("typed"))
    got = {}
    for o, raw in zip(resp.outputs, resp.raw_output_contents):
        if o.datatype == "BYTES":
            vals, at = [], 0
            while at < len(raw):
                n = int.from_bytes(raw[at:at + 4], "little")
                vals.append(raw[at + 4:at + 4 + n])
                at += 4 + n
            got[o.name] = np.array(vals, dtype=object).reshape(list(o.shape))
        else:
            dt = {"INT64": np.int64, "BOOL": np.bool_, "FP64": np.float64, "INT32": np.int32}[o.datatype]
            got[o.name] = np.frombuffer(raw, dtype=dt).reshape(list(o.shape))
    check(len(resp.outputs) == len(resp.raw_output_contents) == 5 and not any(
        o.HasField("contents") for o in resp.outputs), "typed request: 5 outputs, all in raw_output_contents")
    for name, w in want_t.items():
        g = got.get(name)
        ok = g is not None and (same_bytes(g, w) if w.dtype == object else np.array_equal(g, w))
        check(ok, "typed contents: %s equal to ONNX Runtime" % name)
    req = typed_request("typed")
    req.inputs[3].contents.uint_contents[1] = 256
    expect_status("uint_contents value 256 for UINT8", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT", ["'u'", "256"])
    req = typed_request("typed")
    req.inputs[0].contents.fp32_contents.append(1.0)
    expect_status("INT64 input with a value in fp32_contents", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT", ["'a'"])
    req = typed_request("mixed")
    f = req.inputs.add(name="f", datatype="FP16", shape=[3, 2])
    f.contents.fp32_contents.extend(feeds["f"].astype(np.float32).ravel().tolist())
    expect_status("typed contents for FP16 (raw only)", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT", ["'f'"])
    req = typed_request("mixed")
    f = req.inputs.add(name="f", datatype="FP32", shape=[3, 2])
    f.contents.fp32_contents.extend(feeds["f"].astype(np.float32).ravel().tolist())
    expect_status("FP32 given for the FP16 input f", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT", ["f"])
    # A model with only typed-capable inputs: digits (fp32_contents).
    req = service_pb2.ModelInferRequest(model_name="digits", id="typed")
    t = req.inputs.add(name="image", datatype="FP32", shape=list(x.shape))
    t.contents.fp32_contents.extend(x.ravel().tolist())
    resp = stub.ModelInfer(req)
    got = np.frombuffer(resp.raw_output_contents[0], dtype=np.float32).reshape(list(resp.outputs[0].shape))
    check(len(resp.raw_output_contents) == 1 and np.allclose(got, want, rtol=1e-4, atol=1e-5),
          "typed fp32_contents: answer in raw_output_contents = ONNX Runtime")
    req.inputs[0].contents.fp32_contents.append(1.0)
    expect_status("typed contents with one value too many", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT",
                  ["image"])
    # typed and raw mixed
    req = service_pb2.ModelInferRequest(model_name="digits")
    t = req.inputs.add(name="image", datatype="FP32", shape=list(x.shape))
    t.contents.fp32_contents.extend(x.ravel().tolist())
    req.raw_input_contents.append(x.tobytes())
    expect_status("raw and typed contents together", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT", ["image"])

    # --- raw content length mismatches ---
    req = service_pb2.ModelInferRequest(model_name="digits")
    req.inputs.add(name="image", datatype="FP32", shape=list(x.shape))
    req.raw_input_contents.append(x.tobytes()[:-4])
    expect_status("raw content 4 bytes short", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT", ["image"])
    req = service_pb2.ModelInferRequest(model_name="digits")
    req.inputs.add(name="image", datatype="FP32", shape=[1000000, 1000000, 1000000, 8])
    req.raw_input_contents.append(x.tobytes())
    expect_status("raw content for a shape of 8e18 elements", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT",
                  ["image"])
    req = service_pb2.ModelInferRequest(model_name="mixed")
    for k, v in feeds.items():
        req.inputs.add(name=k, datatype=np_to_triton_dtype(v.dtype), shape=list(v.shape))
        if v.dtype == object:
            req.raw_input_contents.append(b"".join(len(e).to_bytes(4, "little") + e for e in v)[:-1])
        else:
            req.raw_input_contents.append(v.tobytes())
    expect_status("BYTES raw content whose last element is cut", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT",
                  ["'s'"])
    req = service_pb2.ModelInferRequest(model_name="digits")
    req.inputs.add(name="image", datatype="FP32", shape=list(x.shape))
    expect_status("an input with no data", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT", ["image"])
    req = service_pb2.ModelInferRequest(model_name="digits")
    req.inputs.add(name="image", datatype="FP32", shape=[-1, 1, 8, 8])
    req.raw_input_contents.append(x[:1].tobytes())
    expect_status("a negative dim", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT", ["image"])
    req = service_pb2.ModelInferRequest(model_name="mixed")
    req.inputs.add(name="s", datatype="BYTES", shape=[1000000, 1000000])
    req.raw_input_contents.append(b"\x01\x00\x00\x00a" * 3)
    expect_status("BYTES shape of 10^12 elements with 15 bytes", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT",
                  ["'s'"])
    req = service_pb2.ModelInferRequest(model_name="digits")
    req.inputs.add(name="image", datatype="FP33", shape=list(x.shape))
    req.raw_input_contents.append(x.tobytes())
    expect_status("an unknown datatype", lambda: stub.ModelInfer(req), "INVALID_ARGUMENT", ["FP33"])

    # Mutated requests (bytes flipped, cut, repeated) on the wire: each gets an answer, no crash.
    base = service_pb2.ModelInferRequest(model_name="mixed")
    for k, v in feeds.items():
        base.inputs.add(name=k, datatype=np_to_triton_dtype(v.dtype), shape=list(v.shape))
        if v.dtype == object:
            base.raw_input_contents.append(b"".join(len(e).to_bytes(4, "little") + e for e in v))
        else:
            base.raw_input_contents.append(v.tobytes())
    base_bytes = base.SerializeToString()
    raw_call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
    rng = np.random.default_rng(24)
    codes = {}
    for _ in range(300):
        b = bytearray(base_bytes)
        for _ in range(int(rng.integers(1, 6))):
            op = int(rng.integers(0, 3))
            at = int(rng.integers(0, len(b)))
            if op == 0:
                b[at] = int(rng.integers(0, 256))
            elif op == 1:
                del b[at:at + int(rng.integers(1, 16))]
            else:
                b[at:at] = b[at:at + int(rng.integers(1, 32))]
        try:
            raw_call(bytes(b))
            codes["OK"] = codes.get("OK", 0) + 1
        except grpc.RpcError as e:
            codes[e.code().name] = codes.get(e.code().name, 0) + 1
    print("   mutated bytes:", codes)
    # (INTERNAL: gRPC's own answer to a message that does not parse.)
    check(set(codes) <= {"OK", "INVALID_ARGUMENT", "NOT_FOUND", "INTERNAL", "UNIMPLEMENTED"},
          "300 byte-mutated ModelInfer requests each answered (%s)" % codes)
    # Well-formed messages with wrong shapes, datatypes, contents: the decoder and the Service.
    dtypes = ["BOOL", "UINT8", "UINT16", "INT8", "INT32", "INT64", "UINT64", "FP16", "BF16", "FP32", "FP64", "BYTES"]
    codes = {}
    for _ in range(300):
        req = service_pb2.ModelInferRequest()
        req.CopyFrom(base)
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(0, len(req.inputs)))
            op = int(rng.integers(0, 5))
            if op == 0 and len(req.inputs[i].shape):
                d = int(rng.integers(0, len(req.inputs[i].shape)))
                req.inputs[i].shape[d] = int(rng.choice([-2, -1, 0, 1, 2, 3, 5, 1 << 20, 1 << 40, (1 << 63) - 1]))
            elif op == 1:
                req.inputs[i].datatype = str(rng.choice(dtypes))
            elif op == 2:
                raw = req.raw_input_contents[i]
                req.raw_input_contents[i] = raw[:int(rng.integers(0, len(raw) + 1))] + \
                    bytes(rng.integers(0, 256, int(rng.integers(0, 9)), dtype=np.uint8))
            elif op == 3:
                req.inputs[i].shape.append(int(rng.integers(0, 4)))
            else:
                j = int(rng.integers(0, len(req.inputs)))
                req.raw_input_contents[i], req.raw_input_contents[j] = \
                    req.raw_input_contents[j], req.raw_input_contents[i]
        try:
            stub.ModelInfer(req)
            codes["OK"] = codes.get("OK", 0) + 1
        except grpc.RpcError as e:
            codes[e.code().name] = codes.get(e.code().name, 0) + 1
    print("   mutated fields:", codes)
    check(set(codes) <= {"OK", "INVALID_ARGUMENT"}, "300 field-mutated requests: OK or INVALID_ARGUMENT (%s)" % codes)
    check(client.is_server_live(), "live after the mutated requests")
    channel.close()

    # --- errors through the client ---
    expect_status("infer on an unknown model", lambda: infer_tc(client, "nosuch", {"image": x}), "NOT_FOUND")
    expect_status("infer on an unknown version", lambda: infer_tc(client, "digits", {"image": x}, model_version="9"),
                  "NOT_FOUND")
    expect_status("wrong input name", lambda: infer_tc(client, "digits", {"pixels": x}), "INVALID_ARGUMENT", ["pixels"])
    expect_status("wrong input shape", lambda: infer_tc(client, "digits", {"image": x.reshape(x.shape[0], 8, 8, 1)}),
                  "INVALID_ARGUMENT", ["image"])
    expect_status("wrong input datatype", lambda: infer_tc(client, "digits", {"image": x.astype(np.float64)}),
                  "INVALID_ARGUMENT", ["image"])
    expect_status("unknown output", lambda: infer_tc(client, "digits", {"image": x}, outputs=["probs"]),
                  "INVALID_ARGUMENT", ["probs"])
    expect_status("infer on the model that failed to load", lambda: infer_tc(client, "broken", {"image": x}),
                  ("UNAVAILABLE", "NOT_FOUND"))

    # --- the zoo ---
    for name in zoo:
        src = os.path.join(repo, "zoo_" + name, "1", "model.onnx")
        m = onnx.load(src, load_external_data=False)
        init = {i.name for i in m.graph.initializer}
        in_names = [i.name for i in m.graph.input if i.name not in init]
        d = os.path.join(args.zoo, name, "test_data_set_0")
        feeds_z = {}
        for k, n in enumerate(in_names):
            feeds_z[n] = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "input_%d.pb" % k)))
        want_z = ort_run(src, feeds_z)
        try:
            r = infer_tc(client, "zoo_" + name, feeds_z)
            ok = all(np.allclose(r.as_numpy(o), w, rtol=1e-3, atol=1e-4) for o, w in want_z.items())
            check(ok, "zoo %s: every output = ONNX Runtime (atol 1e-4, rtol 1e-3)" % name)
        except InferenceServerException as e:
            check(False, "zoo %s: infer (%s)" % (name, e))

    # --- statistics ---
    st = client.get_inference_statistics("digits")
    ms = [s for s in st.model_stats if s.name == "digits"]
    ok = len(ms) == 1
    if ok:
        s = ms[0]
        print("   digits stats: inference_count %d execution_count %d success %d" %
              (s.inference_count, s.execution_count, s.inference_stats.success.count))
        ok = (s.version == "1" and s.inference_stats.success.count >= 4 and s.inference_count >= 4 and
              s.execution_count >= 1 and s.last_inference > 0 and s.inference_stats.success.ns > 0)
    check(ok, "statistics for digits: version 1, >= 4 successes and inferences, executions, last_inference")
    st_all = client.get_inference_statistics(as_json=True)
    names = {s["name"] for s in st_all.get("model_stats", [])}
    check({"digits", "mixed"} <= names, "statistics of every model name digits and mixed (%s)" % sorted(names))
    expect_status("statistics of an unknown model", lambda: client.get_inference_statistics("nosuch"), "NOT_FOUND")

    # --- repository index, load, unload ---
    idx = client.get_model_repository_index()
    entries = {(m.name, m.version): m for m in idx.models}
    check(("digits", "1") in entries and entries[("digits", "1")].state == "READY", "index: digits/1 READY")
    check(("mixed", "1") in entries and entries[("mixed", "1")].state == "READY", "index: mixed/1 READY")
    broken = [m for m in idx.models if m.name == "broken"]
    check(len(broken) >= 1 and broken[0].state == "UNAVAILABLE" and broken[0].reason != "",
          "index: broken UNAVAILABLE with a reason (%s)" % [(m.state, m.reason) for m in broken])
    ready_only = client.get_model_repository_index(as_json=True)
    check(isinstance(ready_only, dict), "index as JSON")

    # a model added after start-up: not ready until loaded
    os.makedirs(os.path.join(repo, "late", "1"))
    shutil.copy(os.path.join(args.example, "model.onnx"), os.path.join(repo, "late", "1", "model.onnx"))
    check(not client.is_model_ready("late"), "a model added after start-up is not ready before load")
    client.load_model("late")
    check(client.is_model_ready("late"), "load_model late: ready")
    r = infer_tc(client, "late", {"image": x})
    check(np.allclose(r.as_numpy("logits"), want, rtol=1e-4, atol=1e-5), "infer on the loaded model")
    client.unload_model("late")
    check(not client.is_model_ready("late"), "unload_model late: not ready")
    expect_status("infer on the unloaded model", lambda: infer_tc(client, "late", {"image": x}),
                  ("UNAVAILABLE", "NOT_FOUND"))
    client.load_model("late")
    check(client.is_model_ready("late"), "load_model late again: ready")
    expect_status("load of a model not in the repository", lambda: client.load_model("nowhere"),
                  ("NOT_FOUND", "INVALID_ARGUMENT", "UNAVAILABLE"), ["nowhere"])
    check(client.is_server_live(), "still live at the end")
    client.close()


def digits_src_of(args):
    return os.path.join(args.example, "model.onnx")


if __name__ == "__main__":
    sys.exit(main())
