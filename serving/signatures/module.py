"""`ServingModule`: the `tf.Module` a SavedModel is saved from.

keras-hub cannot put a tokenizer inside `model.export` (untracked resources,
keras-hub#2015, #1629); a plain `tf.Module` that holds the Keras model, the
tokenizer and the lookup tables as attributes tracks all of them, so
`tf.saved_model.save` writes every variable, table and asset it needs:

* `model`: the Keras task model (its variables land in `variables/`);
* `text`: `TextInputs` (tokenizer tables and constants, packer);
* `vocab`: `assets/vocab.txt`, the WordPiece vocabulary, for clients that
  tokenize themselves (the `token_ids` signature);
* `labels`: `assets/labels.txt` (classification, NER) and a table built from
  that very file, which maps class ids to names in the graph; a table with
  fewer entries than the model's labels (a `labels.txt` copied in part) fails
  every lookup with its line count, never answers a label `""`;
* `window_settings`: a function of no input returning int64 `[window, stride,
  max_length]` when single texts are read in windows (`[0, 0, 0]` otherwise),
  which the embedded server reads to bound a request's windows
  (`serving.server.window_cost`): a property of the graph, not of a file beside it.

Example:

    >>> import tempfile
    >>> import tensorflow as tf
    >>> from bert_keras.finetuned_model import read_finetuned
    >>> sentiment = read_finetuned("out/sentiment")
    >>> module = ServingModule(sentiment, tokenizer_backend="core", asset_dir=tempfile.mkdtemp())
    >>> module.label_names(tf.constant([0, 1], tf.int64)).numpy().tolist()
    [b'neg', b'pos']
"""

import os
import shutil

import tensorflow as tf

from serving.signatures.text_inputs import TextInputs, input_check, window_reading

PREDICT = "tensorflow/serving/predict"
CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"

# Positions (rows x sequence length) the model runs on at once, whatever a request's size:
# 256 windows of 128, 64 of 512 (BERT-base's attention scores for 64 x 512: 0.8 GB).
MODEL_CALL_TOKENS = 32768


class ServingModule(tf.Module):
    """Tracks the model, tokenizer, tables and assets of one export (see module docstring).

    Args:
        finetuned: the `bert_keras.finetuned_model.FinetunedModel` to export.
        tokenizer_backend: `"tf_text"` or `"core"` (no TF-Text ops in the graph).
        asset_dir: an empty scratch directory; `vocab.txt` / `labels.txt` are
            written there under the names they get in `assets/`.
    """

    def __init__(self, finetuned, *, tokenizer_backend, asset_dir):
        super().__init__(name="bert_keras_serving")
        self.model = finetuned.model
        tokenizer = finetuned.tokenizer(tokenizer_backend)
        finetuned.config.check_vocabulary_size(tokenizer.vocabulary_size, finetuned.vocab_file)
        self.text = TextInputs(tokenizer, finetuned.seq_length)
        self.vocab_size = int(finetuned.config.vocab_size)
        self.type_vocab_size = int(finetuned.config.type_vocab_size)
        self.max_positions = int(finetuned.config.max_position_embeddings)
        reading = window_reading(finetuned)
        settings = [finetuned.seq_length - 2, *reading] if reading else [0, 0, 0]
        self.window_settings = tf.function(lambda: tf.constant(settings, tf.int64), input_signature=[])
        vocab_copy = os.path.join(asset_dir, "vocab.txt")
        shutil.copyfile(finetuned.vocab_file, vocab_copy)  # named vocab.txt in assets/, whatever its name
        self.vocab = tf.saved_model.Asset(vocab_copy)
        self.num_labels = len(finetuned.labels or [])
        if finetuned.labels:
            path = _write_lines(os.path.join(asset_dir, "labels.txt"), finetuned.labels)
            self.labels = tf.saved_model.Asset(path)
            # Built from the asset itself, so labels.txt is the one source of truth.
            self.label_table = tf.lookup.StaticHashTable(
                tf.lookup.TextFileInitializer(
                    self.labels, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER,
                    tf.string, tf.lookup.TextFileIndex.WHOLE_LINE),
                default_value="")

    def keep_only_variables_of(self, functions):
        """Saves only the variables `functions` (traced concrete functions) read, as a flat list.

        The Keras model is untracked and the variables the graphs capture are
        tracked directly. TF Serving's C++ loader restores a SavedModel in a
        TF1 session through its `saver_def`, which cannot find the variables of
        a Keras 3 model tracked through the model (tensorflow/serving#2250,
        tensorflow/tensorflow#72963); tracked directly, it can. An int8 export
        then also holds no unused float weights. Call after tracing, before saving.
        """
        captured, seen = [], set()
        for function in functions:
            for variable in function.variables:
                if id(variable) not in seen:
                    seen.add(id(variable))
                    captured.append(variable)
        model = self.model
        del self.model  # untracked: its unused float kernels are not saved
        object.__setattr__(self, "model", model)  # still callable, not tracked
        self.model_variables = captured

    def run_model(self, inputs):
        """The Keras model in inference mode on packed int32 inputs, `MODEL_CALL_TOKENS` at a time.

        Every signature calls the same traced function (one per input
        structure, every dimension unknown), so the SavedModel holds the
        model's graph once, not once per signature: an int8 export keeps its
        weights as graph constants (oneDNN packs them once), and four copies
        of them would make `saved_model.pb` four times the weights.

        The rows run in chunks of at most `MODEL_CALL_TOKENS` positions (a `tf.while_loop`
        over the traced model; one pass for an ordinary batch), so what a request holds in
        memory is bounded by the chunk, not by the request: 128 long documents read as 17,000
        windows used to allocate their activations at once (5 GB for one matmul) and brought
        the server down; chunked, they cost time, not memory. Rows are independent, so the
        outputs are those of one call.
        """
        inputs = checked_token_ids(self, inputs)
        key = tuple(sorted((name, tensor.shape.rank, tensor.dtype.name) for name, tensor in inputs.items()))
        forwards = self.__dict__.setdefault("_model_functions", {})  # untracked: not saved as an attribute
        if key not in forwards:
            spec = {name: tf.TensorSpec([None] * tensor.shape.rank, tensor.dtype, name=name)
                    for name, tensor in inputs.items()}
            model = tf.function(lambda x: self.model(x, training=False), input_signature=[spec])
            forwards[key] = tf.function(lambda x: _in_chunks(model, x), input_signature=[spec])
        return forwards[key](inputs)

    def label_names(self, ids):
        """Label names (tf.string) of int label ids, any shape.

        The table is built from `assets/labels.txt` when the SavedModel loads; one with fewer
        lines than the model has labels (a file still being copied) fails the request by name.
        """
        whole = tf.debugging.assert_equal(
            self.label_table.size(), tf.constant(self.num_labels, tf.int64),
            message=f"assets/labels.txt does not hold all {self.num_labels} labels of the model (copied in part?): "
                    "export or copy the version again; table size")
        with tf.control_dependencies([whole]):
            return self.label_table.lookup(tf.cast(ids, tf.int64))


def run_in_chunks(module, name, function, inputs):
    """`function(inputs)` (of a dict of packed `[rows, S]` tensors) traced once per module under
    `name` and run over chunks of rows as `run_model` runs the model (memory bounded by a chunk)."""
    inputs = checked_token_ids(module, inputs)
    forwards = module.__dict__.setdefault("_model_functions", {})  # untracked: not saved as an attribute
    key = (name,) + tuple(sorted((key, tensor.shape.rank, tensor.dtype.name) for key, tensor in inputs.items()))
    if key not in forwards:
        spec = {key: tf.TensorSpec([None] * tensor.shape.rank, tensor.dtype, name=key)
                for key, tensor in inputs.items()}
        traced = tf.function(function, input_signature=[spec])
        forwards[key] = tf.function(lambda x: _in_chunks(traced, x), input_signature=[spec])
    return forwards[key](dict(inputs))


def checked_token_ids(module, inputs):
    """`inputs` (a dict of packed tensors) checked as the `token_ids` signature's callers send them:
    each failure is INVALID_ARGUMENT naming the input (and row), where the model would answer
    otherwise.

    * `token_ids` in [0, vocab_size): Keras' embedding lookup read a negative id from the end of
      the table and answered for another token.
    * `segment_ids` in [0, type_vocab_size): "indices[0,1] = 5 is not in [0, 2)" on a CPU, and
      on a GPU (whose gather reads out-of-range rows as zeros) an answer for no segment.
    * `padding_mask` 0 or 1: a 7 was read as a heavier-than-real token and changed the answer.
    * `segment_ids` / `padding_mask` of the shape of `token_ids`, and a sequence length of 1 to
      `max_position_embeddings`: these failed deep in the graph ("Incompatible shapes: [1,65,32]
      vs. [1,64,32]", "indices[0,0] = 0 is not in [0, 0)") without naming an input.
    """
    inputs = dict(inputs)
    ids = inputs["token_ids"]
    checks = [input_check(tf.logical_and(ids >= 0, ids < module.vocab_size),
                          f"input 'token_ids': ids must be in [0, {module.vocab_size}) (the vocabulary)")]
    length = tf.shape(ids)[-1]
    checks.append(input_check(
        tf.logical_or(tf.shape(ids)[0] == 0, tf.logical_and(length >= 1, length <= module.max_positions)),
        f"input 'token_ids': the sequence length (last dimension) must be 1 to {module.max_positions} "
        "(the model's max_position_embeddings)"))
    ranges = {"segment_ids": (module.type_vocab_size, f"must be in [0, {module.type_vocab_size}) (the model's "
                                                     "type_vocab_size)"),
              "padding_mask": (2, "must be 0 (padding) or 1 (a token)")}
    for name, (limit, rule) in ranges.items():
        if name not in inputs:
            continue
        value = inputs[name]
        checks.append(input_check(tf.reduce_all(tf.equal(tf.shape(value), tf.shape(ids))),
                                  f"input '{name}' must have the shape of input 'token_ids'"))
        with tf.control_dependencies(checks[-1:]):  # a row is indexed only once the shapes agree
            checks.append(input_check(tf.logical_and(value >= 0, value < limit), f"input '{name}': values {rule}"))
    with tf.control_dependencies(checks):
        return {name: tf.identity(value) for name, value in inputs.items()}


def _in_chunks(model, inputs):
    """`model(inputs)` (a traced function of a dict of `[rows, ...]` tensors) over chunks of rows
    of at most `MODEL_CALL_TOKENS` positions each (at least one row), outputs concatenated."""
    ids = inputs["token_ids"]
    rows = tf.shape(ids)[0]
    positions = tf.maximum(tf.reduce_prod(tf.shape(ids)[1:]), 1)  # per row: [S] or [choices, S]
    chunk = tf.maximum(MODEL_CALL_TOKENS // positions, 1)
    chunks = tf.maximum((rows + chunk - 1) // chunk, 1)  # an empty batch runs once, on 0 rows
    structure = model.get_concrete_function().structured_outputs
    flat_specs = tf.nest.flatten(structure)
    arrays = [tf.TensorArray(spec.dtype, size=chunks, infer_shape=False, element_shape=tf.TensorShape(None))
              for spec in flat_specs]

    def body(i, arrays):
        part = {name: value[i * chunk:(i + 1) * chunk] for name, value in inputs.items()}
        outputs = tf.nest.flatten(model(part))
        return i + 1, [array.write(i, output) for array, output in zip(arrays, outputs)]

    _, arrays = tf.while_loop(lambda i, _: i < chunks, body, [tf.constant(0), arrays])
    flat = []
    for array, spec in zip(arrays, flat_specs):
        value = array.concat() if spec.shape.rank else array.stack()
        flat.append(tf.ensure_shape(value, [None] + spec.shape.as_list()[1:]) if spec.shape.rank else value)
    return tf.nest.pack_sequence_as(structure, flat)


def _write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(f"{line}\n" for line in lines))
    return path
