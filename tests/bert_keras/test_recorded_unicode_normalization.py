"""`unicode_normalization="NFC"` recorded beside a vocabulary (`bert-keras vocab --unicode-normalization NFC`)
and read by every later step, as the casing and a morpheme pre-tokenizer are: the tasks, `load_tokenizer`,
`create-pretraining-data` (here and on Beam), the dynamic corpus of `Pretrainer`, `pretrain`'s outputs and the
sentence-embedding export of a bare encoder."""

import json
import os
import unicodedata

import numpy as np
import pytest

from bert_keras.checkpoints import save_pretrained
from bert_keras.config import BertConfig
from pipelines.tokenizer.tokenizer_config import (
    UNICODE_NORMALIZATION_KEY,
    TokenizerSettingsError,
    read_tokenizer_settings,
    resolve_tokenizer_settings,
    write_tokenizer_settings,
)

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "korean")
KOELECTRA = os.path.join(DATA, "koelectra_vocab.txt")
TEXTS = open(os.path.join(DATA, "korean_texts_sample.txt"), encoding="utf-8").read().splitlines()


def nfd(texts):
    return [unicodedata.normalize("NFD", text) for text in texts]


def test_vocab_records_nfc_and_learns_syllables_from_a_decomposed_corpus(tmp_path, capsys):
    """A corpus in NFD (macOS): without the flag the vocabulary is jamo (the note says so); with
    `--unicode-normalization NFC` it is syllables, tokenizer_config.json records the key, and
    `load_tokenizer` / `bert-keras tokenize` compose NFD text to the ids of the composed text."""
    from bert_keras import load_tokenizer
    from bert_keras.cli.main import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(nfd(TEXTS[:300])) + "\n", encoding="utf-8")
    common = ["vocab", str(corpus), "--size", "400", "--no-strip-accents", "--character-coverage", "0.9995"]
    assert main(common + ["-o", str(tmp_path / "plain" / "vocab.txt")]) == 0
    out = capsys.readouterr().out
    assert "decomposed Hangul" in out and "Learn it with --unicode-normalization NFC" in out, out
    plain = open(tmp_path / "plain" / "vocab.txt", encoding="utf-8").read().splitlines()
    assert "\u110b" in plain and "오" not in plain  # jamo, no syllable
    assert UNICODE_NORMALIZATION_KEY not in json.load(open(tmp_path / "plain" / "tokenizer_config.json"))

    target = tmp_path / "nfc" / "vocab.txt"
    assert main(common + ["-o", str(target), "--unicode-normalization", "NFC"]) == 0
    assert "decomposed Hangul" not in capsys.readouterr().out
    tokens = open(target, encoding="utf-8").read().splitlines()
    assert "오" in tokens and "\u110b" not in tokens
    assert json.load(open(tmp_path / "nfc" / "tokenizer_config.json"))[UNICODE_NORMALIZATION_KEY] == "NFC"
    assert read_tokenizer_settings(str(target))["unicode_normalization"] == "NFC"

    tokenizer = load_tokenizer(None, vocab_file=str(target))
    assert tokenizer.unicode_normalization == "NFC"
    ids = tokenizer.tokenize(TEXTS[:20]).to_list()
    assert tokenizer.tokenize(nfd(TEXTS[:20])).to_list() == ids
    assert load_tokenizer(None, vocab_file=str(target), unicode_normalization="none").unicode_normalization is None
    assert main(["tokenize", "--vocab", str(target), "--json", nfd(TEXTS[:1])[0]]) == 0
    assert [token["id"] for token in json.loads(capsys.readouterr().out.splitlines()[0])["tokens"]] == ids[0]


def test_old_files_read_as_none_and_a_bad_value_names_file_and_field(tmp_path):
    vocab = str(tmp_path / "vocab.txt")
    open(vocab, "w", encoding="utf-8").write("[PAD]\n[UNK]\n오늘\n")
    write_tokenizer_settings(vocab, lowercase=True, strip_accents=False)  # as before the key existed
    assert resolve_tokenizer_settings(vocab)["unicode_normalization"] is None
    # the rules given (the fast path that reads only the limit) still read the recorded form
    write_tokenizer_settings(vocab, lowercase=True, strip_accents=False, unicode_normalization="NFC")
    assert resolve_tokenizer_settings(vocab, True, False, "none")["unicode_normalization"] == "NFC"
    assert resolve_tokenizer_settings(vocab, unicode_normalization="none")["unicode_normalization"] is None
    path = tmp_path / "tokenizer_config.json"
    config = json.load(open(path))
    config[UNICODE_NORMALIZATION_KEY] = "NFKD"
    path.write_text(json.dumps(config))
    with pytest.raises(TokenizerSettingsError, match=f"tokenizer_config.json: field '{UNICODE_NORMALIZATION_KEY}': "
                                                     "'NFKD' is not a Unicode normalization"):
        resolve_tokenizer_settings(vocab)


@pytest.fixture(scope="module")
def nfc_checkpoint(tmp_path_factory):
    """`hf:DIR` of a tiny random BERT on KoELECTRA's vocabulary whose tokenizer_config.json records NFC."""
    import keras

    from bert_keras.encoder import BertEncoder

    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=sum(1 for _ in open(KOELECTRA, encoding="utf-8")), hidden_size=32,
                        num_layers=1, num_heads=2, intermediate_size=37, max_position_embeddings=64)
    directory = str(tmp_path_factory.mktemp("nfc") / "bert")
    save_pretrained(BertEncoder(config), f"hf:{directory}", vocab_file=KOELECTRA,
                    tokenizer_settings={"lowercase": True, "strip_accents": False, "unicode_normalization": "NFC"})
    return directory


def test_tasks_and_the_embedding_export_read_the_recorded_normalization(nfc_checkpoint, tmp_path):
    """A checkpoint that records NFC: a task from it composes (NFD text answers as NFC text), `"none"`
    turns it off; the sentence-embedding export of the bare encoder (`from_encoder_spec`) keeps it,
    and takes `unicode_normalization=` for an encoder that records none."""
    import warnings

    from bert_keras.tasks import TextClassifier
    from serving.signatures.embedding import from_encoder_spec

    with open(os.path.join(nfc_checkpoint, "tokenizer_config.json"), encoding="utf-8") as f:
        assert json.load(f)[UNICODE_NORMALIZATION_KEY] == "NFC"
    spec = f"hf:{nfc_checkpoint}"
    task = TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32)
    assert task.tokenizer.unicode_normalization == "NFC"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no NFD warning: the text is composed
        np.testing.assert_allclose(task.predict(nfd(TEXTS[:8])), task.predict(TEXTS[:8]), atol=1e-6)
    assert TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32,
                                          unicode_normalization="none").tokenizer.unicode_normalization is None

    assert from_encoder_spec(spec, seq_length=32).unicode_normalization == "NFC"
    assert from_encoder_spec(spec, seq_length=32, unicode_normalization="none").unicode_normalization is None
    plain = tmp_path / "plain"
    save_pretrained(__import__("bert_keras.checkpoints", fromlist=["load_pretrained"]).load_pretrained(spec),
                    f"hf:{plain}", vocab_file=KOELECTRA, tokenizer_settings={"lowercase": True, "strip_accents": False})
    assert UNICODE_NORMALIZATION_KEY not in json.load(open(plain / "tokenizer_config.json"))
    assert from_encoder_spec(f"hf:{plain}", seq_length=32).unicode_normalization is None
    assert from_encoder_spec(f"hf:{plain}", seq_length=32, unicode_normalization="NFC").unicode_normalization == "NFC"


def _nfc_vocab(directory):
    os.makedirs(directory, exist_ok=True)
    vocab = os.path.join(directory, "vocab.txt")
    with open(KOELECTRA, "rb") as source, open(vocab, "wb") as target:
        target.write(source.read())
    write_tokenizer_settings(vocab, lowercase=True, strip_accents=False, unicode_normalization="NFC")
    return vocab


def test_pretraining_data_composes_a_decomposed_corpus_with_the_recorded_form(tmp_path):
    """create-pretraining-data on a vocabulary that records NFC: the records of an NFD corpus are those
    of the composed corpus (byte for byte), and PREFIX-config.json records the form; on Beam too."""
    from bert_keras.cli.main import main

    vocab = _nfc_vocab(str(tmp_path / "v"))
    documents = "\n".join(TEXTS[:30]) + "\n\n" + "\n".join(TEXTS[30:60]) + "\n"
    for name, text in (("nfc", documents), ("nfd", unicodedata.normalize("NFD", documents))):
        (tmp_path / name).mkdir()  # one file name: the same document ids, the same random choices
        (tmp_path / name / "corpus.txt").write_text(text, encoding="utf-8")
    records = {}
    for name in ("nfc", "nfd"):
        assert main(["create-pretraining-data", "--input", str(tmp_path / name / "corpus.txt"), "--vocab", vocab,
                     "--output-prefix", str(tmp_path / name), "--seq-length", "32", "--max-predictions", "4",
                     "--num_output_shards", "1", "--dupe-factor", "1"]) == 0
        with open(tmp_path / f"{name}-config.json", encoding="utf-8") as f:
            assert json.load(f)["settings"]["unicode_normalization"] == "NFC"
        records[name] = open(tmp_path / f"{name}-00000-of-00001.tfrecord", "rb").read()
    assert records["nfd"] == records["nfc"]
    assert main(["create-pretraining-data", "--input", str(tmp_path / "nfd" / "corpus.txt"), "--vocab", vocab,
                 "--output-prefix", str(tmp_path / "off"), "--seq-length", "32", "--max-predictions", "4",
                 "--num_output_shards", "1", "--dupe-factor", "1", "--unicode-normalization", "none"]) == 0
    assert "unicode_normalization" not in json.load(open(tmp_path / "off-config.json"))["settings"]
    assert open(tmp_path / "off-00000-of-00001.tfrecord", "rb").read() != records["nfc"]

    from pipelines.pretraining.beam_pipeline import _Tokenize

    tokenize = _Tokenize(vocab, True, False, unicode_normalization="NFC")
    tokenize.setup()
    assert tokenize.tokenizer.unicode_normalization == "NFC"


def test_pretrainer_reads_the_recorded_form_and_pretrain_keeps_it(tmp_path):
    """`Pretrainer.from_config` / `pretrain` on a vocabulary that records NFC compose the corpus they
    tokenize (`corpus_tokenizer`), keep it in `get_config`, and write it into the run's
    tokenizer_config.json, which a task from the run's encoder reads."""
    from bert_keras.tasks import Pretrainer, TextClassifier

    vocab = _nfc_vocab(str(tmp_path / "v"))
    config = BertConfig(vocab_size=sum(1 for _ in open(KOELECTRA, encoding="utf-8")), hidden_size=32,
                        num_layers=1, num_heads=2, intermediate_size=37, max_position_embeddings=64)
    pretrainer = Pretrainer.from_config(config, vocab_file=vocab)
    assert pretrainer.unicode_normalization == "NFC"
    tokenizer = pretrainer.corpus_tokenizer()
    assert tokenizer.tokenize(nfd(TEXTS[:5])).to_list() == tokenizer.tokenize(TEXTS[:5]).to_list()
    assert pretrainer.get_config()["unicode_normalization"] == "NFC"
    assert Pretrainer.from_config(pretrainer.get_config()).unicode_normalization == "NFC"
    assert Pretrainer.from_config(config, vocab_file=vocab,
                                  unicode_normalization="none").corpus_tokenizer().unicode_normalization is None

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(unicodedata.normalize("NFD", "\n".join(TEXTS[:40]) + "\n"), encoding="utf-8")
    config_file = tmp_path / "config.json"
    config.to_json(str(config_file))
    run = str(tmp_path / "run")
    Pretrainer.pretrain(run, steps=1, corpus=str(corpus), config=str(config_file), vocab_file=vocab,
                        seq_length=32, max_predictions=4, batch_size=2, strategy="default")
    with open(os.path.join(run, "tokenizer_config.json"), encoding="utf-8") as f:
        assert json.load(f)[UNICODE_NORMALIZATION_KEY] == "NFC"
    with open(os.path.join(run, "run.json"), encoding="utf-8") as f:
        assert "NFC" in f.read()
    task = TextClassifier.from_pretrained(os.path.join(run, "encoder.keras"), labels=["a", "b"], seq_length=32)
    assert task.tokenizer.unicode_normalization == "NFC"


def test_export_takes_nfc_for_an_encoder_and_refuses_another_for_a_fine_tuned_model(nfc_checkpoint, tmp_path,
                                                                                      capsys):
    """`bert-keras export --init SPEC --unicode-normalization NFC` serves NFD requests as composed ones (an
    encoder whose vocabulary records none); `--model DIR` fine-tuned without it refuses NFC by name."""
    import tensorflow as tf

    from bert_keras.checkpoints import load_pretrained
    from bert_keras.cli.main import main
    from bert_keras.tasks import TextClassifier

    plain = tmp_path / "plain"
    save_pretrained(load_pretrained(f"hf:{nfc_checkpoint}"), f"hf:{plain}", vocab_file=KOELECTRA,
                    tokenizer_settings={"lowercase": True, "strip_accents": False})
    assert main(["export", "--init", f"hf:{plain}", "--base-path", str(tmp_path / "models"), "--model-name", "e",
                 "--seq-length", "32", "--unicode-normalization", "NFC", "--warmup-requests", "0"]) == 0
    path = str(tmp_path / "models" / "e" / "1")
    card = json.load(open(os.path.join(path, "assets.extra", "model_card.json"), encoding="utf-8"))
    assert card["tokenization"]["unicode_normalization"] == "NFC"
    served = tf.saved_model.load(path).signatures["serving_default"]
    composed = list(served(text=tf.constant(TEXTS[:4])).values())[0].numpy()
    np.testing.assert_allclose(list(served(text=tf.constant(nfd(TEXTS[:4]))).values())[0].numpy(), composed,
                               atol=1e-5)

    directory = TextClassifier.from_pretrained(f"hf:{plain}", labels=["neg", "pos"], seq_length=32).save(
        str(tmp_path / "model"))
    capsys.readouterr()
    assert main(["export", "--model", directory, "--base-path", str(tmp_path / "models"), "--model-name", "c",
                 "--unicode-normalization", "NFC"]) != 0
    error = capsys.readouterr().err
    assert "--unicode-normalization NFC: " in error and "was fine-tuned with unicode_normalization=none" in error, error
    assert not os.path.exists(tmp_path / "models" / "c")


def test_fit_on_a_dataset_warns_of_decomposed_hangul_in_its_one_pass_of_checks(nfc_checkpoint, tmp_path):
    """Texts given to `fit` as a `tf.data.Dataset` were not checked for NFD Hangul (a list was): the
    warning now comes from the pass that checks the dataset already (no pass of its own), naming the
    element; with the checkpoint's recorded NFC nothing is said."""
    import warnings

    import tensorflow as tf

    from bert_keras.checkpoints import load_pretrained
    from bert_keras.tasks import TextClassifier

    plain = tmp_path / "plain"
    save_pretrained(load_pretrained(f"hf:{nfc_checkpoint}"), f"hf:{plain}", vocab_file=KOELECTRA,
                    tokenizer_settings={"lowercase": True, "strip_accents": False})
    texts = TEXTS[:3] + nfd(TEXTS[3:4]) + TEXTS[4:6]
    rows = tf.data.Dataset.from_tensor_slices((texts, ["neg", "pos"] * 3))
    task = TextClassifier.from_pretrained(f"hf:{plain}", labels=["neg", "pos"], seq_length=16)
    with pytest.warns(UserWarning, match=r"x\[3\] holds Hangul in decomposed form"):
        task.fit(rows, epochs=1, batch_size=2, verbose=0)
    composing = TextClassifier.from_pretrained(f"hf:{nfc_checkpoint}", labels=["neg", "pos"], seq_length=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        composing.fit(rows, epochs=1, batch_size=2, verbose=0)


def test_tokenize_a_fine_tuned_model_refuses_another_normalization(nfc_checkpoint, tmp_path, capsys):
    """`bert-keras tokenize --init DIR --unicode-normalization none` of a model fine-tuned with NFC tokenized
    NFD text into [UNK]s, unlike the model, without a word: now refused naming both values, as `export
    --model` does (its own value is accepted); a model fine-tuned without NFC refuses NFC."""
    from bert_keras.cli.main import main
    from bert_keras.tasks import TextClassifier

    directory = TextClassifier.from_pretrained(f"hf:{nfc_checkpoint}", labels=["neg", "pos"], seq_length=32).save(
        str(tmp_path / "model"))
    text = nfd(TEXTS[:1])[0]
    capsys.readouterr()
    assert main(["tokenize", "--init", directory, "--json", text]) == 0
    ids = [token["id"] for token in json.loads(capsys.readouterr().out)["tokens"]]
    assert 1 not in ids  # [UNK]: the text is composed, as the model reads it
    assert main(["tokenize", "--init", directory, "--json", "--unicode-normalization", "NFC", text]) == 0
    assert [token["id"] for token in json.loads(capsys.readouterr().out)["tokens"]] == ids
    assert main(["tokenize", "--init", directory, "--unicode-normalization", "none", text]) != 0
    error = capsys.readouterr().err
    assert f"--unicode-normalization none: {directory} was fine-tuned with unicode_normalization=NFC" in error, error
    assert "leave the flag out" in error

    plain = tmp_path / "plain"
    save_pretrained(__import__("bert_keras.checkpoints", fromlist=["load_pretrained"]).load_pretrained(
        f"hf:{nfc_checkpoint}"), f"hf:{plain}", vocab_file=KOELECTRA,
        tokenizer_settings={"lowercase": True, "strip_accents": False})
    other = TextClassifier.from_pretrained(f"hf:{plain}", labels=["neg", "pos"], seq_length=32).save(
        str(tmp_path / "plain_model"))
    assert main(["tokenize", "--init", other, "--unicode-normalization", "NFC", text]) != 0
    error = capsys.readouterr().err
    assert "was fine-tuned with unicode_normalization=none" in error and "unicodedata.normalize" in error, error


def test_turning_off_a_recorded_normalization_is_warned_naming_the_file(nfc_checkpoint, tmp_path, capsys):
    """`unicode_normalization="none"` (`--unicode-normalization none`) over a vocabulary that records NFC read
    decomposed Hangul as [UNK] without a word: it still turns it off, with a warning naming the file and key;
    a vocabulary that records none, or a call that leaves it out, says nothing."""
    import warnings

    from bert_keras.cli.main import main

    vocab = _nfc_vocab(str(tmp_path / "v"))
    with pytest.warns(UserWarning, match=r"tokenizer_config.json records bert_keras_unicode_normalization: 'NFC'") \
            as caught:
        assert resolve_tokenizer_settings(vocab, unicode_normalization="none")["unicode_normalization"] is None
    assert str(tmp_path / "v" / "tokenizer_config.json") in str(caught[0].message)
    assert caught[0].filename == __file__  # the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_tokenizer_settings(vocab)["unicode_normalization"] == "NFC"
        assert resolve_tokenizer_settings(KOELECTRA, unicode_normalization="none")["unicode_normalization"] is None

    text = nfd(TEXTS[:1])[0]
    capsys.readouterr()
    with pytest.warns(UserWarning, match=r"unicode_normalization=\"none\" \(--unicode-normalization none\): .*"
                                         r"nfc\S*/bert/tokenizer_config.json records"):
        assert main(["tokenize", "--init", f"hf:{nfc_checkpoint}", "--unicode-normalization", "none", text]) == 0
    assert "[UNK]" in capsys.readouterr().out


def test_a_cached_copy_of_an_hf_vocabulary_keeps_the_recorded_normalization(nfc_checkpoint, tmp_path, monkeypatch):
    """An HF directory whose vocabulary is read through a copy in the user cache (transformers 4's
    `added_tokens.json` past vocab.txt; transformers 5's `tokenizer.json` without vocab.txt) dropped the
    recorded NFC from the copy's rules: the tokenizer and tasks of that directory read NFD text as [UNK].
    The copy keeps it now, under a name of its own (a copy written before is not reused)."""
    import shutil
    import warnings

    from bert_keras.checkpoints import load_tokenizer
    from bert_keras.checkpoints.hf import vocabulary_from_tokenizer_json, vocabulary_with_added_tokens

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    tokens = open(KOELECTRA, encoding="utf-8").read().splitlines()
    added = tmp_path / "added"
    shutil.copytree(nfc_checkpoint, added)
    (added / "added_tokens.json").write_text(json.dumps({"[E1]": len(tokens)}))
    only_json = tmp_path / "only_json"
    shutil.copytree(nfc_checkpoint, only_json)
    (only_json / "vocab.txt").unlink()
    (only_json / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "added_tokens": [],
        "normalizer": {"type": "BertNormalizer", "lowercase": True, "strip_accents": False},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "vocab": {token: i for i, token in enumerate(tokens)}}}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the added token's note
        copies = [vocabulary_with_added_tokens(str(added)), vocabulary_from_tokenizer_json(str(only_json))]
        tokenizers = [load_tokenizer(f"hf:{added}"), load_tokenizer(f"hf:{only_json}")]
    for copy, tokenizer in zip(copies, tokenizers):
        assert read_tokenizer_settings(copy)["unicode_normalization"] == "NFC", copy
        assert tokenizer.unicode_normalization == "NFC"
        assert tokenizer.tokenize(nfd(TEXTS[:3])).to_list() == tokenizer.tokenize(TEXTS[:3]).to_list()


def test_a_keras_hub_preset_records_the_normalization(nfc_checkpoint, tmp_path):
    """`save_pretrained(encoder, "keras-hub:DIR")` / `convert ... keras-hub:DIR` of a vocabulary that records
    NFC wrote the preset's tokenizer_config.json without it (hf:, tf1: and .keras kept it): `load_tokenizer`
    of the preset read NFD Hangul as [UNK]. It is recorded now, with a warning that keras-hub's own
    tokenizer does not compose."""
    pytest.importorskip("keras_hub")
    from bert_keras.checkpoints import load_pretrained, load_tokenizer

    encoder = load_pretrained(f"hf:{nfc_checkpoint}")
    with pytest.warns(UserWarning, match="keras-hub's BertTokenizer does not do"):
        save_pretrained(encoder, f"keras-hub:{tmp_path / 'preset'}",
                        vocab_file=os.path.join(nfc_checkpoint, "vocab.txt"))
    tokenizer = load_tokenizer(f"keras-hub:{tmp_path / 'preset'}")
    assert tokenizer.unicode_normalization == "NFC"
    assert tokenizer.tokenize(nfd(TEXTS[:3])).to_list() == tokenizer.tokenize(TEXTS[:3]).to_list()



def _syllable_vocabulary(tmp_path):
    """KoELECTRA's vocabulary (composed syllables) in `tmp_path/plain`, recording no normalization."""
    vocab = str(tmp_path / "plain" / "vocab.txt")
    os.makedirs(os.path.dirname(vocab))
    with open(KOELECTRA, "rb") as source, open(vocab, "wb") as target:
        target.write(source.read())
    write_tokenizer_settings(vocab, lowercase=True, strip_accents=False)
    return vocab


def _nfc_records(tmp_path, capsys):
    """Records of an NFD corpus written composed (`--unicode-normalization NFC`) with a vocabulary that records
    none: `(prefix, vocab, config, config file, the printed next: line)`."""
    from bert_keras.cli.main import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(unicodedata.normalize("NFD", "\n".join(TEXTS[:30]) + "\n\n" + "\n".join(TEXTS[30:60]) + "\n"),
                      encoding="utf-8")
    vocab = _syllable_vocabulary(tmp_path)
    prefix = str(tmp_path / "nfc")
    capsys.readouterr()
    assert main(["create-pretraining-data", "--input", str(corpus), "--vocab", vocab, "--output-prefix", prefix,
                 "--seq-length", "32", "--max-predictions", "4", "--num_output_shards", "1", "--dupe-factor", "1",
                 "--unicode-normalization", "NFC"]) == 0
    next_line = [line for line in capsys.readouterr().out.splitlines() if line.startswith("next:")][0]
    config = BertConfig(vocab_size=sum(1 for _ in open(KOELECTRA, encoding="utf-8")), hidden_size=32,
                        num_layers=1, num_heads=2, intermediate_size=37, max_position_embeddings=64)
    config_file = str(tmp_path / "config.json")
    config.to_json(config_file)
    return prefix, vocab, config, config_file, next_line


def test_pretraining_on_records_composed_otherwise_is_refused_naming_both_forms(tmp_path, capsys):
    """`Pretrainer.pretrain(records=)` (`pretrain --data`) on records written from composed text with a
    vocabulary that records none saved an encoder that reads text as given, unlike its pretraining text,
    without a word: refused before any model is built, naming both forms and the files; so is
    `Pretrainer.fit(records=)`; `unicode_normalization="NFC"` trains and records it."""
    from bert_keras.tasks import Pretrainer
    from bert_keras.tasks.inputs import TaskInputError

    prefix, vocab, config, config_file, _ = _nfc_records(tmp_path, capsys)
    records = f"{prefix}-*.tfrecord"
    common = dict(steps=1, records=records, config=config_file, vocab_file=vocab, batch_size=2, strategy="default")
    with pytest.raises(TaskInputError) as raised:
        Pretrainer.pretrain(str(tmp_path / "refused"), **common)
    assert f"were written with unicode_normalization=NFC ({prefix}-config.json), but this run's is none: the " \
           f"vocabulary records none ({tmp_path / 'plain' / 'tokenizer_config.json'})" in str(raised.value)
    assert "unicode_normalization='NFC' (--unicode-normalization NFC)" in str(raised.value)
    assert not os.path.exists(tmp_path / "refused" / "encoder.keras")
    with pytest.raises(TaskInputError, match=r"were written with unicode_normalization=NFC .*but the pretrainer's "
                                             r"is none"):
        Pretrainer.from_config(config, vocab_file=vocab).fit(records=records, steps=1, batch_size=2,
                                                             output_dir=str(tmp_path / "fit"))
    Pretrainer.pretrain(str(tmp_path / "run"), unicode_normalization="NFC", **common)
    with open(tmp_path / "run" / "tokenizer_config.json", encoding="utf-8") as f:
        assert json.load(f)[UNICODE_NORMALIZATION_KEY] == "NFC"


def test_pretrain_takes_the_normalization_flag_that_create_pretraining_data_prints(tmp_path, capsys):
    """`bert-keras pretrain` had no `--unicode-normalization` (vocab, create-pretraining-data, finetune and
    tokenize have it): a vocabulary that records none (a downloaded one) could not compose an NFD corpus, nor
    read records written composed. The flag is there now, and the `next:` line of create-pretraining-data
    holds it when the records' form is not the vocabulary's."""
    from bert_keras.cli.main import main

    prefix, vocab, _, config_file, next_line = _nfc_records(tmp_path, capsys)
    assert "--unicode-normalization NFC" in next_line
    common = ["pretrain", "--data", f"{prefix}-*.tfrecord", "--vocab", vocab, "--config", config_file, "--steps", "1",
              "--batch-size", "2", "--strategy", "default"]
    assert main(common + ["--output-dir", str(tmp_path / "refused")]) != 0
    assert "--unicode-normalization NFC" in capsys.readouterr().err
    assert main(common + ["--output-dir", str(tmp_path / "run"), "--unicode-normalization", "NFC"]) == 0
    with open(tmp_path / "run" / "tokenizer_config.json", encoding="utf-8") as f:
        assert json.load(f)[UNICODE_NORMALIZATION_KEY] == "NFC"


def test_every_family_warns_of_decomposed_hangul_however_its_texts_come(nfc_checkpoint, tmp_path):
    """The NFD-Hangul warning named the text only where texts came as lists: a tagger's sentences given as
    words (CoNLL files, `finetune --task conll`) and SQuAD / KorQuAD examples read from a file (`finetune /
    evaluate --task squad`) were named 'text[0]' (of an internal tokenizer batch) by the eager tokenizer, and
    SWAG examples read from its CSV read NFD text as [UNK] without a word. Each now warns once, naming the
    sentence, the question id or the file and line; the composing checkpoint says nothing."""
    import csv
    import warnings

    from bert_keras.checkpoints import load_pretrained
    from bert_keras.tasks import MultipleChoice, SpanQA, TokenClassifier
    from pipelines.datasets.squad import read_squad_json
    from pipelines.datasets.swag import read_swag_csv

    plain = tmp_path / "plain"
    save_pretrained(load_pretrained(f"hf:{nfc_checkpoint}"), f"hf:{plain}", vocab_file=KOELECTRA,
                    tokenizer_settings={"lowercase": True, "strip_accents": False})
    sentences = [text.split() for text in nfd(TEXTS[:3])]
    tagger = TokenClassifier.from_pretrained(f"hf:{plain}", labels=["O", "B-X"], seq_length=32)
    with pytest.warns(UserWarning, match=r"^x\[0\] holds Hangul in decomposed form"):
        tagger.predict(sentences)

    with open(os.path.join(DATA, "korquad", "KorQuAD_v1.0_dev-excerpt.json"), encoding="utf-8") as f:
        squad = json.load(f)
    paragraph = squad["data"][0]["paragraphs"][0]
    questions = [dict(qa, question=unicodedata.normalize("NFD", qa["question"])) for qa in paragraph["qas"][:2]]
    squad["data"] = [{"title": "t", "paragraphs": [{"context": paragraph["context"], "qas": questions}]}]
    path = tmp_path / "korquad_nfd.json"  # questions decomposed (the contexts' answer offsets stay)
    path.write_text(json.dumps(squad, ensure_ascii=False), encoding="utf-8")
    examples = read_squad_json(str(path), is_training=False)
    qa = SpanQA.from_pretrained(f"hf:{plain}", seq_length=64, max_query_length=16)
    with pytest.warns(UserWarning, match=rf"^the question of question {examples[0].id!r} holds Hangul in decomposed"):
        qa.predict_squad(examples)
    scoring = SpanQA.from_pretrained(f"hf:{plain}", seq_length=64, max_query_length=16)  # `evaluate`'s path
    with pytest.warns(UserWarning, match=rf"^the question of question {examples[0].id!r} holds Hangul in decomposed"):
        scoring.score(examples)

    rows = [["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source", "ending0", "ending1",
             "ending2", "ending3", "label"]]
    rows += [[str(i), "v", "0", "", TEXTS[i], "", "gold", *(nfd(TEXTS[i + 1:i + 5]) if i else TEXTS[i + 1:i + 5]), "0"]
             for i in range(2)]
    with open(tmp_path / "swag.csv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(rows)
    choices = MultipleChoice.from_pretrained(f"hf:{plain}", num_choices=4, seq_length=32)
    with pytest.warns(UserWarning, match=r"swag.csv:3 holds Hangul in decomposed form"):
        choices.predict(read_swag_csv(str(tmp_path / "swag.csv")))

    composing = TokenClassifier.from_pretrained(f"hf:{nfc_checkpoint}", labels=["O", "B-X"], seq_length=32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        composing.predict(sentences)


def test_a_student_composes_as_its_teacher(nfc_checkpoint):
    """`distill`'s student was built with the teacher's vocabulary, casing, analyzer and limit but not its
    unicode_normalization: the student of a teacher fine-tuned with NFC read NFD text as [UNK], and so did
    its saved model and export. It keeps the teacher's now."""
    from bert_keras.tasks import TextClassifier
    from bert_keras.tasks.student import make_student, plan_student

    teacher = TextClassifier.from_pretrained(f"hf:{nfc_checkpoint}", labels=["neg", "pos"], seq_length=32)
    assert teacher.tokenizer.unicode_normalization == "NFC"
    student = make_student(teacher, plan_student(teacher, layers=1))
    assert student.tokenizer.unicode_normalization == "NFC"
    assert student._record.unicode_normalization == "NFC"
    np.testing.assert_allclose(student.predict(nfd(TEXTS[:4])), student.predict(TEXTS[:4]), atol=1e-6)


def test_converting_a_fine_tuned_model_keeps_its_normalization(nfc_checkpoint, tmp_path):
    """`bert-keras convert DIR hf:OUT` (`convert_finetuned`) of a model fine-tuned with NFC wrote its casing,
    analyzer and limit beside the vocabulary but not the normalization: the converted model read NFD text
    as [UNK] in this library. Recorded now, in hf: and .keras alike."""
    from bert_keras.checkpoints import load_tokenizer
    from bert_keras.finetuned_model import convert_finetuned
    from bert_keras.tasks import TextClassifier

    directory = TextClassifier.from_pretrained(f"hf:{nfc_checkpoint}", labels=["neg", "pos"], seq_length=32).save(
        str(tmp_path / "model"))
    convert_finetuned(directory, f"hf:{tmp_path / 'hf'}")
    with open(tmp_path / "hf" / "tokenizer_config.json", encoding="utf-8") as f:
        assert json.load(f)[UNICODE_NORMALIZATION_KEY] == "NFC"
    assert load_tokenizer(f"hf:{tmp_path / 'hf'}").unicode_normalization == "NFC"
    with pytest.warns(UserWarning, match="the encoder is written alone"):
        convert_finetuned(directory, str(tmp_path / "encoder.keras"), strict=False)
    assert load_tokenizer(str(tmp_path / "encoder.keras")).unicode_normalization == "NFC"


def test_the_decomposed_hangul_warning_names_fixes_that_exist(tmp_path):
    """The warning told every reader to pass `--unicode-normalization NFC`, also under `bert-keras predict /
    evaluate --model DIR`, which have no such flag, and for a fine-tuned model, which refuses another form:
    it now names composing the text first, and the commands that take the flag (each does)."""
    import re

    from bert_keras.cli.main import build_parser
    from pipelines import BertTokenizer

    tokenizer = BertTokenizer(KOELECTRA, lowercase=True, strip_accents=False)
    with pytest.warns(UserWarning) as caught:
        tokenizer.check_composition(nfd(TEXTS[:1]), "x")
    message = str(caught[0].message)
    assert 'unicodedata.normalize("NFC", text)' in message and "a fine-tuned model keeps the setting" in message
    named = re.search(r"bert-keras ([a-z, -]+): --unicode-normalization NFC", message).group(1).split(", ")
    action = next(a for a in build_parser()._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    for command in named:
        assert "--unicode-normalization" in action.choices[command]._option_string_actions, command


def test_fit_on_an_endless_dataset_warns_of_decomposed_hangul_as_it_streams(nfc_checkpoint, tmp_path):
    """An infinite dataset (`fit(..., steps_per_epoch=)`) is never read through before training, so its texts
    skipped the NFD-Hangul check that lists and finite datasets pass: a `TextClassifier` (single texts and
    pairs) and a `SpanQA` trained on decomposed Korean read it as [UNK] without a word. The check now runs as
    the rows stream (in the graph; the host only for a row holding jamo), warning once and naming the
    element as the finite pass does; the composing checkpoint adds nothing to its stream."""
    import warnings

    import tensorflow as tf

    from bert_keras.checkpoints import load_pretrained
    from bert_keras.tasks import SpanQA, TextClassifier

    plain = tmp_path / "plain"
    save_pretrained(load_pretrained(f"hf:{nfc_checkpoint}"), f"hf:{plain}", vocab_file=KOELECTRA,
                    tokenizer_settings={"lowercase": True, "strip_accents": False})
    texts = TEXTS[:3] + nfd(TEXTS[3:4]) + TEXTS[4:6]
    rows = tf.data.Dataset.from_tensor_slices((texts, ["neg", "pos"] * 3)).repeat()
    task = TextClassifier.from_pretrained(f"hf:{plain}", labels=["neg", "pos"], seq_length=16)
    with pytest.warns(UserWarning, match=r"^x\[3\] holds Hangul in decomposed form") as caught:
        task.fit(rows, epochs=2, steps_per_epoch=3, batch_size=2, verbose=0)
    assert sum("decomposed form" in str(w.message) for w in caught) == 1  # once per tokenizer

    pairs = tf.data.Dataset.from_tensor_slices(((TEXTS[:4], TEXTS[:2] + nfd(TEXTS[2:4])), ["neg", "pos"] * 2))
    pair_task = TextClassifier.from_pretrained(f"hf:{plain}", labels=["neg", "pos"], seq_length=16, text_pair=True)
    with pytest.warns(UserWarning, match=r"^x\[1\]\[2\] holds Hangul in decomposed form"):
        pair_task.fit(pairs.repeat(), epochs=1, steps_per_epoch=2, batch_size=2, verbose=0)

    context = TEXTS[5]
    answer = context.split()[1]
    questions = [TEXTS[6], nfd(TEXTS[7:8])[0]]
    squad = tf.data.Dataset.from_tensor_slices(((questions, [context] * 2),
                                                {"text": [answer] * 2, "answer_start": [context.index(answer)] * 2}))
    qa = SpanQA.from_pretrained(f"hf:{plain}", seq_length=64, max_query_length=16)
    with pytest.warns(UserWarning, match=r"^x\[0\]\[1\] holds Hangul in decomposed form"):
        qa.fit(squad.repeat(), epochs=1, steps_per_epoch=2, batch_size=2, verbose=0)

    composing = TextClassifier.from_pretrained(f"hf:{nfc_checkpoint}", labels=["neg", "pos"], seq_length=16)
    assert not composing.tokenizer.checks_composition
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        composing.fit(rows, epochs=1, steps_per_epoch=3, batch_size=2, verbose=0)


def test_a_vocabulary_learned_with_nfc_composes_its_corpus_before_splitting_it(tmp_path):
    """`learn_vocabulary(unicode_normalization="NFC")` composed the words after the pre-tokenizer had split
    them, where the tokenizer that records NFC composes the text first: with accents stripped (the uncased
    default) the vocabulary held the syllables the strip had taken apart, its tokenizer read its own corpus
    as jamo (72% [UNK]) and the jamo note was never given; a character NFC makes punctuation (U+1FEF GREEK
    VARIA -> '`') stayed inside a word. The lines are composed before the split now, here and on Beam: a
    corpus, its NFC and its NFD form give the same counts and vocabulary, which its tokenizer reads
    without [UNK]."""
    from pipelines import BertTokenizer
    from pipelines.tokenizer.corpus_words import count_corpus_words
    from pipelines.tokenizer.vocabulary_learning import learn_vocabulary

    raw = TEXTS[:150] + ["a\u1fefb x\u212bz Caf\u00e9"]  # neither NFC nor NFD
    learned, counts = {}, {}
    for form in ("raw", "NFC", "NFD"):
        corpus = tmp_path / f"{form}.txt"
        corpus.write_text("\n".join(raw if form == "raw" else [unicodedata.normalize(form, t) for t in raw]) + "\n",
                          encoding="utf-8")
        notes = []
        learned[form] = learn_vocabulary([str(corpus)], str(tmp_path / form / "vocab.txt"), size=300,
                                         unicode_normalization="NFC", log=notes.append)
    tokens = learned["NFD"].tokens
    tokenizer = BertTokenizer(vocabulary=tokens, lowercase=True, unicode_normalization="NFC")
    ids = [i for row in tokenizer.tokenize(raw).to_list() for i in row]
    assert ids.count(tokens.index("[UNK]")) == 0
    assert learned["raw"].tokens == learned["NFC"].tokens == tokens
    assert any("stripping accents (the uncased default) decomposes into jamo" in note for note in notes), notes
    for form in ("raw", "NFC", "NFD"):
        counts[form] = count_corpus_words([str(tmp_path / f"{form}.txt")], unicode_normalization="NFC")
    assert counts["raw"] == counts["NFC"] == counts["NFD"]
    assert counts["raw"]["`"] == 1 and "a`b" not in counts["raw"]
    pytest.importorskip("apache_beam")
    beam = count_corpus_words([str(tmp_path / "NFD.txt")], unicode_normalization="NFC", runner="DirectRunner",
                              pipeline_args=["--direct_num_workers=1"])
    assert beam == counts["NFD"]


def test_pretraining_on_a_decomposed_corpus_warns_naming_the_file_and_line(tmp_path):
    """`Pretrainer.pretrain(corpus=)` / `bert-keras pretrain --input` on a corpus of decomposed Hangul, with a
    vocabulary of syllables that records no NFC, trained on [UNK]s without a word (the corpus streams through
    `tf.data`, where no eager tokenize call warns; `create-pretraining-data` warned). Its one pass over the
    corpus before training warns now, naming the file and line; the composing vocabulary says nothing."""
    import shutil
    import warnings

    from bert_keras.tasks import Pretrainer

    vocab = str(tmp_path / "plain" / "vocab.txt")
    os.makedirs(os.path.dirname(vocab))
    shutil.copy(KOELECTRA, vocab)
    write_tokenizer_settings(vocab, lowercase=True, strip_accents=False)
    config = BertConfig(vocab_size=sum(1 for _ in open(KOELECTRA, encoding="utf-8")), hidden_size=32,
                        num_layers=1, num_heads=2, intermediate_size=37, max_position_embeddings=64)
    config_file = tmp_path / "config.json"
    config.to_json(str(config_file))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS[:2] + nfd(TEXTS[2:40])) + "\n", encoding="utf-8")
    common = dict(steps=1, corpus=str(corpus), config=str(config_file), seq_length=32, max_predictions=4,
                  batch_size=2, strategy="default")
    with pytest.warns(UserWarning, match=r"corpus.txt:3 holds Hangul in decomposed form"):
        Pretrainer.pretrain(str(tmp_path / "run"), vocab_file=vocab, **common)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        Pretrainer.pretrain(str(tmp_path / "nfc_run"), vocab_file=_nfc_vocab(str(tmp_path / "v")), **common)


def test_fit_idf_names_the_decomposed_text_by_its_place_in_the_corpus(nfc_checkpoint, tmp_path):
    """`Embedder.fit_idf` left the NFD-Hangul warning to its eager tokenize calls, which named the text by its
    place in a batch of `batch_size` ('text[0]' for texts[2]): it is named in the corpus now; and `embed`'s
    query is named as the query."""
    from bert_keras.checkpoints import load_pretrained
    from bert_keras.tasks import Embedder

    plain = tmp_path / "plain"
    save_pretrained(load_pretrained(f"hf:{nfc_checkpoint}"), f"hf:{plain}", vocab_file=KOELECTRA,
                    tokenizer_settings={"lowercase": True, "strip_accents": False})
    embedder = Embedder.from_pretrained(f"hf:{plain}", seq_length=32, pooling="bm25")
    with pytest.warns(UserWarning, match=r"^texts\[2\] holds Hangul in decomposed form"):
        embedder.fit_idf(TEXTS[:2] + nfd(TEXTS[2:3]), batch_size=2)
    # a query of decomposed Hangul was named x[0], the first of the texts ranked
    with pytest.warns(UserWarning, match=r"^query holds Hangul in decomposed form"):
        Embedder.from_pretrained(f"hf:{plain}", seq_length=32).embed(TEXTS[:3], query=nfd(TEXTS[3:4])[0])


def test_create_pretraining_data_names_the_file_and_line_of_decomposed_hangul(tmp_path, capsys):
    """`create-pretraining-data` on a corpus of decomposed Hangul, with a vocabulary of syllables that records
    no NFC, warned naming 'text[i]', a sentence's place inside one of its tokenize batches of 4,096. It names
    the file and line now (the second file's fifth line here: a blank line ends a document); a composing run
    says nothing."""
    import warnings

    from bert_keras.cli.main import main

    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("\n".join(TEXTS[:20]) + "\n", encoding="utf-8")
    second.write_text("\n".join(TEXTS[20:23]) + "\n\n" + "\n".join(TEXTS[23:24] + nfd(TEXTS[24:40])) + "\n",
                      encoding="utf-8")
    vocab = _syllable_vocabulary(tmp_path)
    common = ["create-pretraining-data", "--input", f"{first},{second}", "--vocab", vocab, "--seq-length", "32",
              "--max-predictions", "4", "--num_output_shards", "1", "--dupe-factor", "1"]
    with pytest.warns(UserWarning, match=r"b\.txt:6 holds Hangul in decomposed form") as caught:
        assert main(common + ["--output-prefix", str(tmp_path / "plain_run")]) == 0
    assert not any("text[" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert main(common + ["--output-prefix", str(tmp_path / "nfc_run"), "--unicode-normalization", "NFC"]) == 0
