"""The version layout, warmup file, model card, portability check and `bert-keras export`.

* `<base>/<name>/<version>/`: versions numbered max + 1, written through a hidden
  staging directory renamed into place, never overwritten without `overwrite`
  (then replaced atomically, nothing left behind).
* `assets.extra/tf_serving_warmup_requests` parses as `PredictionLog`s whose
  requests replay through the loaded signature; `assets/vocab.txt` and
  `assets/labels.txt` are the model's.
* `assets.extra/model_card.json` has what a deployer needs.
* The portability check fails, naming the output, when outputs differ.
* `bert-keras export --tokenizer core` end to end: progress, next steps, the
  default fresh-process check (without tensorflow_text), no TF-Text op in the
  graph (read from saved_model.pb here, independently of serving.op_audit),
  the same outputs as the tf_text export, --version / --overwrite.
"""

import json
import os
import types

import numpy as np
import pytest
import tensorflow as tf

from serving import exporter
from serving.model_card import read_model_card
from serving.portability import PortabilityError, check_export, compare_outputs
from serving.warmup import read_warmup_file, request_arrays

import export_fixtures


def version_dir(exported):
    base_path, name, version = exported
    return os.path.join(base_path, name, str(version))


# -- versions and atomic installation ----------------------------------------------------


def test_version_numbering(tmp_path):
    model_dir = str(tmp_path / "sentiment")
    assert exporter.choose_version(model_dir) == 1  # no directory yet
    for name in ("1", "3", "07", "latest", ".export-4-abc"):
        os.makedirs(os.path.join(model_dir, name))
        open(os.path.join(model_dir, name, "saved_model.pb"), "w").close()
    open(os.path.join(model_dir, "9"), "w").close()  # a file, not a version
    assert exporter.existing_versions(model_dir) == [1, 3, 7]
    assert exporter.choose_version(model_dir) == 8
    open(os.path.join(model_dir, "8"), "w").close()  # the user's file: skipped, never replaced
    assert exporter.choose_version(model_dir) == 10
    for name in ("8", "9"):
        with pytest.raises(FileExistsError, match=f"sentiment/{name} exists and is not a SavedModel"):
            exporter.choose_version(model_dir, name, overwrite=True)
    assert exporter.choose_version(model_dir, 5) == 5
    assert exporter.choose_version(model_dir, "3", overwrite=True) == 3
    with pytest.raises(FileExistsError, match="sentiment/3 already exists.*overwrite"):
        exporter.choose_version(model_dir, 3)
    for bad in (0, -1, "x", 1.5, True, "\u0663", "\u00b2", "\uff13"):  # "٣" was version 3, "²" an int() error
        with pytest.raises(ValueError, match="positive integer"):
            exporter.choose_version(model_dir, bad)
    # TF Serving reads a version directory up to int64's maximum (19 digits); one past it is no version
    assert exporter.choose_version(model_dir, 2 ** 63 - 1) == 2 ** 63 - 1
    with pytest.raises(ValueError, match=f"version {2 ** 63} is past int64's maximum"):
        exporter.choose_version(model_dir, 2 ** 63)
    os.makedirs(os.path.join(model_dir, str(2 ** 63 - 1)))
    with pytest.raises(ValueError, match=f"the next version, {2 ** 63}, is past int64's maximum"):
        exporter.choose_version(model_dir)


def test_the_next_version_after_zero_or_negative_versions_is_one(tmp_path):
    """"0" and "-3" are versions TF Serving serves (safe_strto64); after "-3" alone the next was -2."""
    model_dir = tmp_path / "m"
    (model_dir / "-3").mkdir(parents=True)
    assert exporter.existing_versions(str(model_dir)) == [-3]
    assert exporter.choose_version(str(model_dir)) == 1
    (model_dir / "0").mkdir()
    assert exporter.choose_version(str(model_dir)) == 1


def test_a_version_held_under_another_name_is_not_written_beside_it(tmp_path):
    """Version 7 held as "07": --version 7 said "sentiment/7 already exists" (no such directory), and with
    --overwrite wrote "7" beside "07", two names of one version (the server loads "7" and warns; "07" stays)
    → refused, with or without overwrite, naming the directory that holds the version."""
    model_dir = str(tmp_path / "sentiment")
    os.makedirs(os.path.join(model_dir, "07"))
    open(os.path.join(model_dir, "07", "saved_model.pb"), "w").close()
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match=r"sentiment/07 holds version 7 .*move or rename it"):
            exporter.choose_version(model_dir, 7, overwrite=overwrite)
    assert not os.path.exists(os.path.join(model_dir, "7"))
    assert exporter.choose_version(model_dir) == 8


def staged(model_dir, version, content):
    staging = exporter.make_staging_dir(model_dir, version)
    with open(os.path.join(staging, "saved_model.pb"), "w") as f:
        f.write(content)
    return staging


def test_overwrite_never_deletes_files_the_export_did_not_write(tmp_path, finetuned_dir, capsys):
    # --overwrite renamed the old version aside and deleted it whole: a README.txt the user had put
    # in models/x/2 was gone. The refusal told a Python caller (`export(..., overwrite=True)`) of a
    # flag, "even with --overwrite": it names the keyword, and the command line its flag.
    from serving.export_manifest import write_manifest

    model_dir = str(tmp_path / "x")
    for version in ("1", "2"):
        os.makedirs(os.path.join(model_dir, version, "variables"))
        open(os.path.join(model_dir, version, "saved_model.pb"), "w").close()
    write_manifest(os.path.join(model_dir, "2"))  # as the exporter leaves a version
    assert exporter.choose_version(model_dir, 1, overwrite=True) == 1  # no manifest: a SavedModel's files
    assert exporter.choose_version(model_dir, 2, overwrite=True) == 2
    for version, name in (("1", "README.txt"), ("2", os.path.join("assets", "mine.txt"))):
        os.makedirs(os.path.dirname(os.path.join(model_dir, version, name)), exist_ok=True)
        open(os.path.join(model_dir, version, name), "w").close()
        with pytest.raises(FileExistsError, match=f"x/{version} holds files its export did not write "
                                                  rf"\({name}\).*not replaced, even with overwrite=True"):
            exporter.choose_version(model_dir, version, overwrite=True)
    # the command line reads its flag: `bert-keras export --overwrite` is refused the same way
    from bert_keras.cli.main import main

    assert main(["export", "--model", finetuned_dir("regression"), "--base-path", str(tmp_path), "--model-name",
                 "x", "--version", "1", "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "holds files its export did not write (README.txt)" in err and "even with --overwrite" in err, err
    assert "overwrite=True" not in err
    open(tmp_path / "y", "w").close()  # a file where the model's directory goes: named before any work
    with pytest.raises(FileExistsError, match="y exists and is not a directory"):
        exporter.export_saved_model(finetuned_dir("regression"), str(tmp_path), "y", progress=None)
    with pytest.raises(FileExistsError, match="y exists and is not a directory"):
        exporter.export_saved_model(finetuned_dir("regression"), str(tmp_path / "y"), "z", progress=None)


def test_install_is_a_rename_and_never_overwrites_silently(tmp_path):
    model_dir = str(tmp_path / "m")
    target = os.path.join(model_dir, "1")
    staging = staged(model_dir, 1, "first")
    assert os.path.basename(staging).startswith(".export-1-")  # TF Serving skips it
    exporter.install_version(staging, target)
    assert not os.path.exists(staging) and open(os.path.join(target, "saved_model.pb")).read() == "first"

    second = staged(model_dir, 1, "second")
    with pytest.raises(FileExistsError, match="already exists"):
        exporter.install_version(second, target)
    assert open(os.path.join(target, "saved_model.pb")).read() == "first"
    exporter.install_version(second, target, overwrite=True)
    assert open(os.path.join(target, "saved_model.pb")).read() == "second"
    assert sorted(os.listdir(model_dir)) == ["1"]  # old version and staging gone


def test_an_export_whose_number_another_export_takes_meanwhile_installs_as_the_next(finetuned_dir, tmp_path,
                                                                                      monkeypatch):
    real_install = exporter.install_version
    model_dir = tmp_path / "models" / "race"

    def raced(staging, target, *, overwrite=False):
        if target.endswith(os.sep + "1"):  # another export installs version 1 first
            os.makedirs(target)
            open(os.path.join(target, "saved_model.pb"), "w").write("the other export")
        return real_install(staging, target, overwrite=overwrite)

    monkeypatch.setattr(exporter, "install_version", raced)
    result = exporter.export_saved_model(finetuned_dir("regression"), str(tmp_path / "models"), "race",
                                         progress=None, check=False, warmup_requests=0, overwrite=True)
    assert result.version == 2 and result.path == str(model_dir / "2")
    assert open(model_dir / "1" / "saved_model.pb").read() == "the other export"  # never replaced
    with open(model_dir / "2" / "assets.extra" / "model_card.json") as f:
        assert json.load(f)["version"] == 2
    assert sorted(os.listdir(model_dir)) == ["1", "2"]


def test_existing_version_fails_before_any_work(finetuned_dir, exported_model):
    base_path, name, version = exported_model("regression")
    before = sorted(os.listdir(os.path.join(base_path, name)))
    with pytest.raises(FileExistsError, match="already exists"):
        exporter.export_saved_model(finetuned_dir("regression"), base_path, name, version=version,
                                    progress=None)
    assert sorted(os.listdir(os.path.join(base_path, name))) == before  # no staging left


def test_strict_export_with_unsupported_ops_writes_nothing(finetuned_dir, tmp_path, monkeypatch):
    import dataclasses

    from serving import op_audit

    real_audit = op_audit.audit_saved_model

    def audit_of_an_old_server(directory, release):
        audit = real_audit(directory, release=release)
        return dataclasses.replace(audit, unsupported=("FastWordpieceTokenizeWithOffsets",),
                                   reasons={"FastWordpieceTokenizeWithOffsets": "not registered"})

    monkeypatch.setattr(op_audit, "audit_saved_model", audit_of_an_old_server)
    lines = []
    with pytest.raises(op_audit.OpAuditError, match="FastWordpieceTokenizeWithOffsets"):
        exporter.export_saved_model(finetuned_dir("regression"), str(tmp_path), "old", strict=True,
                                    check=False, warmup_requests=0, progress=lines.append)
    assert os.listdir(os.path.join(tmp_path, "old")) == []  # staging removed, no version
    assert any("--tokenizer core" in line for line in lines)  # the audit's advice was shown
    with pytest.raises(ValueError, match="no op list for tensorflow/serving 1.0"):
        exporter.export_saved_model(finetuned_dir("regression"), str(tmp_path), "old",
                                    release="1.0", progress=None)


# -- assets, warmup, model card ----------------------------------------------------------


def test_assets_are_the_models_vocabulary_and_labels(exported_model):
    directory = version_dir(exported_model("ner"))
    with open(os.path.join(directory, "assets", "vocab.txt"), encoding="utf-8") as f:
        assert f.read().splitlines() == export_fixtures.TINY_VOCAB
    with open(os.path.join(directory, "assets", "labels.txt"), encoding="utf-8") as f:
        assert f.read().splitlines() == export_fixtures.CONLL_LABELS
    assert not os.path.exists(os.path.join(version_dir(exported_model("regression")), "assets",
                                           "labels.txt"))


@pytest.mark.parametrize("kind", ["classification", "multiple_choice"])
def test_warmup_requests_parse_and_replay(kind, exported_model):
    exported = exported_model(kind)
    logs = read_warmup_file(version_dir(exported))
    assert len(logs) == exporter.DEFAULT_WARMUP_REQUESTS
    loaded = tf.saved_model.load(version_dir(exported))
    sizes = []
    for log in logs:
        request = log.predict_log.request
        assert request.model_spec.name == exported[1]
        assert request.model_spec.signature_name == "serving_default"
        arrays = request_arrays(log)
        outputs = loaded.signatures["serving_default"](**{k: tf.constant(v) for k, v in arrays.items()})
        sizes.append({int(v.shape[0]) for v in outputs.values()}.pop())
        if kind == "multiple_choice":
            assert arrays["endings"].shape[1] == 4
    assert sizes == [1, 8]
    # Sample rows come from the task's eval file (task.json eval_path).
    if kind == "classification":
        assert request_arrays(logs[0])["text"][0] == b"I loved this film."


def test_warmup_fits_the_batching_max_batch_size(exported_model, finetuned_dir, tmp_path):
    # TF Serving replays warmup through its batching session: a record of more rows than
    # max_batch_size fails the load ("Task size 8 is larger than maximum input batch size 4").
    # The embedded server replayed it unbatched and loaded what tensorflow_model_server refuses,
    # and an export could not write a warmup file that a max_batch_size under 8 loads.
    from serving.server.engine import BatchingOptions, InferenceEngine, ModelSource

    def states(base_path, name):
        engine = InferenceEngine([ModelSource(name, os.path.join(base_path, name))], poll_interval_s=0,
                                 batching=BatchingOptions(max_batch_size=4, batch_timeout_micros=0))
        engine.start()
        try:
            return [(s["state"], s["error_message"]) for s in engine.model_status(name)]
        finally:
            engine.stop(5)

    base_path, name, _ = exported_model("regression")  # warmup batches of 1 and 8 rows
    [(state, message)] = states(base_path, name)
    assert state == "END"
    assert "warmup record 1" in message and "Task size 8 is larger than maximum input batch size 4" in message
    assert "--max-batch-size 4" in message and "--warmup-requests 0" in message

    result = exporter.export_saved_model(finetuned_dir("regression"), str(tmp_path), "capped", check=False,
                                         progress=None, warmup_requests=3, max_batch_size=4)
    assert [len(request_arrays(log)["text"]) for log in read_warmup_file(result.path)] == [1, 4, 1]
    assert result.card["warmup"] == {"requests": 3, "batch_sizes": [1, 4, 1]}
    assert states(str(tmp_path), "capped") == [("AVAILABLE", "")]
    with pytest.raises(ValueError, match="max_batch_size must be a positive integer, got 0"):
        exporter.export_saved_model(finetuned_dir("regression"), str(tmp_path), "capped", max_batch_size=0)


def test_a_warmup_record_over_max_batch_size_fails_the_load_at_once_not_after_the_retries(exported_model):
    # With polling on, the load was retried --max-num-load-retries times, --load-retry-interval-micros
    # apart (5 x 60 s by default): `serve` waited minutes for a failure the same file repeats, the
    # version LOADING all that while. It ends at once with the message; changed files load again.
    from serving.server.engine import BatchingOptions, InferenceEngine, ModelSource

    base_path, name, _ = exported_model("regression")  # warmup batches of 1 and 8 rows
    engine = InferenceEngine([ModelSource(name, os.path.join(base_path, name))], poll_interval_s=30,
                             batching=BatchingOptions(max_batch_size=4, batch_timeout_micros=0))
    engine.start()
    try:
        [status] = engine.model_status(name)
        assert status["state"] == "END", status
        assert "Task size 8 is larger than maximum input batch size 4" in status["error_message"]
        assert engine._registry.status(name)[0].attempts == 1
    finally:
        engine.stop(5)


@pytest.mark.parametrize("kind", ["classification", "squad", "multiple_choice"])
def test_printed_query_and_curl_examples_are_requests_the_export_answers(kind, exported_model, tmp_path):
    # The commands printed after export / serve / deploy-kit sent '"some text"' (or "your text",
    # or an endings list ending in '...') to every model: a sentence-pair classifier answered
    # "this model takes sentence pairs", question answering "give --question Q --context C", and
    # multiple choice "expected 4 endings per row". The example is read from the model card.
    import shlex

    from bert_keras.cli.main import build_parser
    from bert_keras.cli.server_arguments import build_inputs
    from serving.next_steps import version_dir_example

    directory = version_dir(exported_model(kind))
    arguments, instance = version_dir_example(directory)
    served = tf.saved_model.load(directory).signatures["serving_default"]
    args = build_parser().parse_args(["query", "--model-name", "m", *shlex.split(arguments)])
    inputs = build_inputs({name: {"dtype": "DT_STRING"} for name in served.structured_input_signature[1]}, args)
    assert set(inputs) == set(served.structured_input_signature[1])
    rows = {name: tf.constant(values) for name, values in inputs.items()}
    assert {int(v.shape[0]) for v in served(**rows).values()} == {1}
    columns = instance if isinstance(instance, dict) else {"text": instance}  # one REST instance
    assert {int(v.shape[0]) for v in served(**{k: tf.constant([v]) for k, v in columns.items()}).values()} == {1}

    # Where it is printed: the export's next steps, deploy-kit's, and serve's try: lines.
    from serving.deploy import DeployKitOptions, build_deploy_kit
    from serving.next_steps import export_result_steps
    from serving.server import InferenceEngine, ModelSource
    from serving.server.options import _served_example

    base, name, _ = exported_model(kind)
    result = types.SimpleNamespace(card=read_model_card(directory), audit=None)
    assert f"bert-keras query --model-name {name} {arguments}\n" in export_result_steps(result, base, name, "2.21")
    kit = build_deploy_kit(DeployKitOptions(base_path=base, models=[name], output=str(tmp_path / "kit")))
    assert f"bert-keras query --model-name {name} {arguments}\n" in kit.report([], str(tmp_path / "kit"))
    assert f"bert-keras query --model-name {name} {arguments}" in kit.files["README_DEPLOY.md"]
    engine = InferenceEngine([ModelSource(name, os.path.join(base, name))], poll_interval_s=0)
    engine.start()
    try:
        assert _served_example(engine, name) == (arguments, instance)
    finally:
        engine.stop(5)


def test_model_card(finetuned_dir, exported_model):
    card = read_model_card(version_dir(exported_model("classification")))
    with open(os.path.join(finetuned_dir("classification"), "eval_results.json")) as f:
        assert card["evaluation"] == json.load(f)
    assert card["task"]["kind"] == "classification" and card["task"]["spec"].startswith("csv:")
    assert card["task"]["settings"] == {"text_pair": True}
    assert card["labels"] == ["neg", "neutral", "pos"]
    assert (card["seq_length"], card["lowercase"], card["tokenizer_backend"]) == (32, True, "tf_text")
    assert card["config"]["vocab_size"] == len(export_fixtures.TINY_VOCAB)
    assert card["config"]["hidden_size"] == 32
    libraries = card["libraries"]
    assert libraries["tensorflow"] == tf.__version__ and libraries["keras"].startswith("3.")  # 2.20 or 2.21
    assert libraries["bert-keras"] and libraries["tensorflow-text"]
    default = card["signatures"]["serving_default"]
    assert default["method_name"] == "tensorflow/serving/predict"
    assert default["inputs"] == {"text": {"dtype": "string", "shape": [-1]},
                                 "text_b": {"dtype": "string", "shape": [-1]}}
    assert default["outputs"]["probabilities"] == {"dtype": "float32", "shape": [-1, 3]}
    for flag in ("truncated", "empty"):  # one bool per row: read in part; no token in any text of the row
        assert default["outputs"][flag] == {"dtype": "bool", "shape": [-1]}
    assert card["signatures"]["classification"]["method_name"] == "tensorflow/serving/classify"
    assert "FastWordpieceTokenizeWithOffsets" in card["op_audit"]["tf_text_ops"]
    assert card["check"] == {"skipped": True}  # the session fixtures skip it
    assert card["warmup"] == {"requests": 2, "batch_sizes": [1, 8]}

    squad_card = read_model_card(version_dir(exported_model("squad")))
    assert squad_card["task"]["settings"]["version_2"] is True
    assert squad_card["task"]["settings"]["stride"] == 16
    assert squad_card["task"]["settings"]["null_score_diff_threshold"] == 0.0


# -- portability check ---------------------------------------------------------------------


def test_compare_outputs_names_what_differs():
    expected = {"label": np.array([b"pos", b"neg"], object),
                "probabilities": np.array([[0.2, 0.8], [0.9, 0.1]], np.float32)}
    assert compare_outputs(expected, expected).ok
    wrong_label = dict(expected, label=np.array([b"pos", b"pos"], object))
    report = compare_outputs(expected, wrong_label)
    assert not report.ok and "output 'label' differs at [1]" in report.problems[0]
    shifted = dict(expected, probabilities=expected["probabilities"] + np.float32(2e-4))
    report = compare_outputs(expected, shifted)
    assert "output 'probabilities' differs by up to 0.0002" in report.problems[0]
    assert compare_outputs(expected, dict(expected, probabilities=expected["probabilities"] + 5e-5)).ok
    with pytest.raises(PortabilityError, match="output 'label'"):
        compare_outputs(expected, wrong_label).raise_if_failed()


def test_portability_check_fails_on_wrong_expected_values(finetuned_dir, exported_model):
    from serving.signatures import finetuned_for_export, reference_outputs

    source = finetuned_for_export(finetuned_dir("regression"))
    inputs = {"text": ["A great film.", "A terrible film."]}
    expected = reference_outputs(source, inputs)
    corrupted = {"score": expected["score"] + np.float32(0.01)}
    with pytest.raises(PortabilityError, match="output 'score' differs by up to 0.01"):
        check_export(version_dir(exported_model("regression")), inputs, corrupted,
                     needs_tf_text=True)


# -- the command line, and the core tokenizer ------------------------------------------


@pytest.fixture(scope="module")
def cli_export(finetuned_dir, tmp_path_factory):
    """`bert-keras export --tokenizer core` of the classification model, with the default check."""
    import contextlib
    import io

    from bert_keras.cli.main import main

    base = str(tmp_path_factory.mktemp("cli") / "models")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(["export", "--model", finetuned_dir("classification"), "--base-path", base,
                       "--name", "pairs", "--tokenizer", "core", "--warmup-requests", "1"])
    assert status == 0
    return base, printed.getvalue()


def test_cli_export_prints_progress_and_next_steps(cli_export):
    base, out = cli_export
    assert "tracing the classification signatures (core tokenizer" in out and "Op audit" in out
    assert "check passed: 8 sample inputs" in out
    assert f"bert-keras serve --model-base-path {os.path.join(base, 'pairs')}" in out
    assert 'bert-keras query --model-name pairs "The cat sat. ||| A cat was sitting."\n' in out  # a pair model
    assert f"tensorflow/serving:{exporter.DEFAULT_RELEASE}.0" in out and "MODEL_NAME=pairs" in out
    assert sorted(os.listdir(os.path.join(base, "pairs"))) == ["1"]


def saved_model_ops(directory):
    """Every op type of saved_model.pb: graph nodes and all library functions."""
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(directory, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    ops = set()
    for meta_graph in saved_model.meta_graphs:
        ops.update(node.op for node in meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            ops.update(node.op for node in function.node_def)
    return ops


def custom_ops(ops):
    """The ops core TensorFlow does not define (`tf.raw_ops`): here, TF-Text's."""
    return {op for op in ops if not hasattr(tf.raw_ops, op)}


def test_core_export_has_no_tf_text_ops_and_passed_the_check(cli_export, exported_model):
    directory = os.path.join(cli_export[0], "pairs", "1")
    ops = saved_model_ops(directory)
    assert len(ops) > 50 and not custom_ops(ops)
    assert not any("Wordpiece" in op or "FastBert" in op for op in ops)
    # ... while the default export does use TF-Text's FastWordpiece.
    assert "FastWordpieceTokenizeWithOffsets" in custom_ops(
        saved_model_ops(version_dir(exported_model("classification"))))
    card = read_model_card(directory)
    assert card["tokenizer_backend"] == "core" and card["op_audit"]["tf_text_ops"] == []
    # The fresh process imported no tensorflow_text, and matched the Python path.
    assert card["check"]["ok"] and max(card["check"]["max_abs_diff"].values()) < 1e-5


def test_core_export_equals_tf_text_export(cli_export, exported_model):
    texts = ["John Smith moved from Paris to New York in 1998.", "Zürich, São Paulo; 東京!",
             "naïve café résumé", "A" * 300 + " long word", "tabs\tand\nnewlines  "]
    inputs = {"text": tf.constant(texts), "text_b": tf.constant(texts[::-1])}
    core = tf.saved_model.load(os.path.join(cli_export[0], "pairs", "1"))
    fast = tf.saved_model.load(version_dir(exported_model("classification")))
    core_out = core.signatures["serving_default"](**inputs)
    fast_out = fast.signatures["serving_default"](**inputs)
    np.testing.assert_array_equal(core_out["label"], fast_out["label"])
    np.testing.assert_allclose(core_out["probabilities"], fast_out["probabilities"], atol=1e-6)


def test_cli_refuses_an_existing_version_then_overwrites(cli_export, finetuned_dir, capsys):
    from bert_keras.cli.main import main

    base = cli_export[0]
    args = ["export", "--model", finetuned_dir("classification"), "--base-path", base,
            "--name", "pairs", "--tokenizer", "core", "--version", "1"]
    assert main(args) == 2
    assert "pairs/1 already exists; pass --overwrite to replace it" in capsys.readouterr().err  # the flag alone
    assert main(args + ["--overwrite", "--no-check", "--warmup-requests", "0"]) == 0
    replaced = read_model_card(os.path.join(base, "pairs", "1"))
    assert replaced["warmup"] is None and replaced["check"] == {"skipped": True}
    assert sorted(os.listdir(os.path.join(base, "pairs"))) == ["1"]  # nothing left aside
    assert not os.path.exists(os.path.join(base, "pairs", "1", "assets.extra",
                                           "tf_serving_warmup_requests"))

    assert main(["export", "--model", base, "--base-path", base, "--name", "x"]) == 2
    assert "not a `bert-keras finetune` output directory (no task.json)" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["../evil", "a b/c", "..", ".hidden", "-rf", "a/b", "", "x" * 256, "naïve"])
def test_a_model_name_that_is_not_one_plain_directory_name_is_refused_before_anything(name, tmp_path):
    with pytest.raises(ValueError, match="a served model's name is one directory name"):
        exporter.export_saved_model(str(tmp_path / "not-a-model"), str(tmp_path / "models"), name)
    assert not (tmp_path / "models").exists() and not (tmp_path / "evil").exists()
    for fine in ("sentiment", "ner_v2", "minilm-L6.int8", "2024"):
        exporter.check_export_options(model_name=fine)


def test_export_refuses_a_base_path_inside_the_model_it_reads(tmp_path, capsys):
    from bert_keras.cli.main import main

    model = tmp_path / "model"
    model.mkdir()
    (model / "task.json").write_text("{}")
    assert main(["export", "--model", str(model), "--base-path", str(model / "models"), "--model-name", "s"]) == 2
    assert "--base-path" in capsys.readouterr().err and not (model / "models").exists()
    assert main(["export", "--model", str(model), "--base-path", str(tmp_path / "m"), "--model-name", "../x"]) == 2
    assert "a served model's name" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_export_reads_long_texts_in_windows_and_refuses_flags_the_model_has_not(finetuned_dir, tmp_path, capsys):
    # `export --init` had no --max-length / --stride (`embed` has them: the export could not serve
    # the vectors embed computed for long texts), and a kind's setting flag given to a model without
    # that setting was refused in Python's words after the model loaded ("max_windows=: not a setting
    # of a ner model"), not naming the flag.
    from bert_keras.cli.main import main

    base = str(tmp_path / "models")
    common = ["--base-path", base, "--no-check", "--warmup-requests", "0"]
    assert main(["export", "--init", finetuned_dir("embedding"), "--model-name", "long", "--seq-length", "16",
                 "--max-length", "100", "--stride", "8"] + common) == 0
    settings = read_model_card(os.path.join(base, "long", "1"))["task"]["settings"]
    assert (settings["max_length"], settings["stride"]) == (100, 8)
    capsys.readouterr()
    for source, flags, message in [
            (["--model", finetuned_dir("ner")], ["--max-windows", "4"],
             "--max-windows: {} is a ner model, which has no max_windows setting; --max-windows is for squad models"),
            (["--model", finetuned_dir("squad")], ["--max-length", "100"],
             "--max-length: {} is a squad model, which has no max_length setting"),
            (["--init", finetuned_dir("embedding")], ["--text-pair"],
             "--text-pair: --init {} exports an embedding model, which has no text_pair setting"),
            (["--model", finetuned_dir("classification")], ["--max-length", "100"],
             "--max-length: {} is a classification model of text pairs, which reads a pair as one window"),
            # was accepted: the export took a text_b its single-text head never learned from
            (["--model", finetuned_dir("regression")], ["--text-pair"],
             "--text-pair: {} is a regression model fine-tuned on single texts (its inputs: text)")]:
        assert main(["export", *source, "--model-name", "refused", *flags] + common) == 2
        assert message.format(source[1]) in capsys.readouterr().err
    assert not os.path.exists(os.path.join(base, "refused"))


def test_a_core_export_of_a_model_that_composes_its_text_is_refused_first_in_the_commands_terms(tmp_path, capsys):
    """A model saved with unicode_normalization="NFC" and `bert-keras export --tokenizer core`: refused
    after loading and tracing began, told to use `backend="tf_text"`, a keyword no export flag or
    argument is named → refused before anything is staged, naming --tokenizer (tokenizer_backend=
    for a Python caller)."""
    from tiny_finetuned import cased_classifier_directory

    from bert_keras.cli.main import main

    model_dir, _ = cased_classifier_directory(tmp_path)
    with open(os.path.join(model_dir, "task.json"), encoding="utf-8") as f:
        info = json.load(f)
    info["tokenizer"]["unicode_normalization"] = "NFC"
    with open(os.path.join(model_dir, "task.json"), "w", encoding="utf-8") as f:
        json.dump(info, f)
    base = tmp_path / "models"
    assert main(["export", "--model", model_dir, "--base-path", str(base), "--model-name", "m",
                 "--tokenizer", "core", "--warmup-requests", "0", "--no-check"]) == 2
    error = capsys.readouterr().err
    assert "--tokenizer core" in error and "--tokenizer tf_text" in error and 'use backend="tf_text"' not in error, error
    assert not (base / "m" / "1").exists()
    with pytest.raises(ValueError, match='tokenizer_backend="core".*unicode_normalization="NFC"'):
        exporter.export_saved_model(model_dir, str(base), "m", tokenizer_backend="core", warmup_requests=0,
                                    check=False)
