"""One flag name per concept across the `bert-keras` subcommands (issue 21).

The table below says, for each concept, its flag and the subcommands that take it; every
subcommand's parser is read (no command runs) to check that the flag is there, visible, and
that the former spellings (`bert_keras.cli.flag_arguments.OLD_NAMES`) still parse, hidden
from `--help`, into the same destination.
"""

import argparse

import pytest

from bert_keras.cli.flag_arguments import FLAG_NAMES, OLD_NAMES
from bert_keras.cli.main import build_parser

# flag -> the subcommands whose parser must show it
USED_BY = {
    "--init": {"finetune", "pretrain", "embed", "attention", "tokenize", "export", "quickstart"},
    "--model": {"evaluate", "predict", "export"},
    "--data": {"finetune", "distill", "evaluate", "pretrain"},
    "--eval-data": {"finetune", "distill"},
    "--input": {"embed", "predict", "pretrain", "create-pretraining-data", "loadtest"},
    "--output": {"vocab", "evaluate", "predict", "embed"},
    "--output-dir": {"finetune", "distill", "pretrain", "attention", "predict", "deploy-kit"},
    "--vocab": {"finetune", "pretrain", "embed", "attention", "tokenize", "export", "create-pretraining-data"},
    "--cased": {"finetune", "pretrain", "embed", "attention", "tokenize", "export", "vocab",
                "create-pretraining-data"},
    "--strip-accents": {"finetune", "pretrain", "embed", "attention", "tokenize", "export", "vocab",
                        "create-pretraining-data"},
    "--seq-length": {"finetune", "pretrain", "embed", "attention", "tokenize", "export",
                     "create-pretraining-data", "quickstart"},
    "--max-length": {"finetune", "embed"},  # the document length, as max_length= in Python
    "--stride": {"finetune", "embed", "distill"},  # distill: a squad context's windows
    "--max-predictions": {"pretrain", "create-pretraining-data"},
    "--batch-size": {"finetune", "distill", "pretrain", "evaluate", "predict", "embed", "loadtest"},
    "--seed": {"finetune", "distill", "pretrain", "create-pretraining-data", "quickstart"},
    "--overwrite": {"finetune", "distill", "pretrain", "vocab", "export", "create-pretraining-data", "deploy-kit"},
    "--json": {"info", "tokenize", "evaluate", "predict", "embed", "query", "loadtest"},
    "--tokenizer": {"tokenize", "export", "quickstart"},
    "--model-name": {"export", "query", "loadtest", "serve", "deploy-kit"},
    "--top-k": {"embed", "attention"},
    "--null-threshold": {"predict", "export"},
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


def test_the_table_covers_every_concept_flag():
    assert set(USED_BY) == set(FLAG_NAMES.values())
    assert set(OLD_NAMES.values()) <= set(FLAG_NAMES.values())


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
    (["encode", "--init", "x", "a"], "pooling", "mean"),
])
def test_scripts_written_for_the_former_names_still_parse(argv, dest, value):
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value


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
