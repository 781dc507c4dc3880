"""Settings records whose fields are also command-line flags: one name, default and help for both.

A settings dataclass (`PretrainingDataSettings`, `PretrainingOptions`, `ServerOptions`, ...)
declares each field with `option(...)`; `add_field_options` adds a flag per field to an argparse
parser and `field_values` reads the parsed values back, so a Python caller and the command line
share the default, the check and the help text. `add_option` adds any flag with its former
spellings as hidden aliases; `positive_int`, `positive_float`, `seed` and `fraction` are the
checked argparse types (`option(type="positive_int")` names one). Plain Python (no TensorFlow):
`--help` stays fast.

>>> import argparse, dataclasses
>>> @dataclasses.dataclass(frozen=True)
... class Run:
...     steps: int = option(100, "optimizer steps (default 100)", type="positive_int")
>>> flag = dataclasses.fields(Run)[0].metadata["flag"]
>>> flag["help"], flag["type"], Run().steps
('optimizer steps (default 100)', 'positive_int', 100)
>>> parser = argparse.ArgumentParser()
>>> add_field_options(parser, Run)
>>> Run(**field_values(Run, parser.parse_args(["--steps", "5"])))
Run(steps=5)
>>> add_option(parser, "--seq-length", "--max-seq-length", type=int, default=128)
>>> parser.parse_args(["--max-seq-length", "64"]).seq_length
64
"""

import argparse
import dataclasses
import math
import typing
from typing import Optional


def option(default=dataclasses.MISSING, help=None, name=None, *old_names, **flag):
    """A dataclass field with its command-line flag in `metadata["flag"]`.

    Args:
        default: the field's default (none: the field, and its flag, are required).
        help: the flag's help (and the field's documentation).
        name: the flag (default `--field-name`).
        *old_names: earlier spellings, accepted and hidden from `--help`.
        **flag: more of the flag: `group` (its `--help` section), `metavar`, `choices`, `type`
            (a callable, or the name of one of `CHECKED_TYPES`: "positive_int", "pair_sequence_length",
            "positive_float", "non_negative_float", "seed", "fraction", "held_out_fraction"), `nargs`,
            `action` ("append"; "store_true" / "store_false" for an Optional[bool] switch), `opposite`
            (such a switch's other value: `(flag, help)`, mutually exclusive with it).
    """
    return dataclasses.field(default=default, metadata={"flag": dict(flag, help=help, name=name,
                                                                      old_names=old_names)})


def positive_int(text):
    """argparse type of counts that must be at least 1 (`--batch-size 0` is a usage error, not a
    TensorFlow traceback at the first batch)."""
    return _whole_number_at_least(text, 1)


def sequence_length(text):
    """argparse type of `--seq-length`: positions of a packed example, at least 3 (`[CLS]`, a token
    and `[SEP]`; `--seq-length 2` is a usage error naming the flag, not the packer's message)."""
    return _whole_number_at_least(text, 3, " ([CLS], a token and [SEP])")


def pair_sequence_length(text):
    """argparse type of a pretraining `--seq-length`: at least 5 (`[CLS] A [SEP] B [SEP]`, the
    next-sentence pair). `--seq-length 4` was refused only once the run had started, as
    "max_seq_length must be at least 5" (`create-pretraining-data`) or "seq_length ..." (`pretrain`),
    naming no flag."""
    return _whole_number_at_least(text, 5, " ([CLS] A [SEP] B [SEP])")


def model_version(text):
    """argparse type of a model version (`query --version`, `export --version`): ASCII digits with an
    optional "-", within int64, as TF Serving's `safe_strto64` reads one. int() alone also reads
    other scripts' digits ("٣" is 3) and "1_0", which name no version directory.

    >>> model_version("7"), model_version("-1")
    (7, -1)
    >>> model_version("٣")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: '٣' is not a whole number (ASCII digits 0-9)
    """
    value = _whole_number(text)
    if not -2**63 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"{text} is past int64, which TF Serving reads versions as")
    return value


def _whole_number(text):
    """int of `text`: ASCII digits with an optional sign ("٣", "²", "1_0" and " 3" are refused)."""
    digits = text[1:] if text[:1] in "+-" else text
    if not (digits.isascii() and digits.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (ASCII digits 0-9)")
    return int(text)


def _whole_number_at_least(text, least, why=""):
    value = _whole_number(text)
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}{why}, got {value}")
    return value

def positive_float(text):
    """argparse type of rates that must be above 0 and finite (`--learning-rate -1` would train
    by gradient ascent)."""
    value = _float(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
    return value


def non_negative_float(text):
    """argparse type of a finite amount that may be 0 (`--epochs 0`: no step, as Keras; `--epochs -1`
    was refused by the library after the data was read, naming `epochs=` instead of the flag)."""
    value = _float(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def finite_float(text):
    """argparse type of a number that may be negative but must be finite (`--null-threshold nan`
    would answer every question: no comparison with NaN is true)."""
    value = _float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def seed(text):
    """argparse type of a random seed: a whole number in [0, 2**32) (what NumPy and TensorFlow take)."""
    value = _whole_number(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be between 0 and 2**32 - 1, got {value}")
    return value


def fraction(text):
    """argparse type of a fraction in [0, 1] (`--warmup-ratio`)."""
    value = _float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def held_out_fraction(text):
    """argparse type of a share held out of the data, in [0, 1) (`--validation-split`, as Keras':
    1 would leave nothing to train on)."""
    value = _float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1, got {text}")
    return value


def _float(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


# what `pipelines.command_options.option(type="...")` names: the checked argparse types above
CHECKED_TYPES = {"positive_int": positive_int, "model_version": model_version, "pair_sequence_length": pair_sequence_length,
                 "positive_float": positive_float, "finite_float": finite_float,
                 "non_negative_float": non_negative_float,
                 "seed": seed, "fraction": fraction, "held_out_fraction": held_out_fraction}


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


def add_field_options(parser, options_class, *, only=None):
    """A flag per field of dataclass `options_class` declared with `pipelines.command_options.option`
    (`metadata["flag"]`: `help`; `name`, else `--field-name`; `old_names`, hidden as `add_option`;
    `group`, `metavar`, `choices`, `nargs`, `action`; `type`, else the field's, a name of
    `CHECKED_TYPES` standing for that type). The destination is the field's name; a field without a
    default is required; a bool is a switch that flips its default; an Optional[bool] is
    `--name / --no-name`, or with `action="store_true"` / `"store_false"` a switch to that value
    (its default, None say, when not given), and with `opposite=(flag, help)` a second switch to the
    other value, the two mutually exclusive. `only`: these fields alone."""
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
        elif field.type == Optional[bool] and flag.get("action") in ("store_true", "store_false"):
            options = {"action": flag["action"], "default": field.default}  # a switch; its default when not given
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
        target = groups[group] if group else parser
        opposite = flag.get("opposite")
        if opposite:
            target = target.add_mutually_exclusive_group()
        add_option(target, name, *flag.get("old_names", ()), required=required,
                   dest=field.name, help=flag["help"], **options)
        if opposite:
            other = "store_true" if options["action"] == "store_false" else "store_false"
            target.add_argument(opposite[0], dest=field.name, action=other, default=argparse.SUPPRESS,
                                help=opposite[1])


def _optional_of(annotation):
    """`X` for `Optional[X]`, else `annotation` (argparse converts to the type itself)."""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    return args[0] if typing.get_origin(annotation) is typing.Union and len(args) == 1 else annotation


def field_values(options_class, namespace):
    """{field: value} of dataclass `options_class` from the `argparse.Namespace` attributes named as its fields."""
    return {field.name: getattr(namespace, field.name) for field in dataclasses.fields(options_class)
            if hasattr(namespace, field.name)}
