"""TF-Text's compiled tokenizer models, built once per machine and kept on disk.

`FastWordpieceTokenizer` and `FastBertNormalizer` run on a model that TF-Text compiles from
the vocabulary (or, for the normalizer, from Unicode's tables) when a tokenizer is made:
about 0.35 s of a fresh process's start for the four a `BertTokenizer` needs. The model is the
same bytes every time for the same inputs, so the first build is kept in a cache directory
and later processes read it (a few milliseconds).

Models go in `tf_text_models/` of the project's cache directory (`pipelines.user_cache`:
`$BERT_KERAS_CACHE`, else `~/.cache/bert_keras`). A file is named by a SHA-256 of what the model
is built from (the TF-Text version, the builder, its arguments and the whole vocabulary), holds
the model's own SHA-256 before the model, and appears whole or not at all (renamed into place).
A file that fails its checksum is built again and replaced; a directory that cannot be written
is skipped (the model is built in memory, as without a cache). At most `MAX_MODELS` are kept,
the least recently used removed first.

Example:

>>> import tempfile
>>> directory = tempfile.mkdtemp()
>>> model = cached_model("example", ["a", "b"], lambda: b"model bytes", directory=directory)
>>> bytes(model), bytes(cached_model("example", ["a", "b"], lambda: b"never built", directory=directory))
(b'model bytes', b'model bytes')
"""

import hashlib
import importlib.metadata
import json
import os
import re

import numpy as np

_CHECKSUM_BYTES = 32  # a SHA-256 of the model, before it in the file

# Models kept at most (a BERT-base vocabulary's are 1-2 MB each); the least recently used go first.
MAX_MODELS = 48

_MODEL_NAME = re.compile(r"\w+-[0-9a-f]{32}\.bin")  # what `cached_model` names a file
_TEMPORARY_NAME = re.compile(r"\.tmp-\w+\.part")  # what `_write` names a file before renaming it


def cache_directory():
    """Where the models are kept."""
    from pipelines.user_cache import cache_root

    return os.path.join(cache_root(), "tf_text_models")


def cached_model(kind, inputs, build, *, directory=None):
    """The model `build()` returns for these `inputs`, from the cache when it holds it.

    Args:
        kind: str. Which builder (part of the key; letters, digits and "_").
        inputs: JSON-serializable arguments the model is built from (part of the key).
        build: a function returning the model's bytes.
        directory: where the models are kept; default `cache_directory()`.

    Returns:
        The model as a read-only uint8 numpy array.
    """
    directory = cache_directory() if directory is None else directory
    path = os.path.join(directory, f"{kind}-{_key(kind, inputs)}.bin")
    model = _read(path)
    if model is None:
        model = bytes(build())
        if _write(path, model):
            _prune(directory)
    return np.frombuffer(model, np.uint8)


def _key(kind, inputs):
    digest = hashlib.sha256(json.dumps([tf_text_version(), kind, inputs], ensure_ascii=False)
                            .encode("utf-8"))
    return digest.hexdigest()[:32]


def tf_text_version():
    """The installed TF-Text's version, read from its metadata: importing the package to ask
    loads all its op libraries (`tf_text_kernels`)."""
    try:
        return importlib.metadata.version("tensorflow-text")
    except importlib.metadata.PackageNotFoundError:  # a build under another distribution name
        import tensorflow_text

        return tensorflow_text.__version__


def _read(path):
    try:
        with open(path, "rb") as handle:
            content = handle.read()
    except OSError:
        return None
    checksum, model = content[:_CHECKSUM_BYTES], content[_CHECKSUM_BYTES:]
    if len(checksum) != _CHECKSUM_BYTES or hashlib.sha256(model).digest() != checksum:
        return None  # damaged: built again and replaced
    try:
        os.utime(path)  # recently used: the last to be pruned
    except OSError:
        pass
    return model


def _write(path, model):
    """Whether the model was kept (a read-only or full disk: it is still used, just not kept).

    Written to a temporary name beside `path`, then renamed: a reader sees the whole file or
    none. Not fsynced (that took ~0.5 s a file here): after a crash a torn file fails its
    checksum and is built again.
    """
    import tempfile

    temporary = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".part")
        with os.fdopen(handle, "wb") as file:
            file.write(hashlib.sha256(model).digest())
            file.write(model)
        os.replace(temporary, path)
    except OSError:
        if temporary is not None and os.path.exists(temporary):
            os.remove(temporary)
        return False
    return True


def _prune(directory):
    """Removes the least recently used models beyond `MAX_MODELS`, and temporary files an
    interrupted write left over an hour ago (only names this module writes)."""
    import time

    try:
        entries = [entry for entry in os.scandir(directory) if entry.is_file()]
        models = sorted((entry for entry in entries if _MODEL_NAME.fullmatch(entry.name)),
                        key=lambda entry: entry.stat().st_mtime, reverse=True)
        stale = [entry for entry in entries if _TEMPORARY_NAME.fullmatch(entry.name)
                 and entry.stat().st_mtime < time.time() - 3600]
        for entry in models[MAX_MODELS:] + stale:
            os.remove(entry.path)
    except OSError:
        pass  # another process pruned first, or the directory went away
