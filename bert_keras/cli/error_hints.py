"""What to type instead: a `hint:` line under a `bert-keras` error.

The library's errors name the problem in library terms (a file, a column, a spec, a
distribution); the command line adds the flag or the command that fixes it. Each rule
reads the message of the error (and, for flags, the parsed arguments):

- a column missing from a CSV/TSV/JSONL file -> `--label-column` / `--text-column` /
  `--text-b-column`, with the columns the file has;
- a task given as a bare GLUE name (`sst2`) or misspelled -> `--task glue/sst2` (close match);
- `pip:DISTRIBUTION` not installed -> the installed distribution closest to it;
- a model without its vocabulary -> `--vocab FILE`, or `bert-keras vocab` to make one;
- pretraining records of other shapes -> `--seq-length` / `--max-predictions`.

Example:

>>> import argparse
>>> hint_for(ValueError("unknown task 'sst2'; valid forms: glue/NAME, csv:PATH"), argparse.Namespace())
'did you mean --task glue/sst2?'
"""

import difflib
import re

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
    message = str(error)
    for rule in (_column_hint, _task_hint, _pip_hint, _vocabulary_hint, _records_hint):
        hint = rule(message, args)
        if hint:
            return hint
    return None


def _column_hint(message, args):
    match = re.search(r"no (?:column|field) '([^']*)'; (?:columns|fields) found: \[([^\]]*)\]", message)
    if not match:
        return None
    missing = match.group(1)
    found = re.findall(r"'([^']*)'", match.group(2))
    for flag, dest, defaults in COLUMN_FLAGS:
        if missing == getattr(args, dest, None) or (getattr(args, dest, None) is None and missing in defaults):
            # a column another option already takes (the text) is not the one to suggest
            taken = {c for f, d, names in COLUMN_FLAGS if f != flag for c in (getattr(args, d, None),) + names}
            guess = difflib.get_close_matches(missing, [c for c in found if c not in taken], n=1, cutoff=0.0)
            example = f" (e.g. {flag} {guess[0]})" if guess else ""
            return f"name the column with {flag} COLUMN; the file has {', '.join(found) or 'no columns'}{example}"
    return None


def _task_hint(message, args):
    from bert_keras.tasks.named_datasets import GLUE_NAMES, TASK_FORMS

    match = re.search(r"unknown task '([^']*)'", message, re.IGNORECASE)
    if match:
        name = match.group(1).strip().lower()
        if name in GLUE_NAMES:
            return f"did you mean --task glue/{name}?"
        if name.startswith(("csv", "tsv", "jsonl")) or name.endswith((".csv", ".tsv", ".jsonl")):
            return f"a file of your own is --task csv:PATH (e.g. --task csv:{name.split(':')[-1]})"
        others = [form for form in TASK_FORMS if not form.startswith(("glue/", "csv:"))]
        candidates = [f"glue/{n}" for n in GLUE_NAMES] + others
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
        bare = difflib.get_close_matches(name, GLUE_NAMES, n=1, cutoff=0.6)
        if close or bare:
            return f"did you mean --task {close[0] if close else 'glue/' + bare[0]}?"
        return None
    match = re.search(r"unknown GLUE task '([^']*)'", message, re.IGNORECASE)
    if match:
        close = difflib.get_close_matches(match.group(1).lower(), GLUE_NAMES, n=1, cutoff=0.5)
        return f"did you mean --task glue/{close[0]}?" if close else None
    return None


def _pip_hint(message, args):
    match = re.search(r"distribution '([^']*)' is not installed", message)
    if not match:
        return None
    wanted = _normalized(match.group(1))
    close = difflib.get_close_matches(wanted, installed_distributions(), n=1, cutoff=0.6)
    if close:
        return f"did you mean pip:{close[0]}? (an installed distribution)"
    return None


def _vocabulary_hint(message, args):
    if not re.search(r"has no vocab\.txt|no vocab\.txt beside", message):
        return None
    return ("pass the model's own vocabulary with --vocab FILE, or make one from text with "
            "`bert-keras vocab CORPUS.txt -o vocab.txt` (only for a model you train from scratch)")


def _records_hint(message, args):
    if "The records were written with" not in message:
        return None
    return "pass --seq-length and --max-predictions that match the records"


def installed_distributions():
    """Names of the installed Python distributions, normalised (lowercase, `-` separators).

    Example:

    >>> "numpy" in installed_distributions()
    True
    """
    from importlib import metadata

    return sorted({_normalized(d.metadata["Name"]) for d in metadata.distributions() if d.metadata["Name"]})


def _normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()
