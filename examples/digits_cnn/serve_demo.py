"""The last step of `make demo`: serve the signed digits artifact with `ferry serve` and ask it
for a prediction with the real Triton client — once with the tensor, once with the digit as an
encoded PNG that the artifact's own prep.yaml turns into that tensor — then stop the server with
SIGTERM. The class names come from the artifact (ferry.yaml `class_names`).

usage: serve_demo.py --ferry build/src/ferry --artifact build/demo-artifact --key KEY.pub.pem
"""
import argparse
import io
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
import tritonclient.http as httpclient

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "serve"))
from serving import Server  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--key", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = os.path.join(tmp, "models")
        shutil.copytree(a.artifact, os.path.join(repo, "digits", "1"))
        with Server(os.path.abspath(a.ferry), repo, "--trusted-key", a.key,
                    "--insecure-no-auth") as srv:
            print("\n".join("  " + line for line in srv.banner))
            t = onnx.TensorProto()
            with open(os.path.join(HERE, "test_data_set_0", "input_0.pb"), "rb") as f:
                t.ParseFromString(f.read())
            image = numpy_helper.to_array(t).astype(np.float32)
            client = httpclient.InferenceServerClient(srv.url)
            inp = httpclient.InferInput("image", list(image.shape), "FP32")
            inp.set_data_from_numpy(image)
            out = httpclient.InferRequestedOutput("logits", class_count=3)
            result = client.infer("digits", [inp], outputs=[out])
            top = [x.decode() for x in result.as_numpy("logits").reshape(-1)]
            meta = client.get_model_metadata("digits")
            print(f"serve demo: digits v{result.get_response()['model_version']} "
                  f"(verified: {meta['verified']}) top-3 {top}")
            # The same digit as a 64x64 PNG: the server runs the artifact's prep.yaml on it.
            from PIL import Image
            pixels = np.round(image[0, 0] * 255).astype(np.uint8)
            png = io.BytesIO()
            Image.fromarray(np.kron(pixels, np.ones((8, 8), np.uint8))).save(png, format="PNG")
            raw = httpclient.InferInput("image", [1], "BYTES")
            raw.set_data_from_numpy(np.array([png.getvalue()], dtype=object))
            result = client.infer("digits", [raw], outputs=[out])
            top_png = [x.decode() for x in result.as_numpy("logits").reshape(-1)]
            print(f"serve demo: the same digit as a {len(png.getvalue())}-byte PNG: top-3 {top_png}")
            if top_png[0].split(":")[1] != top[0].split(":")[1]:
                print("serve demo: the PNG and the tensor disagree")
                return 1
            code = srv.terminate()
            print(f"serve demo: SIGTERM, exit {code}")
            return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
