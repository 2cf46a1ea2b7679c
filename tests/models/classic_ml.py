#!/usr/bin/env python3
"""Classic-ML corpus (ai.onnx.ml): scikit-learn pipelines trained on its bundled data sets (iris,
wine, breast cancer, digits, diabetes, linnerud; no downloads), XGBoost and LightGBM models,
converted with skl2onnx / onnxmltools (pinned in scripts/requirements-peers.txt), then run by
`ferry run` (.npy in, .npy / ZipMap JSON out) with the cpu and the reference provider and by ONNX
Runtime, all compared with the library's own predict / predict_proba.

Bar, per model and output: labels equal to predict wherever ONNX Runtime's are; scores' max abs
error against the library <= max(5 x ONNX Runtime's, 1e-5 x max |library|). Then
`ferry optimize` on each model (checked on the test rows), and ONNX Runtime on its output must
agree with ONNX Runtime on the original (labels equal, scores within 1e-5 x magnitude).

Converted models and the test rows are cached under --cache (keyed by the peer versions and this
file's contents). Run with the project venv's python:

    .venv/bin/python tests/models/classic_ml.py --ferry build/src/ferry --cache build/models
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
import onnxruntime as ort

warnings.filterwarnings("ignore")

ROWS = 96  # test rows per model (the first ones of a seeded shuffle)


def npy_name(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


# ---------------------------------------------------------------- the corpus


def datasets():
    from sklearn import datasets as ds
    out = {}
    for name, fn in [("iris", ds.load_iris), ("wine", ds.load_wine), ("breast_cancer", ds.load_breast_cancer),
                     ("digits", ds.load_digits), ("diabetes", ds.load_diabetes), ("linnerud", ds.load_linnerud)]:
        X, y = fn(return_X_y=True)
        rng = np.random.RandomState(0)
        order = rng.permutation(len(X))
        out[name] = (X[order].astype(np.float32), y[order])
    return out


def patch_skl2onnx():
    # skl2onnx 1.20 passes numpy bools for nodes_missing_value_tracks_true of
    # HistGradientBoosting leaves, which onnx 1.20's make_attribute refuses.
    import skl2onnx.common.tree_ensemble as te
    orig = te.add_node

    def add_node(*a, **k):
        if "nodes_missing_value_tracks_true" in k:
            k["nodes_missing_value_tracks_true"] = int(k["nodes_missing_value_tracks_true"])
        return orig(*a, **k)

    te.add_node = add_node


def build_corpus(data):
    """Returns [(name, kind, model, X_test (dict input -> array), converter)]; kind is 'clf' or 'reg'."""
    from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,
                                  HistGradientBoostingClassifier, HistGradientBoostingRegressor,
                                  RandomForestClassifier, RandomForestRegressor, ExtraTreesClassifier)
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import (Binarizer, MinMaxScaler, Normalizer, OneHotEncoder, RobustScaler,
                                       StandardScaler)
    from sklearn.svm import SVC, SVR, LinearSVC
    from sklearn.tree import DecisionTreeClassifier
    import lightgbm
    import xgboost

    specs = []

    def add(name, kind, ds, model, opts=None, target=None, y=None, X=None, conv="skl"):
        Xd, yd = data[ds]
        X = Xd if X is None else X
        y = yd if y is None else y
        specs.append(dict(name=name, kind=kind, model=model, X=X, y=y, opts=opts or {}, target=target,
                          conv=conv))

    # Linear models, scalers, normalizers.
    add("iris_scaler_logreg_zipmap", "clf", "iris", make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)))
    add("cancer_scaler_logreg", "clf", "breast_cancer",
        make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)), {"zipmap": False})
    add("wine_minmax_normalizer_logreg", "clf", "wine",
        make_pipeline(MinMaxScaler(), Normalizer("l2"), LogisticRegression(max_iter=2000)), {"zipmap": False})
    add("cancer_scaler_binarizer_logreg", "clf", "breast_cancer",
        make_pipeline(StandardScaler(), Binarizer(threshold=0.0), LogisticRegression(max_iter=2000)))
    add("cancer_linearsvc", "clf", "breast_cancer", LinearSVC(max_iter=20000))
    add("diabetes_linreg", "reg", "diabetes", LinearRegression())
    add("diabetes_robust_ridge", "reg", "diabetes", make_pipeline(RobustScaler(), Ridge(alpha=0.5)))
    # Support vector machines.
    add("wine_scaler_svc_rbf", "clf", "wine",
        make_pipeline(StandardScaler(), SVC(probability=True, random_state=0)), {"zipmap": False})
    add("cancer_scaler_svc_poly", "clf", "breast_cancer",
        make_pipeline(StandardScaler(), SVC(kernel="poly", degree=3, probability=True, random_state=0)))
    add("iris_svc_linear_noproba", "clf", "iris", SVC(kernel="linear"), {"zipmap": False})
    add("diabetes_scaler_svr", "reg", "diabetes", make_pipeline(StandardScaler(), SVR(C=50.0)))
    # Trees.
    add("digits_random_forest_zipmap", "clf", "digits", RandomForestClassifier(n_estimators=30, max_depth=10, random_state=0))
    add("cancer_random_forest", "clf", "breast_cancer",
        RandomForestClassifier(n_estimators=25, random_state=0), {"zipmap": False})
    add("wine_extra_trees", "clf", "wine", ExtraTreesClassifier(n_estimators=20, random_state=0), {"zipmap": False})
    add("iris_tree_string_labels", "clf", "iris", DecisionTreeClassifier(random_state=0),
        y=np.array(["setosa", "versicolor", "virginica"])[data["iris"][1]])
    add("wine_gradient_boosting", "clf", "wine",
        GradientBoostingClassifier(n_estimators=30, random_state=0), {"zipmap": False})
    add("cancer_gradient_boosting", "clf", "breast_cancer",
        GradientBoostingClassifier(n_estimators=40, random_state=0), {"zipmap": False})
    add("digits_hist_gradient_boosting", "clf", "digits",
        HistGradientBoostingClassifier(max_iter=20, random_state=0), {"zipmap": False})
    Xc, yc = data["breast_cancer"]
    Xnan = Xc.copy()
    rng = np.random.RandomState(1)
    Xnan[rng.rand(*Xnan.shape) < 0.1] = np.nan
    add("cancer_hist_gradient_boosting_nan", "clf", "breast_cancer",
        HistGradientBoostingClassifier(max_iter=30, random_state=0), {"zipmap": False}, X=Xnan)
    add("diabetes_random_forest", "reg", "diabetes", RandomForestRegressor(n_estimators=30, max_depth=8, random_state=0))
    add("diabetes_gradient_boosting", "reg", "diabetes", GradientBoostingRegressor(n_estimators=50, random_state=0))
    add("diabetes_hist_gradient_boosting", "reg", "diabetes", HistGradientBoostingRegressor(max_iter=30, random_state=0))
    add("linnerud_random_forest_3_targets", "reg", "linnerud",
        RandomForestRegressor(n_estimators=10, random_state=0))
    # Categories: a string input one-hot encoded; missing numbers imputed.
    Xw, yw = data["wine"]
    cats = np.array(["low", "mid", "high"])
    cat = np.stack([cats[np.digitize(Xw[:, j], np.quantile(Xw[:, j], [0.33, 0.66]))] for j in (0, 6, 9, 12)], axis=1)
    add("wine_onehot_strings_logreg", "clf", "wine",
        make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression(max_iter=2000)), {"zipmap": False},
        X=cat)
    num = Xw.copy()
    num[np.random.RandomState(2).rand(*num.shape) < 0.05] = np.nan
    add("wine_imputer_scaler_logreg", "clf", "wine",
        make_pipeline(SimpleImputer(), StandardScaler(), LogisticRegression(max_iter=2000)), X=num)
    # XGBoost, LightGBM (onnxmltools).
    add("iris_xgboost", "clf", "iris", xgboost.XGBClassifier(n_estimators=20, max_depth=3, random_state=0),
        conv="xgb")
    add("cancer_xgboost", "clf", "breast_cancer",
        xgboost.XGBClassifier(n_estimators=30, max_depth=4, random_state=0), conv="xgb")
    add("diabetes_xgboost", "reg", "diabetes",
        xgboost.XGBRegressor(n_estimators=40, max_depth=4, random_state=0), conv="xgb")
    add("wine_lightgbm", "clf", "wine",
        lightgbm.LGBMClassifier(n_estimators=30, num_leaves=8, random_state=0, verbose=-1), conv="lgbm")
    add("cancer_lightgbm", "clf", "breast_cancer",
        lightgbm.LGBMClassifier(n_estimators=30, num_leaves=8, random_state=0, verbose=-1), conv="lgbm")
    add("diabetes_lightgbm", "reg", "diabetes",
        lightgbm.LGBMRegressor(n_estimators=40, num_leaves=8, random_state=0, verbose=-1), conv="lgbm")
    return specs


def convert(spec, X_train):
    if spec["conv"] == "skl":
        from skl2onnx import to_onnx
        return to_onnx(spec["model"], X_train[:1], options=spec["opts"] or None, target_opset=spec["target"])
    from onnxmltools.convert.common.data_types import FloatTensorType
    types = [("X", FloatTensorType([None, X_train.shape[1]]))]
    if spec["conv"] == "xgb":
        from onnxmltools.convert import convert_xgboost
        return convert_xgboost(spec["model"], initial_types=types, target_opset=15)
    from onnxmltools.convert import convert_lightgbm
    return convert_lightgbm(spec["model"], initial_types=types, target_opset=15, zipmap=False)


def generate(cache):
    """Trains and converts every model of the corpus into `cache` (once per version key)."""
    os.makedirs(cache, exist_ok=True)
    marker = os.path.join(cache, "corpus.json")
    if os.path.exists(marker):
        with open(marker) as f:
            return json.load(f)
    patch_skl2onnx()
    data = datasets()
    index = []
    for spec in build_corpus(data):
        X, y = spec["X"], spec["y"]
        # Small sets (linnerud's 20 rows) are fitted whole and tested on their first rows.
        cut = ROWS if len(X) > 2 * ROWS else 0
        train, test = X[cut:], X[:ROWS]
        model = spec["model"]
        model.fit(train, y[cut:])
        onx = convert(spec, train)
        d = os.path.join(cache, spec["name"])
        os.makedirs(d, exist_ok=True)
        onnx.save(onx, os.path.join(d, "model.onnx"))
        feeds = {onx.graph.input[0].name: test}
        for k, v in feeds.items():
            np.save(os.path.join(d, "in_%s.npy" % npy_name(k)), v)
        pred = model.predict(test)
        np.save(os.path.join(d, "predict.npy"), pred if pred.dtype.kind != "O" else pred.astype(str))
        if spec["kind"] == "clf" and hasattr(model, "predict_proba"):
            try:
                np.save(os.path.join(d, "proba.npy"), model.predict_proba(test))
            except AttributeError:
                pass
        index.append({"name": spec["name"], "kind": spec["kind"], "inputs": list(feeds)})
        print("generated", spec["name"], flush=True)
    with open(marker, "w") as f:
        json.dump(index, f)
    return index


def version_key():
    import lightgbm
    import onnxmltools
    import skl2onnx
    import sklearn
    import xgboost
    h = hashlib.sha256()
    for v in (sklearn.__version__, skl2onnx.__version__, onnxmltools.__version__, lightgbm.__version__,
              xgboost.__version__, onnx.__version__, np.__version__):
        h.update(v.encode())
    with open(__file__, "rb") as f:
        h.update(f.read())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- running and comparing


def split_outputs(values, names):
    """(labels, scores) from a model's outputs: the first integer/string tensor and the first float
    one (ZipMap's list of dicts becomes a [N, C] array in key order)."""
    labels = scores = None
    for v in values:
        if isinstance(v, list):  # ZipMap
            keys = list(v[0].keys())
            v = np.array([[d[k] for k in keys] for d in v], dtype=np.float32)
        v = np.asarray(v)
        if v.dtype.kind in "iuUSO" and labels is None:
            labels = v.reshape(-1)
        elif v.dtype.kind == "f" and scores is None:
            scores = v
    return labels, scores


def read_ferry_outputs(od, names):
    vals = []
    for n in names:
        base = os.path.join(od, npy_name(n))
        if os.path.exists(base + ".json"):
            with open(base + ".json") as f:
                vals.append(json.load(f))
        else:
            vals.append(np.load(base + ".npy"))
    return vals


def max_abs(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64).reshape(a.shape)
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--cache", required=True, help="folder for converted models (the build tree)")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--providers", default="cpu,reference")
    ap.add_argument("--no-optimize", action="store_true")
    args = ap.parse_args()
    cache = os.path.join(args.cache, "classic_ml", version_key())
    index = generate(cache)
    only = set(n for n in args.only.split(",") if n)
    providers = [p for p in args.providers.split(",") if p]
    failures = []
    rows = []
    with tempfile.TemporaryDirectory(prefix="ferry-classic-ml-") as work:
        for m in index:
            if only and m["name"] not in only:
                continue
            d = os.path.join(cache, m["name"])
            path = os.path.join(d, "model.onnx")
            model = onnx.load(path)
            out_names = [o.name for o in model.graph.output]
            feeds = {k: np.load(os.path.join(d, "in_%s.npy" % npy_name(k))) for k in m["inputs"]}
            want_label = np.load(os.path.join(d, "predict.npy"))
            pp = os.path.join(d, "proba.npy")
            want_proba = np.load(pp) if os.path.exists(pp) else None
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            ort_vals = sess.run(None, feeds)
            o_label, o_scores = split_outputs(ort_vals, out_names)
            if m["kind"] == "reg":
                o_scores = o_label if o_scores is None else o_scores
                want = want_label.reshape(o_scores.shape).astype(np.float64)
                ort_err = max_abs(o_scores, want)
                tol = max(5 * ort_err, 1e-5 * float(np.max(np.abs(want))))
            else:
                ort_lab_bad = o_label.astype(str) != want_label.astype(str)
                # Without predict_proba (SVC without probabilities, LinearSVC) the scores are
                # compared with ONNX Runtime's.
                ort_err = max_abs(o_scores, want_proba) if want_proba is not None else 0.0
                ref = want_proba if want_proba is not None else o_scores
                tol = max(5 * ort_err, 1e-5 * max(1.0, float(np.max(np.abs(ref)))))
            errs = []
            for pv in providers:
                od = os.path.join(work, m["name"], pv)
                cmd = [args.ferry, "run", path, "--provider", pv, "--output-dir", od]
                for k in m["inputs"]:
                    cmd += ["--input", "%s=%s" % (k, os.path.join(d, "in_%s.npy" % npy_name(k)))]
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if p.returncode != 0:
                    failures.append("%s (%s): ferry run exit %d: %s" % (m["name"], pv, p.returncode, p.stderr.strip()[-400:]))
                    errs.append(float("inf"))
                    continue
                f_label, f_scores = split_outputs(read_ferry_outputs(od, out_names), out_names)
                if m["kind"] == "reg":
                    f_scores = f_label if f_scores is None else f_scores
                    e = max_abs(f_scores, want)
                else:
                    bad = f_label.astype(str) != want_label.astype(str)
                    if np.any(bad & ~ort_lab_bad):
                        failures.append("%s (%s): %d labels differ from predict where ONNX Runtime's agree" %
                                        (m["name"], pv, int(np.sum(bad & ~ort_lab_bad))))
                    if f_scores is not None and o_scores is not None and f_scores.shape != o_scores.shape:
                        failures.append("%s (%s): scores of shape %s, ONNX Runtime %s" %
                                        (m["name"], pv, f_scores.shape, o_scores.shape))
                        e = float("inf")
                    else:
                        e = max_abs(f_scores, want_proba) if want_proba is not None else max_abs(f_scores, o_scores)
                errs.append(e)
                if e > tol:
                    failures.append("%s (%s): max abs error %.3g > %.3g" % (m["name"], pv, e, tol))
            opt = "skipped"
            if not args.no_optimize:
                od = os.path.join(work, m["name"], "opt")
                os.makedirs(od, exist_ok=True)
                check_dir = os.path.join(od, "check")
                os.makedirs(check_dir, exist_ok=True)
                for k, v in feeds.items():
                    np.save(os.path.join(check_dir, npy_name(k) + ".npy"), v[:16])
                opt_path = os.path.join(od, "model.onnx")
                p = subprocess.run([args.ferry, "optimize", path, "-o", opt_path, "--check-data", check_dir],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if p.returncode != 0:
                    failures.append("%s: ferry optimize exit %d: %s" % (m["name"], p.returncode, p.stderr.strip()[-400:]))
                    opt = "FAIL"
                else:
                    try:
                        s2 = ort.InferenceSession(opt_path, providers=["CPUExecutionProvider"])
                        l2, sc2 = split_outputs(s2.run(None, feeds), out_names)
                        ok = True
                        if m["kind"] == "reg":
                            sc2 = l2 if sc2 is None else sc2
                        elif not np.array_equal(l2.astype(str), o_label.astype(str)):
                            ok = False
                        if sc2 is not None and o_scores is not None:
                            ok = ok and max_abs(sc2, o_scores) <= 1e-5 * max(1.0, float(np.max(np.abs(o_scores))))
                        opt = "ok" if ok else "FAIL"
                        if not ok:
                            failures.append("%s: ONNX Runtime on the optimized model disagrees with the original" % m["name"])
                    except Exception as ex:  # noqa: BLE001
                        opt = "FAIL"
                        failures.append("%s: ONNX Runtime cannot load the optimized model: %s" % (m["name"], ex))
            rows.append((m["name"], ort_err) + tuple(errs) + (opt,))
    print(("%-38s %10s" + " %12s" * len(providers) + " %9s") %
          (("model", "ort_err") + tuple("ferry_%s_err" % p[:3] for p in providers) + ("optimize",)))
    for r in rows:
        print(("%-38s %10.3g" + " %12.3g" * len(providers) + " %9s") % r)
    for f in failures:
        print("FAIL:", f)
    print("%d models, %d failures" % (len(rows), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
