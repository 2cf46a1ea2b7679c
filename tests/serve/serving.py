"""Helpers for the ferry serve tests: start a real server process on free loopback ports,
read the ports it prints, stop it with SIGTERM. Used by test_http.py (and the gRPC test)."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """`ferry serve` on 127.0.0.1 with free ports; a context manager that always kills it."""

    def __init__(self, ferry, models, *extra, grpc=False):
        self.ports = {"http": free_port(), "metrics": free_port()}
        args = [ferry, "serve", "--models", str(models), "--host", "127.0.0.1",
                "--http-port", str(self.ports["http"]),
                "--metrics-port", str(self.ports["metrics"])]
        if grpc:
            self.ports["grpc"] = free_port()
            args += ["--grpc-port", str(self.ports["grpc"])]
        else:
            args += ["--grpc-port", "-1"]
        args += list(extra)
        self.stderr_path = os.path.join(os.path.dirname(str(models)),
                                        f"serve-{self.ports['http']}.err")
        self.stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.banner = []
        for line in self.proc.stdout:
            self.banner.append(line.rstrip("\n"))
            if line.strip() == "ready":
                break
        if self.proc.poll() is not None or not self.banner or self.banner[-1] != "ready":
            self.kill()
            raise RuntimeError("ferry serve did not start:\n" + "\n".join(self.banner) +
                               "\n" + open(self.stderr_path).read())
        self.url = f"127.0.0.1:{self.ports['http']}"

    def log(self):
        return open(self.stderr_path).read()

    def metrics(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['metrics']}/metrics") as r:
            return r.read().decode()

    def terminate(self):
        """SIGTERM; returns the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        finally:
            self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()


def metric(text, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, value = line.rsplit(" ", 1)
        if "{" in head:
            mname, rest = head.split("{", 1)
            pairs = dict(p.split("=", 1) for p in rest.rstrip("}").split(",") if p)
            pairs = {k: v.strip('"') for k, v in pairs.items()}
        else:
            mname, pairs = head, {}
        if mname != name:
            continue
        if all(pairs.get(k) == str(v) for k, v in labels.items()):
            total += float(value)
    return total


def link_model(repo, name, version, model_path):
    d = os.path.join(repo, name, str(version))
    os.makedirs(d, exist_ok=True)
    shutil.copyfile(model_path, os.path.join(d, "model.onnx"))
    return d
