"""A user's --check for `stdops reduce`: exit 1 when the candidate differs from the same cut with the ORIGINAL
model's initializers (the candidate comes from a copy whose weights were edited), both run in onnxruntime.
Usage: onnx_original_weights.py CANDIDATE.onnx ORIGINAL.onnx -i NAME=FILE.npy ..."""

import sys

import numpy as np
import onnx
import onnxruntime as ort

candidate, original = sys.argv[1], sys.argv[2]
rest = sys.argv[3:]
feeds = {}
for k in range(0, len(rest), 2):
    name, path = rest[k + 1].split("=", 1)
    feeds[name] = np.load(path)
edited = onnx.load(candidate)
model = onnx.load(candidate)
pristine = {t.name: t for t in onnx.load(original).graph.initializer}
for t in model.graph.initializer:
    if t.name in pristine:
        t.CopyFrom(pristine[t.name])


def run(m):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


ours, theirs = run(edited), run(model)
differ = [n for n in ours if not np.allclose(ours[n], theirs[n], rtol=1e-4, atol=1e-4)]
print("differ:", differ)
sys.exit(1 if differ else 0)
