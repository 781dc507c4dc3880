"""What a command may write over, checked before any work: never one of its own inputs, and an
existing file only with `--overwrite`.

Every subcommand that writes a file the user names (`--output`, a fixed name inside
`--output-dir`) asks here first, so that a typo such as `--output dev.tsv` for the dev data
itself is refused by name instead of replacing the data with metrics.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "rows.jsonl")
>>> check_output_file(path, overwrite=False)       # new: fine
>>> _ = open(path, "w").write("{}")
>>> check_output_file(path, overwrite=False)
Traceback (most recent call last):
...
bert_keras.cli.main.CommandError: --output ...rows.jsonl: the file exists; pass --overwrite to replace it
>>> check_output_file(path, overwrite=True, inputs=[path])
Traceback (most recent call last):
...
bert_keras.cli.main.CommandError: --output ...rows.jsonl is the command's input (...rows.jsonl): name another file
"""

import os

from bert_keras.cli.main import CommandError


def check_output_file(path, *, overwrite, inputs=(), flag="--output"):
    """Refuses `path` as an output when it is an input, a directory, or (without `overwrite`) a file.

    Args:
        path: the file the command will write (None: nothing to check).
        overwrite: the command's `--overwrite`.
        inputs: paths the command reads (files or directories; None and "-" are skipped).
        flag: the option that named `path`, for the message.

    Raises:
        CommandError: naming the path and what to do.
    """
    if not path:
        return
    if os.path.isdir(path):
        raise CommandError(f"{flag} {path}: is a directory; name a file")
    refuse_inputs([path], inputs, flag=flag)
    if os.path.lexists(path) and not overwrite:
        raise CommandError(f"{flag} {path}: the file exists; pass --overwrite to replace it")
    _check_writable(os.path.dirname(os.path.abspath(path)), flag, path)


def check_output_names(directory, names, *, overwrite, inputs=(), flag="--output-dir"):
    """Refuses to write the files `names` into `directory` over existing ones (without
    `overwrite`) or over an input; other files in `directory` are not the command's concern.

    Args:
        directory: where the command writes its fixed-name files.
        names: the file names it writes there.
        overwrite, inputs, flag: as `check_output_file`.
    """
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise CommandError(f"{flag} {directory}: is a file, not a directory")
    paths = [os.path.join(directory, name) for name in names]
    refuse_inputs(paths, inputs, flag=flag)
    existing = [name for name, path in zip(names, paths) if os.path.lexists(path)]
    if existing and not overwrite:
        raise CommandError(f"{flag} {directory}: holds {', '.join(existing)} already; pass --overwrite to "
                           "replace them (other files stay)")
    _check_writable(os.path.abspath(directory), flag, directory)


def refuse_inputs(outputs, inputs, *, flag):
    """Refuses when an output path is one of `inputs`, or lies inside an input directory (a
    `--model` directory's `model.keras`, `vocab.txt`, ...); the flag cannot lift it."""
    for output in outputs:
        target = os.path.realpath(output)
        for source in inputs:
            if not source or source == "-" or not os.path.exists(source):
                continue
            source_path = os.path.realpath(source)
            if target == source_path:
                raise CommandError(f"{flag} {output} is the command's input ({source}): name another file")
            if os.path.isdir(source_path) and target.startswith(source_path.rstrip(os.sep) + os.sep):
                raise CommandError(f"{flag} {output} is inside the command's input directory ({source}): "
                                   "write it somewhere else")


def _check_writable(directory, flag, path):
    """Fails early when the output cannot be written (a read-only directory, a file on the way)."""
    existing = directory
    while not os.path.exists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            return
        existing = parent
    if not os.path.isdir(existing):
        raise CommandError(f"{flag} {path}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CommandError(f"{flag} {path}: {existing} is not writable")
