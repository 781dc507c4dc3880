"""What to type instead: a `hint:` line under a `bert-keras` error.

The library's errors name the problem in library terms (a file, a column, a spec, a
distribution) and, where it knows one, the value probably meant (`error.suggestion`:
`bert_keras.tasks.named_datasets.suggest_task`, the installed distribution closest to a
`pip:` spec); `hint_for` adds the flag or the command that fixes it (`bert_keras.cli.main`
prints it; plain Python, no TensorFlow: an early error stays fast):

- a column missing from a CSV/TSV/JSONL file -> `--label-column` / `--text-column` /
  `--text-b-column`, with the columns the file has;
- a task given as a bare GLUE name (`sst2`) or misspelled -> `--task glue/sst2` (close match);
- `pip:DISTRIBUTION` not installed -> the installed distribution closest to it;
- a model without its vocabulary -> `--vocab FILE`, or `bert-keras vocab` to make one;
- pretraining records of other shapes -> `--seq-length` / `--max-predictions`;
- a checkpoint with tensors the encoder does not use (a task head), in a command without
  `--no-strict` -> `bert-keras convert --no-strict` first.

`file_system_error` turns a TensorFlow op error caused by the disk or a path (no space left,
permission denied) into an `OSError`, printed as one line with what to do.

Example:

>>> import argparse
>>> from bert_keras.tasks.named_datasets import DatasetSpecError
>>> hint_for(DatasetSpecError("unknown task 'sst2'", suggestion="glue/sst2"), argparse.Namespace())
'did you mean --task glue/sst2?'
"""

import difflib
import re
import shlex
import sys

# column option of the CSV task -> the argparse destination that holds its value, and its default
COLUMN_FLAGS = (
    ("--label-column", "label_column", ("label",)),
    ("--text-column", "text_column", ("text", "sentence", "sentence1")),
    ("--text-b-column", "text_b_column", ("text_b", "sentence2")),
)


def hint_for(error, args):
    """The `hint:` text for a user-facing error, or None when there is nothing to add.

    Args:
        error: the exception `bert-keras` is about to print.
        args: the parsed `argparse.Namespace` of the command.
    """
    # a CommandError raised while handling a library error keeps it as its context
    suggestion = getattr(error, "suggestion", None) or getattr(error.__context__, "suggestion", None)
    hint = _suggestion_hint(suggestion)
    for rule in (_column_hint, _vocabulary_hint, _records_hint, _strict_hint):
        hint = hint or rule(str(error), args)
    return hint


def in_flag_terms(message, args, argv, parser=None):
    """`message` with each setting the user typed as a flag named as that flag: the library's errors
    name its settings (`seq_length 4000 exceeds the model's 384 positions`, `pooling_layer=9: ...`),
    and the user who typed `--seq-length 4000` looks for that, not for a Python name.

    A setting is renamed only where it stands with the value the user typed (`name=VALUE`, or
    `name VALUE` for a number: anywhere for a name with an underscore, at the start for a word) and the flag (`--` and the name, dashes for underscores) is in `argv`, so a
    default the message mentions (`seq_length 128`) or a name that is not a flag is left alone.
    `parser` (the command's): a flag typed as argparse also takes it, abbreviated (`--seq 4000`) or
    in a former spelling (`--max-seq-length`), counts, and the name shown is the flag `--help` shows
    (`typed_flags`); without it, only `--` and the setting's name, dashes for underscores, counts.

    >>> import argparse
    >>> args = argparse.Namespace(seq_length=4000, pooling_layer=9, stride=None)
    >>> in_flag_terms("seq_length 4000 exceeds the model's 384 positions", args, ["--seq-length", "4000"])
    "--seq-length 4000 exceeds the model's 384 positions"
    >>> in_flag_terms("pooling_layer=9: the encoder has 2 layers", args, ["--pooling-layer=9"])
    '--pooling-layer 9: the encoder has 2 layers'
    >>> in_flag_terms("seq_length 48 (--seq-length) is longer than 40", args, ["--seq-length", "48"])
    'seq_length 48 (--seq-length) is longer than 40'
    >>> in_flag_terms("seq_length 4000 exceeds the model's 384 positions", args, [])  # not typed: as it was
    "seq_length 4000 exceeds the model's 384 positions"
    >>> in_flag_terms("the model out/x reads pairs", argparse.Namespace(model="out/x"), ["--model", "out/x"])
    'the model out/x reads pairs'
    >>> in_flag_terms("it holds the backups of epochs 2 and 1", argparse.Namespace(epochs=2), ["--epochs", "2"])
    'it holds the backups of epochs 2 and 1'

    A message about a path the user typed as a flag's value, which starts with that path (`out/x: no
    such directory`), is led by the flag, as the commands' own messages are (`--model out/x: ...`).

    >>> in_flag_terms("out/x: no such directory", argparse.Namespace(model="out/x"), ["--model", "out/x"])
    '--model out/x: no such directory'

    A switch the message asks for (`pass overwrite=True to replace it`: a library error says what a
    Python call passes) is named as the command's flag of that switch (`pass --overwrite ...`), with
    `parser`, whether typed or not; a flag already beside it (`overwrite=True (--overwrite)`) is not
    said twice. So is a setting named without its value (`choose another output_dir`).

    >>> parser = argparse.ArgumentParser()
    >>> _ = parser.add_argument("--overwrite", action="store_true")
    >>> in_flag_terms("out: holds a model; pass overwrite=True to replace it", argparse.Namespace(), [], parser)
    'out: holds a model; pass --overwrite to replace it'
    >>> in_flag_terms("pass overwrite=True (--overwrite) or move it", argparse.Namespace(), [], parser)
    'pass --overwrite or move it'
    >>> _ = parser.add_argument("--output-dir")
    >>> in_flag_terms("out holds other work: choose another output_dir or pass overwrite=True", argparse.Namespace(),
    ...               [], parser)
    'out holds other work: choose another --output-dir or pass --overwrite'
    >>> _ = parser.add_argument("--max-batch-size")
    >>> in_flag_terms("b.txt: allowed_batch_sizes must match max_batch_size", argparse.Namespace(), [], parser)
    'b.txt: allowed_batch_sizes must match max_batch_size'
    """
    if parser is not None:
        message = _switches_as_flags(message, parser)
    typed = typed_flags(parser, argv) if parser is not None else None
    leading = []  # the flags whose value (a path) the message starts with: "out/x: no such directory"
    for name, value in sorted(vars(args).items()):
        if value is None or isinstance(value, (bool, list, tuple, dict)):
            continue
        if typed is not None:
            flag = typed.get(name)
            if flag is None:
                continue
        else:
            flag = "--" + name.replace("_", "-")
            if not any(arg == flag or arg.startswith(flag + "=") for arg in argv):
                continue
        if re.search(rf"{re.escape(flag)}(?![\w-])", message):
            continue  # the message names the flag already ("seq_length 48 (--seq-length) is ...")
        if isinstance(value, str) and value and message.startswith(value + ":"):
            leading.append(flag)  # not when it names the flag itself: "--model out/x: ... give --model ...".
        shown = re.escape(str(value))
        named = lambda match: f"{flag} {match.group(1)}"  # noqa: E731 (a function: no escapes read in the value)
        message = re.sub(rf"(?<![\w-]){name}=({shown})(?!\w|\.\d)", named, message)
        if isinstance(value, (int, float)):
            # `name VALUE`: only for a number (`model`, `data` are words a path follows: "the model
            # out/x is ..."), and a plain word only where the message starts with it ("stride 500
            # exceeds ..."; elsewhere "the backups of epochs 2 and 1" counts epochs, not the setting).
            where = r"(?<![\w-])" if "_" in name else "^"
            message = re.sub(rf"{where}{name} ({shown})(?!\w|\.\d)", named, message)
    if len(leading) == 1:  # one flag gave that path (two: which one is not known)
        message = f"{leading[0]} {message}"
    return message


# What comes before a setting a message asks the caller to choose again (`choose another output_dir`).
_CHOOSE_ANOTHER = r"(?:(?<=another )|(?<=an empty )|(?<=a different )|(?<=a new ))"


def _switches_as_flags(message, parser):
    """`name=True` (with its ` (--flag)` where one follows) as `parser`'s switch of that name (`--name`),
    and a setting the message asks to choose again (`choose another output_dir`, `an empty
    output_dir`: a name with an underscore) as `parser`'s option of that name."""
    import argparse

    for action in parser._actions:
        flags = [flag for flag in action.option_strings if flag.startswith("--")]
        if not flags or action.help is argparse.SUPPRESS:
            continue
        name = re.escape(action.dest)
        if isinstance(action, argparse._StoreTrueAction):
            message = re.sub(rf"(?<![\w-]){name}=True(?: \({re.escape(flags[0])}\))?(?!\w)",
                             lambda _: flags[0], message)
        elif "_" in action.dest:  # only a setting to choose again: a file's own field (TF Serving's
            # "must match max_batch_size" of a batching file) keeps its name
            message = re.sub(rf"{_CHOOSE_ANOTHER}{name}(?: \({re.escape(flags[0])}\))?(?= \(| or | and |[.;,)]|$)",
                             lambda _: flags[0], message)
    return message


def typed_flags(parser, argv):
    """`{destination: flag}` of the options `argv` gives `parser` (a command's parser), spelled as
    argparse takes them: the flag, a former spelling kept as a hidden alias (`--max-seq-length`), or
    an abbreviation (`--seq 64`). The flag is the one `--help` shows, whichever spelling was typed.

    >>> import argparse
    >>> from pipelines.command_options import add_option
    >>> parser = argparse.ArgumentParser()
    >>> add_option(parser, "--seq-length", "--max-seq-length", type=int)
    >>> add_option(parser, "--model-name", "--model", dest="model")
    >>> typed_flags(parser, ["--seq", "64", "--model=x"])
    {'seq_length': '--seq-length', 'model': '--model-name'}
    >>> typed_flags(parser, ["--max-seq-length", "64", "--", "--model-name"])
    {'seq_length': '--seq-length'}
    """
    import argparse

    shown = {}
    for action in parser._actions:
        flags = [flag for flag in action.option_strings if flag.startswith("--")]
        if flags and action.help is not argparse.SUPPRESS:
            shown.setdefault(action.dest, flags[0])
    by_flag = parser._option_string_actions
    typed = {}
    for arg in argv:
        if arg == "--":
            break
        if not arg.startswith("--"):
            continue
        name = arg.split("=", 1)[0]
        action = by_flag.get(name)
        if action is None and parser.allow_abbrev:  # argparse takes a prefix of one flag only
            matches = {id(a): a for flag, a in by_flag.items() if flag.startswith(name)}
            action = next(iter(matches.values())) if len(matches) == 1 else None
        if action is not None and action.dest in shown:
            typed[action.dest] = shown[action.dest]
    return typed


def _column_hint(message, args):
    row = re.search(r"no field '([^']*)'; fields found:", message)
    if row:  # one JSONL line lacks a field others have: naming the column another way would not help
        return (f"every line of the file needs the field {row.group(1)!r} (a second text once any line has one): "
                "add it to that line, or remove the line")
    match = re.search(r"no column '([^']*)'; columns found: \[([^\]]*)\]", message)
    if not match:
        return None
    missing = match.group(1)
    found = re.findall(r"'([^']*)'", match.group(2))
    for flag, dest, defaults in COLUMN_FLAGS:
        if not hasattr(args, dest):
            continue  # a command without the flag: naming it would not work
        if missing == getattr(args, dest, None) or (getattr(args, dest, None) is None and missing in defaults):
            # a column another option already takes (the text) is not the one to suggest
            taken = {c for f, d, names in COLUMN_FLAGS if f != flag for c in (getattr(args, d, None),) + names}
            free = [c for c in found if c not in taken]
            # the one column left, or one whose name is close (a far guess would name the wrong one)
            guess = free if len(free) == 1 else difflib.get_close_matches(missing, free, n=1, cutoff=0.5)
            if len(found) == 1 and re.search(r"[,;\t|]", found[0]):  # one column of joined names
                return (f"the file's header is one column, {found[0]!r}: its columns are not separated as "
                        "its extension says (.csv: commas, .tsv: tabs); rename the file or fix the separator")
            if _reads_as_data(found):  # CoLA's TSV and many exports have no header line
                return (f"the file's first line ({', '.join(found)}) reads as a row of data, not as column "
                        "names: a CSV / TSV task file starts with a header line naming its columns (e.g. text "
                        "and label, separated as the rows are); add one")
            example = f" (e.g. {flag} {shlex.quote(guess[0])})" if guess else ""
            return f"name the column with {flag} COLUMN; the file has {', '.join(found) or 'no columns'}{example}"
    return None


def _reads_as_data(cells):
    """Whether a header's cells look like a row of data: a number (a label, a score), a sentence
    (three words or more, or a final . ! ?). Column names are short words (`review text`, `label`)."""
    def data(cell):
        try:
            float(cell)
            return True
        except ValueError:
            return len(cell.split()) >= 3 or cell.rstrip().endswith((".", "!", "?"))

    return any(data(cell) for cell in cells)


def _suggestion_hint(suggestion):
    if not suggestion:
        return None
    if suggestion.startswith("pip:"):
        return f"did you mean {suggestion}? (an installed distribution)"
    if suggestion.startswith("csv:"):
        return f"a file of your own is --task csv:PATH (e.g. --task {suggestion})"
    return f"did you mean --task {suggestion}?"


def _vocabulary_hint(message, args):
    if message.startswith("Vocabulary file not found:"):  # the library's advice is Python calls
        return ("check the --vocab path, or make a vocabulary from text with "
                "`bert-keras vocab CORPUS.txt -o vocab.txt` (only for a model you train from scratch)")
    if not re.search(r"has no vocab\.txt|no vocab\.txt beside", message):
        return None
    return ("pass the model's own vocabulary with --vocab FILE, or make one from text with "
            "`bert-keras vocab CORPUS.txt -o vocab.txt` (only for a model you train from scratch)")


def _strict_hint(message, args):
    # The checkpoint errors name `--no-strict`, which only `convert` has: another command that
    # reads `--init` gets the conversion that drops the tensors, then the flag that reads it.
    if "--no-strict" not in message or hasattr(args, "strict"):
        return None
    source = getattr(args, "init", None) or "SPEC"
    return (f"--no-strict is `bert-keras convert`'s: `bert-keras convert --no-strict {shlex.quote(source)} "
            "hf:converted` keeps what the encoder uses, then pass --init hf:converted")


def _records_hint(message, args):
    if "The records were written with" not in message:
        return None
    return "pass --seq-length and --max-predictions that match the records"


# What TensorFlow's file writes (SavedModel, checkpoints, TFRecords) fail with when the disk
# or the directory is the problem: the user fixes it, so it gets a line, not a traceback.
_FILE_SYSTEM_PROBLEMS = re.compile(r"No space left on device|Disk quota exceeded|File too large|"
                                   r"Read-only file system|Permission denied|is not a directory|"
                                   r"Not a directory")


def file_system_error(error):
    """An `OSError` for a TensorFlow op error caused by the file system or a damaged file, else None."""
    tf = sys.modules.get("tensorflow")
    errors = getattr(tf, "errors", None)
    if errors is None or not isinstance(error, errors.OpError):
        return None
    message = str(getattr(error, "message", error)).strip()
    first = message.splitlines()[0] if message else type(error).__name__
    if isinstance(error, errors.DataLossError):
        # A truncated or foreign record file ("corrupted record at 0"), a damaged checkpoint: a
        # file to write again, not a bug in the program.
        return OSError(f"{first}: a file it reads is damaged or of another kind (a TFRecord file cut short "
                       "or not written by create-pretraining-data, a damaged checkpoint); write it again, "
                       "or leave it out of --data, and run the same command again")
    if not _FILE_SYSTEM_PROBLEMS.search(message):
        return None
    room = re.search(r"No space left on device|Disk quota exceeded|File too large", message)
    advice = "free some space" if room else "fix the path or its permissions"
    return OSError(f"{first}; {advice} and run the same command again")


def expanded_pattern_hint(argv, extras):
    """The hint for arguments argparse did not take that are files: an unquoted pattern the shell
    expanded (`--data out/*.tfrecord` is `--data out/a.tfrecord out/b.tfrecord`); argparse said only
    "unrecognized arguments". None when they are not files.

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> files = [os.path.join(folder, name) for name in ("a.tfrecord", "b.tfrecord")]
    >>> for name in files: open(name, "w").close()
    >>> expanded_pattern_hint(["pretrain", "--data", *files], files[1:]).replace(folder, "DIR")
    "--data takes one pattern, and the shell expanded it into files: quote it, --data 'DIR/*.tfrecord'"
    """
    import os

    if not extras or not all(os.path.isfile(extra) for extra in extras):
        return None
    at = next((i for i, arg in enumerate(argv) if arg == extras[0]), None)
    while at and os.path.isfile(argv[at - 1]):
        at -= 1  # back over the pattern's first file, the flag's value
    flag = argv[at - 1] if at and argv[at - 1].startswith("-") else None
    if flag is None:
        return "the shell expanded an unquoted pattern into files: quote it, e.g. 'out/*.tfrecord'"
    files = argv[at:at + 1 + len(extras)] if at is not None else extras
    folder = os.path.dirname(os.path.commonprefix(files))
    extensions = {os.path.splitext(name)[1] for name in files}
    pattern = os.path.join(folder, "*" + (extensions.pop() if len(extensions) == 1 else ""))
    return f"{flag} takes one pattern, and the shell expanded it into files: quote it, {flag} {shlex.quote(pattern)}"
