#!/usr/bin/env python3
"""`ferry loadgen` against a real `ferry serve` (tests/serve/serving.py) on a temporary
Triton-layout repository: the zoo's digits CNN, a model with INT64/BOOL/FP16 inputs (generated
values), one whose every run fails (a Reshape that cannot fit one element) and one with a
BYTES input (cannot be generated).

Checked, over HTTP and gRPC: a few hundred requests at concurrency 1 and 4 end with 0 errors,
completed == requested, the JSON fields, and the server's statistics endpoint counted exactly
those requests (plus the warm-up ones); generated inputs; the shared gRPC channel; a cell cut by
--duration; a model whose requests fail shows them as errors (exit 1, never as throughput); a
wrong model name, a closed port and a server that never answers are one `ferry: error:` line
with exit 3; bad flags exit 2. Nothing here asserts a time.
"""
import argparse
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import urllib.request

import onnx
from onnx import TensorProto as T
from onnx import helper as h

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clilib import check, expect_error, ferry, summary  # noqa: E402
from serving import Server, free_port, link_model  # noqa: E402


def save(graph, path):
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def make_typed(path):
    """a INT64[N,4], b BOOL[N,4], f FP16[N,2] -> a2 = a + a, nb = not b, f32 = float(f)."""
    g = h.make_graph(
        [h.make_node("Add", ["a", "a"], ["a2"]), h.make_node("Not", ["b"], ["nb"]),
         h.make_node("Cast", ["f"], ["f32"], to=T.FLOAT)], "typed",
        [h.make_tensor_value_info("a", T.INT64, ["N", 4]),
         h.make_tensor_value_info("b", T.BOOL, ["N", 4]),
         h.make_tensor_value_info("f", T.FLOAT16, ["N", 2])],
        [h.make_tensor_value_info("a2", T.INT64, ["N", 4]),
         h.make_tensor_value_info("nb", T.BOOL, ["N", 4]),
         h.make_tensor_value_info("f32", T.FLOAT, ["N", 2])])
    save(g, path)


def make_failing(path):
    """x FP32[N] reshaped to [2, -1]: with N = 1 (what loadgen generates) every run fails."""
    g = h.make_graph(
        [h.make_node("Reshape", ["x", "shape"], ["y"])], "failing",
        [h.make_tensor_value_info("x", T.FLOAT, ["N"])],
        [h.make_tensor_value_info("y", T.FLOAT, [2, "M"])],
        [h.make_tensor("shape", T.INT64, [2], [2, -1])])
    save(g, path)


def make_bytes(path):
    g = h.make_graph([h.make_node("Identity", ["s"], ["t"])], "bytes",
                     [h.make_tensor_value_info("s", T.STRING, ["N"])],
                     [h.make_tensor_value_info("t", T.STRING, ["N"])])
    save(g, path)


def stats(server, model):
    url = f"http://{server.url}/v2/models/{model}/stats"
    with urllib.request.urlopen(url) as r:
        s = json.load(r)["model_stats"][0]["inference_stats"]
    return s["success"]["count"], s["fail"]["count"]


def loadgen(args, *cmd):
    rc, out, err = ferry(args, "loadgen", *cmd)
    doc = None
    if out.strip().startswith("{"):
        try:
            doc = json.loads(out)
        except ValueError:
            pass
    return rc, doc, err


CELL_KEYS = {"concurrency", "requests", "completed", "ok", "errors", "warmup_errors",
             "first_error", "stopped_by", "wall_s", "throughput", "p50_us", "p90_us", "p99_us",
             "max_us", "mean_us", "cpu_s", "cpu_us_per_request"}


def check_clean_run(name, rc, doc, err, conc, requests):
    check(rc == 0, f"{name}: exit 0 (got {rc}; {err.strip()[:300]})")
    if doc is None:
        check(False, f"{name}: one JSON document on stdout")
        return
    cells = doc.get("cells", [])
    check([c.get("concurrency") for c in cells] == conc, f"{name}: one cell per C {conc}")
    for c in cells:
        tag = f"{name} C={c.get('concurrency')}"
        check(set(c) == CELL_KEYS, f"{tag}: JSON cell fields (got {sorted(c)})")
        check(c["errors"] == 0 and c["warmup_errors"] == 0 and c["first_error"] is None,
              f"{tag}: 0 errors ({c.get('first_error')})")
        check(c["requests"] == requests and c["completed"] == requests and c["ok"] == requests,
              f"{tag}: completed == ok == requested {requests} (got {c['completed']}, {c['ok']})")
        check(c["stopped_by"] == "requests", f"{tag}: stopped by the ticket budget")
        check(c["throughput"] > 0 and c["wall_s"] > 0, f"{tag}: throughput and wall time > 0")
        check(0 < c["p50_us"] <= c["p90_us"] <= c["p99_us"] <= c["max_us"],
              f"{tag}: 0 < p50 <= p90 <= p99 <= max ({c['p50_us']}, {c['p90_us']}, "
              f"{c['p99_us']}, {c['max_us']})")
        check(c["cpu_s"] > 0 and c["cpu_us_per_request"] > 0, f"{tag}: generator CPU measured")


def never_answers():
    """A listening socket that accepts and never answers; returns (port, stop)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    held, done = [], threading.Event()

    def run():
        s.settimeout(0.2)
        while not done.is_set():
            try:
                held.append(s.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def stop():
        done.set()
        t.join()
        for c in held:
            c.close()
        s.close()
    return s.getsockname()[1], stop


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--zoo", required=True, help="build/models/zoo")
    ap.add_argument("--work", default="")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="ferry_loadgen_")
    if os.path.isdir(work):
        shutil.rmtree(work)
    repo = os.path.join(work, "models")
    os.makedirs(repo)
    link_model(repo, "digits", 1, os.path.join(args.zoo, "digits_cnn", "model.onnx"))
    data = os.path.join(args.zoo, "digits_cnn", "test_data_set_0")
    for name, make in (("typed", make_typed), ("failing", make_failing), ("bytes", make_bytes)):
        os.makedirs(os.path.join(repo, name, "1"))
        make(os.path.join(repo, name, "1", "model.onnx"))

    with Server(args.ferry, repo, "--allow-unsigned", "--insecure-no-auth", "--instances", "2",
                "--poll-interval-ms", "0", grpc=True) as server:
        addr = {"http": server.url, "grpc": f"127.0.0.1:{server.ports['grpc']}"}
        requests, warmup, conc = 300, 2, [1, 4]
        for proto in ("http", "grpc"):
            ok0, fail0 = stats(server, "digits")
            rc, doc, err = loadgen(args, f"--{proto}", addr[proto], "--model", "digits",
                                   "--input-dir", data, "--concurrency", "1,4", "--requests",
                                   str(requests), "--warmup", str(warmup), "--json")
            check_clean_run(f"{proto} digits", rc, doc, err, conc, requests)
            if doc:
                check(doc["protocol"] == proto and doc["model"] == "digits" and
                      doc["target"] == addr[proto] and doc["input_source"] == data,
                      f"{proto}: report names protocol, target, model, input dir")
                check([(i["name"], i["datatype"], i["shape"], i["bytes"]) for i in doc["inputs"]]
                      == [("image", "FP32", [1, 1, 8, 8], 256)],
                      f"{proto}: input from test_data_set_0 ({doc['inputs']})")
                check([o["name"] for o in doc["outputs"]] == ["logits"], f"{proto}: outputs")
            ok1, fail1 = stats(server, "digits")
            want = requests * len(conc) + warmup * sum(conc)
            check(ok1 - ok0 == want and fail1 == fail0,
                  f"{proto}: the server counted {want} successes, no failure "
                  f"(got {ok1 - ok0}, {fail1 - fail0})")

        # Generated inputs (INT64, BOOL, FP16), both protocols, and the shared gRPC channel.
        for proto, extra in (("http", []), ("grpc", []), ("grpc", ["--grpc-channels", "shared"])):
            ok0, _ = stats(server, "typed")
            rc, doc, err = loadgen(args, f"--{proto}", addr[proto], "--model", "typed",
                                   "--concurrency", "3", "--requests", "100", "--warmup", "1",
                                   "--seed", "7", "--json", *extra)
            name = f"{proto} typed generated {' '.join(extra)}".strip()
            check_clean_run(name, rc, doc, err, [3], 100)
            if doc:
                check(doc["input_source"] == "generated (seed 7)" and
                      [i["shape"] for i in doc["inputs"]] == [[1, 4], [1, 4], [1, 2]],
                      f"{name}: generated inputs, dynamic dims 1 ({doc['inputs']})")
            ok1, _ = stats(server, "typed")
            check(ok1 - ok0 == 103, f"{name}: the server counted 103 successes (got {ok1 - ok0})")

        # The text report.
        rc, out, err = ferry(args, "loadgen", "--http", addr["http"], "--model", "digits",
                             "--requests", "20", "--concurrency", "1,2")
        check(rc == 0 and "req/s" in out and "p99 us" in out and len(out.splitlines()) >= 8,
              f"text report (rc {rc}): {out[:400]!r} {err[:200]!r}")

        # --duration ends a cell whose tickets are not spent.
        rc, doc, err = loadgen(args, "--http", addr["http"], "--model", "digits", "--requests",
                               "10000000", "--duration", "0.3", "--json")
        check(rc == 0 and doc and doc["cells"][0]["stopped_by"] == "duration" and
              0 < doc["cells"][0]["completed"] < 10000000 and doc["cells"][0]["errors"] == 0,
              f"--duration stops the cell (rc {rc}, {doc and doc['cells'][0]})")

        # A model whose every request fails: errors, never throughput; exit 1.
        for proto in ("http", "grpc"):
            _, fail0 = stats(server, "failing")
            rc, doc, err = loadgen(args, f"--{proto}", addr[proto], "--model", "failing",
                                   "--concurrency", "2", "--requests", "50", "--warmup", "1",
                                   "--json")
            c = doc["cells"][0] if doc else {}
            check(rc == 1, f"{proto} failing: exit 1 (got {rc}; {err.strip()[:200]})")
            check(c.get("ok") == 0 and c.get("errors") == 50 and c.get("completed") == 50 and
                  c.get("warmup_errors") == 2 and c.get("throughput") == 0,
                  f"{proto} failing: 50 errors, 2 warm-up errors, 0 ok, throughput 0 ({c})")
            check(bool(c.get("first_error")) and "Reshape" in c.get("first_error", ""),
                  f"{proto} failing: first error kept ({c.get('first_error')})")
            _, fail1 = stats(server, "failing")
            check(fail1 - fail0 == 52, f"{proto} failing: the server counted 52 failures "
                                       f"(got {fail1 - fail0})")
            rc, out, err = ferry(args, "loadgen", f"--{proto}", addr[proto], "--model", "failing",
                                 "--requests", "3")
            check(rc == 1 and "first:" in out, f"{proto} failing, text: exit 1, first error shown")

        # Clear error exits: unknown model, a BYTES input to generate, files that do not fit.
        for proto in ("http", "grpc"):
            expect_error(args, f"{proto} unknown model", 3, ["'nope'", addr[proto]], "loadgen",
                         f"--{proto}", addr[proto], "--model", "nope")
            expect_error(args, f"{proto} unknown version", 3, ["digits", "9"], "loadgen",
                         f"--{proto}", addr[proto], "--model", "digits", "--model-version", "9")
            expect_error(args, f"{proto} BYTES input", 4, ["'s'", "BYTES", "--input-dir"],
                         "loadgen", f"--{proto}", addr[proto], "--model", "bytes")
        expect_error(args, "input files of another model", 3, ["input_0.pb", "'image'"],
                     "loadgen", "--http", addr["http"], "--model", "digits", "--input-dir",
                     os.path.join(args.zoo, "gru_encoder", "test_data_set_0"))
        expect_error(args, "input dir missing", 3, ["--input-dir"], "loadgen", "--http",
                     addr["http"], "--model", "digits", "--input-dir",
                     os.path.join(work, "nope"))

    # A closed port and a server that never answers: exit 3, one line, no hang.
    closed = free_port()
    expect_error(args, "http closed port", 3, [f"127.0.0.1:{closed}", "cannot connect"],
                 "loadgen", "--http", f"127.0.0.1:{closed}", "--model", "digits")
    expect_error(args, "grpc closed port", 3, [f"127.0.0.1:{closed}", "cannot connect"],
                 "loadgen", "--grpc", f"127.0.0.1:{closed}", "--model", "digits",
                 "--connect-timeout-s", "1")
    port, stop = never_answers()
    try:
        expect_error(args, "http server that never answers", 3, ["no answer"], "loadgen",
                     "--http", f"127.0.0.1:{port}", "--model", "digits", "--timeout-s", "1")
    finally:
        stop()

    # Bad flags: exit 2.
    for name, cmd, needle in (
            ("no target", ["--model", "m"], "--http"),
            ("both targets", ["--http", "a:1", "--grpc", "b:2", "--model", "m"], "one of"),
            ("no port", ["--http", "localhost", "--model", "m"], "HOST:PORT"),
            ("concurrency 0", ["--http", "a:1", "--model", "m", "--concurrency", "1,0"],
             "--concurrency"),
            ("requests 0", ["--http", "a:1", "--model", "m", "--requests", "0"], "--requests"),
            ("duration 0", ["--http", "a:1", "--model", "m", "--duration", "0"], "--duration"),
            ("grpc channels", ["--grpc", "a:1", "--model", "m", "--grpc-channels", "many"],
             "--grpc-channels")):
        expect_error(args, name, 2, [needle], "loadgen", *cmd)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
