"""serving.op_audit: op types of a SavedModel against the op set of tensorflow/serving 2.20."""

import json

import numpy as np
import pytest

import tensorflow as tf  # noqa: E402

from serving.op_audit import (  # noqa: E402
    OpAuditError,
    audit_saved_model,
    main,
    saved_model_op_types,
)
from serving.op_sets import OpSetFileError, load_op_set, matching_release, parse_op_set  # noqa: E402

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", ",", "!", "the"]


def _save(module, path, signature):
    tf.saved_model.save(module, str(path), signatures={"serving_default": signature})
    return str(path)


def test_core_op_model_audits_clean(tmp_path):
    module = tf.Module()
    module.scale = tf.Variable([[2.0], [3.0]])

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32), tf.TensorSpec([None], tf.string)])
    def serve(x, text):
        return {"y": tf.matmul(x, module.scale) + 1.0, "n": tf.strings.length(text)}

    module.serve = serve
    audit = audit_saved_model(_save(module, tmp_path / "core", serve), release="2.20")
    assert audit.ok and audit.unsupported == ()
    assert {"MatMul", "AddV2", "StringLength", "ReadVariableOp"} <= set(audit.ops)
    assert audit.tf_text_ops == ()
    assert list(audit.ops) == sorted(audit.ops)
    assert not any(op.startswith("__inference") for op in audit.ops)  # calls are not op types
    assert audit.raise_if_unsupported() is audit
    card = audit.to_json()
    assert card["ok"] is True and card["docker_image"] == "tensorflow/serving:2.20.0"
    assert json.loads(json.dumps(card)) == card
    assert "OK" in audit.summary() and "none from TF-Text" in audit.summary()



def test_the_export_report_names_the_version_directory_not_the_staging_one(tmp_path):
    # `bert-keras export` printed "Op audit of models/clf/.export-1-o8099...-w4btj74n ...": the hidden
    # staging directory, gone once the export is renamed into place.
    from serving.exporter import audit_ops

    module = tf.Module()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        return {"n": tf.strings.length(text)}

    module.serve = serve
    staging = _save(module, tmp_path / ".export-1-abc", serve)
    said = []
    audit = audit_ops(staging, release="2.20", strict=False, say=said.append, shown_as=str(tmp_path / "1"))
    assert said[0].startswith(f"Op audit of {tmp_path / '1'} for tensorflow/serving 2.20")
    assert ".export-" not in said[0] and audit.ok

def test_unbundled_tf_text_op_is_flagged(tmp_path):
    import tensorflow_text as tf_text
    module = tf.Module()
    trimmer = tf_text.RoundRobinTrimmer(max_seq_length=4)

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int64)])
    def serve(ids):
        ragged = tf.RaggedTensor.from_tensor(ids)
        first, second = trimmer.trim([ragged, ragged])
        return {"first": first.to_tensor(), "second": second.to_tensor()}

    module.serve = serve
    audit = audit_saved_model(_save(module, tmp_path / "trim", serve), release="2.20")
    assert not audit.ok
    assert "TFText>RoundRobinTrim" in audit.unsupported
    assert "TFText>RoundRobinTrim" in audit.tf_text_ops
    assert "TF-Text 2.12.1" in audit.reasons["TFText>RoundRobinTrim"]
    assert "--tokenizer core" in audit.summary()
    with pytest.raises(OpAuditError, match=r"TFText>RoundRobinTrim") as caught:
        audit.raise_if_unsupported()
    assert isinstance(caught.value, ValueError)
    assert audit.to_json()["unsupported"] == list(audit.unsupported)


def test_python_function_ops_are_flagged(tmp_path):
    module = tf.Module()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def serve(x):
        doubled = tf.py_function(lambda v: v * 2.0, [x], tf.float32)
        tripled = tf.numpy_function(lambda v: v * 3.0, [x], tf.float32)
        return {"y": doubled + tripled}

    module.serve = serve
    audit = audit_saved_model(_save(module, tmp_path / "pyfunc", serve), release="2.20")
    assert {"EagerPyFunc", "PyFunc"} <= set(audit.unsupported)
    assert "Python interpreter" in audit.reasons["EagerPyFunc"]
    assert "tf.py_function" in audit.summary()


def test_ops_inside_while_and_cond_bodies_are_found(tmp_path):
    module = tf.Module()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32), tf.TensorSpec([], tf.bool)])
    def serve(x, flag):
        def body(i, acc):
            return i + 1, acc + tf.math.lgamma(acc + 2.0)

        _, looped = tf.while_loop(lambda i, _: i < 3, body, [tf.constant(0), x])
        chosen = tf.cond(flag, lambda: tf.math.digamma(looped + 1.0), lambda: looped)
        return {"y": chosen}

    module.serve = serve
    path = _save(module, tmp_path / "nested", serve)
    audit = audit_saved_model(path, release="2.20")
    assert audit.ok
    assert {"Lgamma", "Digamma"} <= set(audit.ops)
    assert {"While", "StatelessWhile"} & set(audit.ops) and {"If", "StatelessIf"} & set(audit.ops)

    # The two ops live only in the branch/body functions, never in the top-level graph.
    from serving.op_audit import read_saved_model

    proto = read_saved_model(path)
    top_level = {node.op for mg in proto.meta_graphs for node in mg.graph_def.node}
    assert "Lgamma" not in top_level and "Digamma" not in top_level


def test_function_calls_by_name_are_not_op_types():
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    graph = proto.meta_graphs.add().graph_def
    graph.node.add(name="call", op="my_function")
    graph.node.add(name="const", op="Const")
    function = graph.library.function.add()
    function.signature.name = "my_function"
    function.node_def.add(name="inner", op="Erf")
    function.node_def.add(name="nested_call", op="my_function")
    assert saved_model_op_types(proto) == ["Const", "Erf"]


def test_data_file_covers_the_installed_registries():
    from serving.op_registry import registry_listing

    op_set = load_op_set(matching_release())  # the file of the installed TensorFlow's release
    core_listing = registry_listing(with_tf_text=False)
    core = set(core_listing["ops"])
    uncovered = core - op_set.core - op_set.excluded
    assert not uncovered, f"ops of this TensorFlow missing from the data file: {sorted(uncovered)[:20]}"
    # Every exclusion is deliberate and explained.
    assert {"PyFunc", "PyFuncStateless", "EagerPyFunc"} <= op_set.excluded
    assert all(op_set.reasons.get(op) for op in op_set.excluded)
    assert {"MatMul", "StringSplitV2", "StatelessWhile", "LookupTableFindV2"} <= op_set.core

    tf_text = set(registry_listing(with_tf_text=True)["ops"]) - core
    assert tf_text, "tensorflow_text registered no ops?"
    assert tf_text <= op_set.all_tf_text, sorted(tf_text - op_set.all_tf_text)
    assert op_set.all_tf_text.isdisjoint(op_set.core | op_set.excluded)
    assert op_set.tf_text.isdisjoint(op_set.tf_text_unsupported)
    assert all(op_set.reasons.get(op) for op in op_set.all_tf_text)  # every TF-Text op cites a source
    assert "FastWordpieceTokenizeWithOffsets" in op_set.tf_text
    assert "TFText>RoundRobinTrim" in op_set.tf_text_unsupported
    assert any("--freeze" in line for line in op_set.header)


@pytest.mark.parametrize("backend", ["core", "tf_text"])
def test_bert_tokenizer_export_audit(tmp_path, backend):
    from pipelines import BertTokenizer

    module = tf.Module()
    module.tokenizer = BertTokenizer(vocabulary=TOKENS, backend=backend)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(text):
        ids, begin, end = module.tokenizer.tokenize_with_offsets(text)
        return {"ids": ids.to_tensor(), "begin": begin.to_tensor(), "end": end.to_tensor()}

    module.serve = serve
    audit = audit_saved_model(_save(module, tmp_path / backend, serve), release="2.20")
    assert audit.ok, audit.summary()
    if backend == "core":
        assert audit.tf_text_ops == ()
    else:
        # FastWordpiece is the one TF-Text op; tensorflow/serving links it (serving#2064).
        assert audit.tf_text_ops == ("FastWordpieceTokenizeWithOffsets",)


def test_command_line(tmp_path, capsys):
    module = tf.Module()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def serve(x):
        return {"y": tf.numpy_function(lambda v: v, [x], tf.float32)}

    module.serve = serve
    path = _save(module, tmp_path / "bad", serve)
    assert main([path]) == 0  # a report, not a failure, without --strict
    assert "PyFunc" in capsys.readouterr().out
    assert main([path, "--strict"]) == 1
    capsys.readouterr()
    assert main([path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unsupported"] == ["PyFunc"]
    assert main([str(tmp_path / "missing")]) == 2
    assert "no saved_model.pb" in capsys.readouterr().err


def test_unknown_release_and_version_parent_are_explained(tmp_path):
    (tmp_path / "model" / "3").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"holds versions \[3\]"):
        audit_saved_model(tmp_path / "model")
    with pytest.raises(OpSetFileError, match=r"available releases: 2\.20"):
        load_op_set("1.15")


def test_data_file_format_errors_name_file_and_line():
    with pytest.raises(OpSetFileError, match=r"ops\.txt:3: MatMul is listed twice"):
        parse_op_set("[core]\nMatMul\nMatMul\n", "9.9", path="ops.txt")
    with pytest.raises(OpSetFileError, match=r"ops\.txt:1: unknown section \[kernels\]"):
        parse_op_set("[kernels]\nMatMul\n", "9.9", path="ops.txt")
    parsed = parse_op_set("# made by hand\n[core]\nMatMul\n[excluded]\nPyFunc  # python\n", "9.9")
    assert parsed.header == ("made by hand",) and parsed.reasons == {"PyFunc": "python"}
    assert parsed.reason_unsupported("MatMul") is None
    assert "Python wheel only: python" in parsed.reason_unsupported("PyFunc")
    assert "custom op" in parsed.reason_unsupported("MyCustomOp")


def test_jit_compiled_functions_are_warned_about(tmp_path):
    module = tf.Module()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)], jit_compile=True)
    def serve(x):
        return {"y": x * 2.0}

    module.serve = serve
    audit = audit_saved_model(_save(module, tmp_path / "xla", serve), release="2.20")
    assert audit.ok  # the ops exist; the server just will not compile them on CPU
    assert len(audit.warnings) == 1 and "--xla_cpu_compilation_enabled" in audit.warnings[0]
    assert "Warning:" in audit.summary() and audit.to_json()["warnings"] == list(audit.warnings)


def test_oneDNN_only_kernels_are_listed_with_their_condition(tmp_path):
    from serving.int8_dense import Int8Dense
    from serving.op_sets import onednn_only_kernels

    module = tf.Module()
    module.dense = Int8Dense(np.random.default_rng(0).normal(size=(8, 4)).astype("float32"))

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32)])
    def serve(x):
        return {"y": module.dense(x)}

    module.serve = serve
    audit = audit_saved_model(_save(module, tmp_path / "int8", serve), release="2.20")
    assert audit.ok  # the release registers the op...
    assert list(audit.conditional_kernels) == ["QuantizedMatMulWithBiasAndDequantize"]  # ...conditionally
    assert audit.conditional_kernels["QuantizedMatMulWithBiasAndDequantize"] == (
        onednn_only_kernels()["QuantizedMatMulWithBiasAndDequantize"])
    assert "oneDNN" in audit.summary() and "ARM" in audit.summary()
    assert audit.to_json()["conditional_kernels"] == audit.conditional_kernels
    plain = audit_saved_model(str(tmp_path / "int8"), release="2.20").to_json()
    assert json.loads(json.dumps(plain)) == plain
