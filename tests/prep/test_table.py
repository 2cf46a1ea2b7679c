#!/usr/bin/python3
"""Tabular inputs in a prep spec (`table:`), through `ferry prep run` and `ferry run --prep`,
against the same steps written with NumPy (and scikit-learn's StandardScaler / OneHotEncoder for
the standardisation and the one-hot block): CSV quoting, missing values, clipping, mean/std,
one-hot and index categories with unknown values, int64 and string tables; bad CSV and bad
fields are one error line with exit 3.

    /usr/bin/python3 tests/prep/test_table.py --ferry build/src/ferry --work DIR
"""
import argparse
import csv
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from clilib import check, summary  # noqa: E402


def run(args, *cmd):
    return subprocess.run([args.ferry] + list(cmd), capture_output=True, text=True)


SPEC = """inputs:
  - name: features
    table:
      columns:
        - field: sepal length
          number: {mean: 5.8433, std: 0.8253}
        - field: petal_width
          number: {missing: 1.2, clip: [0.0, 2.0], scale: 10}
        - field: colour
          category: {vocabulary: [red, green, "blue, dark"], unknown: zeros}
        - field: size
          category: {vocabulary: [S, M, L], encoding: index}
"""


def make_rows(rng, n):
    rows = []
    for i in range(n):
        rows.append({
            "id": str(i),
            "sepal length": "%.3f" % rng.uniform(4, 8),
            "petal_width": "" if i % 7 == 3 else "%.4f" % rng.uniform(-0.5, 2.6),
            "colour": ["red", "green", "blue, dark", "purple"][i % 4],
            "size": ["S", "M", "L"][i % 3],
        })
    return rows


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\r\n")
        w.writeheader()
        w.writerows(rows)


def reference(rows):
    """The spec's steps in NumPy / scikit-learn, float64 then one cast to float32."""
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    sepal = np.array([float(r["sepal length"]) for r in rows])
    sc = StandardScaler()
    sc.mean_, sc.scale_, sc.var_, sc.n_features_in_ = (np.array([5.8433]), np.array([0.8253]),
                                                       np.array([0.8253 ** 2]), 1)
    a = sc.transform(sepal[:, None])[:, 0]
    pw = np.array([float(r["petal_width"]) if r["petal_width"] else 1.2 for r in rows])
    b = np.clip(pw, 0.0, 2.0) * 10
    enc = OneHotEncoder(categories=[["red", "green", "blue, dark"]], handle_unknown="ignore")
    onehot = enc.fit_transform(np.array([[r["colour"]] for r in rows])).toarray()
    size = np.array([["S", "M", "L"].index(r["size"]) for r in rows], np.float64)
    return np.concatenate([a[:, None], b[:, None], onehot, size[:, None]], 1).astype(np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.RandomState(0)
    spec = os.path.join(work, "spec.yaml")
    open(spec, "w").write(SPEC)

    # Two CSV files (quoted fields with commas, CRLF): rows concatenated in order.
    rows_a, rows_b = make_rows(rng, 50), make_rows(rng, 23)
    write_csv(os.path.join(work, "a.csv"), rows_a)
    write_csv(os.path.join(work, "b.csv"), rows_b)
    r = run(args, "prep", "run", spec, os.path.join(work, "a.csv"), os.path.join(work, "b.csv"),
            "-o", os.path.join(work, "out"))
    check(r.returncode == 0, f"prep run on two CSV files: exit 0 ({r.stderr.strip()})")
    if r.returncode == 0:
        got = np.load(os.path.join(work, "out", "features.npy"))
        want = reference(rows_a + rows_b)
        check(got.shape == (73, 6) and got.dtype == np.float32 and np.array_equal(got, want),
              f"table: equal to NumPy/scikit-learn ({got.shape}, max diff "
              f"{np.abs(got - want).max() if got.shape == want.shape else 'shape'})")

    # int64 and string tables.
    open(os.path.join(work, "ints.yaml"), "w").write(
        "inputs:\n  - name: ids\n    table:\n      dtype: int64\n      columns:\n"
        "        - field: n\n          number: {missing: -1}\n"
        "        - field: c\n          category: {vocabulary: [x, y]}\n")
    open(os.path.join(work, "ints.csv"), "w").write("c,n\ny,7\nx,\ny,-12\n")
    r = run(args, "prep", "run", os.path.join(work, "ints.yaml"), os.path.join(work, "ints.csv"),
            "-o", os.path.join(work, "out_i"))
    got = np.load(os.path.join(work, "out_i", "ids.npy")) if r.returncode == 0 else None
    check(got is not None and got.dtype == np.int64 and
          got.tolist() == [[7, 0, 1], [-1, 1, 0], [-12, 0, 1]],
          f"int64 table: {None if got is None else got.tolist()} ({r.stderr.strip()})")
    open(os.path.join(work, "text.yaml"), "w").write(
        "inputs:\n  - name: words\n    table:\n      dtype: string\n      columns:\n"
        "        - field: w\n          text: {}\n        - field: v\n          text: {}\n")
    open(os.path.join(work, "text.csv"), "w", encoding="utf-8").write(
        'v,w\n"say ""hi""",é中\nplain,"multi\nline"\n')
    r = run(args, "prep", "run", os.path.join(work, "text.yaml"), os.path.join(work, "text.csv"),
            "-o", os.path.join(work, "out_t"))
    got = np.load(os.path.join(work, "out_t", "words.npy"), allow_pickle=True) \
        if r.returncode == 0 else None
    check(got is not None and got.tolist() == [["é中", 'say "hi"'], ["multi\nline", "plain"]],
          f"string table with quotes and a newline in a field: {None if got is None else got.tolist()}")

    # ferry run --prep: a model taking the table (Identity), fed a CSV file.
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Identity", ["features"], ["y"])], "t",
                          [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["n", 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 6])])
    model = os.path.join(work, "id.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), model)
    r = run(args, "run", model, "--prep", spec, "--input", "features=" + os.path.join(work, "a.csv"),
            "-o", os.path.join(work, "run_out"))
    got = np.load(os.path.join(work, "run_out", "y.npy")) if r.returncode == 0 else None
    check(got is not None and np.array_equal(got, reference(rows_a)),
          f"ferry run --prep with a CSV file: the model gets the table ({r.stderr.strip()})")

    # Bad input: one error line, exit 3, naming the line and field.
    bad = {
        "empty field without missing": ("sepal length,petal_width,colour,size\n,1,red,S\n",
                                        ["line 2", "sepal length", "empty"]),
        "not a number": ("sepal length,petal_width,colour,size\n5.1x,1,red,S\n",
                         ["line 2", "'5.1x' is not a number"]),
        "unknown index category": ("sepal length,petal_width,colour,size\n5,1,red,XL\n",
                                   ["line 2", "size", "'XL' is not in the vocabulary"]),
        "field count": ("sepal length,petal_width,colour,size\n5,1,red\n", ["line 2", "3 fields"]),
        "unterminated quote": ("sepal length,petal_width,colour,size\n5,1,\"red,S\n",
                               ["line 2", "never ends"]),
        "missing column": ("sepal length,colour,size\n5,red,S\n", ["no field 'petal_width'"]),
        "empty file": ("", ["empty"]),
    }
    for name, (text, needles) in bad.items():
        path = os.path.join(work, "bad.csv")
        open(path, "w").write(text)
        out = os.path.join(work, "out_bad")
        shutil.rmtree(out, ignore_errors=True)
        r = run(args, "prep", "run", spec, path, "-o", out)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 3 and len(lines) == 1 and all(n in lines[0] for n in needles)
              and not os.path.exists(out), f"bad CSV ({name}): exit {r.returncode}, {lines}")
    for body, needle in (
            ("        - field: a\n          text: {}\n", "a text column needs dtype: string"),
            ("        - field: a\n          number: {std: 0}\n", "number.std"),
            ("        - field: a\n          number: {}\n          text: {}\n",
             "exactly one of number, category and text"),
            ("        - field: a\n          category: {vocabulary: []}\n", "vocabulary")):
        path = os.path.join(work, "bad_spec.yaml")
        open(path, "w").write("inputs:\n  - name: t\n    table:\n      columns:\n" + body)
        r = run(args, "prep", "run", path, os.path.join(work, "a.csv"), "-o", os.path.join(work, "o"))
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 3 and len(lines) == 1 and needle in lines[0],
              f"table spec error ({needle}): exit {r.returncode}, {lines}")
    path = os.path.join(work, "mixed.yaml")
    open(path, "w").write("inputs:\n  - name: t\n    table:\n      columns:\n        - field: a\n"
                          "          number: {}\n  - name: i\n    image:\n      decode: {exif: apply}\n"
                          "      color: rgb\n")
    r = run(args, "prep", "run", path, os.path.join(work, "a.csv"), "-o", os.path.join(work, "o"))
    check(r.returncode == 3 and "all images or all tables" in r.stderr,
          f"a spec mixing image and table inputs is refused ({r.stderr.strip()})")

    return summary()


if __name__ == "__main__":
    sys.exit(main())
