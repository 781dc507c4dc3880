"""An export reads one `FinetunedModel`: a directory, a task in memory, or an encoder spec.

Its options are a checked copy of the record (`FinetunedModel.with_settings`): a name that is
not a setting of the kind, a value of the wrong type, or settings that cannot work (a packed
length over the model's positions, SQuAD windows without room) are refused by name, before
anything is traced.
"""

import os
import pytest

from bert_keras.finetuned_model import FinetunedModel, FinetunedModelError, read_finetuned
from serving.signatures import card_settings, finetuned_for_export


def test_a_directory_is_read_as_it_is_and_options_make_a_checked_copy(finetuned_dir):
    saved = read_finetuned(finetuned_dir("squad"), load_model=False)
    record = finetuned_for_export(finetuned_dir("squad"), max_windows=3, null_score_diff_threshold=1.5,
                                  seq_length=48, text_pair=None)
    assert (record.seq_length, record.settings["max_windows"]) == (48, 3)
    assert record.settings["null_score_diff_threshold"] == 1.5
    assert {k: v for k, v in record.settings.items()
            if k not in ("max_windows", "null_score_diff_threshold")} == {
        k: v for k, v in saved.settings.items() if k not in ("max_windows", "null_score_diff_threshold")}
    assert card_settings(record)["threshold_from"] == "settings null_score_diff_threshold"
    unchanged = finetuned_for_export(record)
    assert unchanged.settings == record.settings and unchanged.model is record.model


@pytest.mark.parametrize("options, message", [
    ({"max_windows": "4"}, r"max_windows='4': expected an integer"),
    ({"max_windows": 0}, r"max_windows 0 must be at least 1"),
    ({"seq_length": 19}, r"seq_length 19 must exceed max_query_length \+ 3 \(19\)"),
    ({"seq_length": 4096}, r"seq_length 4096 exceeds the model's \d+ positions"),
    ({"seq_length": True}, r"seq_length=True: expected a positive integer"),
    ({"aggregation": "max"}, r"aggregation=: not a setting of a squad model; its settings: evaluation_metric, .*, stride, version_2"),
])
def test_options_that_do_not_fit_are_refused_by_name(finetuned_dir, options, message):
    with pytest.raises(FinetunedModelError, match=message):
        finetuned_for_export(finetuned_dir("squad"), **options)


def test_squad_settings_saved_as_doc_stride_export_as_stride(finetuned_dir, tmp_path):
    """A directory (or settings dict) written while SQuAD's window step was `doc_stride` (run_squad.py's
    name) exports with the same windows: its `stride`."""
    import json
    import shutil

    legacy = str(tmp_path / "legacy")
    shutil.copytree(finetuned_dir("squad"), legacy)
    with open(f"{legacy}/task.json") as f:
        info = json.load(f)
    info["settings"]["doc_stride"] = info["settings"].pop("stride")
    with open(f"{legacy}/task.json", "w") as f:
        json.dump(info, f)
    record = finetuned_for_export(legacy, max_windows=3)
    assert record.settings == {**read_finetuned(finetuned_dir("squad"), load_model=False).settings, "max_windows": 3}
    assert record.settings["stride"] == 16 and "doc_stride" not in record.settings
    settings = {"doc_stride": 16, "max_query_length": 16}
    assert FinetunedModel(kind="squad", model=None, vocab_file=record.vocab_file, seq_length=64,
                          settings=settings).settings["stride"] == 16
    with pytest.raises(FinetunedModelError, match=r"settings: stride=8 and doc_stride=16: doc_stride is the earlier"):
        FinetunedModel(kind="squad", model=None, vocab_file=record.vocab_file, seq_length=64,
                       settings={**settings, "stride": 8})


def test_a_classifier_takes_text_pair_and_refuses_squad_options(finetuned_dir):
    record = finetuned_for_export(finetuned_dir("classification"), text_pair=False)
    assert record.settings["text_pair"] is False and card_settings(record) == {"text_pair": False}
    with pytest.raises(FinetunedModelError, match="max_windows=: not a setting of a classification model"):
        finetuned_for_export(finetuned_dir("classification"), max_windows=2)
    # A single-text model read pairs at export (Python: export_saved_model / task.export) without a word.
    single = finetuned_dir("regression")
    for source in (single, read_finetuned(single)):
        with pytest.raises(FinetunedModelError, match=r"text_pair=True: .* fine-tuned on single texts \(its inputs: text\)"):
            finetuned_for_export(source, text_pair=True)
    assert finetuned_for_export(single, text_pair=False).settings["text_pair"] is False


def test_an_encoder_spec_is_an_embedding_record(finetuned_dir):
    record = finetuned_for_export(finetuned_dir("embedding"), pooling="cls", normalize=True, seq_length=24)
    assert (record.kind, record.seq_length, record.lowercase, record.directory) == ("embedding", 24, True, None)
    assert (record.settings["pooling"], record.settings["normalize"]) == ("cls", True)
    assert record.training == {"init": finetuned_dir("embedding")}
    assert (record.model.pooling, record.model.normalize) == ("cls", True)


def test_an_encoder_specs_embedder_options_are_refused_for_a_finetuned_model(finetuned_dir):
    """pooling=, normalize=, pooling_layer=, vocab_file= were ignored for a fine-tuned model (directory or
    record): the export's vectors were not the ones asked for, without a word."""
    embedding = finetuned_for_export(finetuned_dir("embedding"), pooling="cls", normalize=True)
    classifier = finetuned_dir("classification")
    for source, options, message in [
            (classifier, {"pooling": "cls"}, r"pooling='cls': .*finetuned-classification.* keeps its own embedder"),
            (read_finetuned(classifier), {"normalize": True}, r"normalize=True: .* keeps its own"),
            (classifier, {"vocab_file": "vocab.txt"}, r"vocab_file='vocab.txt': .*applies to an encoder spec"),
            (embedding, {"pooling": "mean"}, r"pooling='mean': a fine-tuned model keeps its own .*"
                                             r"\(its own: pooling='cls'\)"),
            (embedding, {"pooling_layer": -2}, r"pooling_layer=-2: ")]:
        with pytest.raises(FinetunedModelError, match=message):
            finetuned_for_export(source, **options)
    # the model's own values pass
    assert finetuned_for_export(embedding, pooling="cls", normalize=True).settings["pooling"] == "cls"
    assert finetuned_for_export(finetuned_dir("embedding")).settings["pooling"] == "mean"  # a spec's default
    own_vocabulary = os.path.join(classifier, "vocab.txt")  # as the docstring says: the model's own passes
    assert finetuned_for_export(classifier, vocab_file=own_vocabulary).kind == "classification"


def test_label_count_and_positions_are_checked_when_the_record_is_made(finetuned_dir):
    saved = read_finetuned(finetuned_dir("classification"))
    with pytest.raises(FinetunedModelError, match="labels: 2 label names for a model with 3 classes"):
        FinetunedModel(kind="classification", model=saved.model, vocab_file=saved.vocab_file,
                       seq_length=16, labels=["a", "b"])
    with pytest.raises(FinetunedModelError, match="exceeds the model's"):
        saved.with_settings(seq_length=saved.config.max_position_embeddings + 1)


def test_not_a_source(finetuned_dir):
    with pytest.raises(ValueError, match=r"got int \(a task: task.to_finetuned\(\)\)"):
        finetuned_for_export(3)
