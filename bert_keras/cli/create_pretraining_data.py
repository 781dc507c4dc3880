"""Build BERT pretraining TFRecords (masked LM + next sentence prediction) exactly as the original
create_pretraining_data.py (its instances, its masking budget min(P, max(1, round(len(tokens) *
masked_lm_prob))) with [CLS]/[SEP] counted), with the features run_pretraining.py reads. Shards are
written in parallel, atomically, and a rerun skips the ones already complete; other settings or a
changed corpus on the same prefix need --overwrite. Flags also accept the original script's
spellings (--input_file, --vocab_file, --max_seq_length, --random_seed, --do_lower_case=False,
--do_whole_word_mask=True); its --output_file is told apart (here --output-prefix names the shards).

Thin: the flags are the fields of `pipelines.pretraining.settings.PretrainingDataSettings`
(which checks them), `write_pretraining_data` writes; this module prints.
"""

import os

from pipelines.command_options import add_field_options, field_values


def register(subparsers, summary):
    from pipelines.pretraining.settings import PretrainingDataSettings  # no TensorFlow: --help stays fast

    parser = subparsers.add_parser(
        "create-pretraining-data",
        help=summary,
        description=__doc__.split("\n\nThin:")[0],
    )
    add_field_options(parser, PretrainingDataSettings)
    _add_original_script_flags(parser)
    parser.add_argument("--workers", type=int, default=None,
                        help="processes writing shards (default: CPU count for a big corpus, else 1)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace shards under the prefix made with other settings or from a changed corpus")
    parser.add_argument("--runner", default=None,
                        help="run on Apache Beam (pip install bert-keras[beam]): DirectRunner, DataflowRunner, "
                             "FlinkRunner, SparkRunner, PortableRunner or PrismRunner; the same records as the default "
                             "single-machine path. Beam pipeline options go after '--', e.g. -- "
                             "--direct_num_workers=4 --direct_running_mode=multi_processing")
    parser.add_argument("--write-documents", action="store_true",
                        help="with --runner: also write the documents as BERT-format text, "
                             "PREFIX-documents-0000j-of-0000N.txt, for dynamic masking (pretrain --input)")
    parser.add_argument("beam_options", nargs="*", metavar="-- BEAM_OPTION",
                        help="Beam pipeline options (with --runner), after '--'")
    parser.set_defaults(func=run)


def run(args):
    import time

    from pipelines.pretraining import PretrainingDataSettings, write_pretraining_data

    start = time.perf_counter()
    _check_beam_options(args)
    settings = PretrainingDataSettings(**field_values(PretrainingDataSettings, args))
    if args.write_documents and not args.runner:
        raise ValueError("--write-documents writes from the Beam path: add --runner (e.g. DirectRunner).")
    if getattr(args, "runner", None) or getattr(args, "beam_options", None):
        from pipelines.beam_runner import beam_imports, parse_runner

        with beam_imports(args.runner or "DirectRunner"):
            from pipelines.pretraining.beam_pipeline import write_pretraining_data_with_beam

        summary = write_pretraining_data_with_beam(
            settings, runner=parse_runner(args.runner or "DirectRunner"), pipeline_args=args.beam_options,
            overwrite=args.overwrite, write_documents=args.write_documents,
            log=lambda line: print(line, flush=True))
    else:
        summary = write_pretraining_data(settings, workers=args.workers, overwrite=args.overwrite,
                                         log=lambda line: print(line, flush=True))
    from pipelines.pretraining.writer import counted

    print(f"{len(summary['written'])} shard(s) written, {len(summary['skipped'])} skipped, "
          f"{counted(summary['instances'], 'instance')} in {time.perf_counter() - start:.1f}s")
    if summary["complete"]:
        print(next_step(args, settings, summary))
    return 0


def next_step(args, settings, summary):
    """The `pretrain` command that reads these shards, runnable as printed: the prefix and vocabulary
    as typed, the case rules and Unicode normalization given here where the vocabulary's own differ, and --steps of one pass over the records at pretrain's batch
    of 32 (when this run wrote them all; 10,000 otherwise), into a directory named after the prefix."""
    import math
    import shlex

    from bert_keras.run_options import PretrainingOptions
    from pipelines.tokenizer.tokenizer_config import resolve_tokenizer_settings

    batch = PretrainingOptions.__dataclass_fields__["batch_size"].default
    pattern = f"{args.output_prefix}-*-of-{settings.num_output_shards:05d}.tfrecord"
    one_pass = not summary["skipped"] and settings.num_shards == 1 and summary["instances"]
    steps = max(1, math.ceil(summary["instances"] / batch)) if one_pass else 10000
    vocabulary_rules = resolve_tokenizer_settings(settings.vocab_file)  # what pretrain reads without a flag
    if vocabulary_rules["strip_accents"] is None:  # as lowercasing, BERT's rule
        vocabulary_rules["strip_accents"] = vocabulary_rules["lowercase"]
    command = ["bert-keras", "pretrain", "--data", pattern, "--vocab", args.vocab_file,
               *([] if settings.lowercase == vocabulary_rules["lowercase"] else
                 ["--no-cased" if settings.lowercase else "--cased"]),
               *([] if settings.strip_accents == vocabulary_rules["strip_accents"] else
                 ["--strip-accents" if settings.strip_accents else "--no-strip-accents"]),
               *([] if settings.unicode_normalization == vocabulary_rules["unicode_normalization"] else
                 ["--unicode-normalization", settings.unicode_normalization or "none"]),
               "--config", "mini", "--steps", str(steps), "--output-dir", f"{args.output_prefix}-pretrain"]
    line = f"next: {shlex.join(command)}"
    return line + (f"   # --steps {steps}: one pass over the records at --batch-size {batch}" if one_pass else "")



def _absl_boolean(text):
    """An absl boolean flag's value, as google-research/bert's scripts read `--do_lower_case=False`."""
    import argparse

    value = {"true": True, "t": True, "1": True, "false": False, "f": False, "0": False}.get(text.lower())
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false")
    return value


def _add_original_script_flags(parser):
    """google-research/bert's create_pretraining_data.py flags that are absl booleans
    (`--do_lower_case=False`, `--do_whole_word_mask`, `--nodo_lower_case`), hidden; its
    `--output_file` (files, not a prefix) is refused by name with the flag that replaces it."""
    import argparse

    class OutputFile(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            parser.error(f"{option_string} is google-research/bert's flag (the output files themselves): here "
                         f"--output-prefix PREFIX writes PREFIX-00000-of-0000N.tfrecord (--num-output-shards N), "
                         f"e.g. --output-prefix {os.path.splitext(values)[0]}")

    hidden = dict(nargs="?", const=True, type=_absl_boolean, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.add_argument("--do_lower_case", dest="lowercase", **hidden)
    parser.add_argument("--do_whole_word_mask", dest="whole_word_mask", **hidden)
    parser.add_argument("--nodo_lower_case", dest="lowercase", action="store_false", default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)
    parser.add_argument("--nodo_whole_word_mask", dest="whole_word_mask", action="store_false",
                        default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    parser.add_argument("--output_file", action=OutputFile, help=argparse.SUPPRESS)


def _check_beam_options(args):
    """Beam's options are flags (`--direct_num_workers=4`). A bare word is most often a file of an
    unquoted `--input` pattern the shell expanded: it was taken as a Beam option, and the run read
    the first file only, on Beam, without a word."""
    from bert_keras.cli.main import CommandError
    from bert_keras.error_hints import expanded_pattern_hint

    from pipelines.beam_runner import stray_beam_words

    stray = stray_beam_words(args.beam_options)
    if stray:
        hint = expanded_pattern_hint(["--input", args.input, *stray], stray)
        raise CommandError(f"{stray[0]!r} is not a Beam option (they start with --, after '--')"
                           + (f"; {hint}" if hint else ""))
