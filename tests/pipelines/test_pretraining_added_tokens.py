"""Pretraining data of a vocabulary that records added tokens ("[E1]", "<ent>": a conversion's or an
earlier run's `tokenizer_config.json`): the static writer (here and on Beam) and the masker find them
whole, one id each; a special one is never masked, as [CLS] / [SEP] / [PAD]."""

import glob

import numpy as np
import pytest
import tensorflow as tf

from pipelines.masking import MaskedLmMasker
from pipelines.pretraining import PretrainingDataSettings, write_pretraining_data
from pipelines.tokenizer import BertTokenizer, special_tokens_from_vocabulary
from pipelines.tokenizer.tokenizer_config import write_tokenizer_settings

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "drug", "cures", "pain", "e", "##1", "[", "]", "<",
         ">", "ent", "x", "!", "/", "[E1]", "[/E1]", "<ent>"]
E1, END_E1, ENT, BRACKET = 19, 20, 21, 11
ADDED = [{"content": "[E1]", "special": True}, "[/E1]", {"content": "<ent>", "single_word": True}]
S, P = 32, 32


@pytest.fixture
def vocab_file(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(WORDS) + "\n")
    write_tokenizer_settings(vocab, lowercase=True, added_tokens=ADDED)
    return str(vocab)


def _corpus(tmp_path):
    documents = [["[E1] The drug [/E1] cures <ent> pain!", "the drug cures pain x<ent>!"] for _ in range(6)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n".join("\n".join(sentences) for sentences in documents) + "\n")
    return str(path)


def _originals_and_targets(prefix):
    """Every record's ids before masking, and the ids the masked LM predicts."""
    spec = {"input_ids": tf.io.FixedLenFeature([S], tf.int64),
            "masked_lm_positions": tf.io.FixedLenFeature([P], tf.int64),
            "masked_lm_ids": tf.io.FixedLenFeature([P], tf.int64),
            "masked_lm_weights": tf.io.FixedLenFeature([P], tf.float32)}
    originals, targets = [], []
    for record in tf.data.TFRecordDataset(sorted(glob.glob(prefix + "-*.tfrecord"))):
        features = {name: value.numpy() for name, value in tf.io.parse_single_example(record, spec).items()}
        ids, real = features["input_ids"].copy(), features["masked_lm_weights"] > 0
        ids[features["masked_lm_positions"][real]] = features["masked_lm_ids"][real]
        originals.append(ids)
        targets.extend(features["masked_lm_ids"][real].tolist())
    return np.concatenate(originals), targets


@pytest.mark.parametrize("runner", ["local", pytest.param("beam", marks=pytest.mark.slow)])
def test_the_static_writer_finds_the_recorded_added_tokens_whole(vocab_file, tmp_path, runner):
    """Before: create-pretraining-data split "[E1]" into [, e, ##1, ] (the records held ids the model's
    tokenizer never gives), and could mask the special [E1] too."""
    settings = PretrainingDataSettings(input=_corpus(tmp_path), vocab_file=vocab_file,
                                       output_prefix=str(tmp_path / "out" / runner), max_seq_length=S,
                                       max_predictions_per_seq=P, masked_lm_prob=1.0, dupe_factor=2,
                                       num_output_shards=1, seed=3)
    assert [spec["content"] for spec in settings.added_tokens] == ["[E1]", "[/E1]", "<ent>"]
    assert settings.recorded()["added_tokens"][0] == {"content": "[E1]", "special": True, "normalized": False,
                                                      "lstrip": False, "rstrip": False, "single_word": False}
    if runner == "beam":
        pytest.importorskip("apache_beam")
        from pipelines.pretraining import write_pretraining_data_with_beam

        write_pretraining_data_with_beam(settings)
    else:
        write_pretraining_data(settings, workers=1)
    originals, targets = _originals_and_targets(settings.output_prefix)
    assert {E1, END_E1, ENT} <= set(originals.tolist()) and BRACKET not in originals
    # every other token is a target (masked_lm_prob 1): the special [E1] never, [/E1] and <ent> as words
    assert E1 not in targets and END_E1 in targets and ENT in targets


def test_a_vocabulary_recording_no_added_token_of_its_own_records_none(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(WORDS) + "\n")
    write_tokenizer_settings(vocab, lowercase=True, added_tokens=["[PAD]", "[CLS]"])  # BERT's own alone
    settings = PretrainingDataSettings(input=_corpus(tmp_path), vocab_file=str(vocab), output_prefix=str(tmp_path / "o"))
    assert settings.added_tokens == () and "added_tokens" not in settings.recorded()


def test_the_masker_never_chooses_a_special_added_token():
    tokenizer = BertTokenizer(vocabulary=WORDS, added_tokens=ADDED)
    special = special_tokens_from_vocabulary(WORDS)
    masker = MaskedLmMasker.from_vocabulary(WORDS, special_tokens=special, max_predictions_per_seq=12,
                                            masked_lm_prob=1.0, added_tokens=tokenizer.added_tokens,
                                            whole_word_mask=True)
    ids = tokenizer.tokenize(["[E1] the drug [/E1] cures <ent> pain!"]).to_list()[0]
    assert ids == [E1, 5, 6, END_E1, 7, ENT, 8, 17]
    row = tf.constant([[special.cls, *ids, special.sep, 0, 0]])
    masked = masker(row, seed=[1, 2])
    positions = masked["masked_lm_positions"].numpy()[0][masked["masked_lm_weights"].numpy()[0] > 0]
    assert sorted(positions.tolist()) == [2, 3, 4, 5, 6, 7, 8]  # all but [CLS], [E1], [SEP] and padding


def test_recorded_added_tokens_that_are_not_lines_of_the_vocabulary_are_named(tmp_path):
    """transformers 4's layout: `added_tokens_decoder` lists "[E1]" past vocab.txt's lines (its line is in
    added_tokens.json): the corpus reads it as word pieces, as before, and a warning says so."""
    import json

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(WORDS[:19]) + "\n")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "added_tokens_decoder": {
        "0": {"content": "[PAD]", "special": True}, "19": {"content": "[E1]", "special": False}}}))
    with pytest.warns(UserWarning, match=r"added token\(s\) \['\[E1\]'\] that are not lines of .*vocab\.txt"):
        settings = PretrainingDataSettings(input=_corpus(tmp_path), vocab_file=str(vocab),
                                           output_prefix=str(tmp_path / "o"))
    assert settings.added_tokens == ()


def test_an_added_tokens_decoder_key_that_is_no_ascii_number_is_named(tmp_path):
    """transformers writes the ids as ASCII digits; a key "²" ("²".isdigit() is true, int() refuses
    it) stopped the reader with int()'s bare ValueError, naming no file."""
    import json

    from pipelines.tokenizer.tokenizer_config import TokenizerSettingsError, added_tokens_decoder

    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps({"added_tokens_decoder": {"5": {"content": "[E2]"}, "2": {"content": "[E1]"}}}))
    assert [entry["content"] for entry in added_tokens_decoder(str(path))] == ["[E1]", "[E2]"]
    path.write_text(json.dumps({"added_tokens_decoder": {"\u00b2": {"content": "[E1]"}}}))
    with pytest.raises(TokenizerSettingsError, match="tokenizer_config.json.*'\u00b2'"):
        added_tokens_decoder(str(path))
