"""An HF checkpoint whose tokenizer adds tokens ("[E1]", "<ent>"): a task from it, its saved forms, its
export and `bert-keras tokenize` read them whole, with transformers' ids (`BertTokenizerFast`)."""

import json
import warnings

import numpy as np
import pytest

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "drug", "cures", "pain", "e", "##1", "[", "]", "<",
         ">", "ent", "x", "!", "/"]
TEXT = "[E1] The drug [/E1] cures <ent> pain x<ent>!"  # <ent> is single_word: not after the x
SEQ_LENGTH = 16  # HF's ids fit (14); the text split by BERT's rules would not (23)


def _hf_checkpoint(directory, added=True, lowercase=True):
    """A tiny HF directory (tokenizer.json, random weights) and transformers' tokenizer of it."""
    from bert_keras.checkpoints import hf
    from bert_keras.checkpoints.layout import canonical_shapes
    from bert_keras.config import BertConfig

    directory.mkdir()
    (directory / "words.txt").write_text("\n".join(WORDS) + "\n")
    theirs = transformers.BertTokenizerFast(str(directory / "words.txt"), do_lower_case=lowercase)
    if added:
        theirs.add_tokens(["[E1]", "[/E1]", tokenizers.AddedToken("<ent>", single_word=True)])
    theirs.save_pretrained(directory / "hf")
    config = BertConfig(vocab_size=len(theirs), hidden_size=16, num_layers=1, num_heads=2, intermediate_size=19,
                        max_position_embeddings=32)
    rng = np.random.default_rng(0)
    weights = {name: rng.normal(0.0, 0.2, shape).astype(np.float32)
               for name, shape in dict(canonical_shapes(config)).items()}
    hf.write_hf(str(directory / "hf"), config, weights)
    return f"hf:{directory / 'hf'}", transformers.BertTokenizerFast.from_pretrained(str(directory / "hf"))


def _packed_ids(task, text=TEXT):
    ids = task.preprocessor([text])["token_ids"].numpy()[0].tolist()
    return ids[:ids.index(task.tokenizer.special_tokens.sep) + 1]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """`(spec, transformers' tokenizer, task fine-tuned one step, its predictions, saved directory)`."""
    from bert_keras.tasks import TextClassifier

    root = tmp_path_factory.mktemp("added")
    spec, theirs = _hf_checkpoint(root / "checkpoint")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not "read as word pieces": they are not
        task = TextClassifier.from_pretrained(spec, labels=["no", "yes"], seq_length=SEQ_LENGTH)
    task.fit([TEXT, "the drug"], ["yes", "no"], epochs=1, batch_size=2, verbose=0)
    predictions = task.predict([TEXT], verbose=0)
    directory = task.save(str(root / "model"))
    return spec, theirs, task, predictions, directory, root


def test_a_task_from_an_hf_checkpoint_reads_its_added_tokens_as_transformers(trained):
    """Before: "[E1]" read as [, e, ##1, ] (the task built its tokenizer without the checkpoint's added
    tokens) where transformers reads one id."""
    _, theirs, task, _, _, _ = trained
    assert _packed_ids(task) == theirs(TEXT)["input_ids"] == [2, 19, 5, 6, 20, 7, 21, 8, 16, 13, 15, 14, 17, 3]


def test_the_saved_directory_and_keras_file_keep_the_added_tokens(trained, tmp_path):
    import keras

    from bert_keras.finetuned_model import read_finetuned_encoder
    from bert_keras.tasks import load

    _, theirs, task, predictions, directory, _ = trained
    expected = theirs(TEXT)["input_ids"]
    saved = json.load(open(f"{directory}/task.json"))["tokenizer"]["added_tokens"]
    assert [entry["content"] for entry in saved][-3:] == ["[E1]", "[/E1]", "<ent>"]
    assert saved[-1]["single_word"] is True and "id" not in saved[-1]
    loaded = load(directory)
    assert _packed_ids(loaded) == expected
    np.testing.assert_allclose(loaded.predict([TEXT], verbose=0), predictions, atol=1e-6)
    _, tokenizer = read_finetuned_encoder(directory)
    assert tokenizer.tokenize([TEXT]).to_list()[0] == expected[1:-1]
    task.save(str(tmp_path / "task.keras"))
    reread = keras.saving.load_model(str(tmp_path / "task.keras"))
    assert _packed_ids(reread) == expected
    np.testing.assert_allclose(reread.predict([TEXT], verbose=0), predictions, atol=1e-6)
    # the preprocessor layer on its own, as Keras serializes it
    from bert_keras.tasks.preprocessor import TextPreprocessor

    layer = TextPreprocessor.from_config(task.preprocessor.get_config())
    assert layer([TEXT])["token_ids"].numpy()[0][:len(expected)].tolist() == expected


@pytest.mark.parametrize("source", ["checkpoint", "finetuned"])
def test_bert_keras_tokenize_finds_the_added_tokens(trained, source, capsys):
    from bert_keras.cli.main import main

    spec, theirs, _, _, directory, _ = trained
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["tokenize", "--init", spec if source == "checkpoint" else directory, "--json", TEXT]) == 0
    record = json.loads(capsys.readouterr().out)
    expected = theirs(TEXT, add_special_tokens=False, return_offsets_mapping=True)
    assert [token["id"] for token in record["tokens"]] == expected["input_ids"]
    assert [[t["start_char"], t["end_char"]] for t in record["tokens"]] == [list(o) for o in expected["offset_mapping"]]


@pytest.mark.slow  # the export: ~35 s
def test_the_export_tokenizes_with_the_added_tokens(trained):
    """Before: the SavedModel's in-graph tokenizer split "[E1]", so the text no longer fit (truncated)."""
    import tensorflow as tf

    from bert_keras.tasks import load

    _, _, _, predictions, directory, root = trained
    path = load(directory).export(str(root / "models"), "clf", check=False, warmup_requests=0)
    outputs = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant([TEXT]))
    assert not outputs["truncated"].numpy()[0]
    np.testing.assert_allclose(outputs["probabilities"].numpy(), predictions, atol=1e-5)


def test_a_checkpoint_adding_nothing_keeps_the_original_rules(tmp_path):
    """Every tokenizer.json lists BERT's special tokens as added: alone they change nothing (a text's
    "[SEP]" is split as google-research splits it)."""
    from bert_keras.checkpoints import find_added_tokens, find_matched_added_tokens

    spec, _ = _hf_checkpoint(tmp_path / "plain", added=False)
    assert [entry["content"] for entry in find_added_tokens(spec)] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert find_matched_added_tokens(spec) == []


def test_a_task_json_with_a_bad_added_token_names_the_file(trained, tmp_path):
    import shutil

    from bert_keras.finetuned_model import FinetunedModelError, read_finetuned

    _, _, _, _, directory, _ = trained
    copy = shutil.copytree(directory, tmp_path / "model")
    info = json.load(open(copy / "task.json"))
    for bad, message in (("[E1]", r"field 'tokenizer'.*expected a list"),
                         ([{"content": "[E9]"}], r"added token\(s\) \['\[E9\]'\] are not lines of"),
                         ([{"content": "[E1]", "single_word": "yes"}], "single_word must be true or false")):
        info["tokenizer"]["added_tokens"] = bad
        (copy / "task.json").write_text(json.dumps(info))
        with pytest.raises(FinetunedModelError, match=r"task\.json.*" + message):
            read_finetuned(str(copy), load_model=False)


def test_an_encoder_spec_export_reads_the_added_tokens_as_the_embedder_does(tmp_path):
    """`export_saved_model("hf:DIR", ...)` (a sentence-embedding export of an encoder spec) built its record
    without the checkpoint's added tokens (warning they would be word pieces), while `Embedder.from_pretrained`
    / `bert-keras export --init hf:DIR` read them whole: the served vectors were of other ids."""
    from bert_keras.tasks import Embedder
    from serving.signatures import finetuned_for_export

    spec, theirs = _hf_checkpoint(tmp_path / "checkpoint")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not "read as word pieces": they are not
        record = finetuned_for_export(spec, seq_length=SEQ_LENGTH)
    assert [entry["content"] for entry in record.added_tokens][-3:] == ["[E1]", "[/E1]", "<ent>"]
    expected = theirs(TEXT, add_special_tokens=False)["input_ids"]
    assert record.tokenizer().tokenize([TEXT]).flat_values.numpy().tolist() == expected
    assert Embedder.from_pretrained(spec).tokenizer.tokenize([TEXT]).flat_values.numpy().tolist() == expected


def test_attention_of_an_hf_checkpoint_reads_its_added_tokens_as_the_tasks_do(tmp_path):
    """`bert-keras attention --init hf:DIR` showed "[E1]" as [, e, ##1, ] (warning they were word pieces),
    while a task from the checkpoint, and `attention --init` of its fine-tuned directory, read one token."""
    from bert_keras.visualization.encoder_attention import encoder_attention

    spec, theirs = _hf_checkpoint(tmp_path / "checkpoint")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not "read as word pieces": they are not
        view = encoder_attention(spec, [TEXT], seq_length=SEQ_LENGTH)
    # (transformers lowercases the tokens it added to an uncased tokenizer: "[e1]", the vocabulary's "[E1]")
    assert [token.lower() for token in view.tokens] == [
        token.lower() for token in theirs.convert_ids_to_tokens(theirs(TEXT)["input_ids"])]
    assert view.tokens[1] == "[E1]"


def test_a_conversion_to_hf_keeps_the_added_tokens(trained, tmp_path):
    """Before: `convert_finetuned(DIR, "hf:OUT")` wrote vocab.txt (the added tokens as its last lines) and
    a tokenizer_config.json without them, so BertTokenizerFast.from_pretrained(OUT) split "[E1]" into
    [, e, ##1, ] (23 ids where the model reads 14)."""
    from bert_keras.checkpoints import find_added_tokens, load_tokenizer
    from bert_keras.finetuned_model import convert_finetuned

    _, theirs, _, _, directory, _ = trained
    convert_finetuned(directory, f"hf:{tmp_path / 'hf'}")
    converted = transformers.BertTokenizerFast.from_pretrained(str(tmp_path / "hf"))
    assert converted(TEXT)["input_ids"] == theirs(TEXT)["input_ids"]
    assert converted.added_tokens_decoder[21].content == "<ent>" and converted.added_tokens_decoder[21].single_word
    ours = load_tokenizer(f"hf:{tmp_path / 'hf'}", added_tokens=find_added_tokens(f"hf:{tmp_path / 'hf'}"))
    assert ours.tokenize([TEXT]).to_list()[0] == theirs(TEXT, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("kind", ["tf1", "keras", "keras-hub"])
def test_a_conversion_to_an_encoder_format_records_the_added_tokens(trained, tmp_path, kind):
    """tf1:, keras-hub: and .keras hold them beside the vocabulary, where find_added_tokens reads them back;
    tf1: and keras-hub: say that their own tokenizer reads them as word pieces."""
    from bert_keras.checkpoints import find_added_tokens, find_matched_added_tokens, load_tokenizer
    from bert_keras.finetuned_model import convert_finetuned

    _, theirs, _, _, directory, _ = trained
    if kind == "keras-hub":
        pytest.importorskip("keras_hub")
    dest = {"tf1": f"tf1:{tmp_path / 'tf1'}/", "keras": str(tmp_path / "encoder.keras"),
            "keras-hub": f"keras-hub:{tmp_path / 'preset'}"}[kind]
    with pytest.warns(UserWarning) as caught:
        convert_finetuned(directory, dest, strict=False)
    about_tokens = [str(w.message) for w in caught if "added tokens" in str(w.message)]
    assert len(about_tokens) == (0 if kind == "keras" else 1)
    if kind != "keras":
        reader = "google-research's tokenization.py" if kind == "tf1" else "keras-hub's BertTokenizer"
        assert f"{reader} reads them as word pieces" in about_tokens[0]
    assert [entry["content"] for entry in find_matched_added_tokens(dest)][-3:] == ["[E1]", "[/E1]", "<ent>"]
    tokenizer = load_tokenizer(dest, added_tokens=find_added_tokens(dest))
    assert tokenizer.tokenize([TEXT]).to_list()[0] == theirs(TEXT, add_special_tokens=False)["input_ids"]


def test_the_attention_view_of_a_checkpoint_reads_its_added_tokens(trained):
    """Before: encoder_attention('hf:DIR', ...) built its tokenizer without the checkpoint's added tokens:
    the view showed [, e, ##1, ] where the model reads "[E1]"."""
    from bert_keras.visualization.encoder_attention import encoder_attention

    spec, theirs, _, _, _, _ = trained
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not "read as word pieces"
        view = encoder_attention(spec, [TEXT], seq_length=SEQ_LENGTH)
    vocabulary = WORDS + ["[E1]", "[/E1]", "<ent>"]
    assert list(view.tokens) == [vocabulary[i] for i in theirs(TEXT)["input_ids"]]
    assert view.tokens[:5] == ["[CLS]", "[E1]", "the", "drug", "[/E1]"]


@pytest.mark.parametrize("kind", ["tf1", "keras", "hf"])
def test_bert_keras_convert_of_a_cased_hf_checkpoint_keeps_its_added_tokens_and_casing(tmp_path, kind, capsys):
    """Before: `bert-keras convert hf:SRC tf1:OUT` (or OUT.keras, hf:OUT) wrote the vocabulary (the added
    tokens its last lines) without them: "[E1]" read as [, e, ##1, ] there, and transformers' too (hf:)."""
    from bert_keras.checkpoints import find_added_tokens, find_tokenizer_settings, load_tokenizer
    from bert_keras.cli.main import main

    spec, theirs = _hf_checkpoint(tmp_path / "checkpoint", lowercase=False)
    expected = theirs(TEXT, add_special_tokens=False)["input_ids"]
    assert expected[:3] == [19, 1, 6]  # cased: "The" is [UNK] ("the" is 5)
    dest = {"tf1": f"tf1:{tmp_path / 'tf1'}/", "keras": str(tmp_path / "encoder.keras"),
            "hf": f"hf:{tmp_path / 'out'}"}[kind]
    assert main(["convert", spec, dest]) == 0
    warned = capsys.readouterr().err
    assert "matched as word pieces" not in warned  # recorded: they are found whole
    assert ("tokenization.py reads them as word pieces" in warned) == (kind == "tf1")
    assert find_tokenizer_settings(dest)["lowercase"] is False
    assert [entry["content"] for entry in find_added_tokens(dest)][-3:] == ["[E1]", "[/E1]", "<ent>"]
    tokenizer = load_tokenizer(dest, added_tokens=find_added_tokens(dest))
    assert tokenizer.tokenize([TEXT]).to_list()[0] == expected
    if kind == "hf":
        converted = transformers.BertTokenizerFast.from_pretrained(str(tmp_path / "out"))
        assert converted(TEXT, add_special_tokens=False)["input_ids"] == expected


def test_save_pretrained_with_only_the_added_tokens_keeps_the_recorded_casing(tmp_path):
    """A `tokenizer_settings` dict without the casing replaced the vocabulary's recorded cased rules with
    BERT's uncased default."""
    from bert_keras.checkpoints import find_added_tokens, find_tokenizer_settings, save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder
    from pipelines.tokenizer.tokenizer_config import write_tokenizer_settings

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(WORDS + ["[E1]"]) + "\n")
    write_tokenizer_settings(vocab, lowercase=False, max_input_chars_per_word=100)
    encoder = BertEncoder(BertConfig(vocab_size=len(WORDS) + 1, hidden_size=16, num_layers=1, num_heads=2,
                                     intermediate_size=19, max_position_embeddings=32))
    dest = str(tmp_path / "out" / "encoder.keras")
    (tmp_path / "out").mkdir()
    save_pretrained(encoder, dest, vocab_file=str(vocab), tokenizer_settings={"added_tokens": ["[E1]"]})
    assert find_tokenizer_settings(dest) == {"lowercase": False, "max_input_chars_per_word": 100}
    assert [entry["content"] for entry in find_added_tokens(dest)] == ["[E1]"]


def _restored_rows(batch):
    """The token ids of a pretraining batch before masking."""
    x, y = batch
    ids = x["token_ids"].numpy().copy()
    for row, (positions, targets, weights) in enumerate(zip(x["masked_lm_positions"].numpy(),
                                                            y["masked_lm_ids"].numpy(),
                                                            y["masked_lm_weights"].numpy())):
        ids[row, positions[weights > 0]] = targets[weights > 0]
    return ids


def test_continued_pretraining_of_an_hf_checkpoint_reads_its_added_tokens_whole(tmp_path):
    """Before: Pretrainer.from_pretrained(hf:DIR) tokenized a corpus without the checkpoint's added tokens
    (warning they were word pieces): "[E1]" reached the masked LM as [, e, ##1, ], ids the model's
    tokenizer never gives."""
    import keras

    from bert_keras.tasks import Pretrainer

    spec, theirs = _hf_checkpoint(tmp_path / "checkpoint")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not "read as word pieces": they are not
        pretrainer = Pretrainer.from_pretrained(spec)
    assert [entry["content"] for entry in pretrainer.added_tokens][-3:] == ["[E1]", "[/E1]", "<ent>"]
    expected = theirs(TEXT, add_special_tokens=False)["input_ids"]
    assert pretrainer.corpus_tokenizer().tokenize([TEXT]).to_list()[0] == expected
    pretrainer.save(str(tmp_path / "pretrainer.keras"))  # Keras' own file keeps them
    reread = keras.saving.load_model(str(tmp_path / "pretrainer.keras"))
    assert reread.corpus_tokenizer().tokenize([TEXT]).to_list()[0] == expected


@pytest.mark.slow  # the dynamic masked-LM stream: ~40 s
def test_the_masked_lm_stream_of_an_hf_checkpoint_holds_its_added_tokens_whole(tmp_path):
    from bert_keras.tasks import Pretrainer
    from bert_keras.tasks.pretrainer import dataset_factory
    from pipelines.pretraining.settings import MaskingSettings

    spec, theirs = _hf_checkpoint(tmp_path / "checkpoint")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join([f"{TEXT}\n{TEXT}"] * 4) + "\n")
    pretrainer = Pretrainer.from_pretrained(spec)
    make_dataset = dataset_factory(
        corpus=str(corpus), records=None, vocab_file=pretrainer.vocab_file, lowercase=pretrainer.lowercase,
        strip_accents=pretrainer.strip_accents, pre_tokenizer=pretrainer.pre_tokenizer, batch_size=4, seq_length=32,
        max_predictions=5, seed=0, masking=MaskingSettings(short_seq_prob=0.0),
        max_input_chars_per_word=pretrainer.max_input_chars_per_word, added_tokens=pretrainer.added_tokens)
    expected = theirs(TEXT, add_special_tokens=False)["input_ids"]
    for row in _restored_rows(next(iter(make_dataset()))):
        assert row[:len(expected) + 2].tolist() == [2, *expected, 3]  # [CLS] TEXT [SEP], as transformers reads it


@pytest.mark.slow  # a pretraining run: ~90 s
def test_a_pretraining_run_from_an_hf_checkpoint_keeps_its_added_tokens(tmp_path):
    """Before: `pretrain --init hf:DIR` wrote the run's vocabulary (the added tokens its last lines) without
    them: a second phase or a task from run/encoder.keras read "[E1]" as [, e, ##1, ]."""
    from bert_keras.checkpoints import find_added_tokens, load_tokenizer
    from bert_keras.tasks import Pretrainer

    spec, theirs = _hf_checkpoint(tmp_path / "checkpoint")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join([f"{TEXT}\n{TEXT}"] * 4) + "\n")
    expected = theirs(TEXT, add_special_tokens=False)["input_ids"]
    run = tmp_path / "run"
    Pretrainer.pretrain(str(run), steps=1, corpus=str(corpus), init=spec, batch_size=2, seq_length=32,
                        max_predictions=5, checkpoint_every=1, verbose=0, jit_compile=False, mixed_precision="off")
    saved = f"{run / 'encoder.keras'}"
    assert [entry["content"] for entry in find_added_tokens(saved)][-3:] == ["[E1]", "[/E1]", "<ent>"]
    again = Pretrainer.from_pretrained(saved)  # a second phase reads them too
    assert [entry["content"] for entry in again.added_tokens][-3:] == ["[E1]", "[/E1]", "<ent>"]
    tokenizer = load_tokenizer(saved, added_tokens=find_added_tokens(saved))
    assert tokenizer.tokenize([TEXT]).to_list()[0] == expected
