"""KServe's Python model server (PyPI `kserve` 0.21) with ONNX Runtime inside: the peer of
`ferry serve` in bench/serve/loadgen.py.

    .venv/bin/python bench/serve/kserve_ort.py --models DIR --http_port P --grpc_port Q \
        [--intra-op 1] [--executions 2] [any kserve ModelServer flag, e.g. --workers]

DIR is a Triton-layout repository (DIR/<model>/<version>/model.onnx, the highest version is
served). One `kserve.Model` per model: `load` creates an `onnxruntime.InferenceSession`
(CPUExecutionProvider, ORT_ENABLE_ALL, `intra_op_num_threads` = --intra-op,
`inter_op_num_threads` = 1); `predict` speaks the Open Inference Protocol (v2): it takes the
`InferRequest` KServe decoded (JSON, binary tensor extension, gRPC raw contents) and answers an
`InferResponse` in the format the request asked for (binary outputs when the client asked).

Concurrency: KServe runs a synchronous `predict` on its event loop, one request at a time per
process. Here `predict` is async and hands the ORT call to a thread pool of --executions threads
(ORT releases the GIL), so up to --executions inferences run at once on one shared session, as
`ferry serve --instances N` does; --executions 0 keeps KServe's own synchronous behaviour.
"""
import argparse
import asyncio
import concurrent.futures
import logging
import os
import uuid

import numpy as np
import onnxruntime as ort
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer, model_server
from kserve.utils.numpy_codec import from_np_dtype

parser = argparse.ArgumentParser(parents=[model_server.parser], conflict_handler="resolve")
parser.add_argument("--models", required=True, help="Triton-layout repository")
parser.add_argument("--intra-op", type=int, default=1, help="ORT intra_op_num_threads")
parser.add_argument("--quiet", type=int, default=1,
                    help="1: no per-request log lines (kserve INFO incl. the gRPC interceptor, kserve.trace, uvicorn access), as ferry "
                         "serve logs none by default; 0: KServe's defaults")
parser.add_argument("--executions", type=int, default=2,
                    help="inferences at once (thread pool); 0: synchronous predict")


ORT_TYPES = {"float": "FP32", "float16": "FP16", "double": "FP64", "int64": "INT64",
             "int32": "INT32", "int16": "INT16", "int8": "INT8", "uint8": "UINT8",
             "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64", "bool": "BOOL",
             "string": "BYTES"}


def tensor_types(args):
    """ORT NodeArgs -> the v2 metadata's [{name, datatype, shape}] (symbolic dims -1)."""
    return [{"name": a.name, "datatype": ORT_TYPES.get(a.type[7:-1], a.type),
             "shape": [d if isinstance(d, int) else -1 for d in a.shape]} for a in args]


class OrtModel(Model):
    def __init__(self, name, path, intra_op, pool):
        super().__init__(name)
        self.path = path
        self.intra_op = intra_op
        self.pool = pool
        self.sess = None

    def load(self):
        so = ort.SessionOptions()
        so.intra_op_num_threads = self.intra_op
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.sess = ort.InferenceSession(self.path, so, providers=["CPUExecutionProvider"])
        self.input_names = [i.name for i in self.sess.get_inputs()]
        self.output_names = [o.name for o in self.sess.get_outputs()]
        self.ready = True
        return self.ready

    # The model metadata endpoint (v2/models/M, gRPC ModelMetadata) lists the session's inputs
    # and outputs, as ferry serve and Triton do (KServe's default lists none); ferry loadgen
    # takes names and types from it.
    def get_input_types(self):
        return tensor_types(self.sess.get_inputs())

    def get_output_types(self):
        return tensor_types(self.sess.get_outputs())

    def _run(self, payload: InferRequest):
        feed = {}
        for name in self.input_names:
            tensor = payload.get_input_by_name(name)
            if tensor is None:
                raise ValueError(f"missing input '{name}'")
            feed[name] = tensor.as_numpy()
        return self.sess.run(self.output_names, feed)

    def _response(self, payload: InferRequest, results):
        outputs = []
        for name, value in zip(self.output_names, results):
            value = np.ascontiguousarray(value)
            # an ndarray as data: InferResponse.to_rest / to_grpc encode it as the request
            # asked (binary_data_output / raw_output_contents, else JSON / typed contents)
            out = InferOutput(name=name, shape=list(value.shape),
                              datatype=from_np_dtype(value.dtype), data=value)
            if payload.from_grpc:
                # raw_output_contents; KServe 0.21's to_grpc fails on an ndarray `data`
                # ("truth value of an array ... is ambiguous")
                out.set_data_from_numpy(value, binary_data=True)
            outputs.append(out)
        return InferResponse(response_id=payload.id or str(uuid.uuid4()),
                             model_name=self.name, infer_outputs=outputs,
                             use_binary_outputs=payload.use_binary_outputs,
                             requested_outputs=payload.request_outputs)


class SyncOrtModel(OrtModel):
    def predict(self, payload: InferRequest, headers=None, response_headers=None):
        return self._response(payload, self._run(payload))


class AsyncOrtModel(OrtModel):
    async def predict(self, payload: InferRequest, headers=None, response_headers=None):
        loop = asyncio.get_running_loop()
        results = await loop.run_in_executor(self.pool, self._run, payload)
        return self._response(payload, results)


def repository_models(root):
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        versions = [v for v in os.listdir(d) if v.isdigit() and
                    os.path.isfile(os.path.join(d, v, "model.onnx"))] if os.path.isdir(d) else []
        if versions:
            yield name, os.path.join(d, max(versions, key=int), "model.onnx")


def main():
    args, _ = parser.parse_known_args()
    pool = (concurrent.futures.ThreadPoolExecutor(max_workers=args.executions,
                                                  thread_name_prefix="ort")
            if args.executions > 0 else None)
    cls = AsyncOrtModel if pool else SyncOrtModel
    models = []
    for name, path in repository_models(args.models):
        m = cls(name, path, args.intra_op, pool)
        m.load()
        models.append(m)
    if not models:
        raise SystemExit(f"no DIR/<model>/<version>/model.onnx under {args.models}")
    server = ModelServer(http_port=args.http_port, grpc_port=args.grpc_port,
                         workers=args.workers,
                         enable_latency_logging=not args.quiet and args.enable_latency_logging)
    if args.quiet:
        for name in ("kserve", "kserve.trace", "uvicorn.access"):
            logging.getLogger(name).setLevel(logging.WARNING)
    server.start(models)


if __name__ == "__main__":
    main()
