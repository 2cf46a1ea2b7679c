#!/usr/bin/env python3
"""Bounded closed-loop load over loopback for the Open Inference Protocol (KServe v2), HTTP (binary
tensor extension) and gRPC, from `ferry loadgen` (C++, the default --generator) or the real
`tritonclient` (PyPI 2.73, --generator python), and the side-by-side peers of issue 24 started
by this script itself, one after the other:

  ferry   `ferry serve` on a temporary Triton-layout repository (the zoo models copied in)
  kserve  KServe's Python model server with ONNX Runtime inside (bench/serve/kserve_ort.py)
  triton  Triton Inference Server (the binary in PyPI's nvidia-pytriton wheel) with ONNX Runtime
          in its Python backend (bench/serve/get_triton.sh fetches it into build/peers/triton)

    .venv/bin/python bench/serve/loadgen.py [--servers ferry,kserve,triton]
        [--models digits_cnn,gru_encoder,resnet18_op17,bert_encoder] [--protocols http,grpc]
        [--concurrency 1,4,16] [--requests 1000] [--requests-for resnet18_op17=200,...]
        [--duration 30] [--json OUT.json] [--markdown]
    .venv/bin/python bench/serve/loadgen.py --ceiling [--workers process|thread|both]
    .venv/bin/python bench/serve/loadgen.py --target http=HOST:PORT,grpc=HOST:PORT --models M

Closed loop: C clients, each sends its next request when the previous answer came back.
--generator ferry (default): one `ferry loadgen` process per cell, C client threads with one
connection each (src/serve/README.md "ferry loadgen"). --generator python: one tritonclient per
client, each in its own worker process (--workers thread puts them all in threads of one
process). A cell (server, model, protocol, C) first warms every client (--warmup
requests each, untimed, answers checked against ONNX Runtime), then all clients start together
and draw from one shared budget of --requests tickets; the cell stops when the tickets are spent
or --duration seconds passed. Throughput = successful requests / (last answer - start);
latency percentiles over every timed request; errors counted (the first message kept). Also per
request: the generator's CPU time (all worker processes) and the server's (its process tree).

Inputs: the zoo model's test_data_set_0 (ONNX TensorProto input_K.pb) from build/models/zoo/M/,
the same bytes for every server; before a server is timed each (model, protocol) is checked:
its outputs against ONNX Runtime's on the same input.

--ceiling: the generator's own limit. `ferry serve` on a one-node Identity model (1x4 FP32, next
to no work in a C++ server) as the trivial target, HTTP and gRPC, worker processes and threads.
"""
import argparse
import glob
import json
import multiprocessing as mp
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = os.path.join(ROOT, "build", "models", "zoo")
HERE = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"float32": "FP32", "float16": "FP16", "float64": "FP64", "int64": "INT64",
          "int32": "INT32", "int8": "INT8", "uint8": "UINT8", "bool": "BOOL"}
TRITON_TYPES = {"FP32": "TYPE_FP32", "FP16": "TYPE_FP16", "FP64": "TYPE_FP64",
                "INT64": "TYPE_INT64", "INT32": "TYPE_INT32", "INT8": "TYPE_INT8",
                "UINT8": "TYPE_UINT8", "BOOL": "TYPE_BOOL"}
SMALL = {"digits_cnn", "gru_encoder"}          # protocol-bound: the 3x / half-p99 bar


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- test data

def read_pb(path):
    import onnx
    from onnx import numpy_helper
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def model_data(model_path, data_dir):
    """[(name, array)] inputs of test_data_set_0 and ONNX Runtime's outputs on them."""
    import onnxruntime as ort
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    files = sorted(glob.glob(os.path.join(data_dir, "input_*.pb")),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    inputs = []
    for k, f in enumerate(files):
        name, arr = read_pb(f)
        inputs.append((name or sess.get_inputs()[k].name, arr))
    names = [o.name for o in sess.get_outputs()]
    outs = sess.run(names, dict(inputs))
    return inputs, list(zip(names, outs))


# ----------------------------------------------------------------------------- worker side

class Slot:
    """One client: its tritonclient, the request it repeats, the answer it expects."""

    def __init__(self, protocol, url, model, inputs, outputs):
        if protocol == "http":
            import tritonclient.http as tc
            self.client = tc.InferenceServerClient(url, connection_timeout=120,
                                                   network_timeout=120)
            self.outputs = [tc.InferRequestedOutput(n, binary_data=True) for n, _ in outputs]
        else:
            import tritonclient.grpc as tc
            self.client = tc.InferenceServerClient(url)
            self.outputs = [tc.InferRequestedOutput(n) for n, _ in outputs]
        self.inputs = []
        for name, arr in inputs:
            i = tc.InferInput(name, list(arr.shape), DTYPES[str(arr.dtype)])
            i.set_data_from_numpy(arr)
            self.inputs.append(i)
        self.model = model
        self.expected = outputs

    def infer(self):
        return self.client.infer(self.model, self.inputs, outputs=self.outputs)

    def check(self, result, atol=1e-3, rtol=1e-3):
        """Largest |difference| against ONNX Runtime; raises when out of tolerance."""
        worst = 0.0
        for name, ref in self.expected:
            got = result.as_numpy(name)
            if got is None or got.shape != ref.shape:
                raise RuntimeError(f"output {name}: shape {None if got is None else got.shape}"
                                   f" != {ref.shape}")
            diff = float(np.max(np.abs(got.astype(np.float64) - ref))) if ref.size else 0.0
            if not np.allclose(got, ref, atol=atol, rtol=rtol):
                raise RuntimeError(f"output {name}: max |diff| {diff:g} against ONNX Runtime")
            worst = max(worst, diff)
        return worst

    def close(self):
        try:
            self.client.close()
        except Exception:
            pass


def take_ticket(tickets):
    with tickets.get_lock():
        if tickets.value <= 0:
            return False
        tickets.value -= 1
        return True


def run_slot(slot, tickets, start_at, deadline, out):
    lat, errors, first_error, t_end = [], 0, None, start_at
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    while time.time() < deadline and take_ticket(tickets):
        t0 = time.perf_counter()
        try:
            slot.infer()
            lat.append(time.perf_counter() - t0)
        except Exception as e:  # counted, the loop goes on
            errors += 1
            if first_error is None:
                first_error = str(e)[:300]
        t_end = time.time()
    out.append((lat, errors, first_error, t_end))


def slot_thread(cmds, answers):
    """One client in its own thread, for its whole life (tritonclient.http's gevent client may
    only be used by the thread that created it)."""
    slot = None
    while True:
        cmd = cmds.get()
        if cmd["op"] == "quit":
            if slot:
                slot.close()
            return
        if cmd["op"] == "prepare":
            try:
                slot = Slot(cmd["protocol"], cmd["url"], cmd["model"], cmd["inputs"],
                            cmd["outputs"])
                for _ in range(cmd["warmup"]):
                    slot.check(slot.infer())
                answers.put(("ready", None))
            except Exception as e:
                answers.put(("failed", f"{type(e).__name__}: {e}"[:500]))
        elif cmd["op"] == "go":
            out = []
            run_slot(slot, cmd["tickets"], cmd["start_at"], cmd["deadline"], out)
            answers.put(out[0])


def cpu_seconds():
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def worker_main(index, conn, tickets):
    """A worker process: holds up to N client threads, runs them when told to."""
    import queue
    threads = []          # (thread, its command queue)
    answers = queue.Queue()

    def stop_all():
        for t, q in threads:
            q.put({"op": "quit"})
        for t, q in threads:
            t.join()
        threads.clear()

    while True:
        cmd = conn.recv()
        op = cmd["op"]
        if op == "quit":
            stop_all()
            break
        if op == "prepare":
            stop_all()
            for _ in range(cmd["slots"]):
                q = queue.Queue()
                t = threading.Thread(target=slot_thread, args=(q, answers), daemon=True)
                t.start()
                threads.append((t, q))
                q.put(cmd)
            got = [answers.get() for _ in threads]
            bad = [m for st, m in got if st != "ready"]
            conn.send(("failed", bad[0]) if bad else ("ready", None))
        elif op == "go":
            c0 = cpu_seconds()
            for t, q in threads:
                q.put(dict(cmd, tickets=tickets))
            out = [answers.get() for _ in threads]
            conn.send(("done", out, cpu_seconds() - c0))


class Pool:
    """`procs` worker processes (spawned: no gRPC state forked), slots spread round-robin."""

    def __init__(self, procs):
        ctx = mp.get_context("spawn")
        self.tickets = ctx.Value("q", 0)
        self.conns, self.procs = [], []
        for i in range(procs):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=worker_main, args=(i, child, self.tickets), daemon=True)
            p.start()
            self.conns.append(parent)
            self.procs.append(p)

    def run(self, protocol, url, model, inputs, outputs, concurrency, requests, duration,
            warmup, server_pids=()):
        n = len(self.conns)
        counts = [concurrency // n + (1 if i < concurrency % n else 0) for i in range(n)]
        active = [i for i in range(n) if counts[i]]
        for i in active:
            self.conns[i].send({"op": "prepare", "slots": counts[i], "protocol": protocol,
                                "url": url, "model": model, "inputs": inputs,
                                "outputs": outputs, "warmup": warmup})
        failures = [m for i in active for (st, m) in [self.conns[i].recv()] if st != "ready"]
        if failures:
            return {"errors": concurrency, "first_error": failures[0], "ok": 0,
                    "throughput": 0.0, "p50_ms": None, "p90_ms": None, "p99_ms": None}
        with self.tickets.get_lock():
            self.tickets.value = requests
        srv0, sys0 = tree_cpu(server_pids), busy_seconds()
        start_at = time.time() + 0.2
        for i in active:
            self.conns[i].send({"op": "go", "start_at": start_at,
                                "deadline": start_at + duration})
        lat, errors, first_error, t_end, cpu = [], 0, None, start_at, 0.0
        for i in active:
            _, out, c = self.conns[i].recv()
            cpu += c
            for l, e, fe, te in out:
                lat += l
                errors += e
                first_error = first_error or fe
                t_end = max(t_end, te)
        srv_cpu, sys_cpu = tree_cpu(server_pids) - srv0, busy_seconds() - sys0
        wall = max(t_end - start_at, 1e-9)
        window = max(time.time() - start_at, 1e-9)
        lat_ms = np.array(lat) * 1e3
        pct = (lambda q: float(np.percentile(lat_ms, q))) if len(lat_ms) else (lambda q: None)
        done = len(lat) + errors
        return {"ok": len(lat), "errors": errors, "first_error": first_error,
                "generator": "python", "wall_s": wall, "throughput": len(lat) / wall,
                "p50_ms": pct(50), "p90_ms": pct(90), "p99_ms": pct(99),
                "mean_ms": float(lat_ms.mean()) if len(lat_ms) else None,
                "client_cpu_us_per_req": cpu / done * 1e6 if done else None,
                "server_cpu_us_per_req": srv_cpu / done * 1e6 if done and server_pids else None,
                # cores busy with anything else during the cell (other users of the machine)
                "other_cores": max(0.0, (sys_cpu - cpu - srv_cpu) / window) if server_pids
                else None}

    def close(self):
        for c in self.conns:
            try:
                c.send({"op": "quit"})
            except Exception:
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()


class FerryGen:
    """The C++ generator: one `ferry loadgen --json` process per cell (same tickets, duration,
    warm-up and closed loop as Pool; C client threads, one connection each), inputs written once
    per model as input_K.pb. Server CPU and other load are taken around that process, so they
    include its warm-up requests (counted in the per-request division) and start-up."""

    def __init__(self, ferry, workdir, grpc_channels="per-client"):
        self.ferry, self.grpc_channels = ferry, grpc_channels
        self.dir = tempfile.mkdtemp(prefix="inputs-", dir=workdir)
        self.inputs = {}

    def input_dir(self, model, inputs):
        if model not in self.inputs:
            from onnx import numpy_helper
            d = os.path.join(self.dir, model)
            os.makedirs(d)
            for k, (name, arr) in enumerate(inputs):
                with open(os.path.join(d, f"input_{k}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(arr, name).SerializeToString())
            self.inputs[model] = d
        return self.inputs[model]

    def run(self, protocol, url, model, inputs, outputs, concurrency, requests, duration,
            warmup, server_pids=()):
        import resource
        argv = [self.ferry, "loadgen", f"--{protocol}", url, "--model", model,
                "--input-dir", self.input_dir(model, inputs), "--concurrency", str(concurrency),
                "--requests", str(requests), "--duration", str(duration),
                "--warmup", str(warmup), "--grpc-channels", self.grpc_channels, "--json"]
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        srv0, sys0, t0 = tree_cpu(server_pids), busy_seconds(), time.time()
        p = subprocess.run(argv, capture_output=True, text=True)
        window = max(time.time() - t0, 1e-9)
        srv_cpu, sys_cpu = tree_cpu(server_pids) - srv0, busy_seconds() - sys0
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        gen_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        try:
            c = json.loads(p.stdout)["cells"][0]
        except (ValueError, KeyError, IndexError):
            return {"errors": concurrency, "ok": 0, "throughput": 0.0, "p50_ms": None,
                    "p90_ms": None, "p99_ms": None, "generator": "ferry",
                    "first_error": f"ferry loadgen exit {p.returncode}: {p.stderr.strip()[:300]}"}
        done = c["completed"] + c["warmup_errors"]
        sent = done + warmup * concurrency - c["warmup_errors"]
        ms = (lambda k: c[k] / 1e3 if c["ok"] else None)
        return {"ok": c["ok"], "errors": c["errors"] + c["warmup_errors"],
                "first_error": c["first_error"], "wall_s": c["wall_s"],
                "throughput": c["throughput"], "p50_ms": ms("p50_us"), "p90_ms": ms("p90_us"),
                "p99_ms": ms("p99_us"), "max_ms": ms("max_us"), "mean_ms": ms("mean_us"),
                "stopped_by": c["stopped_by"], "generator": "ferry",
                "client_cpu_us_per_req": c["cpu_us_per_request"],
                "server_cpu_us_per_req": srv_cpu / sent * 1e6 if sent and server_pids else None,
                "other_cores": max(0.0, (sys_cpu - gen_cpu - srv_cpu) / window) if server_pids
                else None}

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def make_generator(args, conc, workdir, mode=None):
    """The --generator: FerryGen, or Pool (tritonclient) with --workers' processes/threads."""
    if args.generator == "ferry":
        return FerryGen(args.ferry, workdir, args.grpc_channels)
    mode = mode or args.workers
    return Pool(max(conc) if mode == "process" else 1)


def busy_seconds():
    """CPU seconds the whole machine spent not idle (all cores)."""
    import psutil
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def tree_cpu(pids):
    """CPU seconds (user + system) of these processes and all their descendants."""
    if not pids:
        return 0.0
    import psutil
    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for p in [root] + root.children(recursive=True):
                try:
                    t = p.cpu_times()
                    total += t.user + t.system
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
    return total


# ----------------------------------------------------------------------------- servers

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_ok(url, timeout=2):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status == 200
    except Exception:
        return False


class Peer:
    """A server process started here, in its own session; stop() ends its process group."""
    name = "?"

    def __init__(self, argv, logpath, env=None):
        self.http_port, self.grpc_port = None, None
        self.logpath = logpath
        self.logf = open(logpath, "w")
        self.proc = subprocess.Popen(argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)

    def url(self, protocol):
        return f"127.0.0.1:{self.http_port if protocol == 'http' else self.grpc_port}"

    def wait_ready(self, models, timeout=180):
        t_end = time.time() + timeout
        while time.time() < t_end:
            if self.proc.poll() is not None:
                break
            if all(http_ok(f"http://127.0.0.1:{self.http_port}/v2/models/{m}/ready")
                   for m in models):
                return
            time.sleep(0.3)
        tail = open(self.logpath, errors="replace").read()[-3000:]
        self.stop()
        raise RuntimeError(f"{self.name} did not become ready:\n{tail}")

    def pids(self):
        return [self.proc.pid]

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)   # its own group (start_new_session)
                self.proc.wait(timeout=30)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)       # stragglers of the group
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.logf.close()


class FerryPeer(Peer):
    name = "ferry"

    def __init__(self, ferry, repo, models, workdir, instances, threads):
        self.settings = f"--instances {instances} --threads {threads}, no batching"
        h, g, m = free_port(), free_port(), free_port()
        super().__init__([ferry, "serve", "--models", repo, "--allow-unsigned",
                          "--insecure-no-auth", "--host", "127.0.0.1",
                          "--http-port", str(h), "--grpc-port", str(g), "--metrics-port", str(m),
                          "--poll-interval-ms", "0", "--instances", str(instances),
                          "--threads", str(threads)], os.path.join(workdir, "ferry.log"))
        self.http_port, self.grpc_port = h, g
        self.wait_ready(models)


class KservePeer(Peer):
    name = "kserve"

    def __init__(self, repo, models, workdir, executions, intra_op, workers):
        self.settings = (f"kserve 0.21.0, {workers} uvicorn worker(s), ORT "
                         f"{ort_version()} intra_op {intra_op}, {executions} executions at once")
        h, g = free_port(), free_port()
        super().__init__([sys.executable, os.path.join(HERE, "kserve_ort.py"), "--models", repo,
                          "--http_port", str(h), "--grpc_port", str(g),
                          "--executions", str(executions), "--intra-op", str(intra_op),
                          "--workers", str(workers)], os.path.join(workdir, "kserve.log"))
        self.http_port, self.grpc_port = h, g
        self.wait_ready(models)


TRITON_MODEL_PY = '''import sys
sys.path[0:0] = {paths!r}
import os
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        so = ort.SessionOptions()
        so.intra_op_num_threads = {intra_op}
        so.inter_op_num_threads = 1
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.sess.get_inputs()]
        self.outputs = [o.name for o in self.sess.get_outputs()]

    def execute(self, requests):
        answers = []
        for r in requests:
            feed = {{n: pb_utils.get_input_tensor_by_name(r, n).as_numpy() for n in self.inputs}}
            res = self.sess.run(self.outputs, feed)
            answers.append(pb_utils.InferenceResponse(
                [pb_utils.Tensor(n, v) for n, v in zip(self.outputs, res)]))
        return answers
'''


class TritonPeer(Peer):
    """tritonserver from the nvidia-pytriton wheel; ORT in the Python backend, one stub process
    per instance. The stub embeds the system libpython3.11 and Triton 2.51's pybind11 reads
    numpy 1.x arrays only (numpy 2 outputs come back empty), hence numpy 1.26 first on its path."""
    name = "triton"

    def __init__(self, root, repo_src, models, workdir, instances, intra_op):
        tdir = os.path.join(root, "x", "pytriton", "tritonserver")
        if not os.path.isfile(os.path.join(tdir, "bin", "tritonserver")):
            raise RuntimeError(f"no Triton under {root}: run bench/serve/get_triton.sh")
        settings = (f"(nvidia-pytriton wheel), Python backend, {instances} instances, ORT "
                    f"{ort_version()} intra_op {intra_op}, no batching")
        repo = os.path.join(workdir, "triton_repo")
        site = [p for p in sys.path if p.endswith("site-packages")][0]
        for m in models:
            inputs, outputs = model_data(os.path.join(repo_src, m, "1", "model.onnx"),
                                         os.path.join(ZOO, m, "test_data_set_0"))
            os.makedirs(os.path.join(repo, m, "1"), exist_ok=True)
            shutil.copyfile(os.path.join(repo_src, m, "1", "model.onnx"),
                            os.path.join(repo, m, "1", "model.onnx"))

            def dims(arrs):
                return ",\n".join(
                    f'  {{ name: "{n}" data_type: {TRITON_TYPES[DTYPES[str(a.dtype)]]} '
                    f'dims: [ {", ".join("-1" for _ in a.shape)} ] }}' for n, a in arrs)
            with open(os.path.join(repo, m, "config.pbtxt"), "w") as f:
                f.write(f'name: "{m}"\nbackend: "python"\nmax_batch_size: 0\n'
                        f"input [\n{dims(inputs)}\n]\noutput [\n{dims(outputs)}\n]\n"
                        f"instance_group [ {{ count: {instances} kind: KIND_CPU }} ]\n")
            with open(os.path.join(repo, m, "1", "model.py"), "w") as f:
                f.write(TRITON_MODEL_PY.format(paths=[os.path.join(root, "np1"), site],
                                               intra_op=intra_op))
        h, g, mp_ = free_port(), free_port(), free_port()
        super().__init__([os.path.join(tdir, "bin", "tritonserver"), "--model-repository", repo,
                          "--backend-directory", os.path.join(tdir, "backends"),
                          "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1",
                          "--http-port", str(h), "--grpc-port", str(g),
                          "--metrics-port", str(mp_), "--allow-metrics", "true"],
                         os.path.join(workdir, "triton.log"))
        self.http_port, self.grpc_port = h, g
        self.wait_ready(models)
        with urllib.request.urlopen(f"http://127.0.0.1:{h}/v2") as r:
            self.settings = f"Triton {json.load(r).get('version', '?')} {settings}"


def ort_version():
    import onnxruntime
    return onnxruntime.__version__


# ----------------------------------------------------------------------------- driver

def parse_list(s, cast=str):
    return [cast(x) for x in s.split(",") if x]


def per_model(spec):
    out = {}
    for item in parse_list(spec or ""):
        k, v = item.split("=")
        out[k] = int(v)
    return out


def fmt(v, nd=1):
    return "—" if v is None else f"{v:.{nd}f}"


def verify(peer, model, protocol, inputs, outputs):
    slot = Slot(protocol, peer.url(protocol), model, inputs, outputs)
    try:
        return slot.check(slot.infer())
    finally:
        slot.close()


def cell_line(r):
    return (f"{r['server']:7} {r['model']:14} {r['protocol']:5} C={r['concurrency']:<3} "
            f"{fmt(r['throughput']):>8} req/s  p50 {fmt(r['p50_ms'], 2):>7}  "
            f"p90 {fmt(r['p90_ms'], 2):>7}  p99 {fmt(r['p99_ms'], 2):>7} ms  "
            f"ok {r['ok']:<5} err {r['errors']}"
            f"  cpu/req client {fmt(r.get('client_cpu_us_per_req'), 0)} us"
            f" server {fmt(r.get('server_cpu_us_per_req'), 0)} us"
            f"  other {fmt(r.get('other_cores'), 2)} cores"
            + (f"  first error: {r['first_error']}" if r.get("first_error") else ""))


def machine():
    name = "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                name = line.split(":", 1)[1].strip()
    except Exception:
        pass
    return {"cpu": name, "cores": os.cpu_count(), "loadavg": os.getloadavg(),
            "python": platform.python_version()}


def start_peer(name, args, repo, models, workdir):
    if name == "ferry":
        return FerryPeer(args.ferry, repo, models, workdir, args.instances, args.threads)
    if name == "kserve":
        return KservePeer(repo, models, workdir, args.instances, args.threads,
                          args.kserve_workers)
    if name == "triton":
        return TritonPeer(args.triton, repo, models, workdir, args.instances, args.threads)
    raise SystemExit(f"unknown server {name}")


def sweep(args, pool, peer, sname, models, data, conc, counts, rnd):
    for m in models:
        for proto in parse_list(args.protocols):
            d = verify(peer, m, proto, *data[m])
            log(f"   {sname} {m} {proto}: outputs match ORT (max |diff| {d:.3g})")
    results = []
    for m in models:
        for proto in parse_list(args.protocols):
            for c in conc:
                r = pool.run(proto, peer.url(proto), m, data[m][0], data[m][1], c,
                             counts.get(m, args.requests), args.duration, args.warmup,
                             peer.pids())
                r.update(server=sname, model=m, protocol=proto, concurrency=c, round=rnd)
                results.append(r)
                log(cell_line(r))
    return results


def run_servers(args):
    models = parse_list(args.models)
    counts = per_model(args.requests_for)
    workdir = tempfile.mkdtemp(prefix="ferry-loadgen-")
    repo = os.path.join(workdir, "repo")
    data = {}
    for m in models:
        src = os.path.join(ZOO, m, "model.onnx")
        os.makedirs(os.path.join(repo, m, "1"))
        shutil.copyfile(src, os.path.join(repo, m, "1", "model.onnx"))
        data[m] = model_data(src, os.path.join(ZOO, m, "test_data_set_0"))
    conc = parse_list(args.concurrency, int)
    pool = make_generator(args, conc, workdir)
    results, settings = [], {}
    info = machine()
    log(f"machine: {info['cpu']}, {info['cores']} cores, load {info['loadavg']}")
    try:
        order = parse_list(args.servers)
        for rnd in range(1, args.rounds + 1):
            for sname in (order if rnd % 2 == 1 else order[::-1]):
                log(f"== round {rnd}: {sname} (load {os.getloadavg()[0]:.2f})")
                peer = start_peer(sname, args, repo, models, workdir)
                settings[sname] = peer.settings
                try:
                    results += sweep(args, pool, peer, sname, models, data, conc, counts, rnd)
                finally:
                    peer.stop()
    finally:
        pool.close()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return {"machine": info, "settings": settings, "argv": sys.argv, "results": results}


def identity_model(path):
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def run_ceiling(args):
    workdir = tempfile.mkdtemp(prefix="ferry-loadgen-ceiling-")
    repo = os.path.join(workdir, "repo")
    os.makedirs(os.path.join(repo, "identity", "1"))
    path = os.path.join(repo, "identity", "1", "model.onnx")
    identity_model(path)
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    inputs, outputs = [("x", x)], [("y", x.copy())]
    conc = parse_list(args.concurrency, int)
    if args.generator == "ferry":
        modes = ["cpp"]
    else:
        modes = ["process", "thread"] if args.workers == "both" else [args.workers]
    results = []
    info = machine()
    log(f"machine: {info['cpu']}, {info['cores']} cores, load {info['loadavg']}")
    peer = FerryPeer(args.ferry, repo, ["identity"], workdir, args.instances, args.threads)
    try:
        for mode in modes:
            pool = make_generator(args, conc, workdir, mode)
            try:
                for proto in parse_list(args.protocols):
                    for c in conc:
                        r = pool.run(proto, peer.url(proto), "identity", inputs, outputs, c,
                                     args.requests, args.duration, args.warmup, peer.pids())
                        r.update(server=f"ferry/{mode}", model="identity", protocol=proto,
                                 concurrency=c)
                        results.append(r)
                        log(cell_line(r))
            finally:
                pool.close()
    finally:
        peer.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return {"machine": info, "settings": {"ferry": peer.settings}, "argv": sys.argv,
            "results": results}


def run_target(args):
    urls = dict(item.split("=", 1) for item in parse_list(args.target))
    models = parse_list(args.models)
    conc = parse_list(args.concurrency, int)
    counts = per_model(args.requests_for)
    workdir = tempfile.mkdtemp(prefix="ferry-loadgen-target-")
    pool = make_generator(args, conc, workdir)
    results = []
    try:
        for m in models:
            inputs, outputs = model_data(os.path.join(ZOO, m, "model.onnx"),
                                         os.path.join(ZOO, m, "test_data_set_0"))
            for proto, url in urls.items():
                for c in conc:
                    r = pool.run(proto, url, m, inputs, outputs, c, counts.get(m, args.requests),
                                 args.duration, args.warmup)
                    r.update(server="target", model=m, protocol=proto, concurrency=c)
                    results.append(r)
                    log(cell_line(r))
    finally:
        pool.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return {"machine": machine(), "settings": {}, "argv": sys.argv, "results": results}


def merged(results):
    """Per (server, model, protocol, C) over rounds: the round with the highest throughput (its
    p50, p99 and other load; the same rule for every server, it filters out rounds disturbed by
    other users of a shared VM), errors summed over all rounds."""
    groups = {}
    for r in results:
        groups.setdefault((r["server"], r["model"], r["protocol"], r["concurrency"]), []).append(r)
    out = {}
    for k, rs in groups.items():
        best = max(rs, key=lambda r: r["throughput"] or 0.0)
        out[k] = dict(best, errors=sum(r["errors"] for r in rs), rounds=len(rs),
                      other_cores=best.get("other_cores") or 0.0)
    return out


def markdown(doc, base="ferry"):
    """Per (model, protocol, C): throughput and p50/p99 of every server (best round),
    ferry's ratios against each peer and the issue's bar (small models: >= 3x throughput and
    p99 <= half; others: >= 1.2x and p99 below), the most other load seen in the row."""
    res = doc["results"]
    servers = list(dict.fromkeys(r["server"] for r in res))
    peers = [s for s in servers if s != base]
    key = merged(res)
    cells = list(dict.fromkeys((r["model"], r["protocol"], r["concurrency"]) for r in res))
    head = ["model", "proto", "C"]
    for s in servers:
        head += [f"{s} req/s", f"{s} p50 / p99 ms"]
    for p in peers:
        head += [f"thr ×{p}", f"p99 ÷{p}", f"bar vs {p}"]
    head += ["other cores"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m, proto, c in cells:
        row = [m, proto, str(c)]
        other = 0.0
        for s in servers:
            r = key.get((s, m, proto, c))
            if r is None:
                row += ["—", "—"]
                continue
            other = max(other, r["other_cores"])
            err = f" ({r['errors']} err)" if r["errors"] else ""
            row += [fmt(r["throughput"]) + err, f"{fmt(r['p50_ms'], 2)} / {fmt(r['p99_ms'], 2)}"]
        b = key.get((base, m, proto, c))
        for p in peers:
            r = key.get((p, m, proto, c))
            if not b or not r or not r["throughput"] or not b["p99_ms"] or not r["p99_ms"]:
                row += ["—", "—", "—"]
                continue
            tr, pr = b["throughput"] / r["throughput"], b["p99_ms"] / r["p99_ms"]
            if m in SMALL:
                ok = tr >= 3 and pr <= 0.5
            else:
                ok = tr >= 1.2 and pr < 1
            if p != "kserve":   # the bar against Triton: not below it
                ok = tr >= 1 and pr <= 1
            if b["errors"]:
                ok = False
            row += [f"{tr:.2f}", f"{pr:.2f}", "meets" if ok else "**no**"]
        row.append(f"{other:.2f}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", default="ferry,kserve")
    ap.add_argument("--models", default="digits_cnn,gru_encoder,resnet18_op17,bert_encoder")
    ap.add_argument("--protocols", default="http,grpc")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--requests", type=int, default=1000, help="per cell (default 1000)")
    ap.add_argument("--requests-for", default="resnet18_op17=200,bert_encoder=500",
                    help="per-model request counts, M=N,...")
    ap.add_argument("--duration", type=float, default=30, help="seconds per cell at most")
    ap.add_argument("--warmup", type=int, default=2, help="untimed requests per client")
    ap.add_argument("--generator", default="ferry", choices=["ferry", "python"],
                    help="ferry: `ferry loadgen` (C++, C client threads; default); python: "
                         "tritonclient in worker processes or threads (--workers)")
    ap.add_argument("--grpc-channels", default="per-client", choices=["per-client", "shared"],
                    help="ferry generator over gRPC: one channel per client (default) or one "
                         "for all")
    ap.add_argument("--workers", default="process", choices=["process", "thread", "both"],
                    help="python generator: one process per client (default) or all clients "
                         "in one process")
    ap.add_argument("--ferry", default=os.path.join(ROOT, "build", "src", "ferry"))
    ap.add_argument("--instances", type=int, default=2,
                    help="executions at once, every server (ferry --instances, KServe thread "
                         "pool, Triton instance_group count)")
    ap.add_argument("--threads", type=int, default=1,
                    help="engine threads per execution (ferry --threads, ORT intra_op)")
    ap.add_argument("--kserve-workers", type=int, default=1, help="uvicorn workers (KServe's 1)")
    ap.add_argument("--triton", default=os.path.join(ROOT, "build", "peers", "triton"),
                    help="where bench/serve/get_triton.sh unpacked Triton")
    ap.add_argument("--ceiling", action="store_true", help="the generator's own ceiling")
    ap.add_argument("--target", help="an already running server: http=HOST:PORT,grpc=HOST:PORT")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat the sweep, the server order reversed every other round; the "
                         "table shows each cell's round of highest throughput")
    ap.add_argument("--table", nargs="+", metavar="JSON",
                    help="only print the table of earlier --json runs (their rounds pooled)")
    ap.add_argument("--json", help="write every cell here")
    ap.add_argument("--markdown", action="store_true", help="print the README table")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (server logs)")
    args = ap.parse_args()
    if args.workers == "both" and not args.ceiling:
        ap.error("--workers both is for --ceiling")
    if args.generator == "ferry" and not args.table and not os.access(args.ferry, os.X_OK):
        ap.error(f"--generator ferry needs the ferry binary: {args.ferry} (--ferry)")
    if args.table:
        docs = [json.load(open(f)) for f in args.table]
        doc = dict(docs[0], results=[r for d in docs for r in d["results"]])
        print(markdown(doc))
        return 0
    if args.ceiling:
        doc = run_ceiling(args)
    elif args.target:
        doc = run_target(args)
    else:
        doc = run_servers(args)
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(args.json + ".tmp", args.json)
    for r in doc["results"]:
        print(cell_line(r))
    for s, v in doc["settings"].items():
        print(f"{s}: {v}")
    if args.markdown:
        print(markdown(doc))
    return 1 if any(r["errors"] for r in doc["results"]) else 0


if __name__ == "__main__":
    sys.exit(main())
