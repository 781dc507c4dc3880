"""Does the export run without this library? Load it in a fresh Python that imports only TensorFlow.

`run_in_fresh_process` starts `python -c` in a clean working directory, with
no `PYTHONPATH`, imports `tensorflow` (and `tensorflow_text` only when the
graph uses TF-Text ops), `tf.saved_model.load`s the version directory, calls
`serving_default` on the sample inputs and returns its outputs; it also loads
the export the way `tensorflow_model_server` does (a TF1 session restoring the
SavedModel's `saver_def`), which must load and give the same outputs. It also
reports if `bert_keras`, `pipelines` or `serving` got imported: none
may be, or the SavedModel would secretly depend on Python code a server does
not have.

`compare_outputs` then compares those outputs with the Python path's
(tokenizer + packer + Keras model + the task's decoder): floats within
`atol` (1e-4), everything else (labels, ids, answer texts, offsets) equal.

Example:

    >>> import tensorflow as tf
    >>> outputs = run_in_fresh_process("models/sentiment/1", {"text": ["Great film."]},
    ...                                needs_tf_text=True)
    >>> here = tf.saved_model.load("models/sentiment/1").signatures["serving_default"]
    >>> expected = {k: v.numpy() for k, v in here(text=tf.constant(["Great film."])).items()}
    >>> report = compare_outputs(outputs, expected)       # expected: numpy arrays
    >>> report.ok, sorted(report.max_abs_diff)
    (True, ['class_id', 'empty', 'label', 'probabilities', 'truncated'])
    >>> report.raise_if_failed()
"""

import dataclasses
import json
import os
import subprocess
import sys
from typing import Dict, List, Optional

import numpy as np

FLOAT_TOLERANCE = 1e-4
# This library's packages: none may be needed to run an export. (keras is not
# listed: `tf.saved_model.load` itself imports it in TF 2.20, and a C++ model
# server needs none of it.)
LIBRARY_MODULES = ("bert_keras", "pipelines", "serving")

_SCRIPT = r"""
import json, sys
import tensorflow as tf
if sys.argv[3] == "1":
    import tensorflow_text  # noqa: F401  (registers the TF-Text ops the graph uses)
loaded = tf.saved_model.load(sys.argv[1])
with open(sys.argv[2], encoding="utf-8") as f:
    inputs = json.load(f)
tensors = {k: tf.constant([[c.encode("utf-8", "surrogateescape") for c in r] if isinstance(r, list)
                           else r.encode("utf-8", "surrogateescape") for r in v], tf.string)
           for k, v in inputs.items()}
outputs = loaded.signatures["serving_default"](**tensors)

def plain(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return [plain(v) for v in value] if isinstance(value, list) else value

def encoded(arrays):
    return {k: {"dtype": tf.as_dtype(v.dtype).name, "shape": list(v.shape),
                "values": plain(v.tolist())} for k, v in arrays.items()}

# The way tensorflow_model_server loads it: a TF1 session restoring `saver_def`.
session_outputs, session_error = None, None
try:
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], sys.argv[1])
        signature = meta_graph.signature_def["serving_default"]
        feed = {signature.inputs[k].name: v.numpy() for k, v in tensors.items()}
        session_outputs = encoded(session.run(
            {k: v.name for k, v in signature.outputs.items()}, feed))
except Exception as error:  # reported, not raised: the parent names it
    session_error = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300]}"

result = {"outputs": encoded({k: v.numpy() for k, v in outputs.items()}),
          "session_outputs": session_outputs, "session_error": session_error,
          "imported": sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[4].split(","))}
with open(sys.argv[5], "w", encoding="utf-8") as f:
    json.dump(result, f)
"""


class PortabilityError(RuntimeError):
    """The export does not load, or gives other outputs than the Python path (names the output)."""


@dataclasses.dataclass
class CheckReport:
    """Result of comparing a fresh process's outputs with the Python path's.

    Attributes:
        ok: everything matched.
        max_abs_diff: per output, the largest absolute difference (0.0 for
            equal non-float outputs, inf for mismatched ones).
        problems: one message per mismatch, naming the output.
        tolerance: the float tolerance used.
        float32_max_abs_diff: quantized exports: per output, the largest
            difference between the quantized and the float32 Python paths.
    """

    ok: bool
    max_abs_diff: Dict[str, float]
    problems: List[str]
    tolerance: float = FLOAT_TOLERANCE
    float32_max_abs_diff: Optional[Dict[str, float]] = None

    def to_json(self):
        return dataclasses.asdict(self)

    def raise_if_failed(self):
        if not self.ok:
            raise PortabilityError("the exported model disagrees with the Python path: "
                                   + "; ".join(self.problems))


def run_in_fresh_process(version_dir, inputs, *, needs_tf_text, timeout=600):
    """`serving_default`'s outputs (numpy arrays) for `inputs`, computed by a fresh `python`.

    Args:
        version_dir: the SavedModel directory.
        inputs: `{input name: list of str (or list of lists of str)}`.
        needs_tf_text: import `tensorflow_text` first (the graph has TF-Text ops).
        timeout: seconds before the child is killed.

    Raises:
        PortabilityError: the child failed (its stderr tail is in the message)
            or imported one of `LIBRARY_MODULES`.
    """
    from pipelines.atomic_writes import scratch_directory
    from serving.child_process import WITH_PARENT, child_environment

    version_dir = os.path.abspath(version_dir)
    with scratch_directory("bert-keras-portability-") as scratch:
        inputs_path = os.path.join(scratch, "inputs.json")
        result_path = os.path.join(scratch, "outputs.json")
        with open(inputs_path, "w", encoding="utf-8") as f:
            json.dump({k: _plain(v) for k, v in inputs.items()}, f)
        env = child_environment({k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        command = [sys.executable, "-c", WITH_PARENT + _SCRIPT, version_dir, inputs_path,
                   "1" if needs_tf_text else "0", ",".join(LIBRARY_MODULES), result_path]
        try:
            done = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PortabilityError(f"loading {version_dir} in a fresh process took more than "
                                   f"{timeout}s") from None
        if done.returncode != 0 or not os.path.isfile(result_path):
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise PortabilityError(f"{version_dir} does not load and run in a fresh process that "
                                   f"imports only tensorflow"
                                   f"{' and tensorflow_text' if needs_tf_text else ''}:\n{tail}")
        with open(result_path, encoding="utf-8") as f:
            result = json.load(f)
    if result["imported"]:
        raise PortabilityError(f"running {version_dir} imported {result['imported'][:5]}: the SavedModel "
                               "depends on Python code a model server does not have")
    if result.get("session_error"):
        raise PortabilityError(f"{version_dir} loads with tf.saved_model.load but not the way "
                               f"tensorflow_model_server loads it (a TF1 session restoring its "
                               f"saver_def): {result['session_error']}")
    outputs = {name: _array(output) for name, output in result["outputs"].items()}
    if result.get("session_outputs") is not None:
        session = {name: _array(output) for name, output in result["session_outputs"].items()}
        report = compare_outputs(session, outputs)
        if not report.ok:
            raise PortabilityError(f"{version_dir}: the TF1-session load (tensorflow_model_server's "
                                   f"way) gives other outputs than tf.saved_model.load: "
                                   + "; ".join(report.problems))
    return outputs


def compare_outputs(actual, expected, *, atol=FLOAT_TOLERANCE):
    """A `CheckReport` of `actual` vs `expected` (`{name: numpy array}`; names of `expected` checked)."""
    diffs, problems = {}, []
    for name, want in expected.items():
        want = np.asarray(want)
        if name not in actual:
            diffs[name] = float("inf")
            problems.append(f"output '{name}' is missing")
            continue
        got = np.asarray(actual[name])
        if got.shape != want.shape:
            diffs[name] = float("inf")
            problems.append(f"output '{name}' has shape {list(got.shape)}, expected {list(want.shape)}")
            continue
        if want.dtype.kind == "f":
            diff = float(np.max(np.abs(got.astype(np.float64) - want), initial=0.0))
            diffs[name] = diff
            if not diff <= atol:  # also catches NaN
                problems.append(f"output '{name}' differs by up to {diff:.3g} (> {atol:g})")
            continue
        equal = got == want
        diffs[name] = 0.0 if np.all(equal) else float("inf")
        if not np.all(equal):
            where = tuple(int(i) for i in np.argwhere(~np.asarray(equal))[0])
            problems.append(f"output '{name}' differs at {list(where)}: {got[where]!r} vs "
                            f"expected {want[where]!r}")
    return CheckReport(ok=not problems, max_abs_diff=diffs, problems=problems, tolerance=atol)


def check_export(version_dir, inputs, expected, *, needs_tf_text, atol=FLOAT_TOLERANCE):
    """`run_in_fresh_process` + `compare_outputs`; raises `PortabilityError` on any mismatch."""
    report = compare_outputs(run_in_fresh_process(version_dir, inputs, needs_tf_text=needs_tf_text),
                             expected, atol=atol)
    report.raise_if_failed()
    return report


def _plain(value):
    """JSON-able rows: bytes -> str (lossless through surrogateescape)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    return value


def _array(output):
    values = output["values"]
    if output["dtype"] == "string":
        def encode(v):
            return [encode(x) for x in v] if isinstance(v, list) else v.encode("utf-8", "surrogateescape")
        array = np.array(encode(values), dtype=object)
        return array.reshape(output["shape"]) if array.size == 0 else array
    return np.array(values, dtype=output["dtype"]).reshape(output["shape"])
