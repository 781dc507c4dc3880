"""Tests for pipelines.packing.BertPacker."""

import itertools
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from pipelines.packing import BertPacker

CLS, SEP, PAD = 101, 102, 0
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_packer(seq_length, **kwargs):
    return BertPacker(seq_length, cls_id=CLS, sep_id=SEP, pad_id=PAD, **kwargs)


def as_lists(outputs):
    return {name: tensor.numpy().tolist() for name, tensor in outputs.items()}


def original_truncate_seq_pair(tokens_a, tokens_b, max_length):
    """google-research/bert `_truncate_seq_pair`, verbatim apart from returning."""
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_length:
            break
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()
    return tokens_a, tokens_b


# --- layouts -----------------------------------------------------------------


def test_single_segment_layout():
    out = as_lists(make_packer(7)(tf.ragged.constant([[1, 2, 3], [4]])))
    assert out["token_ids"] == [[CLS, 1, 2, 3, SEP, PAD, PAD], [CLS, 4, SEP, PAD, PAD, PAD, PAD]]
    assert out["segment_ids"] == [[0] * 7, [0] * 7]
    assert out["padding_mask"] == [[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0]]


def test_pair_layout_and_segment_ids():
    a = tf.ragged.constant([[1, 2], [3]])
    b = tf.ragged.constant([[4], [5, 6, 7]])
    out = as_lists(make_packer(9)((a, b)))
    assert out["token_ids"] == [
        [CLS, 1, 2, SEP, 4, SEP, PAD, PAD, PAD],
        [CLS, 3, SEP, 5, 6, 7, SEP, PAD, PAD],
    ]
    assert out["segment_ids"] == [
        [0, 0, 0, 0, 1, 1, 0, 0, 0],
        [0, 0, 0, 1, 1, 1, 1, 0, 0],
    ]
    assert out["padding_mask"] == [
        [1, 1, 1, 1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1, 1, 1, 0, 0],
    ]


def test_empty_segments_and_empty_batch():
    empty = tf.ragged.constant([[]], dtype=tf.int32)
    out = as_lists(make_packer(5)((empty, empty)))
    assert out["token_ids"] == [[CLS, SEP, SEP, PAD, PAD]]
    assert out["segment_ids"] == [[0, 0, 1, 0, 0]]
    no_rows = tf.ragged.constant([[1]], dtype=tf.int32)[:0]
    assert make_packer(5)(no_rows)["token_ids"].shape == (0, 5)
    # An empty batch is as wide as [CLS] [SEP] rounded up (at most seq_length): its tensors slice
    # and broadcast as any batch's do (an exported signature answers 0 rows with 0 rows).
    assert make_packer(5, pad_to="longest")(no_rows)["token_ids"].shape == (0, 5)
    assert make_packer(128, pad_to="longest")(no_rows)["token_ids"].shape == (0, 8)


def test_outputs_are_int32_for_int64_input():
    out = make_packer(6)(tf.ragged.constant([[1, 2]], dtype=tf.int64))
    assert all(t.dtype == tf.int32 for t in out.values())


def test_single_segment_in_tuple_equals_bare():
    a = tf.ragged.constant([[1, 2, 3], [4]])
    assert as_lists(make_packer(6)([a])) == as_lists(make_packer(6)(a))


def test_dense_batch_is_treated_as_full_rows():
    out = as_lists(make_packer(5)(tf.constant([[1, 2], [3, 4]])))
    assert out["token_ids"] == [[CLS, 1, 2, SEP, PAD], [CLS, 3, 4, SEP, PAD]]


def test_single_example_gives_rank_1_outputs():
    packer = make_packer(6)
    out = packer((tf.constant([1, 2, 3]), tf.constant([4, 5])))
    assert out["token_ids"].numpy().tolist() == [CLS, 1, 2, SEP, 4, SEP]
    assert out["segment_ids"].numpy().tolist() == [0, 0, 0, 0, 1, 1]
    assert packer.num_truncated((tf.constant([1, 2, 3]), tf.constant([4, 5]))).numpy() == 2


def test_wordpiece_shaped_input_is_flattened():
    pieces = tf.ragged.constant([[[1, 2], [3]], [[4]]])  # [batch, (words), (pieces)]
    out = as_lists(make_packer(6)(pieces))
    assert out["token_ids"] == [[CLS, 1, 2, 3, SEP, PAD], [CLS, 4, SEP, PAD, PAD, PAD]]


@pytest.mark.parametrize(
    "kwargs, segments, message",
    [
        (dict(seq_length=1), None, "seq_length"),
        (dict(seq_length=8, truncation="shortest"), None, "truncation"),
        (dict(seq_length=8, pad_to="max"), None, "pad_to"),
        (dict(seq_length=2), "pair", "at least 3"),
        (dict(seq_length=8), "triple", "1 or 2 segments"),
        (dict(seq_length=8), "float", "integer"),
        (dict(seq_length=8), "mixed_rank", "both be batched"),
    ],
)
def test_bad_arguments_are_explained(kwargs, segments, message):
    row = tf.ragged.constant([[1, 2]])
    inputs = {
        "pair": (row, row),
        "triple": (row, row, row),
        "float": tf.constant([[1.0]]),
        "mixed_rank": (row, tf.constant([1, 2])),
    }
    with pytest.raises((ValueError, TypeError), match=message):
        seq_length = kwargs.pop("seq_length")
        make_packer(seq_length, **kwargs)(inputs.get(segments, row))


# --- truncation ----------------------------------------------------------------


def test_longest_first_matches_original_loop_exhaustively():
    lens = list(range(13))
    pairs = list(itertools.product(lens, lens))
    # Row i of A is [1, 2, ..., la] and of B is [-1, -2, ..., -lb], so the kept
    # prefixes can be read back from the packed ids.
    a = tf.ragged.constant([list(range(1, la + 1)) for la, _ in pairs], dtype=tf.int32)
    b = tf.ragged.constant([[-i for i in range(1, lb + 1)] for _, lb in pairs], dtype=tf.int32)
    for budget in range(16):
        packer = make_packer(budget + 3)
        out = packer((a, b))
        token_ids = out["token_ids"].numpy()
        mask = out["padding_mask"].numpy().astype(bool)
        dropped = packer.num_truncated((a, b)).numpy()
        for row, (la, lb) in enumerate(pairs):
            want_a, want_b = original_truncate_seq_pair(list(range(1, la + 1)), [-i for i in range(1, lb + 1)], budget)
            want = [CLS, *want_a, SEP, *want_b, SEP]
            assert token_ids[row][mask[row]].tolist() == want, (la, lb, budget)
            assert dropped[row] == la + lb - len(want_a) - len(want_b)


def test_longest_first_single_segment_keeps_the_start():
    out = make_packer(4)(tf.ragged.constant([[1, 2, 3, 4, 5]]))
    assert out["token_ids"].numpy().tolist() == [[CLS, 1, 2, SEP]]


def test_waterfall_gives_a_everything_it_needs_first():
    packer = make_packer(8, truncation="waterfall")  # budget 5
    a = tf.ragged.constant([[1, 2, 3, 4, 5, 6], [1, 2], [1, 2, 3]])
    b = tf.ragged.constant([[-1, -2], [-1, -2, -3, -4, -5], [-1]])
    out = packer((a, b))
    assert out["token_ids"].numpy().tolist() == [
        [CLS, 1, 2, 3, 4, 5, SEP, SEP],
        [CLS, 1, 2, SEP, -1, -2, -3, SEP],
        [CLS, 1, 2, 3, SEP, -1, SEP, PAD],
    ]
    assert packer.num_truncated((a, b)).numpy().tolist() == [3, 2, 0]


# --- padding and shapes ------------------------------------------------------------


@pytest.mark.parametrize(
    "lengths, seq_length, width",
    [([3, 5], 64, 8), ([6, 1], 64, 8), ([7], 64, 16), ([14], 64, 16), ([15], 64, 24), ([40], 20, 20)],
)
def test_pad_to_longest_rounds_up_to_multiple_of_8(lengths, seq_length, width):
    packer = make_packer(seq_length, pad_to="longest")
    segment = tf.ragged.constant([[1] * n for n in lengths], dtype=tf.int32)
    out = packer(segment)
    assert out["token_ids"].shape == (len(lengths), width)
    np.testing.assert_array_equal(
        out["padding_mask"].numpy().sum(axis=1), [min(n, seq_length - 2) + 2 for n in lengths]
    )


def test_fixed_has_static_shape_in_graph():
    packer = make_packer(16)

    @tf.function(input_signature=[tf.RaggedTensorSpec([None, None], tf.int32), tf.RaggedTensorSpec([None, None], tf.int32)])
    def pack(a, b):
        out = packer((a, b))
        for tensor in out.values():
            assert tensor.shape.as_list() == [None, 16]
        return out

    assert pack(tf.ragged.constant([[1]]), tf.ragged.constant([[2]]))["token_ids"].shape == (1, 16)


def test_pad_to_longest_width_is_dynamic_in_graph():
    packer = make_packer(16, pad_to="longest")
    spec = tf.RaggedTensorSpec([None, None], tf.int32)
    graph_out = tf.function(packer).get_concrete_function(spec).structured_outputs
    assert graph_out["token_ids"].shape.as_list() == [None, None]


# --- graph contexts --------------------------------------------------------------


def test_inside_dataset_map_batched_and_unbatched():
    packer = make_packer(8)
    a = tf.ragged.constant([[1, 2], [3, 4, 5]])
    b = tf.ragged.constant([[6], [7, 8, 9, 10, 11, 12]])
    want = as_lists(packer((a, b)))

    ds = tf.data.Dataset.from_tensor_slices((a, b))  # elements: rank-1 dense
    unbatched = [as_lists(x) for x in ds.map(lambda x, y: packer((x, y)))]
    assert [x["token_ids"] for x in unbatched] == want["token_ids"]

    batched = next(iter(ds.ragged_batch(2).map(lambda x, y: packer((x, y)))))
    assert as_lists(batched) == want
    assert batched["token_ids"].shape == (2, 8)


def test_inside_tf_function_matches_eager():
    packer = make_packer(12, pad_to="longest")
    a = tf.ragged.constant([[1, 2, 3], [4]])
    b = tf.ragged.constant([[5], [6, 7]])
    assert as_lists(tf.function(packer, jit_compile=False)((a, b))) == as_lists(packer((a, b)))


def test_graph_uses_only_core_tensorflow_ops():
    """The packer must run on stock TF Serving, i.e. without TF-Text's kernels.

    Checked in a fresh interpreter that never loads tensorflow_text (this test
    process may have loaded it through other tests): every op type in the traced
    graph must be registered by TensorFlow itself.
    """
    script = textwrap.dedent(
        """
        import importlib.util, sys
        import tensorflow as tf
        from tensorflow.python.framework import op_def_registry

        # Load the module by path so no package __init__ can pull in TF-Text.
        spec = importlib.util.spec_from_file_location("packing", sys.argv[1])
        packing = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(packing)

        ragged = tf.RaggedTensorSpec([None, None], tf.int64)
        op_types = set()
        for truncation, pad_to in (("longest_first", "fixed"), ("waterfall", "longest")):
            packer = packing.BertPacker(
                32, cls_id=101, sep_id=102, pad_id=0, truncation=truncation, pad_to=pad_to)
            fn = tf.function(lambda a, b: (packer((a, b)), packer.num_truncated((a, b)), packer(a)))
            graph = fn.get_concrete_function(ragged, ragged).graph
            op_types |= {op.type for op in graph.get_operations()}
        assert "tensorflow_text" not in sys.modules, "packing imported tensorflow_text"
        missing = sorted(t for t in op_types if op_def_registry.get(t) is None)
        assert not missing, f"ops not in core TensorFlow: {missing}"
        print("OK", len(op_types))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, os.path.join(REPO_ROOT, "pipelines", "packing.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-3000:]
