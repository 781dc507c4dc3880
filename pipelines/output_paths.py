"""What a writer may write over, checked before any work: never one of its own inputs, and an
existing file only with `overwrite`.

Every library call and `bert-keras` subcommand that writes a file the user names (an output
file, fixed names inside an output directory, a model directory) asks here first, so that a
typo such as `--output dev.tsv` for the dev data itself is refused by name instead of replacing
the data with metrics. `flag` names the option in the messages of the command line (None: the
Python argument, `overwrite=True`).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "rows.jsonl")
>>> check_output_file(path, overwrite=False)       # new: fine
>>> _ = open(path, "w").write("{}")
>>> check_output_file(path, overwrite=False, flag="--output")
Traceback (most recent call last):
...
pipelines.output_paths.OutputExistsError: --output ...rows.jsonl: the file exists; pass --overwrite to replace it
>>> check_output_file(path, overwrite=True, inputs=[path], flag="--output")
Traceback (most recent call last):
...
pipelines.output_paths.OutputPathError: --output ...rows.jsonl is one of the inputs (...rows.jsonl): name another file
"""

import os


class OutputPathError(ValueError):
    """An output path that is an input, a directory where a file is named (or the reverse), or
    that cannot be written."""


class OutputExistsError(FileExistsError):
    """An output that exists, without `overwrite`."""


def _overwrite(flag):
    return "--overwrite" if flag else "overwrite=True"


def check_output_file(path, *, overwrite, inputs=(), flag=None):
    """Refuses `path` as an output when it is an input, a directory, or (without `overwrite`) a file.

    Args:
        path: the file to be written (None: nothing to check).
        overwrite: whether an existing file may be replaced.
        inputs: paths the writer reads (files or directories; None and "-" are skipped).
        flag: the option that named `path` (`--output`), for the message; None: a Python call.

    Raises:
        OutputPathError: `path` is a directory, an input, inside an input directory, or not writable.
        OutputExistsError: `path` exists and `overwrite` is False.
    """
    if not path:
        return
    path = os.fspath(path)
    named = f"{flag} {path}" if flag else path
    if os.path.isdir(path):
        raise OutputPathError(f"{named}: is a directory; name a file")
    refuse_inputs([path], inputs, flag=flag)
    if os.path.lexists(path) and not overwrite:
        raise OutputExistsError(f"{named}: the file exists; pass {_overwrite(flag)} to replace it")
    _check_writable(os.path.dirname(os.path.abspath(path)), named)


def check_output_names(directory, names, *, overwrite, inputs=(), flag=None, other=None):
    """Refuses to write the files `names` into `directory` over existing ones (without
    `overwrite`) or over an input; other files in `directory` are not the writer's concern.

    Args:
        directory: where the fixed-name files go.
        names: the file names written there (relative paths).
        overwrite, inputs, flag: as `check_output_file` (`flag`: e.g. `--output-dir`).
        other: what to do instead when a file would replace an input (default: "name another
            directory"; a directory that defaulted to another flag's says which flag to give).

    Raises:
        OutputPathError, OutputExistsError: as `check_output_file`, naming the files.
    """
    directory = os.fspath(directory)
    named = f"{flag} {directory}" if flag else directory
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise OutputPathError(f"{named}: is a file, not a directory")
    paths = [os.path.join(directory, name) for name in names]
    refuse_inputs(paths, inputs, flag=flag, directory=directory, other=other)
    existing = [name for name, path in zip(names, paths) if os.path.lexists(path)]
    if existing and not overwrite:
        shown = ", ".join(existing[:5]) + (" ..." if len(existing) > 5 else "")
        them = "them" if len(existing) > 1 else "it"
        raise OutputExistsError(f"{named}: holds {shown} already; pass {_overwrite(flag)} to replace {them} "
                                "(other files stay)")
    _check_writable(os.path.abspath(directory), named)


def refuse_inputs(outputs, inputs, *, flag=None, directory=None, other=None):
    """Refuses when an output path is one of `inputs`, or lies inside an input directory (a model
    directory's `model.keras`, `vocab.txt`, ...); `overwrite` cannot lift it.

    `directory`: the outputs are the fixed-name files a command writes into this directory (the
    one `flag` names): the error names the directory as given and asks for another directory, or
    for `other`.

    Raises:
        OutputPathError: naming the output and the input.
    """
    for output in outputs:
        target = os.path.realpath(output)
        named = f"{flag} {output}" if flag else str(output)
        if directory is not None:
            named = (f"{flag} {directory}" if flag else str(directory)) \
                + f" (its {os.path.relpath(output, directory)})"
        instead = other or ("name another directory" if directory is not None else "name another file")
        for source in inputs:
            if not source or source == "-" or not os.path.exists(source):
                continue
            source_path = os.path.realpath(source)
            if target == source_path:
                raise OutputPathError(f"{named} is one of the inputs ({source}): {instead}")
            if os.path.isdir(source_path) and target.startswith(source_path.rstrip(os.sep) + os.sep):
                raise OutputPathError(f"{named} is inside an input directory ({source}): write it somewhere else")


def input_inside(directory, inputs):
    """The first of `inputs` (paths; None skipped) that is `directory` or lies inside it, else None:
    a writer that replaces what `directory` holds must not run on it."""
    target = os.path.realpath(directory)
    for path in inputs:
        if path is None or not os.path.exists(path):
            continue
        source = os.path.realpath(path)
        if source == target or source.startswith(target.rstrip(os.sep) + os.sep):
            return path
    return None


def _check_writable(directory, named):
    """Fails early when the output cannot be written (a read-only directory, a file on the way)."""
    existing = directory
    while not os.path.exists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            return
        existing = parent
    if not os.path.isdir(existing):
        raise OutputPathError(f"{named}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"{named}: {existing} is not writable")
