"""`BertConfig`: the hyper-parameters of a BERT encoder, and their file formats.

Three JSON dialects describe the same architecture:

* our own (`to_json` / `from_json`): the field names of `BertConfig`, lossless;
* google-research `bert_config.json` (`from_google_json` / `to_google_dict`);
* Hugging Face `config.json` (`from_hf_json` / `to_hf_dict`).

They disagree on one thing that silently changes every output: the meaning of
`"gelu"`. google-research `modeling.py` computes the tanh approximation under
that name, Hugging Face computes the exact erf form. `BertConfig.hidden_act`
is never ambiguous: `"gelu"` is exact, `"gelu_approximate"` is tanh.
"""

import dataclasses
import json
import os

# Activation names this library understands. "gelu" is the exact (erf) GELU.
VALID_ACTIVATIONS = ("gelu", "gelu_approximate", "relu", "silu")

# Named sizes from the BERT README ("Well-Read Students Learn Better" family
# plus base/large): name -> (num_layers, hidden_size). heads = H / 64,
# intermediate = 4 H.
NAMED_SIZES = {
    "tiny": (2, 128),
    "mini": (4, 256),
    "small": (4, 512),
    "medium": (8, 512),
    "base": (12, 768),
    "large": (24, 1024),
}

# google-research bert_config.json key -> BertConfig field.
_GOOGLE_KEYS = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_size",
    "max_position_embeddings": "max_position_embeddings",
    "type_vocab_size": "type_vocab_size",
    "hidden_dropout_prob": "hidden_dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "hidden_act": "hidden_act",
    "initializer_range": "initializer_range",
}
# The google file has no layer_norm_eps: modeling.py hard-codes 1e-12.
_GOOGLE_REQUIRED = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
)
# Activation names as google-research modeling.py `get_activation` reads them.
_GOOGLE_ACT_IN = {
    "gelu": "gelu_approximate",  # modeling.py's gelu() is the tanh formula
    "relu": "relu",
}
_GOOGLE_ACT_OUT = {"gelu_approximate": "gelu", "relu": "relu"}
# Keys the released multilingual / Chinese bert_config.json files carry that
# modeling.py never reads; ignored when reading.
_GOOGLE_IGNORED_KEYS = frozenset(
    {
        "directionality", "pooler_fc_size", "pooler_num_attention_heads",
        "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type",
    }
)

# Hugging Face config.json key -> BertConfig field.
_HF_KEYS = dict(_GOOGLE_KEYS, layer_norm_eps="layer_norm_eps")
_HF_REQUIRED = _GOOGLE_REQUIRED
_HF_ACT_IN = {
    "gelu": "gelu",  # torch.nn.functional.gelu, exact erf
    "gelu_python": "gelu",  # x * 0.5 * (1 + erf(x / sqrt(2))): the same function, in Python
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "gelu_fast": "gelu_approximate",
    "gelu_accurate": "gelu_approximate",  # the tanh formula with sqrt(2 / pi) precomputed
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}
# transformers' ACT2FN names that no BERT activation here computes, and what they are.
_HF_ACT_OTHER = {
    "quick_gelu": "x * sigmoid(1.702 x)",
    "gelu_10": "GELU clipped to [-10, 10]",
    "laplace": "the Laplace-CDF GELU",
    "leaky_relu": "leaky ReLU",
    "linear": "the identity",
    "mish": "x * tanh(softplus(x))",
    "relu2": "ReLU squared",
    "relu6": "ReLU capped at 6",
    "sigmoid": "sigmoid",
    "tanh": "tanh",
}
_HF_ACT_OUT = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu", "silu": "silu"}
# HF model types whose weights have exactly BERT's layout.
_HF_BERT_MODEL_TYPES = ("bert",)
# HF keys that carry no architecture information; ignored when reading.
_HF_IGNORED_KEYS = frozenset(
    {
        "_name_or_path", "architectures", "model_type", "transformers_version",
        "gradient_checkpointing", "use_cache", "pad_token_id", "bos_token_id",
        "eos_token_id", "torch_dtype", "dtype", "classifier_dropout",
        "position_embedding_type", "is_decoder", "add_cross_attention",
        "id2label", "label2id", "num_labels", "problem_type", "output_past",
        "directionality", "pooler_fc_size", "pooler_num_attention_heads",
        "pooler_num_fc_layers", "pooler_size_per_head", "pooler_type",
        "tie_word_embeddings", "finetuning_task", "tokenizer_class",
        "output_attentions", "output_hidden_states", "return_dict",
        "chunk_size_feed_forward", "prefix", "task_specific_params",
    }
)


class ConfigError(ValueError):
    """An invalid `BertConfig` value, or a config file that cannot be read."""


@dataclasses.dataclass
class BertConfig:
    """Architecture hyper-parameters of a BERT encoder.

    Example:

    >>> config = BertConfig.named("tiny")
    >>> config.num_layers, config.hidden_size, config.num_heads
    (2, 128, 2)
    >>> BertConfig.from_json(config.to_json()) == config
    True

    Args:
        vocab_size: int. Number of word-piece tokens.
        hidden_size: int. Width H of every layer; divisible by `num_heads`.
        num_layers: int. Number of transformer blocks L.
        num_heads: int. Attention heads per block.
        intermediate_size: int. Width of the feed-forward layer (4 H in BERT).
        max_position_embeddings: int. Longest sequence the position table holds.
        type_vocab_size: int. Number of segment ids (2 for sentence A/B).
        hidden_dropout: float in [0, 1). Dropout on embeddings and sub-layer
            outputs.
        attention_dropout: float in [0, 1). Dropout on attention probabilities.
        hidden_act: str. Feed-forward activation: `"gelu"` (exact erf form),
            `"gelu_approximate"` (tanh form, what google-research BERT
            checkpoints were trained with), `"relu"` or `"silu"`.
        layer_norm_eps: float. Epsilon of every LayerNorm.
        initializer_range: float. Stddev of the truncated-normal initializer.
    """

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    hidden_dropout: float = 0.1
    attention_dropout: float = 0.1
    hidden_act: str = "gelu"
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02

    def __post_init__(self):
        for name in (
            "vocab_size", "hidden_size", "num_layers", "num_heads",
            "intermediate_size", "max_position_embeddings", "type_vocab_size",
        ):
            value = getattr(self, name)
            # bool is an int subclass; `True` layers is a typo, not a size.
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"BertConfig.{name} must be a positive int, got {value!r}")
        if self.hidden_size % self.num_heads:
            raise ConfigError(
                f"BertConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_heads ({self.num_heads})"
            )
        for name in ("hidden_dropout", "attention_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ConfigError(f"BertConfig.{name} must be a float in [0, 1), got {value!r}")
        for name in ("layer_norm_eps", "initializer_range"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"BertConfig.{name} must be a positive float, got {value!r}")
        if self.hidden_act not in VALID_ACTIVATIONS:
            raise ConfigError(
                f"BertConfig.hidden_act must be one of {VALID_ACTIVATIONS}, got "
                f"{self.hidden_act!r} ('gelu' means the exact erf form, "
                "'gelu_approximate' the tanh form)"
            )

    def check_vocabulary_size(self, size, vocab_file):
        """Raises `ConfigError` when a vocabulary of `size` tokens (read from `vocab_file`) has
        more tokens than this model has embedding rows: its ids past `vocab_size` would fail the
        embedding lookup ("indices[0,7] = 807 is not in [0, 600)"; a GPU reads zeros instead).

        Fewer tokens are fine: many checkpoints pad their embedding table past the vocabulary
        (a `vocab_size` rounded up to a multiple of 8 or 64), and those rows are never looked up.

        >>> BertConfig.named("tiny", vocab_size=100).check_vocabulary_size(96, "vocab.txt")
        """
        if size > self.vocab_size:
            raise ConfigError(
                f"{vocab_file}: the vocabulary has {size} tokens, more than the model's {self.vocab_size} "
                "(vocab_size of its config): pass the vocabulary the model was trained with (vocab_file=, "
                "--vocab)")

    @property
    def head_size(self):
        """Width of one attention head, `hidden_size // num_heads`."""
        return self.hidden_size // self.num_heads

    # ---- named sizes ---------------------------------------------------

    @classmethod
    def named(cls, name, vocab_size=30522, **overrides):
        """A config of one of the released BERT sizes.

        Args:
            name: one of `"tiny"` (L2/H128), `"mini"` (L4/H256), `"small"`
                (L4/H512), `"medium"` (L8/H512), `"base"` (L12/H768),
                `"large"` (L24/H1024). Heads are H/64, intermediate 4H.
            vocab_size: int, defaults to the uncased English vocabulary.
            **overrides: any other `BertConfig` field.
        """
        if name not in NAMED_SIZES:
            raise ConfigError(f"unknown BERT size {name!r}; known: {sorted(NAMED_SIZES)}")
        num_layers, hidden = NAMED_SIZES[name]
        fields = dict(
            vocab_size=vocab_size,
            hidden_size=hidden,
            num_layers=num_layers,
            num_heads=hidden // 64,
            intermediate_size=4 * hidden,
        )
        fields.update(overrides)
        return cls(**fields)

    # ---- own format ----------------------------------------------------

    def to_dict(self):
        """All fields as a plain dict (JSON-serialisable)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data, source="<dict>"):
        """Builds a config from `to_dict()` output; unknown/missing keys raise."""
        names = [f.name for f in dataclasses.fields(cls)]
        required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ConfigError(f"{source}: unknown BertConfig field(s) {unknown}")
        missing = [n for n in required if n not in data]
        if missing:
            raise ConfigError(f"{source}: missing required BertConfig field(s) {missing}")
        return _build(cls, dict(data), source)

    def to_json(self, path=None):
        """Serialises to our JSON format; writes `path` if given, returns the text."""
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return text

    @classmethod
    def from_json(cls, path_or_text):
        """Reads our JSON format from a file path, a JSON string or a dict."""
        data, source = _load(path_or_text)
        return cls.from_dict(data, source)

    # ---- google-research bert_config.json ------------------------------

    @classmethod
    def from_google_json(cls, path_or_dict):
        """Reads a google-research `bert_config.json` (path, JSON text or dict).

        Its `"hidden_act": "gelu"` is read as `"gelu_approximate"`, because
        google-research `modeling.py` computes GELU with the tanh formula.
        """
        data, source = _load(path_or_dict)
        fields = _translate(data, source, _GOOGLE_KEYS, _GOOGLE_REQUIRED, ignored=_GOOGLE_IGNORED_KEYS)
        if "hidden_act" in fields:
            act = fields["hidden_act"]
            if act not in _GOOGLE_ACT_IN:
                raise ConfigError(
                    f"{source}: field 'hidden_act' = {act!r} is not an activation "
                    f"google-research BERT defines; known: {sorted(_GOOGLE_ACT_IN)}"
                )
            fields["hidden_act"] = _GOOGLE_ACT_IN[act]
        else:
            fields["hidden_act"] = "gelu_approximate"
        return _build(cls, fields, source)

    def to_google_dict(self):
        """This config as a google-research `bert_config.json` dict."""
        if self.hidden_act not in _GOOGLE_ACT_OUT:
            raise ConfigError(
                f"hidden_act {self.hidden_act!r} has no google-research BERT name "
                f"(it knows {sorted(_GOOGLE_ACT_OUT)})"
            )
        if self.layer_norm_eps != 1e-12:
            raise ConfigError(
                f"google-research bert_config.json cannot express layer_norm_eps="
                f"{self.layer_norm_eps} (modeling.py hard-codes 1e-12)"
            )
        out = {key: getattr(self, field) for key, field in _GOOGLE_KEYS.items()}
        out["hidden_act"] = _GOOGLE_ACT_OUT[self.hidden_act]
        return out

    # ---- Hugging Face config.json --------------------------------------

    @classmethod
    def from_hf_json(cls, path_or_dict):
        """Reads a Hugging Face `config.json` of a `BertModel` (path, text or dict).

        `"gelu"` and `"gelu_python"` are the exact form; `"gelu_new"`,
        `"gelu_pytorch_tanh"`, `"gelu_fast"` and `"gelu_accurate"` are the tanh
        approximation; `"swish"` is `"silu"`. Other activations (`"quick_gelu"`, ...)
        are refused, naming the supported ones. Models that are not BERT
        architecture, and relative position embeddings, are refused.
        """
        data, source = _load(path_or_dict)
        model_type = data.get("model_type", "bert")
        if model_type not in _HF_BERT_MODEL_TYPES:
            raise ConfigError(
                f"{source}: model_type {model_type!r} is not BERT architecture "
                f"(supported: {list(_HF_BERT_MODEL_TYPES)})"
            )
        position_type = data.get("position_embedding_type", "absolute")
        if position_type != "absolute":
            raise ConfigError(
                f"{source}: position_embedding_type {position_type!r} is not supported "
                "(only 'absolute' position embeddings)"
            )
        if data.get("is_decoder") or data.get("add_cross_attention"):
            raise ConfigError(f"{source}: decoder / cross-attention BERT is not supported")
        # transformers' private keys ("_name_or_path", "_attn_implementation_autoset" that 4.4x
        # saved, "_commit_hash") are its bookkeeping, never the architecture
        data = {key: value for key, value in data.items() if not key.startswith("_")}
        fields = _translate(data, source, _HF_KEYS, _HF_REQUIRED, ignored=_HF_IGNORED_KEYS)
        act = fields.get("hidden_act", "gelu")
        if act not in _HF_ACT_IN:
            what = f" ({_HF_ACT_OTHER[act]} in transformers)" if act in _HF_ACT_OTHER else ""
            raise ConfigError(
                f"{source}: field 'hidden_act' = {act!r}{what} is not supported: its outputs would "
                f"differ from every activation bert_keras computes. Supported: {sorted(_HF_ACT_IN)} "
                "('gelu', 'gelu_python': exact erf GELU; 'gelu_new', 'gelu_pytorch_tanh', 'gelu_fast', "
                "'gelu_accurate': its tanh approximation; 'swish' = 'silu')"
            )
        fields["hidden_act"] = _HF_ACT_IN[act]
        return _build(cls, fields, source)

    def to_hf_dict(self):
        """This config as a Hugging Face `BertConfig` / `config.json` dict."""
        out = {key: getattr(self, field) for key, field in _HF_KEYS.items()}
        out["hidden_act"] = _HF_ACT_OUT[self.hidden_act]
        out.update(
            model_type="bert",
            architectures=["BertModel"],
            position_embedding_type="absolute",
            pad_token_id=0,
        )
        return out


def _load(path_or_dict):
    """Returns (dict, source-name for messages) from a dict, a path or JSON text."""
    if isinstance(path_or_dict, dict):
        return dict(path_or_dict), "<dict>"
    text = os.fspath(path_or_dict)
    if text.lstrip().startswith("{"):
        source, raw = "<json string>", text
    else:
        source = text
        try:
            with open(text, encoding="utf-8") as f:
                raw = f.read()
        except OSError as e:
            raise ConfigError(f"{source}: cannot read config file: {e}") from e
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{source}: not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object, got {type(data).__name__}")
    return data, source


def _translate(data, source, key_map, required, ignored):
    """Renames foreign keys to BertConfig fields; unknown or missing keys raise."""
    unknown = sorted(k for k in data if k not in key_map and k not in ignored)
    if unknown:
        raise ConfigError(f"{source}: unknown field(s) {unknown}")
    missing = [k for k in required if k not in data]
    if missing:
        raise ConfigError(f"{source}: missing required field(s) {missing}")
    return {key_map[k]: v for k, v in data.items() if k in key_map}


def _build(cls, fields, source):
    """Calls the constructor, prefixing validation errors with the file name."""
    try:
        return cls(**fields)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
