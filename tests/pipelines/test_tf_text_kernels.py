"""`pipelines.tokenizer.tf_text_kernels`: TF-Text's two kernels without the rest of TF-Text.

The wrappers must give exactly what TF-Text's own classes give (ids, offsets, normalized text, at
every input rank), a tokenizer must run without `import tensorflow_text`, and a later
`import tensorflow_text` must still work, with the same ops, in the same process.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf
import tensorflow_text as tf_text

from pipelines.tokenizer import tf_text_kernels, wordpiece

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "they", "##'", "##re", "the", "great", "##est", "'", "re",
              "un", "##aff", "##able", "caf", "##é", "한", "##국"]

WORDS = ["they're", "the", "greatest", "unaffable", "café", "한국", "xyzzy", ""]


def models():
    """Ours and TF-Text's tokenizer (words already split) and normalizer, on the same model buffers."""
    ours = wordpiece.fast_wordpiece(VOCABULARY, unk_token="[UNK]", max_bytes_per_word=100, split_words=False)
    theirs = tf_text.FastWordpieceTokenizer(model_buffer=ours._model, token_out_type=tf.int64)
    normalizer = wordpiece.fast_normalizer(True)
    return ours, theirs, normalizer, tf_text.FastBertNormalizer(model_buffer=normalizer._model)


def as_lists(parts):
    return [part.to_list() if isinstance(part, tf.RaggedTensor) else part.numpy().tolist() for part in parts]


@pytest.mark.parametrize("shape", ["scalar", "vector", "matrix", "ragged"])
def test_wrappers_give_what_tf_text_classes_give_at_every_rank(shape):
    ours, theirs, normalizer, their_normalizer = models()
    inputs = {"scalar": tf.constant("greatest"), "vector": tf.constant(WORDS),
              "matrix": tf.constant([WORDS[:4], WORDS[4:]]),
              "ragged": tf.ragged.constant([WORDS[:3], [], WORDS[3:]])}[shape]
    assert as_lists(ours.tokenize_with_offsets(inputs)) == as_lists(theirs.tokenize_with_offsets(inputs))
    assert as_lists([ours.tokenize(inputs)]) == as_lists([theirs.tokenize(inputs)])
    if shape != "scalar":  # (TF-Text's normalizer fails on a scalar; ours gives one string)
        assert as_lists([normalizer.normalize(inputs)]) == as_lists([their_normalizer.normalize(inputs)])
    assert normalizer.normalize(tf.constant("Ünïcode CAFÉ")).numpy() == b"unicode cafe"


def test_wrappers_in_a_graph_hold_tf_texts_op_types():
    ours, _, normalizer, _ = models()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def run(words):
        return ours.tokenize(normalizer.normalize(words)).to_tensor()

    assert run(tf.constant(["The", "GREATEST"])).numpy().tolist() == [[7, 0], [8, 9]]
    types = {op.type for op in run.get_concrete_function().graph.get_operations()}
    assert {"FastWordpieceTokenizeWithOffsets", "FastBertNormalize"} <= types


WITHOUT_TF_TEXT = textwrap.dedent(
    """
    import sys
    import tensorflow as tf
    from pipelines import BertTokenizer
    tokenizer = BertTokenizer(vocabulary=VOCABULARY, lowercase=True)
    texts = ["They're the GREATEST, unaffable café!", "한국"]
    ids = tokenizer.tokenize(texts).to_list()
    ids_with_offsets = [t.to_list() for t in tokenizer.tokenize_with_offsets(texts)]
    print("loaded", "tensorflow_text" in sys.modules)
    import tensorflow_text as tf_text  # afterwards, as a user or the serving code does
    theirs = tf_text.FastWordpieceTokenizer(VOCABULARY, token_out_type=tf.int64)
    print("theirs", theirs.tokenize(["the greatest"]).to_list())
    print("normalized", tf_text.FastBertNormalizer(True).normalize(["CAFÉ"]).numpy().tolist())
    print("again", tokenizer.tokenize(texts).to_list() == ids,
          [t.to_list() for t in tokenizer.tokenize_with_offsets(texts)] == ids_with_offsets)
    print("ids", ids)
    """
)


def test_a_tokenizer_runs_without_importing_tf_text_which_still_loads_after(tmp_path):
    """Fresh processes (the models compiled once in the first, read from the cache in the
    second): the second tokenizes without `tensorflow_text` in `sys.modules`, then imports it,
    whose classes run on the libraries already loaded."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environment = dict(os.environ, BERT_KERAS_CACHE=str(tmp_path / "cache"), TF_CPP_MIN_LOG_LEVEL="3",
                       PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    script = f"VOCABULARY = {VOCABULARY!r}\n" + WITHOUT_TF_TEXT
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment,
                           timeout=300) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    first, second = (dict(line.split(" ", 1) for line in run.stdout.splitlines() if " " in line) for run in runs)
    assert first["loaded"] == "True"  # compiling the models needs TF-Text's builders
    assert second["loaded"] == "False"
    assert second["theirs"] == "[[7, 8, 9]]"
    assert second["normalized"] == "[b'cafe']"
    assert second["again"] == "True True"
    assert first["ids"] == second["ids"]
    # they ' re the great ##est [UNK](",") un ##aff ##able [UNK]("cafe": no "##e") [UNK]("!");
    # the Hangul, decomposed by the uncased rules' NFD: [UNK]
    assert second["ids"] == "[[4, 10, 11, 7, 8, 9, 1, 12, 13, 14, 1, 1], [1]]"


def test_tf_texts_own_op_modules_once_it_is_imported():
    """Imported first (as in this test process), TF-Text's own op modules are the ones run."""
    from tensorflow_text.python.ops import fast_bert_normalizer, fast_wordpiece_tokenizer

    tf_text_kernels._op_module.cache_clear()
    try:
        assert tf_text_kernels.fast_wordpiece_ops() is fast_wordpiece_tokenizer.gen_fast_wordpiece_tokenizer
        assert tf_text_kernels.fast_bert_normalizer_ops() is fast_bert_normalizer.gen_fast_bert_normalizer
    finally:
        tf_text_kernels._op_module.cache_clear()


def test_unicode_normalization_with_offsets_gives_what_tf_text_gives():
    """A Korean tokenizer's NFC step: composed strings, and offsets mapped back, as TF-Text's."""
    strings = tf.constant(["\u1112\u1161\u11ab\u1100\u116e\u11a8 text", "plain", "", "e\u0301 \u1100\u1161"])
    composed, maps = tf_text_kernels.normalize_utf8_with_offsets_map(strings, "NFC")
    want, their_maps = tf_text.normalize_utf8_with_offsets_map(strings, "NFC")
    assert composed.numpy().tolist() == want.numpy().tolist() == [
        "한국 text".encode(), b"plain", b"", "é 가".encode()]
    rows = tf.constant([0, 0, 0, 1, 3, 3, 3], tf.int64)
    offsets = tf.constant([0, 3, 7, 2, 0, 2, 6], tf.int64)
    ours = tf_text_kernels.find_source_offsets(tf.gather(maps, rows), offsets)
    theirs = tf_text.find_source_offsets(tf.gather(their_maps, rows), offsets[:, None])[:, 0]
    assert ours.numpy().tolist() == theirs.numpy().tolist() == [0, 9, 19, 2, 0, 3, 10]
