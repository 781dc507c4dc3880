"""BertConfig: named sizes, google/HF json dialects, round trip, validation."""

import json
import math
import os

import numpy as np
import pytest

from bert_keras.config import BertConfig, ConfigError

GOOGLE_BASE = {
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "type_vocab_size": 2,
    "vocab_size": 30522,
}

HF_MINILM = {
    "_name_or_path": "nreimers/MiniLM-L6-H384-uncased",
    "architectures": ["BertModel"],
    "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": False,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 384,
    "initializer_range": 0.02,
    "intermediate_size": 1536,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 6,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "transformers_version": "4.8.2",
    "type_vocab_size": 2,
    "use_cache": True,
    "vocab_size": 30522,
}


@pytest.mark.parametrize(
    "name, layers, hidden",
    [("tiny", 2, 128), ("mini", 4, 256), ("small", 4, 512), ("medium", 8, 512),
     ("base", 12, 768), ("large", 24, 1024)],
)
def test_named_sizes(name, layers, hidden):
    config = BertConfig.named(name)
    assert (config.num_layers, config.hidden_size) == (layers, hidden)
    assert config.num_heads == hidden // 64
    assert config.intermediate_size == 4 * hidden
    assert config.vocab_size == 30522
    assert config.hidden_act == "gelu"
    assert BertConfig.named(name, vocab_size=99).vocab_size == 99


def test_named_unknown():
    with pytest.raises(ConfigError, match="huge"):
        BertConfig.named("huge")


def test_google_json_gelu_is_tanh(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(GOOGLE_BASE))
    config = BertConfig.from_google_json(str(path))
    assert config == BertConfig.named("base", hidden_act="gelu_approximate")
    assert config.to_google_dict() == GOOGLE_BASE
    assert BertConfig.from_google_json(dict(GOOGLE_BASE, hidden_act="relu")).hidden_act == "relu"
    # multilingual-cased bert_config.json carries pooler_* keys modeling.py never reads
    multilingual = dict(GOOGLE_BASE, directionality="bidi", pooler_fc_size=768, pooler_type="first_token_transform")
    assert BertConfig.from_google_json(multilingual) == config


def test_google_json_errors_name_file_and_field(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(dict(GOOGLE_BASE, bogus=1)))
    with pytest.raises(ConfigError, match=r"bert_config\.json.*bogus"):
        BertConfig.from_google_json(str(path))
    partial = dict(GOOGLE_BASE)
    del partial["num_hidden_layers"]
    path.write_text(json.dumps(partial))
    with pytest.raises(ConfigError, match=r"bert_config\.json.*num_hidden_layers"):
        BertConfig.from_google_json(str(path))


def test_hf_json_gelu_mapping(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(HF_MINILM))
    config = BertConfig.from_hf_json(str(path))
    assert (config.num_layers, config.hidden_size, config.num_heads) == (6, 384, 12)
    assert config.hidden_act == "gelu"
    for tanh_name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        assert BertConfig.from_hf_json(dict(HF_MINILM, hidden_act=tanh_name)).hidden_act == "gelu_approximate"
    hf = config.to_hf_dict()
    assert hf["hidden_act"] == "gelu" and hf["model_type"] == "bert"
    assert BertConfig.from_hf_json(hf) == config
    approx = BertConfig.named("tiny", hidden_act="gelu_approximate")
    assert BertConfig.from_hf_json(approx.to_hf_dict()) == approx


def test_hf_json_accepts_installed_minilm(minilm_dir):
    config = BertConfig.from_hf_json(os.path.join(minilm_dir, "config.json"))
    assert config.hidden_act == "gelu" and config.num_layers == 6


def test_hf_json_ignores_transformers_private_keys():
    """transformers 4.4x saved "_attn_implementation_autoset": true in config.json: such BERT
    directories were refused with "unknown field(s) ['_attn_implementation_autoset']"."""
    config = BertConfig.from_hf_json(dict(HF_MINILM, _attn_implementation_autoset=True, _commit_hash="abc"))
    assert config == BertConfig.from_hf_json(HF_MINILM)


def test_hf_json_refusals():
    with pytest.raises(ConfigError, match="roberta.*not BERT"):
        BertConfig.from_hf_json(dict(HF_MINILM, model_type="roberta"))
    with pytest.raises(ConfigError, match="relative_key"):
        BertConfig.from_hf_json(dict(HF_MINILM, position_embedding_type="relative_key"))
    with pytest.raises(ConfigError, match="hidden_act"):
        BertConfig.from_hf_json(dict(HF_MINILM, hidden_act="quick_gelu"))
    with pytest.raises(ConfigError, match="rotary_dim"):
        BertConfig.from_hf_json(dict(HF_MINILM, rotary_dim=4))


def test_json_round_trip(tmp_path):
    config = BertConfig(
        vocab_size=123, hidden_size=48, num_layers=3, num_heads=4, intermediate_size=96,
        max_position_embeddings=64, type_vocab_size=3, hidden_dropout=0.05,
        attention_dropout=0.0, hidden_act="silu", layer_norm_eps=1e-6, initializer_range=0.1,
    )
    assert BertConfig.from_json(config.to_json()) == config
    path = tmp_path / "c.json"
    config.to_json(str(path))
    assert BertConfig.from_json(str(path)) == config
    assert BertConfig.from_dict(config.to_dict()) == config


def test_own_json_errors(tmp_path):
    data = BertConfig.named("tiny").to_dict()
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(dict(data, heads=2)))
    with pytest.raises(ConfigError, match=r"mine\.json.*heads"):
        BertConfig.from_json(str(path))
    del data["vocab_size"]
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"mine\.json.*vocab_size"):
        BertConfig.from_json(str(path))
    with pytest.raises(ConfigError, match="cannot read"):
        BertConfig.from_json(str(tmp_path / "absent.json"))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(hidden_size=100, num_heads=3), "divisible by num_heads"),
        (dict(num_layers=0), "num_layers"),
        (dict(hidden_act="gelu_new"), "hidden_act"),
        (dict(hidden_dropout=1.0), "hidden_dropout"),
        (dict(layer_norm_eps=0.0), "layer_norm_eps"),
        (dict(vocab_size=2.5), "vocab_size"),
    ],
)
def test_validation(overrides, message):
    fields = dict(vocab_size=10, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32)
    fields.update(overrides)
    with pytest.raises(ConfigError, match=message):
        BertConfig(**fields)


def test_google_cannot_express_exact_gelu():
    with pytest.raises(ConfigError, match="hidden_act"):
        BertConfig.named("tiny").to_google_dict()


# transformers' ACT2FN formulas (transformers/activations.py), for the names read as a BERT activation
_HF_ACTIVATION_FORMULAS = {
    "gelu": lambda x: x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
    "gelu_python": lambda x: x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
    "gelu_new": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "gelu_pytorch_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "gelu_fast": lambda x: 0.5 * x * (1 + np.tanh(x * 0.7978845608 * (1 + 0.044715 * x * x))),
    "gelu_accurate": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "swish": lambda x: x / (1 + np.exp(-x)),
}


@pytest.mark.parametrize("name", sorted(_HF_ACTIVATION_FORMULAS))
def test_every_hf_activation_read_computes_what_transformers_computes(name):
    """"gelu_python" (transformers' exact erf GELU written in Python) was refused ("is not
    supported"), as was "gelu_accurate" (the tanh formula); each name read computes the same
    function as transformers' ACT2FN[name]."""
    from bert_keras.layers.activations import get_activation

    x = np.linspace(-6, 6, 241).astype(np.float64)
    ours = np.asarray(get_activation(BertConfig.from_hf_json(dict(HF_MINILM, hidden_act=name)).hidden_act)(
        x.astype(np.float32)))
    np.testing.assert_allclose(ours, _HF_ACTIVATION_FORMULAS[name](x), atol=2e-6)


def test_every_hf_activation_read_matches_transformers_act2fn():
    torch = pytest.importorskip("torch")
    activations = pytest.importorskip("transformers.activations")
    from bert_keras.layers.activations import get_activation

    x = np.linspace(-6, 6, 241).astype(np.float32)
    for name in _HF_ACTIVATION_FORMULAS:
        ours = np.asarray(get_activation(BertConfig.from_hf_json(dict(HF_MINILM, hidden_act=name)).hidden_act)(x))
        theirs = activations.ACT2FN[name](torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(ours, theirs, atol=2e-6, err_msg=name)


def test_an_hf_activation_bert_keras_does_not_compute_is_named_with_the_supported_ones():
    with pytest.raises(ConfigError) as error:
        BertConfig.from_hf_json(dict(HF_MINILM, hidden_act="quick_gelu"))
    message = str(error.value)
    assert "'quick_gelu' (x * sigmoid(1.702 x) in transformers) is not supported" in message
    assert "'gelu_python'" in message and "'gelu_new'" in message
