"""The fine-tuned model directory against hostile files and careless saves.

Labels (one rule, `pipelines.label_names`), `task.json` field by field, a damaged
`model.keras`, never deleting what the user owns, and staging left by killed runs.
"""

import json
import os
import subprocess
import sys

import pytest

from bert_keras.finetuned_model import (DirectoryInUseError, FinetunedModel, FinetunedModelError,
                                        check_can_save, read_finetuned, save_finetuned, write_eval_results)
from pipelines.atomic_writes import COMMIT_MANIFEST, owner_tag, write_json

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n")
    return str(path)


def _classifier(num_classes=2):
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder
    from bert_keras.models import BertClassifier

    config = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_layers=1, num_heads=2,
                        intermediate_size=19, max_position_embeddings=24)
    return BertClassifier(BertEncoder(config), num_classes=num_classes)


def _finetuned(vocab_file, labels=("neg", "pos"), **options):
    if labels is None:
        return FinetunedModel(kind="regression", model=_classifier(1), vocab_file=vocab_file,
                              seq_length=16, **options)
    return FinetunedModel(kind="classification", model=_classifier(len(labels)), vocab_file=vocab_file,
                          seq_length=16, labels=list(labels), **options)


@pytest.fixture(scope="module")
def saved_once(tmp_path_factory, vocab_file):
    return save_finetuned(str(tmp_path_factory.mktemp("saved") / "model"), _finetuned(vocab_file))


@pytest.fixture
def saved(saved_once, tmp_path):
    """A fresh copy of a saved 2-class classifier (labels neg, pos)."""
    import shutil

    return shutil.copytree(saved_once, str(tmp_path / "model"))


def _dead_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# -- A. labels ---------------------------------------------------------------------------------


@pytest.mark.parametrize("content, message", [
    ("pos\npos\n", r"labels.txt:2: duplicate label 'pos' \(also line 1\)"),
    ("neg\n\npos\n", r"labels.txt:2: empty label name"),
    ("neg \npos\n", r"labels.txt:1: label 'neg ' has leading or trailing whitespace"),
    ("neg\n", r"labels.txt: 1 label names for a model with 2 classes"),
    ("neg\npos\nneutral\n", r"labels.txt: 3 label names for a model with 2 classes"),
    (b"neg\n\xe9\n", r"labels.txt:2: not UTF-8"),
])
def test_bad_label_files_are_refused_naming_file_and_line(saved, content, message):
    path = os.path.join(saved, "labels.txt")
    with open(path, "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(FinetunedModelError, match=message):
        read_finetuned(saved)


def test_a_byte_order_mark_and_windows_line_ends_are_accepted(saved):
    with open(os.path.join(saved, "labels.txt"), "wb") as f:
        f.write("\ufeffneg\r\npos\r\n".encode("utf-8"))
    assert read_finetuned(saved).labels == ["neg", "pos"]


def test_labels_in_task_json_follow_the_same_rule(saved):
    os.remove(os.path.join(saved, "labels.txt"))
    info = json.load(open(os.path.join(saved, "task.json")))
    info["labels"] = ["pos", "pos"]
    json.dump(info, open(os.path.join(saved, "task.json"), "w"))
    with pytest.raises(FinetunedModelError, match=r"field 'labels'\[1\]: duplicate label 'pos'"):
        read_finetuned(saved, load_model=False)


def test_saving_bad_or_miscounted_labels_is_refused(vocab_file, tmp_path):
    bad = _finetuned(vocab_file)
    bad.labels = ["pos", "pos"]
    with pytest.raises(FinetunedModelError, match=r"labels\[1\]: duplicate label 'pos'"):
        save_finetuned(str(tmp_path / "a"), bad)
    three = _finetuned(vocab_file)
    three.labels = ["a", "b", "c"]
    with pytest.raises(FinetunedModelError, match="3 label names for a model with 2 classes"):
        save_finetuned(str(tmp_path / "b"), three)
    assert os.listdir(tmp_path) == []


# -- B. task.json ------------------------------------------------------------------------------


@pytest.mark.parametrize("edit, message", [
    (lambda info: [info], r"task.json: expected a JSON object \(\{...\}\), got a list"),
    (lambda info: {**info, "seq_length": "abc"}, r"field 'seq_length' is 'abc'; expected a positive integer"),
    (lambda info: {**info, "seq_length": 0}, r"field 'seq_length' is 0; expected a positive integer"),
    (lambda info: {k: v for k, v in info.items() if k != "seq_length"}, r"field 'seq_length' is missing"),
    (lambda info: {**info, "tokenizer": "vocab.txt"}, r"field 'tokenizer' is 'vocab.txt'; expected an object"),
    (lambda info: {**info, "tokenizer": {"lowercase": "yes"}}, r"field 'lowercase' is 'yes'; expected bool"),
    (lambda info: {**info, "settings": [1]}, r"field 'settings' is \[1\]; expected an object"),
    (lambda info: {**info, "settings": {"text_pair": "no"}}, r"field 'text_pair' is 'no'; expected true or false"),
    (lambda info: {**info, "training": 3}, r"field 'training' is 3; expected an object"),
    (lambda info: {**info, "format_version": True}, r"format_version True is not a positive integer"),
])
def test_task_json_fields_are_checked_by_name(saved, edit, message):
    path = os.path.join(saved, "task.json")
    info = json.load(open(path))
    json.dump(edit(info), open(path, "w"))
    with pytest.raises(FinetunedModelError, match=message) as raised:
        read_finetuned(saved, load_model=False)
    assert "task.json" in str(raised.value)


def test_eval_results_must_be_an_object(saved):
    with open(os.path.join(saved, "eval_results.json"), "w") as f:
        f.write("[0.5]")
    with pytest.raises(FinetunedModelError, match="eval_results.json: expected a JSON object"):
        read_finetuned(saved, load_model=False)



def _strict_json(path):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    with open(path) as f:
        return json.load(f, parse_constant=refuse)


def test_eval_results_are_strict_json_with_an_undefined_metric_as_null(vocab_file, tmp_path):
    # Pearson of a constant prediction is NaN; eval_results.json once held `"pearson": NaN`,
    # which jq and every parser but Python's refuse (`evaluate --output` already wrote null).
    metrics = {"pearson": float("nan"), "spearman": float("nan"), "num_examples": 3}
    path = write_eval_results(str(tmp_path), metrics)
    assert _strict_json(path) == {"pearson": None, "spearman": None, "num_examples": 3}
    saved = save_finetuned(str(tmp_path / "model"), _finetuned(vocab_file, labels=None, eval_results=metrics))
    assert _strict_json(os.path.join(saved, "eval_results.json"))["pearson"] is None
    assert read_finetuned(saved, load_model=False).eval_results["spearman"] is None


# -- C. a damaged model.keras ------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["zeroed", "truncated"])
def test_a_damaged_model_file_is_named_with_its_directory(saved, damage):
    path = os.path.join(saved, "model.keras")
    size = os.path.getsize(path)
    if damage == "zeroed":
        with open(path, "r+b") as f:
            f.seek(size // 3)
            f.write(b"\0" * min(65536, size // 3))
    else:
        os.truncate(path, size // 2)
    with pytest.raises(FinetunedModelError,
                       match=r"model/model.keras: the file is damaged \(.+\); save or fine-tune it again"):
        read_finetuned(saved)


def test_a_model_file_of_another_kind_is_named_not_an_attribute_error(saved):
    """An encoder (or another kind's head) copied over model.keras: every command that read the
    directory ended in "'BertEncoder' object has no attribute 'encoder'" and a traceback."""
    import keras

    from bert_keras.models import BertMultipleChoice

    encoder = _classifier().encoder
    keras.saving.save_model(encoder, os.path.join(saved, "model.keras"))
    with pytest.raises(FinetunedModelError, match=r"model/model.keras: holds a BertEncoder, not the "
                                                  r"classification model task.json names"):
        read_finetuned(saved)
    keras.saving.save_model(BertMultipleChoice(encoder, 2), os.path.join(saved, "model.keras"))
    with pytest.raises(FinetunedModelError, match=r"holds a BertMultipleChoice, not the classification model"):
        read_finetuned(saved)


# -- G. never delete what the user owns --------------------------------------------------------


def test_a_directory_of_other_files_is_refused_even_with_overwrite(vocab_file, tmp_path):
    (tmp_path / "train.csv").write_text("text,label\n")
    (tmp_path / "notes.md").write_text("my notes")
    for overwrite in (False, True):
        with pytest.raises(DirectoryInUseError, match=r"holds no fine-tuned model \(notes.md, train.csv\)"):
            check_can_save(str(tmp_path), overwrite)
        with pytest.raises(DirectoryInUseError, match="holds no fine-tuned model"):
            save_finetuned(str(tmp_path), _finetuned(vocab_file), overwrite=overwrite)
    assert sorted(os.listdir(tmp_path)) == ["notes.md", "train.csv"]


def test_an_empty_directory_even_the_current_one_is_written(vocab_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_can_save(".")
    save_finetuned(".", _finetuned(vocab_file))
    assert sorted(os.listdir(".")) == ["labels.txt", "model.keras", "task.json", "vocab.txt"]
    assert read_finetuned(".").labels == ["neg", "pos"]


def test_a_model_is_replaced_only_with_overwrite_and_only_its_own_files(vocab_file, saved):
    with open(os.path.join(saved, "train.csv"), "w") as f:
        f.write("text,label\n")
    with open(os.path.join(saved, "eval_results.json"), "w") as f:
        f.write('{"accuracy": 0.5}')
    with pytest.raises(DirectoryInUseError, match=r"already holds a fine-tuned model; pass overwrite=True to") as info:
        save_finetuned(saved, _finetuned(vocab_file, labels=None))
    assert "--overwrite" not in str(info.value)  # a Python call reads the argument; the CLI shows its flag
    with pytest.raises(DirectoryInUseError, match="overwrite=True"):
        check_can_save(saved)
    check_can_save(saved, overwrite=True)
    save_finetuned(saved, _finetuned(vocab_file, labels=None), overwrite=True)
    # the user's file stays; the old model's labels and results do not outlive it
    assert sorted(os.listdir(saved)) == ["model.keras", "task.json", "train.csv", "vocab.txt"]
    assert read_finetuned(saved).kind == "regression"


def test_a_file_in_the_way_is_refused(vocab_file, tmp_path):
    (tmp_path / "model").write_text("x")
    with pytest.raises(DirectoryInUseError, match="exists and is not a directory"):
        save_finetuned(str(tmp_path / "model"), _finetuned(vocab_file), overwrite=True)


def test_a_save_killed_after_its_commit_is_finished_by_the_next_read(vocab_file, saved, tmp_path):
    """The state a SIGKILL between two renames leaves: new files staged and committed, some moved."""
    new = save_finetuned(str(tmp_path / "new"), _finetuned(vocab_file, labels=None))
    staging = os.path.join(saved, f".update.tmp-{owner_tag(_dead_pid())}-abc")
    os.mkdir(staging)
    for name in ("model.keras", "vocab.txt"):
        os.rename(os.path.join(new, name), os.path.join(staging, name))
    write_json(os.path.join(staging, COMMIT_MANIFEST), {"remove": ["labels.txt", "eval_results.json"]})
    os.replace(os.path.join(new, "task.json"), os.path.join(saved, "task.json"))  # already moved
    loaded = read_finetuned(saved)
    assert loaded.kind == "regression" and loaded.labels is None
    assert sorted(os.listdir(saved)) == ["model.keras", "task.json", "vocab.txt"]


def test_a_save_killed_before_its_commit_leaves_the_old_model(vocab_file, saved):
    staging = os.path.join(saved, f".update.tmp-{owner_tag(_dead_pid())}-abc")
    os.mkdir(staging)
    with open(os.path.join(staging, "model.keras"), "wb") as f:
        f.write(b"half a model")
    assert read_finetuned(saved).labels == ["neg", "pos"]
    assert not os.path.exists(staging)


# -- F. staging left by killed runs ------------------------------------------------------------


def test_the_next_save_removes_a_dead_runs_staging_but_not_a_live_ones(vocab_file, tmp_path):
    dead = tmp_path / f".model.tmp-{owner_tag(_dead_pid())}-x1"
    live = tmp_path / f".other.tmp-{owner_tag()}-x2"
    foreign = tmp_path / ".model.tmp-x3"  # no owner recorded: not ours to judge
    for directory in (dead, live, foreign):
        directory.mkdir()
        (directory / "model.keras").write_bytes(b"\0" * 1000)
    save_finetuned(str(tmp_path / "model"), _finetuned(vocab_file))
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, foreign.name, "model"])


def test_a_task_directory_without_task_json_is_named_as_such(saved):
    """`from_pretrained` of a fine-tuned directory whose task.json is gone said "cannot tell the weight
    format of directory ...": it says the directory looks like a fine-tuned model's and lacks task.json."""
    from bert_keras.tasks import TextClassifier

    os.remove(os.path.join(saved, "task.json"))
    with pytest.raises(FinetunedModelError) as info:
        TextClassifier.from_pretrained(saved)
    message = str(info.value)
    assert "model.keras, labels.txt" in message and "no task.json" in message, message
    assert "cannot tell the weight format" not in message
