"""One flag name per concept across subcommands; older spellings keep working, hidden.

`tests/bert_keras/test_cli_flags.py` holds the table every subcommand follows (concept -> flag ->
subcommands; it parses each parser against it); `add_option` adds a flag with its deprecated
spellings as hidden aliases of the same destination, so scripts written against an older name do
not break.

>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> add_option(parser, "--seq-length", "--max-seq-length", type=int, default=128)
>>> parser.parse_args(["--max-seq-length", "64"]).seq_length
64
"""

import argparse
import contextlib
import dataclasses
import typing
from typing import Optional

def positive_int(text):
    """argparse type of counts that must be at least 1 (`--batch-size 0` is a usage error, not a
    TensorFlow traceback at the first batch)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text):
    """argparse type of rates that must be above 0 and finite (`--learning-rate -1` would train
    by gradient ascent)."""
    value = _float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
    return value


def seed(text):
    """argparse type of a random seed: a whole number in [0, 2**32) (what NumPy and TensorFlow take)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be between 0 and 2**32 - 1, got {value}")
    return value


def fraction(text):
    """argparse type of a fraction in [0, 1] (`--warmup-ratio`)."""
    value = _float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _float(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


# what `pipelines.command_options.option(type="...")` names: the checked argparse types above
CHECKED_TYPES = {"positive_int": positive_int, "positive_float": positive_float, "seed": seed, "fraction": fraction}


def add_option(parser, name, *old_names, required=False, **options):
    """`parser.add_argument(name, **options)`, plus each of `old_names` as a hidden alias.

    Args:
        parser: a parser or an argument group.
        name: the flag (`--seq-length`); the destination is its name unless `dest=` says otherwise.
        *old_names: earlier spellings, accepted and hidden from `--help`.
        required: the flag or one of its old spellings must be given.
        **options: `add_argument` options (`type`, `default`, `help`, ...).
    """
    options.setdefault("dest", name.lstrip("-").replace("-", "_"))
    if old_names and required:
        parser = parser.add_mutually_exclusive_group(required=True)
    elif required:
        options["required"] = True
    parser.add_argument(name, **options)
    hidden = {key: value for key, value in options.items() if key not in ("help", "default", "metavar")}
    for old in old_names:
        parser.add_argument(old, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **hidden)


INIT_HELP = "hf:DIR | tf1:CKPT_PREFIX | keras-hub:DIR | pip:PACKAGE | model.keras"


def add_encoder_options(parser, *, seq_length_help, seq_length_default=None, init_help=INIT_HELP, applies_to=""):
    """`--init SPEC` (required), `--vocab`, `--cased` and `--seq-length`: a command that runs an encoder.

    `init_help` None: the caller adds `--init` (among alternatives); `applies_to` ("--init: ")
    starts the help of `--vocab` and `--cased`.
    """
    if init_help:
        parser.add_argument("--init", required=True, metavar="SPEC", help=init_help)
    parser.add_argument("--vocab", help=f"{applies_to}vocab.txt, when the model has none beside it")
    add_case_options(parser, applies_to=applies_to)
    add_option(parser, "--seq-length", "--max-seq-length", type=int, default=seq_length_default, help=seq_length_help)


def add_window_options(parser, *, squad=False):
    """`--max-length N` and `--stride N`: a long text read in windows, as `from_pretrained(max_length=,
    stride=)` in Python (classification, NER and embeddings); `squad`: the command also reads SQuAD,
    whose context windows `--stride` spaces too (`add_stride_option`)."""
    parser.add_argument("--max-length", type=positive_int, default=None, metavar="N",
                        help="word pieces of a text read, in overlapping windows of --seq-length; its "
                             "scores come from all of them (classification: the mean of the windows' "
                             "logits). Default: a text is its first window")
    add_stride_option(parser, windows=True, squad=squad)


def add_stride_option(parser, *, windows=True, squad=False):
    """`--stride N` (dest `stride`): word pieces between the starts of two windows, the one flag of
    every family that reads windows (`pipelines.windowing`): a long text's, with `--max-length`
    (`windows`), and SQuAD's context windows (`squad`: SpanQA's `stride`; `--doc-stride`,
    run_squad.py's name, is then a hidden alias)."""
    from bert_keras.families import SquadSettings

    uses = (["a long text's, with --max-length (default: half a window)"] if windows else []) + \
           ([f"a squad context's (default {SquadSettings.stride})"] if squad else [])
    add_option(parser, "--stride", *(["--doc-stride"] if squad else []), type=positive_int, default=None,
               metavar="N", help=f"word pieces between the starts of two windows: {'; '.join(uses)}")


STRIP_ACCENTS_HELP = ("strip accents (NFD, drop combining marks); default: when lowercasing, as BERT's uncased "
                      "rules and HF's strip_accents. --no-strip-accents lowercases only, keeping Hangul syllables "
                      "and accented letters whole: Korean vocabularies need it")


def add_case_options(parser, *, applies_to="", cased_help=None):
    """`--cased` and `--strip-accents / --no-strip-accents` (dest `strip_accents`: None, True or False):
    how text is normalized before word pieces (`pipelines.BertTokenizer(lowercase=, strip_accents=)`)."""
    parser.add_argument("--cased", action="store_true",
                        help=cased_help or f"{applies_to}cased tokenization (no lowercasing or accent stripping)")
    parser.add_argument("--strip-accents", action=argparse.BooleanOptionalAction, default=None,
                        help=f"{applies_to}{STRIP_ACCENTS_HELP}")


def add_field_options(parser, options_class, *, only=None):
    """A flag per field of dataclass `options_class` declared with `pipelines.command_options.option`
    (`metadata["flag"]`: `help`; `name`, else `--field-name`; `old_names`, hidden as `add_option`;
    `group`, `metavar`, `choices`, `nargs`, `action`; `type`, else the field's, a name of
    `CHECKED_TYPES` standing for that type). The destination is the field's name; a field without a
    default is required; a bool is a switch that flips its default. `only`: these fields alone."""
    groups = {}
    for field in dataclasses.fields(options_class):
        flag = field.metadata.get("flag")
        if flag is None or (only is not None and field.name not in only):
            continue
        group = flag.get("group")
        if group and group not in groups:
            groups[group] = parser.add_argument_group(group)
        name = flag.get("name") or "--" + field.name.replace("_", "-")
        required = field.default is dataclasses.MISSING
        if field.type is bool:
            options = {"action": "store_false" if field.default else "store_true"}
        elif field.type == Optional[bool]:
            options = {"action": argparse.BooleanOptionalAction, "default": field.default}
        else:
            metavar = flag.get("metavar")
            if metavar is None and not flag.get("choices"):
                metavar = name.lstrip("-").replace("-", "_").upper()  # not the field's name
            kind = flag.get("type") or _optional_of(field.type)
            options = {"type": CHECKED_TYPES.get(kind, kind), "metavar": metavar,
                       **({} if required else {"default": field.default})}
            options.update({key: flag[key] for key in ("choices", "nargs", "action") if flag.get(key)})
            if options.get("action") == "append":
                options["default"] = []
        add_option(groups[group] if group else parser, name, *flag.get("old_names", ()), required=required,
                   dest=field.name, help=flag["help"], **options)


def _optional_of(annotation):
    """`X` for `Optional[X]`, else `annotation` (argparse converts to the type itself)."""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    return args[0] if typing.get_origin(annotation) is typing.Union and len(args) == 1 else annotation


def field_values(options_class, namespace):
    """{field: value} of dataclass `options_class` from the `argparse.Namespace` attributes named as its fields."""
    return {field.name: getattr(namespace, field.name) for field in dataclasses.fields(options_class)
            if hasattr(namespace, field.name)}


@contextlib.contextmanager
def beam_runner_imports(runner):
    """Turns a missing `apache_beam` under `--runner RUNNER` into a one-line `CommandError` naming
    the extra to install (`beam`, or `beam-gcp` for Dataflow); any other import error is raised as
    it is (Beam is there and one of its own imports failed: the traceback names it)."""
    try:
        yield
    except ImportError as error:
        if (error.name or "").split(".")[0] != "apache_beam":
            raise
        from bert_keras.cli.main import CommandError

        extra = "beam-gcp" if runner.lower().startswith("dataflow") else "beam"
        raise CommandError(f"--runner {runner} needs Apache Beam, which is not installed: pip install "
                           f"'bert-keras[{extra}]' (in a checkout: pip install -e '.[{extra}]'), or drop --runner "
                           "to run on this machine") from None
