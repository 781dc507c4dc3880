"""Tiny SavedModels for the embedded-server engine tests (no BERT: each builds in < 1 s).

`write_tiny_model(path, version=1)` writes a SavedModel with the signatures a real export
has (same names, dtypes and method names as the contract), computed by trivial ops so a
test can predict every value with numpy:

- `serving_default` (predict): `text` string [None] -> `label` string [B] ("neg"/"pos"),
  `class_id` int64 [B], `probabilities` float32 [B,2] = softmax([0.1 * chars, version]),
  `length` int64 [B] (characters), `batch_size` int64 [B] (rows of the batch the graph
  actually ran: shows server-side batching), `version` int64 [B], `empty` bool [B] (the text
  holds only whitespace, control or format characters: as a real export, such a text is
  answered, not refused, and flagged). In-graph checks raise InvalidArgumentError
  "input 'text': invalid UTF-8", and "input 'text': asked to fail" for the text "FAIL" (to
  make one row of a batch fail).
- `pair` (predict): `text`, `text_b` string [None] -> `joined` string [B].
- `scale` (predict): `x` float32 [None,3] -> `y` = 2x + version [B,3], `total` [B].
- `count` (predict): `text` [None] -> `rows` int64 scalar (not batchable: no batch dim).
- `token_ids` (predict): `token_ids` int32 [None, None] -> `id_sum` int64 [B] (sum of each row):
  the shape of a real export's token signature, for the token budget and dtype-range tests.
- `classification` (classify): `inputs` serialized tf.Example with bytes feature `text` ->
  `classes` string [B,2] = ["neg","pos"], `scores` float32 [B,2] = probabilities.
- `regression` (regress): `inputs` -> `outputs` float32 [B] = chars + version.

The module also counts calls of `serving_default` in the variable `calls`.

Example:
    >>> write_tiny_model("/tmp/models/tiny/1", version=1)   # doctest: +SKIP
"""

from __future__ import annotations

import os
import shutil

import numpy as np

LABELS = ("neg", "pos")


def expected_probabilities(texts, version):
    """What `serving_default` answers for `texts` (list of str) on model `version`."""
    chars = np.array([len(t) for t in texts], dtype=np.float32)
    logits = np.stack([0.1 * chars, np.full_like(chars, float(version))], axis=1)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _build_module(version):
    import tensorflow as tf

    class Tiny(tf.Module):
        def __init__(self):
            super().__init__()
            self.offset = tf.Variable(float(version), name="offset")
            self.calls = tf.Variable(0, dtype=tf.int64, name="calls")

        def _check(self, text):
            fixed = tf.strings.unicode_transcode(
                text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
            )
            tf.debugging.assert_equal(
                tf.reduce_all(tf.equal(fixed, text)), True, message="input 'text': invalid UTF-8"
            )
            tf.debugging.assert_equal(
                tf.reduce_any(tf.equal(text, "FAIL")), False, message="input 'text': asked to fail"
            )

        def _predict(self, text):
            self._check(text)  # stateful asserts: tf.function runs them before the outputs
            length = tf.cast(tf.strings.length(text, unit="UTF8_CHAR"), tf.float32)
            logits = tf.stack([0.1 * length, self.offset * tf.ones_like(length)], axis=1)
            probabilities = tf.nn.softmax(logits)
            class_id = tf.argmax(probabilities, axis=1)
            rows = tf.shape(text, out_type=tf.int64)[0]
            return {
                "label": tf.gather(tf.constant(LABELS), class_id),
                "class_id": class_id,
                "probabilities": probabilities,
                "length": tf.cast(length, tf.int64),
                "batch_size": tf.fill([rows], rows),
                "version": tf.fill([rows], tf.cast(self.offset, tf.int64)),
                # No character other than whitespace, controls or format characters (U+200B):
                # the `empty` output of a real export (serving/signatures/text_inputs.py).
                "empty": tf.equal(tf.strings.regex_replace(text, r"[\p{Z}\p{Cc}\p{Cf}]", ""), ""),
            }

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serving_default(self, text):
            self.calls.assign_add(1)
            return self._predict(text)

        @tf.function(
            input_signature=[
                tf.TensorSpec([None], tf.string, name="text"),
                tf.TensorSpec([None], tf.string, name="text_b"),
            ]
        )
        def pair(self, text, text_b):
            return {"joined": tf.strings.join([text, text_b], separator="|")}

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
        def scale(self, x):
            return {"y": 2.0 * x + self.offset, "total": tf.reduce_sum(x, axis=1)}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def count(self, text):
            return {"rows": tf.shape(text, out_type=tf.int64)[0]}

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="token_ids")])
        def token_ids(self, token_ids):
            return {"id_sum": tf.reduce_sum(tf.cast(token_ids, tf.int64), axis=1)}

        def _parse(self, inputs):
            features = tf.io.parse_example(inputs, {"text": tf.io.FixedLenFeature([], tf.string)})
            return features["text"]

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def classification(self, inputs):
            out = self._predict(self._parse(inputs))
            rows = tf.shape(inputs)[0]
            classes = tf.tile(tf.constant([LABELS]), [rows, 1])
            return {"classes": classes, "scores": out["probabilities"]}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
        def regression(self, inputs):
            text = self._parse(inputs)
            length = tf.cast(tf.strings.length(text, unit="UTF8_CHAR"), tf.float32)
            return {"outputs": length + self.offset}

    return Tiny()


def set_method_names(saved_model_dir, methods):
    """Rewrite SignatureDef.method_name in saved_model.pb (TF2 saves all as predict).

    Args:
        saved_model_dir: The SavedModel directory.
        methods: {signature key: method name}.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    path = os.path.join(saved_model_dir, "saved_model.pb")
    proto = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    for key, method in methods.items():
        proto.meta_graphs[0].signature_def[key].method_name = method
    with open(path + ".tmp", "wb") as f:
        f.write(proto.SerializeToString())
    os.replace(path + ".tmp", path)


def write_warmup(saved_model_dir, texts, signature_name="serving_default", input_name="text"):
    """Write assets.extra/tf_serving_warmup_requests with one predict request per text list."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2

    extra = os.path.join(saved_model_dir, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    with tf.io.TFRecordWriter(os.path.join(extra, "tf_serving_warmup_requests")) as writer:
        for batch in texts:
            request = predict_pb2.PredictRequest()
            request.model_spec.signature_name = signature_name
            request.inputs[input_name].CopyFrom(
                tf.make_tensor_proto(np.array([t.encode() for t in batch], dtype=object))
            )
            log = prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
            writer.write(log.SerializeToString())


def write_tiny_model(path, version=1, warmup=("hello world",)):
    """Write the tiny SavedModel for `version` to `path` (a version directory).

    Args:
        path: Destination, e.g. base/tiny/1. Written to a temp dir then renamed (atomic).
        version: Integer baked into the outputs so tests can tell versions apart.
        warmup: Texts of one warmup predict request (None: no warmup file).
    """
    import tensorflow as tf

    module = _build_module(version)
    tmp = str(path) + ".tmp-write"
    shutil.rmtree(tmp, ignore_errors=True)
    signatures = {
        "serving_default": module.serving_default,
        "pair": module.pair,
        "scale": module.scale,
        "count": module.count,
        "token_ids": module.token_ids,
        "classification": module.classification,
        "regression": module.regression,
    }
    tf.saved_model.save(module, tmp, signatures=signatures)
    set_method_names(
        tmp,
        {"classification": "tensorflow/serving/classify", "regression": "tensorflow/serving/regress"},
    )
    if warmup:
        write_warmup(tmp, [list(warmup)])
    os.makedirs(os.path.dirname(str(path)) or ".", exist_ok=True)
    os.replace(tmp, str(path))
    return str(path)


def write_broken_version(path):
    """A version directory whose saved_model.pb is garbage: loading it fails."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "saved_model.pb"), "wb") as f:
        f.write(b"this is not a SavedModel")
    return str(path)


_BUILDS = {}  # version constant -> built SavedModel dir (shared by all test files in a session)


def built_model(root, constant):
    """The tiny SavedModel whose outputs carry `constant`, built once per session under `root`."""
    if constant not in _BUILDS:
        _BUILDS[constant] = write_tiny_model(os.path.join(str(root), f"build-{constant}"), version=constant)
    return _BUILDS[constant]


def make_base_path(root, base, layout):
    """Populate base/<version> directories: layout {version: constant (int) | "broken"}.

    Example: make_base_path(session_root, tmp / "tiny", {1: 1, 2: 2, 3: "broken"}).
    """
    os.makedirs(str(base), exist_ok=True)
    for version, what in layout.items():
        target = os.path.join(str(base), str(version))
        if what == "broken":
            write_broken_version(target)
        else:
            shutil.copytree(built_model(root, what), target)
    return str(base)


def ok_predict(prediction, text="still here"):
    """A good Predict call on the tiny model (`prediction`: a PredictionService stub): after a
    hostile request, the server must still answer it."""
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "tiny"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto(np.array([text.encode()], dtype=object)))
    return prediction.Predict(request, timeout=300)


def rest_request(server, method, path, body=None, headers=None):
    """`(status, content type, raw body)` of one REST request to `server` on a fresh connection (a
    body that is not bytes is sent as JSON)."""
    import http.client
    import json

    conn = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=300)
    try:
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        conn.request(method, path, body=data, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type"), response.read()
    finally:
        conn.close()
