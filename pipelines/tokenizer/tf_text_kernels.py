"""TF-Text's kernels the tokenizer runs, without the rest of TF-Text.

`import tensorflow_text` loads all 22 of its op libraries (about 170 MB of shared objects:
~0.2 s of every process's first tokenizer, a fifth of `from_pretrained`). The tokenizer runs
two kernels: FastWordpiece (`FastWordpieceTokenizeWithOffsets`) and FastBertNormalizer
(`FastBertNormalize`), and a Korean tokenizer's NFC step a third library's two
(`NormalizeUTF8WithOffsetsMap`, `FindSourceOffsets`). This module loads just those libraries,
the very files under the very path `tensorflow_text` loads them from: TensorFlow keeps a
loaded library by its path, so a later `import tensorflow_text` (the user's, or the serving
code's) finds them loaded and gets the same ops, and the graphs hold the same op types either
way (TF Serving runs them as before). `FastWordpieceKernel` and `FastBertNormalizerKernel` call
the ops exactly as TF-Text's `FastWordpieceTokenizer` and `FastBertNormalizer` do. When
`tensorflow_text` is already imported, or its files are not where this expects, TF-Text's own
op modules are used.

Example:

>>> import tensorflow as tf
>>> from pipelines.tokenizer import tf_text_kernels
>>> ops = tf_text_kernels.fast_wordpiece_ops()
>>> hasattr(ops, "fast_wordpiece_tokenize_with_offsets")
True
"""

import functools
import importlib.util
import os
import sys

import tensorflow as tf

# Each kernel's library, the `tensorflow_text` module that loads it and its name for the op
# wrappers there (the fallback), and the wrappers called here.
_LIBRARIES = {
    "fast_wordpiece": ("_fast_wordpiece_tokenizer.so", "tensorflow_text.python.ops.fast_wordpiece_tokenizer",
                       "gen_fast_wordpiece_tokenizer", ("fast_wordpiece_tokenize_with_offsets",)),
    "fast_bert_normalizer": ("_fast_bert_normalizer.so", "tensorflow_text.python.ops.fast_bert_normalizer",
                             "gen_fast_bert_normalizer", ("fast_bert_normalize",)),
    "normalize": ("_normalize_ops.so", "tensorflow_text.python.ops.normalize_ops", "gen_normalize_ops",
                  ("normalize_utf8_with_offsets_map", "find_source_offsets")),
}


@functools.lru_cache(maxsize=None)
def _op_module(kind):
    """The Python op wrappers of `kind`'s library (loaded once a process)."""
    library, module_name, attribute, wrappers = _LIBRARIES[kind]
    path = None if "tensorflow_text" in sys.modules else _library_path(library)
    if path is not None:
        ops = tf.load_op_library(path)
        if all(hasattr(ops, name) for name in wrappers):
            return ops
    # TF-Text loaded already, or laid out otherwise: its own module.
    return getattr(importlib.import_module(module_name), attribute)


def _library_path(library):
    """`library`'s path exactly as `tensorflow_text` names it when it loads it (the package's
    `__path__` entry + `python/ops/`, as `resource_loader.get_path_to_datafile` joins it), or
    None when the file is not there."""
    spec = importlib.util.find_spec("tensorflow_text")  # finds the package without running it
    locations = None if spec is None else spec.submodule_search_locations
    if not locations:
        return None
    path = os.path.join(locations[0], "python", "ops", library)
    return path if os.path.isfile(path) else None


def fast_wordpiece_ops():
    """The op wrappers of TF-Text's FastWordpiece library (`fast_wordpiece_tokenize_with_offsets`)."""
    return _op_module("fast_wordpiece")


def fast_bert_normalizer_ops():
    """The op wrappers of TF-Text's FastBertNormalizer library (`fast_bert_normalize`)."""
    return _op_module("fast_bert_normalizer")


def normalize_ops():
    """The op wrappers of TF-Text's Unicode normalization library (`normalize_utf8_with_offsets_map`,
    `find_source_offsets`): a Korean tokenizer's NFC step (`composition.NfcStep`)."""
    return _op_module("normalize")


def normalize_utf8_with_offsets_map(strings, form):
    """`(normalized, offsets_map)` of a 1-D batch of strings, as `tf_text.normalize_utf8_with_offsets_map`."""
    return normalize_ops().normalize_utf8_with_offsets_map(strings, form)


def find_source_offsets(offsets_map, offsets):
    """Each of `offsets` (int64 `[n]`, one a string) mapped back into its string before
    normalization, `offsets_map` the `[n]` maps of those strings: what
    `tf_text.find_source_offsets(offsets_map, offsets[:, None])[:, 0]` gives."""
    one_per_row = tf.range(tf.size(offsets, out_type=tf.int64) + 1)
    return normalize_ops().find_source_offsets(
        offsets_map=offsets_map, input_offsets_values=offsets, input_offsets_splits=one_per_row)


def _per_flat_values(function, strings):
    """`function` (1-D strings -> one or more RaggedTensors / Tensors over them) applied to
    `strings` of any rank, as TF-Text's wrappers do: a scalar is a batch of one (its row
    returned), a tensor of rank > 1 is read as ragged rows of its flat values."""
    strings = tf.convert_to_tensor(strings) if not isinstance(strings, tf.RaggedTensor) else strings
    rank = strings.shape.rank
    if rank is None:
        raise ValueError("TF-Text kernels: the input must have a known rank")
    if rank == 0:
        return tuple(part.values if isinstance(part, tf.RaggedTensor) else part[0]
                     for part in function(tf.stack([strings])))
    if rank > 1:
        if not isinstance(strings, tf.RaggedTensor):
            strings = tf.RaggedTensor.from_tensor(strings, ragged_rank=rank - 1)
        parts = function(strings.flat_values)
        return tuple(strings.with_flat_values(
            part.with_row_splits_dtype(strings.row_splits.dtype) if isinstance(part, tf.RaggedTensor) else part)
            for part in parts)
    return function(strings)


class _CompiledModelKernel(tf.Module):
    """A TF-Text kernel that runs on a model TF-Text's builder compiled.

    Args:
        model_buffer: the compiled model, a uint8 tensor (`wordpiece.fast_wordpiece` and
            `wordpiece.normalizer_model` build and cache them).
    """

    def __init__(self, model_buffer, name=None):
        super().__init__(name=name)
        self._model = model_buffer


class FastWordpieceKernel(_CompiledModelKernel):
    """TF-Text's `FastWordpieceTokenizer` with int64 ids (`_CompiledModelKernel` for the arguments)."""

    def tokenize_with_offsets(self, strings):
        """`(ids, begin, end)`: RaggedTensors of each string's pieces and their byte offsets."""
        return _per_flat_values(self._tokenize_1d, strings)

    def tokenize(self, strings):
        """Ids, a RaggedTensor `[..., (pieces)]`."""
        return self.tokenize_with_offsets(strings)[0]

    def _tokenize_1d(self, strings):
        with tf.name_scope("FastWordpieceTokenizeWithOffsets"):
            _, ids, row_splits, begin, end = fast_wordpiece_ops().fast_wordpiece_tokenize_with_offsets(
                input_values=strings, wp_model=self._model)
            return tuple(tf.RaggedTensor.from_row_splits(values, row_splits, validate=False)
                         for values in (tf.cast(ids, tf.int64), begin, end))


class FastBertNormalizerKernel(_CompiledModelKernel):
    """TF-Text's `FastBertNormalizer`, `normalize` only (`_CompiledModelKernel` for the arguments)."""

    def normalize(self, strings):
        """The normalized strings, the shape of `strings`."""
        return _per_flat_values(self._normalize_1d, strings)[0]

    def _normalize_1d(self, strings):
        with tf.name_scope("FastBertNormalize"):
            normalized, _, _ = fast_bert_normalizer_ops().fast_bert_normalize(
                input_values=strings, fast_bert_normalizer_model=self._model, get_offsets=False)
            return (normalized,)
