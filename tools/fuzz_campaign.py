#!/usr/bin/env python3
"""Black-box fuzz campaign over the `ferry` CLI (issue 19's bar), with a mutator of its own.

Not fuzz/onnx_mutator.cc: this one mutates models through onnx's Python protobuf classes
(attributes, dims, dtypes, initializers, wiring, names, opsets and domains, If/Loop subgraphs,
model-local functions, cross-over between seeds, shape-like int64 constants set to huge values)
and at the byte level, and writes mutated .npy / TensorProto inputs for `run` and `verify`.
Every mutant goes through `inspect`, `audit`, `run`, `optimize`, `convert` and `verify` (the
seed as reference, the mutant as candidate), one process at a time, each with a wall-clock
timeout and (release binary) RLIMIT_AS.

Findings (kept under --findings, each with the mutant, its seed, its inputs, the command, the
stderr and a replay script):
  signal      the process died by a signal
  exit70      exit 70 (an internal error: a bug)
  sanitizer   "ERROR: AddressSanitizer", "runtime error:", LeakSanitizer in stderr
  hang        past the timeout, and the model has no Loop (a Loop's own endless loop is
              counted as timeout-loop and kept for review, not as a finding)
  bad-exit    an exit code the CLI does not document (0-4, 70)
  bad-json    exit 0 with --json and stdout that is not UTF-8 JSON
Counted, not findings: exit codes per verb, refusals naming the memory budget (exit 3), usage
errors (exit 2: the generated command line, e.g. input names with '=').

Deterministic: mutant i is derived from Random("<seed>-<i>") over the sorted seed list (its
hash is in stats.json: seeds from fuzz/corpus/ change when the corpus grows); with --seconds the
run stops at a time budget, so two runs over the same seeds share a prefix of mutants.

    .venv/bin/python tools/fuzz_campaign.py --binary /tmp/campaign/ferry --seconds 2400 \
        --seed 1 --findings /tmp/campaign/findings-release
    .venv/bin/python tools/fuzz_campaign.py --binary /tmp/campaign/ferry-asan --asan ...
    .venv/bin/python tools/fuzz_campaign.py --binary B --replay FINDING_DIR
    .venv/bin/python tools/fuzz_campaign.py --binary B --seed 1 --only 1234 --findings F
"""
import argparse
import collections
import copy
import glob
import hashlib
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import warnings
warnings.filterwarnings("ignore")
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_SEED_BYTES = 512 * 1024
VERBS = ("inspect", "audit", "run", "optimize", "convert", "verify")

INTS = [0, 1, -1, 2, 3, -2, 4, 7, 8, 16, 255, 256, 65535, 65536, 2**31 - 1, 2**31, -2**31,
        2**32, 2**32 + 1, 2**40, 2**62, 2**63 - 1, -2**63, -2**63 + 1]
SMALL_INTS = [0, 1, -1, 2, 3, -2, 4, 5, 7, 8, 10]
FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-45, 1e-38, 3.4e38, -3.4e38, 1e6, float("nan"),
          float("inf"), float("-inf")]
STRINGS = [b"", b"\xff\xfe\x80", b"NOTAMODE", b"nearest", b"linear", b"cubic", b"constant",
           b"reflect", b"edge", b"wrap", b"SAME_UPPER", b"SAME_LOWER", b"VALID", b"NOTSET",
           b"half_pixel", b"asymmetric", b"align_corners", b"tf_crop_and_resize", b"round_prefer_floor",
           b"floor", b"ceil", b"forward", b"reverse", b"bidirectional", b"Sigmoid", b"Tanh", b"Relu",
           b"DCR", b"CRD", b"avg", b"max", b"add", b"mul", b"none", b"A" * 4096, b"\x00",
           "\u202e\u00e9".encode(), b"ij,jk->ik", b"...ii->...i", b"i,i", b"->", b"abc,cd->",
           b"float", b"bilinear", b"zeros", b"border", b"reflection", b"tanh"]
ATTR_NAMES = ["axis", "axes", "kernel_shape", "strides", "pads", "dilations", "group", "perm",
              "to", "keepdims", "mode", "auto_pad", "ceil_mode", "count_include_pad",
              "storage_order", "epsilon", "alpha", "beta", "gamma", "transA", "transB",
              "num_outputs", "split", "blocksize", "k", "largest", "sorted", "direction",
              "hidden_size", "layout", "batch_dims", "reduction", "select_last_index",
              "noop_with_empty_axes", "allowzero", "coordinate_transformation_mode",
              "nearest_mode", "output_shape", "output_padding", "seed", "dtype", "value",
              "value_int", "value_ints", "value_float", "value_floats", "depth", "exclusive",
              "reverse", "p", "lambd", "bias", "size", "spatial_scale", "sampling_ratio",
              "output_height", "output_width", "starts", "ends", "scales", "min", "max", "fmod",
              "center_point_box", "detect_negative", "detect_positive", "training_mode",
              "momentum", "clip", "activations", "input_forget", "linear_before_reset", "upper",
              "equation", "shape", "sample_size", "num_groups", "stash_type", "axis_w",
              "block_size", "saturate", "antialias", "keep_aspect_ratio_policy",
              "exclude_outside", "cubic_coeff_a", "extrapolation_value", "start", "end",
              "pooled_shape", "align_corners", "padding_mode", "unbiased", "num_heads"]
DOMAINS = ["", "ai.onnx", "ai.onnx.ml", "com.microsoft", "local", "bogus.domain", "ai.onnx.preview.training",
           "\u00e9", "com.ms.internal.nhwc"]
OPSETS = [0, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
          26, 99, 2**31 - 1, 2**31, -1, 2**62]
IR_VERSIONS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 99, -1, 2**40]
WEIRD_NAMES = ["", "a=b", "x,y", "../../etc/passwd", "/tmp/x", "\n", " ", "\u202e\u0000z",
               "\u00e9\u4e2d\U0001f600", "a" * 3000, "input", "output", "%s%n", "{}", "\"quote'",
               "<b>|md|</b>", "con", "x.npy"]
ELEM_TYPES = list(range(0, 27)) + [99, 2**31 - 1, -1]
NP_DTYPES = ["<f4", "<f8", "<f2", "|u1", "|i1", "<u2", "<i2", "<i4", "<i8", "<u4", "<u8", "|b1",
             "<c8", "<U4", ">f4", "<M8[s]"]
ONNX_TO_NP = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
              7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
              13: np.uint64}


def op_schemas():
    try:
        schemas = onnx.defs.get_all_schemas_with_history()
    except Exception:  # pragma: no cover
        return {}
    by_arity = collections.defaultdict(set)
    for s in schemas:
        if s.domain in ("", "ai.onnx", "ai.onnx.ml") and not s.deprecated:
            by_arity[s.min_input].add((s.domain, s.name))
    return {k: sorted(v) for k, v in by_arity.items()}


OPS_BY_ARITY = op_schemas()
ALL_OPS = sorted({op for ops in OPS_BY_ARITY.values() for op in ops})


# ---------------------------------------------------------------------------------------------
# Walking a model: node containers (graphs, subgraphs, functions), values, tensors.

def graphs_of(g):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH or a.HasField("g"):
                yield from graphs_of(a.g)
            for sg in a.graphs:
                yield from graphs_of(sg)


def containers(m):
    """Every graph (main, subgraphs) and every function: things that hold nodes."""
    out = list(graphs_of(m.graph))
    for f in m.functions:
        out.append(f)
        for n in f.node:
            for a in n.attribute:
                if a.HasField("g"):
                    out.extend(graphs_of(a.g))
                for sg in a.graphs:
                    out.extend(graphs_of(sg))
    return out


def all_nodes(m):
    return [(c, n) for c in containers(m) for n in c.node]


def is_graph(c):
    return isinstance(c, onnx.GraphProto)


def value_infos(m):
    out = []
    for g in graphs_of(m.graph):
        out.extend(g.input)
        out.extend(g.output)
        out.extend(g.value_info)
    return out


def tensors(m):
    """Initializers of every graph and tensor attributes (Constant values) of every node."""
    out = []
    for g in graphs_of(m.graph):
        out.extend(g.initializer)
        for sp in g.sparse_initializer:
            out.append(sp.values)
            out.append(sp.indices)
    for _, n in all_nodes(m):
        for a in n.attribute:
            if a.HasField("t"):
                out.append(a.t)
            out.extend(a.tensors)
    return out


def value_names(c):
    names = set()
    if is_graph(c):
        names.update(v.name for v in c.input)
        names.update(t.name for t in c.initializer)
    else:
        names.update(c.input)
    for n in c.node:
        names.update(n.output)
    names.discard("")
    return sorted(names)


def has_loop(m):
    return any(n.op_type in ("Loop", "Scan") for _, n in all_nodes(m))


# ---------------------------------------------------------------------------------------------
# Mutations. Each takes (rng, model, ctx) and returns a short description or None if it did
# not apply.

def pick(rng, seq):
    return seq[rng.randrange(len(seq))] if seq else None


def rand_int(rng):
    r = rng.random()
    if r < 0.5:
        return pick(rng, INTS)
    if r < 0.8:
        return pick(rng, SMALL_INTS)
    return rng.randint(-1000, 1000)


def rand_float(rng):
    return pick(rng, FLOATS) if rng.random() < 0.6 else rng.uniform(-10, 10)


def mutate_int_list(rng, lst):
    vals = list(lst)
    r = rng.random()
    if r < 0.3 and vals:
        vals[rng.randrange(len(vals))] = rand_int(rng)
    elif r < 0.45:
        vals.append(rand_int(rng))
    elif r < 0.6 and vals:
        vals.pop(rng.randrange(len(vals)))
    elif r < 0.7:
        vals = []
    elif r < 0.8:
        vals = [rand_int(rng)] * rng.choice([1, 2, 3, 4, 9, 64])
    elif r < 0.9 and vals:
        vals = [-v for v in vals]
    else:
        vals = [rand_int(rng) for _ in range(rng.randrange(0, 9))]
    return vals


def m_attr_value(rng, m, ctx):
    cands = [(n, a) for _, n in all_nodes(m) for a in n.attribute]
    if not cands:
        return None
    n, a = pick(rng, cands)
    if a.ref_attr_name and rng.random() < 0.5:
        a.ref_attr_name = pick(rng, ["", "nope", a.name])
        return "attr-ref %s.%s" % (n.op_type, a.name)
    t = a.type
    if t == AttributeProto.INT:
        a.i = rand_int(rng)
    elif t == AttributeProto.FLOAT:
        a.f = rand_float(rng)
    elif t == AttributeProto.INTS:
        v = mutate_int_list(rng, a.ints)
        del a.ints[:]
        a.ints.extend(v)
    elif t == AttributeProto.FLOATS:
        v = list(a.floats)
        if v and rng.random() < 0.6:
            v[rng.randrange(len(v))] = rand_float(rng)
        else:
            v = [rand_float(rng) for _ in range(rng.randrange(0, 6))]
        del a.floats[:]
        a.floats.extend(v)
    elif t == AttributeProto.STRING:
        a.s = pick(rng, STRINGS)
    elif t == AttributeProto.STRINGS:
        del a.strings[:]
        a.strings.extend(pick(rng, STRINGS) for _ in range(rng.randrange(0, 4)))
    elif t == AttributeProto.TENSOR:
        mutate_tensor(rng, a.t)
    elif t == AttributeProto.GRAPH:
        sub = onnx.ModelProto()
        sub.graph.CopyFrom(a.g)
        return m_graph_io(rng, sub, ctx) and (a.g.CopyFrom(sub.graph) or "subgraph io")
    else:
        a.i = rand_int(rng)
    return "attr %s.%s" % (n.op_type, a.name)


def m_attr_type(rng, m, ctx):
    cands = [(n, a) for _, n in all_nodes(m) for a in n.attribute]
    if not cands:
        return None
    n, a = pick(rng, cands)
    r = rng.random()
    if r < 0.4:
        a.type = pick(rng, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 99])
    elif r < 0.7:  # a scalar as a list, a list as a scalar, the value moved to another field
        if a.type == AttributeProto.INT:
            a.type = AttributeProto.INTS
            a.ints.append(a.i)
        elif a.type == AttributeProto.INTS:
            a.type = AttributeProto.INT
            a.i = a.ints[0] if a.ints else 0
        elif a.type == AttributeProto.FLOAT:
            a.type = AttributeProto.INT
            a.i = int(a.f) if math.isfinite(a.f) else 0
        else:
            a.type = AttributeProto.STRING
            a.s = b"5"
    else:  # two value fields set
        a.i = rand_int(rng)
        a.f = rand_float(rng)
        a.s = pick(rng, STRINGS)
    return "attr-type %s.%s" % (n.op_type, a.name)


def m_attr_add(rng, m, ctx):
    nodes = all_nodes(m)
    if not nodes:
        return None
    _, n = pick(rng, nodes)
    r = rng.random()
    if r < 0.25 and n.attribute:
        n.attribute.pop(rng.randrange(len(n.attribute)))
        return "attr-remove %s" % n.op_type
    if r < 0.35 and n.attribute:
        n.attribute.append(copy.deepcopy(pick(rng, n.attribute)))
        return "attr-dup %s" % n.op_type
    a = n.attribute.add()
    a.name = pick(rng, ATTR_NAMES) if rng.random() < 0.95 else pick(rng, WEIRD_NAMES)
    kind = rng.randrange(6)
    if kind == 0:
        a.type, a.i = AttributeProto.INT, rand_int(rng)
    elif kind == 1:
        a.type = AttributeProto.INTS
        a.ints.extend(mutate_int_list(rng, [1, 1]))
    elif kind == 2:
        a.type, a.f = AttributeProto.FLOAT, rand_float(rng)
    elif kind == 3:
        a.type, a.s = AttributeProto.STRING, pick(rng, STRINGS)
    elif kind == 4:
        a.type = AttributeProto.TENSOR
        a.t.CopyFrom(rand_tensor(rng))
    else:
        a.type = AttributeProto.FLOATS
        a.floats.extend(rand_float(rng) for _ in range(rng.randrange(0, 5)))
    return "attr-add %s.%s" % (n.op_type, a.name)


def mutate_shape(rng, tt):
    shape = tt.shape
    r = rng.random()
    if r < 0.45 and len(shape.dim):
        d = shape.dim[rng.randrange(len(shape.dim))]
        s = rng.random()
        if s < 0.6:
            d.dim_value = rand_int(rng)
        elif s < 0.8:
            d.dim_param = pick(rng, ["N", "batch", "", "a=b", "\u00e9", "N"])
        else:
            d.Clear()
    elif r < 0.6:
        shape.dim.add().dim_value = pick(rng, [1, 2, 0, -1, 2**40])
    elif r < 0.7 and len(shape.dim):
        shape.dim.pop(rng.randrange(len(shape.dim)))
    elif r < 0.8:
        tt.ClearField("shape")
    elif r < 0.9:
        del shape.dim[:]  # rank 0
    else:
        del shape.dim[:]
        for _ in range(rng.choice([9, 12, 33])):
            shape.dim.add().dim_value = rng.choice([1, 2])


def m_dims(rng, m, ctx):
    vis = [v for v in value_infos(m) if v.type.HasField("tensor_type")]
    if not vis:
        return None
    v = pick(rng, vis)
    mutate_shape(rng, v.type.tensor_type)
    return "dims %s" % v.name


def m_dtype(rng, m, ctx):
    vis = value_infos(m)
    if not vis:
        return None
    v = pick(rng, vis)
    r = rng.random()
    if r < 0.6:
        v.type.tensor_type.elem_type = pick(rng, ELEM_TYPES)
    elif r < 0.7:
        inner = copy.deepcopy(v.type)
        v.type.Clear()
        v.type.sequence_type.elem_type.CopyFrom(inner)
    elif r < 0.8:
        inner = copy.deepcopy(v.type)
        v.type.Clear()
        v.type.optional_type.elem_type.CopyFrom(inner)
    elif r < 0.9:
        v.type.Clear()
        v.type.map_type.key_type = pick(rng, [7, 8, 1, 99])
        v.type.map_type.value_type.tensor_type.elem_type = 1
    else:
        v.type.Clear()  # no type at all
    return "dtype %s" % v.name


def rand_tensor(rng):
    dt = pick(rng, [1, 7, 6, 9, 10, 11, 2, 3, 8, 16, 99])
    t = TensorProto()
    t.data_type = dt
    dims = [rng.choice([0, 1, 2, 3, 4]) for _ in range(rng.randrange(0, 4))]
    t.dims.extend(dims)
    n = int(np.prod(dims)) if dims else 1
    if dt == 8:
        t.string_data.extend([b"x"] * n)
    elif rng.random() < 0.5:
        t.raw_data = bytes(rng.randrange(256) for _ in range(n * 4))
    elif dt in (1,):
        t.float_data.extend(rand_float(rng) for _ in range(n))
    else:
        t.int64_data.extend(rand_int(rng) for _ in range(n))
    return t


def tensor_values(t):
    try:
        return numpy_helper.to_array(t)
    except Exception:
        return None


def set_tensor_array(t, arr):
    name = t.name
    new = numpy_helper.from_array(arr, name)
    t.Clear()
    t.CopyFrom(new)


def mutate_tensor(rng, t):
    r = rng.random()
    if r < 0.12:
        t.data_type = pick(rng, ELEM_TYPES)
    elif r < 0.27:
        v = mutate_int_list(rng, t.dims) if rng.random() < 0.7 else []
        del t.dims[:]
        t.dims.extend(v)
    elif r < 0.4 and t.raw_data:
        raw = t.raw_data
        s = rng.random()
        if s < 0.4:
            t.raw_data = raw[:rng.randrange(len(raw) + 1)]
        elif s < 0.7:
            t.raw_data = raw + bytes(rng.randrange(256) for _ in range(rng.choice([1, 3, 4, 64])))
        else:
            b = bytearray(raw)
            for _ in range(rng.randrange(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            t.raw_data = bytes(b)
    elif r < 0.5:  # typed fields beside (or instead of) raw data
        s = rng.random()
        if s < 0.33:
            t.float_data.extend(rand_float(rng) for _ in range(rng.randrange(1, 5)))
        elif s < 0.66:
            t.int64_data.extend(rand_int(rng) for _ in range(rng.randrange(1, 5)))
        else:
            t.int32_data.extend(rng.choice([0, 1, -1, 2**31 - 1, 65535, 300])
                                for _ in range(rng.randrange(1, 5)))
    elif r < 0.6:  # external data
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        for k, v in (("location", pick(rng, ["../x", "/etc/passwd", "w.bin", "", "/dev/zero",
                                              "/proc/self/mem", "nope/../../x", "\u00e9.bin"])),
                     ("offset", pick(rng, ["0", "-1", "18446744073709551615", "4096", "x"])),
                     ("length", pick(rng, ["0", "4", "-1", "1099511627776", "99999999999999999999"]))):
            if rng.random() < 0.85:
                e = t.external_data.add()
                e.key, e.value = k, v
        if rng.random() < 0.5:
            t.ClearField("raw_data")
    elif r < 0.65:
        t.segment.begin = rand_int(rng)
        t.segment.end = rand_int(rng)
    elif r < 0.95:  # values: shape-like int64 constants become huge or negative
        a = tensor_values(t)
        if a is None or a.size == 0 or a.size > 1 << 16:
            t.dims.append(pick(rng, [0, 2, 2**20]))
            return
        a = a.copy()
        flat = a.reshape(-1)
        i = rng.randrange(flat.size)
        if a.dtype.kind in "iu":
            info = np.iinfo(a.dtype)
            v = pick(rng, [2**20, 2**31 - 1, 2**40, 2**62, -1, -2, 0, 1, info.max, info.min, 3,
                           1 << 30, 100000])
            flat[i] = np.clip(v, info.min, info.max).astype(a.dtype)
        elif a.dtype.kind == "f":
            flat[i] = pick(rng, [np.nan, np.inf, -np.inf, 0.0, 1e30, -1e30, 1e6, 65504.0])
        elif a.dtype.kind == "b":
            flat[i] = not flat[i]
        else:
            return
        set_tensor_array(t, a)
    else:
        t.name = pick(rng, WEIRD_NAMES)


def m_tensor(rng, m, ctx):
    ts = tensors(m)
    if not ts:
        return None
    t = pick(rng, ts)
    mutate_tensor(rng, t)
    return "tensor %s" % t.name


def m_shape_bomb(rng, m, ctx):
    """The memory-bomb mutation: a small integer constant (a shape, repeats, a Range limit, pads)
    gets a huge element; or a Constant/ConstantOfShape/Range appears feeding a node."""
    ts = [t for t in tensors(m) if t.data_type in (6, 7) and 0 < sum(1 for _ in t.dims) <= 1]
    ts = [t for t in ts if (tensor_values(t) is not None and 0 < tensor_values(t).size <= 8)]
    if ts and rng.random() < 0.7:
        t = pick(rng, ts)
        a = tensor_values(t).copy().reshape(-1)
        info = np.iinfo(a.dtype)
        a[rng.randrange(a.size)] = min(pick(rng, [2**20, 2**24, 2**31 - 1, 2**33, 2**40, 2**62]),
                                       info.max)
        set_tensor_array(t, a.reshape(tensor_values(t).shape))
        return "shape-bomb %s" % t.name
    g = m.graph
    outs = value_names(g)
    name = "bomb_%d" % rng.randrange(1 << 30)
    kind = rng.randrange(4)
    shape = [pick(rng, [2**20, 2**31, 2**16, 2**40, 3]) for _ in range(rng.randrange(1, 4))]
    if kind == 0:
        sh = numpy_helper.from_array(np.array(shape, np.int64), name + "_s")
        g.initializer.append(sh)
        g.node.append(helper.make_node("ConstantOfShape", [sh.name], [name], name=name))
    elif kind == 1:
        g.node.append(helper.make_node("Range", [], [name], name=name))
        for k, v in (("s", 0), ("l", pick(rng, [2**40, 2**31, 2**62])), ("d", 1)):
            t = numpy_helper.from_array(np.array(v, np.int64), name + "_" + k)
            g.initializer.append(t)
            g.node[-1].input.append(t.name)
    elif kind == 2 and outs:
        sh = numpy_helper.from_array(np.array(shape, np.int64), name + "_s")
        g.initializer.append(sh)
        g.node.append(helper.make_node("Expand", [pick(rng, outs), sh.name], [name], name=name))
    elif outs:
        reps = numpy_helper.from_array(np.array(shape, np.int64), name + "_r")
        g.initializer.append(reps)
        g.node.append(helper.make_node("Tile", [pick(rng, outs), reps.name], [name], name=name))
    else:
        return None
    g.output.append(helper.make_empty_tensor_value_info(name))
    return "bomb-node %d" % kind


def m_wiring(rng, m, ctx):
    cs = [c for c in containers(m) if len(c.node)]
    if not cs:
        return None
    c = pick(rng, cs)
    n = pick(rng, c.node)
    names = value_names(c) or ["x"]
    # outer-scope and foreign names too
    names = names + value_names(m.graph)[:50] + ["", "nonexistent"]
    r = rng.random()
    if r < 0.45 and len(n.input):
        i = rng.randrange(len(n.input))
        n.input[i] = pick(rng, names)
    elif r < 0.55:
        n.input.append(pick(rng, names))
    elif r < 0.62 and len(n.input):
        n.input.pop()
    elif r < 0.72 and len(n.output):  # duplicate an output name
        n.output[rng.randrange(len(n.output))] = pick(rng, names)
    elif r < 0.78:
        n.output.append(pick(rng, ["", "extra_out", names[0]]))
    elif r < 0.84 and len(n.output):
        n.output.pop()
    elif r < 0.94 and len(c.node) > 1:  # cycle: an input from a later node (or itself)
        i = list(c.node).index(n)
        later = c.node[rng.randrange(i, len(c.node))]
        if later.output and n.input:
            n.input[rng.randrange(len(n.input))] = pick(rng, later.output)
        else:
            return None
    else:
        nodes = list(c.node)
        rng.shuffle(nodes)
        del c.node[:]
        c.node.extend(nodes)
    return "wiring %s" % n.op_type


def m_node(rng, m, ctx):
    cs = [c for c in containers(m) if len(c.node)]
    if not cs:
        return None
    c = pick(rng, cs)
    i = rng.randrange(len(c.node))
    n = c.node[i]
    r = rng.random()
    if r < 0.2:
        del c.node[i]
        return "node-delete %s" % n.op_type
    if r < 0.35:
        c.node.insert(rng.randrange(len(c.node) + 1), copy.deepcopy(n))
        return "node-dup %s" % n.op_type
    if r < 0.65:
        old = n.op_type
        same = OPS_BY_ARITY.get(len(n.input)) or ALL_OPS
        d, op = pick(rng, same if rng.random() < 0.8 else ALL_OPS)
        n.op_type, n.domain = op, d
        return "op %s->%s" % (old, op)
    if r < 0.8:
        n.domain = pick(rng, DOMAINS)
        return "domain %s" % n.op_type
    if r < 0.9:
        n.name = pick(rng, WEIRD_NAMES)
        return "node-name"
    n.op_type = pick(rng, ["", "X", "Relu\u00e9", "Loop", "If", "Scan", "SequenceMap", "Constant"])
    return "op-weird"


def rename_value(c, old, new):
    if is_graph(c):
        for v in list(c.input) + list(c.output) + list(c.value_info):
            if v.name == old:
                v.name = new
        for t in c.initializer:
            if t.name == old:
                t.name = new
    for n in c.node:
        for k, x in enumerate(n.input):
            if x == old:
                n.input[k] = new
        for k, x in enumerate(n.output):
            if x == old:
                n.output[k] = new


def m_names(rng, m, ctx):
    r = rng.random()
    g = m.graph
    if r < 0.4:
        names = value_names(g)
        if not names:
            return None
        old = pick(rng, names)
        rename_value(g, old, pick(rng, WEIRD_NAMES + [names[0]]))
        return "rename %s" % old
    if r < 0.6:
        p = m.metadata_props.add()
        p.key, p.value = pick(rng, WEIRD_NAMES), pick(rng, WEIRD_NAMES)
        return "metadata"
    if r < 0.75:
        m.doc_string = pick(rng, WEIRD_NAMES)
        g.doc_string = pick(rng, WEIRD_NAMES)
        m.producer_name = pick(rng, WEIRD_NAMES)
        return "doc"
    if r < 0.9:
        g.name = pick(rng, WEIRD_NAMES)
        m.domain = pick(rng, WEIRD_NAMES)
        return "graph-name"
    m.model_version = rand_int(rng)
    return "model-version"


def m_graph_io(rng, m, ctx):
    g = m.graph
    r = rng.random()
    names = value_names(g)
    if r < 0.2 and len(g.input):
        g.input.pop(rng.randrange(len(g.input)))
        return "input-remove"
    if r < 0.35 and len(g.input):
        g.input.append(copy.deepcopy(pick(rng, g.input)))
        return "input-dup"
    if r < 0.5 and len(g.initializer):  # an input overriding an initializer
        t = pick(rng, g.initializer)
        if rng.random() < 0.5:
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            g.input.append(helper.make_tensor_value_info(t.name, 1, ["N"] * len(t.dims)))
        return "input-initializer"
    if r < 0.65 and names:
        g.output.append(helper.make_empty_tensor_value_info(pick(rng, names + ["nope"])))
        return "output-add"
    if r < 0.75 and len(g.output):
        g.output.pop(rng.randrange(len(g.output)))
        return "output-remove"
    if r < 0.85 and len(g.output):
        g.output.append(copy.deepcopy(pick(rng, g.output)))
        return "output-dup"
    if r < 0.92:
        g.input.append(helper.make_tensor_value_info(pick(rng, WEIRD_NAMES + ["in2"]),
                                                     pick(rng, [1, 7, 9, 8, 16, 10]),
                                                     [pick(rng, [1, 2, "N", 0])]))
        return "input-add"
    if len(g.initializer):
        g.initializer.append(copy.deepcopy(pick(rng, g.initializer)))
        return "initializer-dup"
    return None


def m_opset(rng, m, ctx):
    r = rng.random()
    if r < 0.5 and len(m.opset_import):
        o = pick(rng, m.opset_import)
        o.version = pick(rng, OPSETS)
        return "opset %s=%d" % (o.domain, o.version)
    if r < 0.6 and len(m.opset_import):
        m.opset_import.pop(rng.randrange(len(m.opset_import)))
        return "opset-remove"
    if r < 0.75:
        o = m.opset_import.add()
        o.domain, o.version = pick(rng, DOMAINS), pick(rng, OPSETS)
        return "opset-add"
    if r < 0.85 and len(m.opset_import):
        pick(rng, m.opset_import).domain = pick(rng, DOMAINS)
        return "opset-domain"
    m.ir_version = pick(rng, IR_VERSIONS)
    return "ir %d" % m.ir_version


def bool_init(name, v):
    return numpy_helper.from_array(np.array(v), name)


def m_wrap_if(rng, m, ctx):
    g = m.graph
    if not len(g.node):
        return None
    i = rng.randrange(len(g.node))
    n = g.node[i]
    if not n.output:
        return None
    cond = "fzcond_%d" % rng.randrange(1 << 30)
    g.initializer.append(bool_init(cond, rng.random() < 0.5))
    if rng.random() < 0.2:
        g.initializer[-1].dims.append(pick(rng, [0, 2]))  # non-scalar condition

    def branch(tag):
        b = helper.make_graph([copy.deepcopy(n)], tag, [],
                              [helper.make_empty_tensor_value_info(o) for o in n.output if o])
        return b
    then_b = branch("then")
    else_b = branch("else")
    if rng.random() < 0.2:
        else_b.output.pop() if len(else_b.output) else None  # branch output counts differ
    new = helper.make_node("If", [cond], [o for o in n.output if o], name="fzif_" + n.name,
                           then_branch=then_b, else_branch=else_b)
    del g.node[i]
    g.node.insert(i, new)
    return "wrap-if %s" % n.op_type


def m_wrap_loop(rng, m, ctx):
    g = m.graph
    if not len(g.node):
        return None
    i = rng.randrange(len(g.node))
    n = g.node[i]
    outs = [o for o in n.output if o]
    if not outs:
        return None
    tag = "fzloop_%d" % rng.randrange(1 << 30)
    trip = pick(rng, [0, 1, 2, 3, 100, 2**31 - 1, 2**40, -1, None])
    inputs = []
    if trip is not None:
        g.initializer.append(numpy_helper.from_array(np.array(trip, np.int64), tag + "_M"))
        inputs.append(tag + "_M")
    else:
        inputs.append("")
    g.initializer.append(bool_init(tag + "_c", True))
    inputs.append(tag + "_c")
    body_nodes = [copy.deepcopy(n), helper.make_node("Identity", [tag + "_ci"], [tag + "_co"])]
    body = helper.make_graph(
        body_nodes, "body",
        [helper.make_tensor_value_info(tag + "_i", TensorProto.INT64, []),
         helper.make_tensor_value_info(tag + "_ci", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info(tag + "_co", TensorProto.BOOL, [])]
        + [helper.make_empty_tensor_value_info(o) for o in outs])
    new = helper.make_node("Loop", inputs, outs, name=tag, body=body)
    del g.node[i]
    g.node.insert(i, new)
    return "wrap-loop %s trip=%s" % (n.op_type, trip)


def m_function(rng, m, ctx):
    g = m.graph
    r = rng.random()
    if r < 0.55 and len(g.node):  # a node moved into a model-local function
        i = rng.randrange(len(g.node))
        n = g.node[i]
        fname = "F%d" % len(m.functions)
        dom = pick(rng, ["local.fz", "local.fz", "", "com.microsoft"])
        body = copy.deepcopy(n)
        f = helper.make_function(dom, fname if rng.random() < 0.9 else "Relu",
                                 [x for x in n.input if x], [x for x in n.output if x], [body],
                                 list(m.opset_import) or [helper.make_opsetid("", 13)])
        if n.attribute and rng.random() < 0.3:  # attribute references
            a = pick(rng, body.attribute)
            name = a.name
            a.Clear()
            a.name, a.ref_attr_name = name, pick(rng, [name, "other"])
            a.type = AttributeProto.INT
            f.attribute.append(name)
        m.functions.append(f)
        call = helper.make_node(f.name, [x for x in n.input if x], [x for x in n.output if x],
                                name=n.name, domain=dom)
        for a in n.attribute:
            if rng.random() < 0.7:
                call.attribute.append(a)
        del g.node[i]
        g.node.insert(i, call)
        if dom not in [o.domain for o in m.opset_import]:
            m.opset_import.append(helper.make_opsetid(dom, 1))
        return "to-function %s" % n.op_type
    if r < 0.8 and len(m.functions):  # recursion: a function's node calls a function
        f = pick(rng, m.functions)
        target = pick(rng, m.functions)
        if len(f.node):
            k = rng.randrange(len(f.node))
            f.node[k].op_type, f.node[k].domain = target.name, target.domain
        else:
            f.node.append(helper.make_node(target.name, list(f.input), list(f.output),
                                           domain=target.domain))
        return "function-recursion"
    if len(m.functions):
        f = pick(rng, m.functions)
        s = rng.random()
        if s < 0.3:
            del f.node[:]
        elif s < 0.5:
            f.output.append("never_made")
        elif s < 0.7:
            m.functions.append(copy.deepcopy(f))  # duplicate definition
        elif s < 0.85:
            del f.opset_import[:]
        else:
            f.input.append(pick(rng, WEIRD_NAMES))
        return "function-edit"
    return None


def m_crossover(rng, m, ctx):
    other = ctx["other"]()
    if other is None or not len(other.graph.node):
        return None
    g = m.graph
    n = copy.deepcopy(pick(rng, other.graph.node))
    inits = {t.name: t for t in other.graph.initializer}
    names = value_names(g)
    for k, x in enumerate(n.input):
        if x in inits and rng.random() < 0.7:
            t = copy.deepcopy(inits[x])
            t.name = "xo_" + x
            g.initializer.append(t)
            n.input[k] = t.name
        elif names:
            n.input[k] = pick(rng, names)
    for k, x in enumerate(n.output):
        n.output[k] = "xo_" + x
    g.node.append(n)
    if rng.random() < 0.7 and n.output:
        g.output.append(helper.make_empty_tensor_value_info(n.output[0]))
    for o in other.opset_import:
        if o.domain not in [x.domain for x in m.opset_import]:
            m.opset_import.append(o)
    return "crossover %s" % n.op_type


def m_sparse(rng, m, ctx):
    g = m.graph
    if not len(g.initializer):
        return None
    i = rng.randrange(len(g.initializer))
    t = g.initializer[i]
    a = tensor_values(t)
    if a is None or a.size == 0 or a.size > 4096:
        return None
    flat = a.reshape(-1)
    idx = np.nonzero(flat)[0].astype(np.int64)
    sp = onnx.SparseTensorProto()
    sp.values.CopyFrom(numpy_helper.from_array(flat[idx], t.name))
    if rng.random() < 0.5 and idx.size:
        idx = idx.copy()
        idx[rng.randrange(idx.size)] = pick(rng, [-1, a.size, 2**40, 2**62])
    sp.indices.CopyFrom(numpy_helper.from_array(idx, t.name + "_idx"))
    sp.dims.extend(a.shape if rng.random() < 0.8 else mutate_int_list(rng, a.shape))
    del g.initializer[i]
    g.sparse_initializer.append(sp)
    return "sparse %s" % t.name


MUTATIONS = [
    (m_attr_value, 14), (m_attr_type, 3), (m_attr_add, 6), (m_dims, 8), (m_dtype, 5),
    (m_tensor, 10), (m_shape_bomb, 6), (m_wiring, 8), (m_node, 8), (m_names, 3),
    (m_graph_io, 5), (m_opset, 4), (m_wrap_if, 3), (m_wrap_loop, 3), (m_function, 5),
    (m_crossover, 4), (m_sparse, 2),
]
MUT_TOTAL = sum(w for _, w in MUTATIONS)


def pick_mutation(rng):
    r = rng.randrange(MUT_TOTAL)
    for f, w in MUTATIONS:
        if r < w:
            return f
        r -= w
    return MUTATIONS[-1][0]


INTERESTING_BYTES = [0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, 0x08, 0x0a, 0x12, 0x1a, 0x22, 0x3a, 0x40]


def byte_mutate(rng, data, other):
    b = bytearray(data)
    for _ in range(rng.randrange(1, 6)):
        if not b:
            b = bytearray(b"\x08\x07")
        r = rng.random()
        i = rng.randrange(len(b))
        if r < 0.25:
            b[i] ^= 1 << rng.randrange(8)
        elif r < 0.45:
            b[i] = pick(rng, INTERESTING_BYTES)
        elif r < 0.55:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16)))
        elif r < 0.65:
            del b[i:i + rng.randrange(1, 64)]
        elif r < 0.72:
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randrange(1, 128)]
        elif r < 0.8:
            del b[rng.randrange(len(b)):]
        elif r < 0.9:  # a huge varint (a length or a dim) over a byte
            b[i:i + 1] = pick(rng, [b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01",
                                    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\x80\x80\x04"])
        elif other:
            j = rng.randrange(len(other))
            b[i:] = other[j:j + rng.randrange(1, 4096)]
    return bytes(b)


# ---------------------------------------------------------------------------------------------
# Inputs: .npy (or TensorProto .pb) per graph input, sometimes mutated.

def npy_bytes(a, version=(1, 0)):
    import io
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, version=version, allow_pickle=False)
    return buf.getvalue()


def npy_header(descr, shape, fortran=False, version=1):
    header = "{'descr': %r, 'fortran_order': %s, 'shape': (%s), }" % (
        descr, fortran, ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    if version == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode()
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header)) + header.encode()


def gen_array(rng, elem_type, dims):
    dt = ONNX_TO_NP.get(elem_type, np.float32)
    shape = []
    for d in dims:
        if isinstance(d, int) and 0 <= d <= 64:
            shape.append(d)
        elif isinstance(d, int) and d > 64:
            shape.append(min(d, 512))
        else:
            shape.append(rng.choice([1, 1, 2, 3]))
    while int(np.prod(shape)) > 1 << 20:
        shape[shape.index(max(shape))] //= 2
    nrng = np.random.default_rng(rng.randrange(1 << 32))
    if dt == np.bool_:
        a = nrng.random(shape) < 0.5
    elif np.issubdtype(dt, np.integer):
        a = nrng.integers(0, 4, size=shape).astype(dt)
    else:
        a = (nrng.random(shape) * 4 - 2).astype(dt)
    return a


def mutate_array(rng, a):
    r = rng.random()
    if r < 0.2:
        dt = pick(rng, NP_DTYPES[:12])
        return a.astype(dt)
    if r < 0.35:
        shape = list(a.shape)
        s = rng.random()
        if s < 0.3 and shape:
            shape[rng.randrange(len(shape))] = pick(rng, [0, 1, 2, 5, 7])
        elif s < 0.6:
            shape.append(pick(rng, [1, 2]))
        elif shape:
            shape.pop()
        n = int(np.prod(shape)) if shape else 1
        return np.resize(a, shape) if n <= 1 << 20 else a
    if r < 0.7 and a.size:
        a = a.copy()
        flat = a.reshape(-1)
        for _ in range(rng.randrange(1, 4)):
            i = rng.randrange(flat.size)
            if a.dtype.kind in "iu":
                info = np.iinfo(a.dtype)
                v = pick(rng, [info.min, info.max, -1, 0, 1, 1000000, 2**31, -2**31])
                flat[i] = np.array(np.clip(v, info.min, info.max)).astype(a.dtype)
            elif a.dtype.kind in "fc":
                flat[i] = pick(rng, [np.nan, np.inf, -np.inf, 0.0, 1e38, -1e38, 1e-40])
            elif a.dtype.kind == "b":
                flat[i] = not flat[i]
        return a
    if r < 0.8:
        return np.asfortranarray(a)
    if r < 0.85:
        return a.astype(">" + a.dtype.str[1:]) if a.dtype.itemsize > 1 else a
    return a


def mutate_npy_bytes(rng, data):
    r = rng.random()
    if r < 0.3:
        return npy_header(pick(rng, ["<f4", "<i8", "|b1", "<U9", "<f2", "|O", "<V8", "x", "<f4 "]),
                          [pick(rng, [2**20, 2**40, 2**62, 0, 1, 3, -1]) for _ in range(rng.randrange(0, 5))],
                          rng.random() < 0.3, pick(rng, [1, 2])) + b"\0" * rng.choice([0, 16, 4096])
    return byte_mutate(rng, data, None)


def input_specs(m):
    inits = {t.name for t in m.graph.initializer}
    specs = []
    for v in m.graph.input:
        if v.name in inits:
            continue
        tt = v.type.tensor_type
        dims = None
        if tt.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        specs.append((v.name, tt.elem_type, dims if dims is not None else [1]))
    return specs


SAFE_NAME = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")


def write_inputs(rng, m, d, mutate):
    """Writes one file per graph input into d; returns the `-i NAME=FILE` pairs."""
    os.makedirs(d, exist_ok=True)
    pairs = []
    for k, (name, et, dims) in enumerate(input_specs(m)):
        if isinstance(name, bytes):  # not valid UTF-8 (protobuf hands back the raw bytes)
            continue
        if (mutate and rng.random() < 0.05) or "\0" in name:
            continue  # a missing input (a name with NUL cannot be given on a command line)
        a = gen_array(rng, et, dims)
        if mutate and rng.random() < 0.35:
            a = mutate_array(rng, a)
        fname = (name + ".npy") if SAFE_NAME.match(name) else ("in%d.npy" % k)
        path = os.path.join(d, fname)
        if mutate and rng.random() < 0.1:  # a TensorProto instead of .npy
            path = path[:-4] + ".pb"
            try:
                t = numpy_helper.from_array(a, name)
            except Exception:
                t = numpy_helper.from_array(a.astype(np.float32), name)
            data = t.SerializeToString()
            if rng.random() < 0.5:
                data = byte_mutate(rng, data, None)
        else:
            try:
                data = npy_bytes(a)
            except Exception:
                data = npy_bytes(a.astype(np.float32))
            if mutate and rng.random() < 0.12:
                data = mutate_npy_bytes(rng, data)
        with open(path, "wb") as f:
            f.write(data)
        pairs.append((name, path))
    if mutate and rng.random() < 0.03:
        p = os.path.join(d, "extra.npy")
        with open(p, "wb") as f:
            f.write(npy_bytes(np.zeros(2, np.float32)))
        pairs.append(("not_an_input", p))
    return pairs


# ---------------------------------------------------------------------------------------------
# Running and classifying.

SAN_PATTERNS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer",
                "AddressSanitizer:DEADLYSIGNAL", "ERROR: UndefinedBehaviorSanitizer")


def limit_as(gib):
    def f():
        resource.setrlimit(resource.RLIMIT_AS, (gib << 30, gib << 30))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return f


def run_cmd(args, cmd, cwd):
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    if args.asan:
        env["ASAN_OPTIONS"] = ("allocator_may_return_null=0:halt_on_error=1:abort_on_error=0:"
                               "hard_rss_limit_mb=%d:max_allocation_size_mb=%d:detect_leaks=1"
                               % (args.rlimit_gb << 10, args.rlimit_gb << 10))
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
        pre = limit_as(0) if False else None
    else:
        pre = limit_as(args.rlimit_gb)
    cmd = [c.replace("\0", "") for c in cmd]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, timeout=args.timeout, preexec_fn=pre,
                           start_new_session=True)
        return p.returncode, p.stdout, p.stderr, time.time() - t0, False
    except subprocess.TimeoutExpired as e:
        return None, e.stdout or b"", e.stderr or b"", time.time() - t0, True


def classify(args, verb, cmd, rc, out, err, timed_out, model):
    text = err.decode("utf-8", "replace")
    if any(p in text for p in SAN_PATTERNS):
        return "sanitizer"
    if timed_out:
        return "timeout-loop" if model is not None and has_loop(model) else "hang"
    if rc < 0:
        return "signal"
    if rc == 70:
        return "exit70"
    if rc not in (0, 1, 2, 3, 4):
        return "bad-exit"
    if rc == 0 and "--json" in cmd:
        try:
            json.loads(out.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return "bad-json"
    return None


FINDING_CLASSES = ("signal", "exit70", "sanitizer", "hang", "bad-exit", "bad-json")


def signature(cls, verb, rc, err):
    text = err.decode("utf-8", "replace")
    if cls == "sanitizer":
        lines = [l for l in text.splitlines() if "SUMMARY:" in l or "runtime error:" in l]
        frames = re.findall(r"#\d+ 0x[0-9a-f]+ in (\S+)", text)
        key = (lines[0] if lines else "") + "|" + "|".join(frames[:3])
    elif cls in ("exit70", "bad-exit"):
        last = text.strip().splitlines()[-1] if text.strip() else ""
        key = re.sub(r"'[^']*'", "'_'", last)
        key = re.sub(r"\d+", "N", key)[:160]
    elif cls == "signal":
        key = "sig%d" % -rc
    else:
        key = cls
    key = re.sub(r"0x[0-9a-f]+", "", key)
    return "%s %s %s" % (cls, verb, key)


def load_seeds(args):
    paths = []
    if args.seed_list:  # a run's seeds.txt: the same seeds as that run
        with open(args.seed_list) as f:
            paths = [line.rstrip("\n") for line in f if line.strip()]
    for d in ([] if args.seed_list else args.seed_dirs):
        for p in sorted(glob.glob(os.path.join(d, "**", "*"), recursive=True)):
            if os.path.isfile(p) and (p.endswith(".onnx") or "/seeds/session/" in p):
                paths.append(p)
    seen, seeds = set(), []
    for p in paths:
        try:
            if os.path.getsize(p) > MAX_SEED_BYTES:
                continue
            with open(p, "rb") as f:
                data = f.read()
        except OSError:
            continue
        h = hashlib.sha1(data).hexdigest()
        if h in seen:
            continue
        seen.add(h)
        seeds.append((p, data))
    return seeds


def default_seed_dirs():
    dirs = [os.path.join(REPO, "build-fuzz", "seeds", "session"),
            os.path.join(REPO, "examples"),
            os.path.join(REPO, "fuzz", "corpus", "session"),
            os.path.join(REPO, "fuzz", "corpus", "passes"),
            os.path.join(REPO, "fuzz", "corpus", "audit_inspect"),
            os.path.join(REPO, "build", "models", "zoo"),
            os.path.join(REPO, "build", "models", "sweep"),
            os.path.join(REPO, "build", "models", "stress")]
    dirs += glob.glob(os.path.join(REPO, ".venv", "lib", "python3*", "site-packages", "onnx",
                                   "backend", "test", "data", "node"))
    dirs += ["/usr/share/libonnx-testdata/data/pytorch-operator",
             "/usr/share/libonnx-testdata/data/simple"]
    return [d for d in dirs if os.path.isdir(d)]


def make_mutant(rng, seeds, si):
    """Returns (seed path, seed bytes, mutant bytes, mutant model or None, description)."""
    path, data = seeds[si]
    desc = []
    try:
        m = onnx.ModelProto()
        m.ParseFromString(data)
    except Exception:
        m = None

    def other():
        _, od = seeds[rng.randrange(len(seeds))]
        try:
            om = onnx.ModelProto()
            om.ParseFromString(od)
            return om
        except Exception:
            return None
    ctx = {"other": other}
    if m is None or rng.random() < 0.12:
        _, od = seeds[rng.randrange(len(seeds))]
        mb = byte_mutate(rng, data, od)
        desc.append("bytes")
    else:
        for _ in range(rng.choice([1, 1, 2, 2, 3, 4])):
            f = pick_mutation(rng)
            try:
                d = f(rng, m, ctx)
            except (ValueError, TypeError, IndexError, OverflowError, AttributeError) as e:
                d = "%s failed: %s" % (f.__name__, type(e).__name__)
            if d:
                desc.append(d)
        try:
            mb = m.SerializeToString()
        except Exception as e:
            mb = data
            desc.append("serialize failed: %s" % e)
        if rng.random() < 0.04:
            mb = byte_mutate(rng, mb, None)
            desc.append("bytes")
    try:
        mm = onnx.ModelProto()
        mm.ParseFromString(mb)
    except Exception:
        mm = None
    return path, data, mb, mm, desc


def verb_commands(rng, args, verb, mutant, seed_model, inputs, datadir, work):
    b = args.binary
    mem = ["--max-memory", "%dG" % (args.rlimit_gb // 2)] if args.asan else []
    if verb == "inspect":
        return [b, "inspect", mutant] + (["--json"] if rng.random() < 0.5 else []) + mem
    if verb == "audit":
        c = [b, "audit", mutant]
        for _ in range(rng.randrange(0, 3)):
            c += ["--target", pick(rng, ["ferry", "ferry-cpu", "opset:%d" % rng.randrange(1, 25),
                                         "opset:%d" % pick(rng, [0, -1, 2**31, 99]) if rng.random() < 0.2 else "ferry"])]
        if rng.random() < 0.5:
            c.append("--json")
        if rng.random() < 0.2:
            c.append("--strict")
        return c + mem
    if verb == "run":
        c = [b, "run", mutant, "-o", os.path.join(work, "out_run"), "--threads", "1"]
        for name, p in inputs:
            c += ["-i", "%s=%s" % (name, p)]
        if rng.random() < 0.4:
            c += ["--provider", "reference"]
        if rng.random() < 0.3:
            c.append("--json")
        return c + mem
    if verb == "optimize":
        c = [b, "optimize", mutant, "-o", os.path.join(work, "opt.onnx")]
        if rng.random() < 0.3:
            c += ["--level", "basic"]
        if rng.random() < 0.2:
            c += ["--check", "1"]
        if rng.random() < 0.2:
            c.append("--json")
        return c + mem
    if verb == "convert":
        c = [b, "convert", mutant, "-o", os.path.join(work, "conv.onnx")]
        if rng.random() < 0.5:
            c.append("--fp16")
            if rng.random() < 0.3:
                c.append("--keep-io-types")
        else:
            c += ["--opset", str(pick(rng, [7, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19, 21]))]
        if rng.random() < 0.2:
            c += ["--check", "1"]
        if rng.random() < 0.2:
            c.append("--json")
        return c + mem
    if verb == "verify":
        c = [b, "verify", "--reference", seed_model, "--candidate", mutant, "--data", datadir,
             "--threads", "1"]
        if rng.random() < 0.3:
            c.append("--per-layer")
        if rng.random() < 0.3:
            c.append("--json")
        if rng.random() < 0.2:
            c += ["--report", os.path.join(work, "report.md")]
        return c + mem
    raise ValueError(verb)


def save_finding(args, cls, sig, idx, verb, cmd, rc, err, out, work, seed_path, desc, dur):
    h = hashlib.sha1(sig.encode()).hexdigest()[:10]
    d = os.path.join(args.findings, cls, "%s-%s-m%d" % (verb, h, idx))
    if os.path.exists(d):
        return d
    shutil.copytree(work, d, ignore=shutil.ignore_patterns("out_run", "opt.onnx", "conv.onnx"))
    rel = [x.replace(work, "$D") for x in cmd]
    with open(os.path.join(d, "cmd.sh"), "w") as f:
        f.write("#!/bin/sh\n# %s\nD=$(cd \"$(dirname \"$0\")\" && pwd)\n" % sig.replace("\n", " "))
        f.write("BIN=${BIN:-%s}\n" % args.binary)
        f.write(" ".join(["\"$BIN\""] + ["'%s'" % x.replace("'", "'\\''") if "$D" not in x
                                         else "\"%s\"" % x for x in rel[1:]]) + "\n")
    with open(os.path.join(d, "stderr.txt"), "wb") as f:
        f.write(err[-200000:])
    with open(os.path.join(d, "stdout.txt"), "wb") as f:
        f.write(out[-20000:])
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump({"class": cls, "signature": sig, "mutant_index": idx, "verb": verb, "rc": rc,
                   "seconds": round(dur, 2), "seed_model": seed_path, "mutations": desc,
                   "campaign_seed": args.seed, "binary": args.binary, "command": rel}, f, indent=1)
    return d


def campaign(args):
    seeds = load_seeds(args)
    if not seeds:
        sys.exit("no seed models found in %s" % args.seed_dirs)
    os.makedirs(args.findings, exist_ok=True)
    with open(os.path.join(args.findings, "seeds.txt"), "w") as f:
        f.write("".join(p + "\n" for p, _ in seeds))
    work = os.path.join(args.findings, "work")
    stats = {"binary": args.binary, "asan": args.asan, "campaign_seed": args.seed,
             "seeds": len(seeds), "mutants": 0, "mutants_unparsable": 0,
             "seed_list_sha1": hashlib.sha1("\n".join(
                 hashlib.sha1(d).hexdigest() for _, d in seeds).encode()).hexdigest(),
             "exec": collections.Counter(), "rc": collections.defaultdict(collections.Counter),
             "classes": collections.Counter(), "signatures": collections.Counter(),
             "memory_budget_refusals": collections.Counter(), "slowest": [],
             "timeout_s": args.timeout, "rlimit_as_gib": None if args.asan else args.rlimit_gb}
    t_start = time.time()
    indices = [args.only] if args.only is not None else range(args.start, 1 << 62)

    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)  # SIGTERM / ^C: stop, still write the stats
    try:
        run_mutants(args, seeds, stats, indices, work, t_start)
    except KeyboardInterrupt:
        stats["interrupted"] = True
    return finish(args, stats, work, t_start)


def run_mutants(args, seeds, stats, indices, work, t_start):
    for idx in indices:
        if time.time() - t_start > args.seconds:
            break
        rng = random.Random("%d-%d" % (args.seed, idx))
        si = rng.randrange(len(seeds))
        seed_path, seed_data, mb, mm, desc = make_mutant(rng, seeds, si)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        mutant = os.path.join(work, "mutant.onnx")
        seed_copy = os.path.join(work, "seed.onnx")
        with open(mutant, "wb") as f:
            f.write(mb)
        with open(seed_copy, "wb") as f:
            f.write(seed_data)
        try:
            sm = onnx.ModelProto()
            sm.ParseFromString(seed_data)
        except Exception:
            sm = None
        base = mm if mm is not None else sm
        datadir = os.path.join(work, "inputs")
        inputs = write_inputs(rng, base, datadir, True) if base is not None else []
        stats["mutants"] += 1
        if mm is None:
            stats["mutants_unparsable"] += 1
        for verb in VERBS:
            cmd = verb_commands(rng, args, verb, mutant, seed_copy, inputs, datadir, work)
            rc, out, err, dur, to = run_cmd(args, cmd, work)
            stats["exec"][verb] += 1
            stats["rc"][verb]["timeout" if to else str(rc)] += 1
            if rc == 3 and b"memory budget" in err:
                stats["memory_budget_refusals"][verb] += 1
            if dur > 5:
                stats["slowest"].append((round(dur, 1), verb, idx))
                stats["slowest"] = sorted(stats["slowest"], reverse=True)[:10]
            cls = classify(args, verb, cmd, rc, out, err, to, mm)
            if cls is None:
                continue
            stats["classes"][cls] += 1
            sig = signature(cls, verb, rc if rc is not None else 0, err)
            stats["signatures"][sig] += 1
            with open(os.path.join(args.findings, "log.jsonl"), "a") as f:
                f.write(json.dumps({"mutant": idx, "verb": verb, "class": cls, "rc": rc,
                                    "signature": sig, "mutations": desc}) + "\n")
            # A signal has no message to tell one cause from another: keep more of them.
            keep = args.keep_per_signature * (10 if cls == "signal" else 1)
            if stats["signatures"][sig] <= keep:
                d = save_finding(args, cls, sig, idx, verb, cmd, rc, err, out, work, seed_path,
                                 desc, dur)
                print("[%6.0fs] mutant %d %s: %s -> %s" % (time.time() - t_start, idx, verb, cls,
                                                         d), flush=True)
                print("    %s" % sig[:300], flush=True)
        if args.progress and stats["mutants"] % args.progress == 0:
            print("[%6.0fs] %d mutants, %s" % (time.time() - t_start, stats["mutants"],
                                               dict(stats["classes"])), flush=True)


def finish(args, stats, work, t_start):
    stats["seconds"] = round(time.time() - t_start, 1)
    shutil.rmtree(work, ignore_errors=True)
    out = {k: (dict(v) if isinstance(v, collections.Counter) else v) for k, v in stats.items()}
    out["rc"] = {k: dict(v) for k, v in stats["rc"].items()}
    out["findings"] = {c: stats["classes"][c] for c in FINDING_CLASSES}
    with open(os.path.join(args.findings, "stats.json"), "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({k: out[k] for k in ("seeds", "seed_list_sha1", "mutants",
                                          "mutants_unparsable", "exec", "classes",
                                          "findings", "memory_budget_refusals", "seconds")}))
    print("signatures:")
    for s, n in stats["signatures"].most_common():
        print("  %5d  %s" % (n, s[:200]))
    return 1 if any(out["findings"].values()) else 0


def replay(args):
    meta = json.load(open(os.path.join(args.replay, "meta.json")))
    cmd = [args.binary] + [x.replace("$D", args.replay) for x in meta["command"][1:]]
    rc, out, err, dur, to = run_cmd(args, cmd, args.replay)
    mm = None
    try:
        mm = onnx.load(os.path.join(args.replay, "mutant.onnx"), load_external_data=False)
    except Exception:
        pass
    cls = classify(args, meta["verb"], cmd, rc, out, err, to, mm)
    sys.stderr.write(err.decode("utf-8", "replace")[-4000:])
    print("rc=%s timeout=%s %.1fs class=%s" % (rc, to, dur, cls))
    return 1 if cls in FINDING_CLASSES else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.path.join(REPO, "build", "src", "ferry"))
    ap.add_argument("--asan", action="store_true",
                    help="the binary is an ASan build: no RLIMIT_AS (ASan reserves terabytes of "
                    "virtual memory), ASAN_OPTIONS allocator_may_return_null=0 and an RSS limit; "
                    "--max-memory is half of --rlimit-gb, the budget ulimit -v gives release")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="first mutant index")
    ap.add_argument("--only", type=int, help="run only mutant INDEX")
    ap.add_argument("--findings", default="/tmp/campaign/findings")
    ap.add_argument("--seed-dirs", nargs="*", default=None,
                    help="folders of seed models (default: the fuzz seeds, examples, fuzz/corpus, "
                    "the zoo / sweep / stress models, the conformance models)")
    ap.add_argument("--seed-list", help="a file of seed model paths (a run's seeds.txt)")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--rlimit-gb", type=int, default=8)
    ap.add_argument("--keep-per-signature", type=int, default=3)
    ap.add_argument("--progress", type=int, default=200)
    ap.add_argument("--replay", help="a finding folder: rerun its command with --binary")
    args = ap.parse_args()
    args.binary = os.path.abspath(args.binary)
    if args.seed_dirs is None:
        args.seed_dirs = default_seed_dirs()
    if args.replay:
        return replay(args)
    return campaign(args)


if __name__ == "__main__":
    sys.exit(main())
