"""Hugging Face `transformers` BERT directories (`config.json` + weights).

Reads `model.safetensors` (also sharded, via `model.safetensors.index.json`)
with `safetensors.numpy`, so no torch is needed; `pytorch_model.bin` needs
torch. Writes `config.json` + `model.safetensors` that
`transformers.BertModel.from_pretrained` (or `BertForPreTraining` when the
pretraining heads are included) loads with no missing keys.

Name mapping, HF -> canonical (google-research TF1 names):

* an optional `bert.` prefix (BertForPreTraining, BertForMaskedLM, ...) is dropped;
* `nn.Linear.weight` is `[out, in]`: transposed to the TF1 kernel `[in, out]`;
* LayerNorm `weight`/`bias` (old files: `gamma`/`beta`) -> `gamma`/`beta`;
* `cls.predictions.bias` -> `cls/predictions/output_bias`; the decoder is tied
  to the word embeddings, so `cls.predictions.decoder.weight` is only checked;
* `cls.seq_relationship.weight` is `[2, H]`, like TF1's `output_weights`.
"""

import contextlib
import json
import os
import re
import shutil
import warnings

import numpy as np

from bert_keras.checkpoints.errors import (
    CheckpointFormatError,
    CheckpointMismatchError,
    reject_or_drop_unused,
)
from bert_keras.config import BertConfig
from pipelines.atomic_writes import atomic_directory

CONFIG_FILE = "config.json"
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
TORCH_FILE = "pytorch_model.bin"
TORCH_INDEX = "pytorch_model.bin.index.json"
VOCAB_FILE = "vocab.txt"
TOKENIZER_JSON = "tokenizer.json"
# A sentence-transformers model's settings of its transformer module (`max_seq_length`).
SENTENCE_CONFIG = "sentence_bert_config.json"
ADDED_TOKENS_FILE = "added_tokens.json"
WEIGHT_FILES = (SAFETENSORS_FILE, SAFETENSORS_INDEX, TORCH_FILE, TORCH_INDEX)

# (HF module, canonical scope, kind). `{i}` is the layer number. The kind says
# how parameter names and shapes translate (see `_PARAMS`).
_MODULES = [
    ("embeddings.word_embeddings", "bert/embeddings/word_embeddings", "table"),
    ("embeddings.position_embeddings", "bert/embeddings/position_embeddings", "table"),
    ("embeddings.token_type_embeddings", "bert/embeddings/token_type_embeddings", "table"),
    ("embeddings.LayerNorm", "bert/embeddings/LayerNorm", "norm"),
    ("encoder.layer.{i}.attention.self.query", "bert/encoder/layer_{i}/attention/self/query", "linear"),
    ("encoder.layer.{i}.attention.self.key", "bert/encoder/layer_{i}/attention/self/key", "linear"),
    ("encoder.layer.{i}.attention.self.value", "bert/encoder/layer_{i}/attention/self/value", "linear"),
    ("encoder.layer.{i}.attention.output.dense", "bert/encoder/layer_{i}/attention/output/dense", "linear"),
    ("encoder.layer.{i}.attention.output.LayerNorm", "bert/encoder/layer_{i}/attention/output/LayerNorm", "norm"),
    ("encoder.layer.{i}.intermediate.dense", "bert/encoder/layer_{i}/intermediate/dense", "linear"),
    ("encoder.layer.{i}.output.dense", "bert/encoder/layer_{i}/output/dense", "linear"),
    ("encoder.layer.{i}.output.LayerNorm", "bert/encoder/layer_{i}/output/LayerNorm", "norm"),
    ("pooler.dense", "bert/pooler/dense", "linear"),
    ("cls.predictions.transform.dense", "cls/predictions/transform/dense", "linear"),
    ("cls.predictions.transform.LayerNorm", "cls/predictions/transform/LayerNorm", "norm"),
    ("cls.predictions.bias", "cls/predictions/output_bias", "tensor"),
    ("cls.seq_relationship.weight", "cls/seq_relationship/output_weights", "tensor"),
    ("cls.seq_relationship.bias", "cls/seq_relationship/output_bias", "tensor"),
]
# kind -> [(HF parameter suffixes accepted, canonical suffix, transpose)]; the
# first HF suffix is the one written.
_PARAMS = {
    "table": [(("weight",), "", False)],
    "norm": [(("weight", "gamma"), "gamma", False), (("bias", "beta"), "beta", False)],
    "linear": [(("weight",), "kernel", True), (("bias",), "bias", False)],
    "tensor": [(("",), "", False)],
}

# Buffers HF saves that are not weights.
_IGNORED = re.compile(r"(?:^|\.)(?:position_ids|token_type_ids)$")
# The masked-LM decoder is tied to the word embeddings / output bias.
_DECODER_WEIGHT = "cls.predictions.decoder.weight"
_DECODER_BIAS = "cls.predictions.decoder.bias"


def _join(*parts):
    return ".".join(p for p in parts if p)


def _compile_rules():
    """[(regex over HF names, canonical template, transpose)] from `_MODULES`."""
    rules = []
    for hf_module, scope, kind in _MODULES:
        for hf_suffixes, suffix, transpose in _PARAMS[kind]:
            module = re.escape(hf_module).replace(re.escape("{i}"), r"(?P<i>\d+)")
            alternatives = "|".join(re.escape(s) for s in hf_suffixes if s)
            pattern = f"{module}\\.(?:{alternatives})" if alternatives else module
            template = "/".join(p for p in (scope, suffix) if p)
            rules.append((re.compile(f"^{pattern}$"), template, transpose))
    return rules


_RULES = _compile_rules()


def hf_to_canonical_name(name):
    """Returns `(canonical name, transpose)` for a HF tensor name, or None.

    >>> hf_to_canonical_name("bert.encoder.layer.3.attention.self.query.weight")
    ('bert/encoder/layer_3/attention/self/query/kernel', True)
    """
    name = name.removeprefix("bert.")
    for pattern, template, transpose in _RULES:
        match = pattern.match(name)
        if match:
            return template.replace("{i}", match.groupdict().get("i") or ""), transpose
    return None


def canonical_to_hf_name(name):
    """Returns `(HF name without "bert." prefix, transpose)` for a canonical name."""
    for hf_module, scope, kind in _MODULES:
        for hf_suffixes, suffix, transpose in _PARAMS[kind]:
            template = "/".join(p for p in (scope, suffix) if p)
            pattern = "^" + re.escape(template).replace(re.escape("{i}"), r"(\d+)") + "$"
            match = re.match(pattern, name)
            if match:
                hf = _join(hf_module, hf_suffixes[0])
                return (hf.replace("{i}", match.group(1)) if match.groups() else hf), transpose
    raise CheckpointMismatchError(f"no Hugging Face name for canonical weight {name!r}")


# ---- reading ------------------------------------------------------------

# `transformers` classes that build their BertModel without a pooler (`add_pooling_layer=False`):
# their directories hold no `bert.pooler.*`.
POOLERLESS_ARCHITECTURES = ("BertForTokenClassification", "BertForQuestionAnswering", "BertForMaskedLM")
_POOLER = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")


def absent_by_design(directory):
    """The canonical names a HF directory lacks by its class's design: the pooler of a
    `BertForTokenClassification`, `BertForQuestionAnswering` or `BertForMaskedLM` (`config.json`'s
    `architectures`), which `transformers` builds without one. Empty for other classes.

    >>> absent_by_design("ner-bert")  # doctest: +SKIP
    ('bert/pooler/dense/kernel', 'bert/pooler/dense/bias')
    """
    try:
        with open(os.path.join(os.fspath(directory), CONFIG_FILE), encoding="utf-8") as f:
            architectures = json.load(f).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        return ()
    return _POOLER if any(name in POOLERLESS_ARCHITECTURES for name in architectures) else ()



def _torch_to_numpy(tensor):
    import torch

    if tensor.dtype in (torch.bfloat16, torch.float16):
        tensor = tensor.float()
    return tensor.detach().cpu().numpy()


def _require_torch(path):
    try:
        import torch  # noqa: F401
    except ImportError:
        raise CheckpointFormatError(
            f"{path}: reading this file needs PyTorch, which is not installed: "
            "pip install torch (or convert the model to model.safetensors)"
        ) from None


def _load_safetensors(path, names=None):
    import safetensors
    from safetensors.numpy import load_file

    # a cut or damaged file raises safetensors' own error (an Exception, not a ValueError)
    unreadable = (TypeError, ValueError, getattr(safetensors, "SafetensorError", ValueError))
    try:
        return load_file(path) if names is None else _safetensors_subset(path, names, "numpy")
    except unreadable as error:
        # numpy has no bfloat16: such files need torch's loader.
        if "bf16" not in str(error).lower() and "bfloat16" not in str(error).lower():
            raise CheckpointFormatError(f"{path}: cannot read safetensors file: {error}") from None
    _require_torch(path)
    from safetensors.torch import load_file as load_torch

    try:
        tensors = load_torch(path) if names is None else _safetensors_subset(path, names, "pt")
        return {k: _torch_to_numpy(v) for k, v in tensors.items()}
    except unreadable as error:
        raise CheckpointFormatError(f"{path}: cannot read safetensors file: {error}") from None


def _safetensors_subset(path, names, framework):
    """The tensors of `names` a safetensors file holds, read alone (the others are not read)."""
    from safetensors import safe_open

    with safe_open(path, framework=framework) as f:
        return {name: f.get_tensor(name) for name in f.keys() if name in names}


def _load_torch_bin(path, names=None):
    import pickle

    _require_torch(path)
    import torch

    try:
        try:  # some tensors: mapped, so that those alone are read (torch.save's zip format)
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=names is not None)
        except RuntimeError:
            if names is None:
                raise
            state = torch.load(path, map_location="cpu", weights_only=True)  # an older format: whole
    except (RuntimeError, OSError, EOFError, ValueError, pickle.UnpicklingError) as error:
        # a cut file: "[Errno 22] Invalid argument", "PytorchStreamReader failed reading zip archive"
        raise CheckpointFormatError(f"{path}: cannot read PyTorch weights ({_cut_short(path) or error})") from None
    if not isinstance(state, dict):
        raise CheckpointFormatError(f"{path}: holds a {type(state).__name__}, not a state dict of tensors")
    return {k: _torch_to_numpy(v) for k, v in state.items() if names is None or k in names}


def _cut_short(path):
    """What is wrong with a `torch.save` file torch cannot read, when it is plainly cut short, else None.

    torch's zip format ends with the archive's directory: a file that starts as a zip archive but has
    none is a partial copy (torch said "[Errno 22] Invalid argument" of it). Its entries record their
    sizes after their data (bit 3), so the size expected is not known without that directory.
    """
    import zipfile

    try:
        with open(path, "rb") as f:
            zipped = f.read(4) == b"PK\x03\x04"
        if not zipped or zipfile.is_zipfile(path):
            return None
        size = os.path.getsize(path)
    except OSError:
        return None
    return (f"the file looks cut short: it starts as torch.save's zip archive but its {size} bytes do not end with "
            "the archive's directory; download or copy it again")


def _load_sharded(directory, index_name, load_one, names=None):
    path = os.path.join(directory, index_name)
    try:
        with open(path, encoding="utf-8") as f:
            index = json.load(f)
    except (UnicodeDecodeError, ValueError) as error:
        raise CheckpointFormatError(f"{path}: not a JSON shard index ({error})") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(s, str) for s in weight_map.values()):
        raise CheckpointFormatError(f"{path}: no \"weight_map\" of tensor names to shard files")
    shards = set(weight_map.values()) if names is None else {weight_map[n] for n in names if n in weight_map}
    tensors = {}
    for shard in sorted(shards):
        shard_path = os.path.join(directory, shard)
        if not os.path.isfile(shard_path):
            raise CheckpointFormatError(f"{path}: names shard {shard}, which is not in {directory}")
        tensors.update(load_one(shard_path, names))
    return tensors


def load_hf_tensors(directory, names=None):
    """The tensors of a HF model directory as `{HF name: np.ndarray}`: all, or those of `names` it
    holds (read alone: a task head's two, say; from a `pytorch_model.bin` of torch's zip format, by
    mapping it, else read whole)."""
    directory = os.fspath(directory)
    names = None if names is None else set(names)
    if os.path.isfile(os.path.join(directory, SAFETENSORS_FILE)):
        return _load_safetensors(os.path.join(directory, SAFETENSORS_FILE), names)
    if os.path.isfile(os.path.join(directory, SAFETENSORS_INDEX)):
        return _load_sharded(directory, SAFETENSORS_INDEX, _load_safetensors, names)
    if os.path.isfile(os.path.join(directory, TORCH_FILE)):
        return _load_torch_bin(os.path.join(directory, TORCH_FILE), names)
    if os.path.isfile(os.path.join(directory, TORCH_INDEX)):
        return _load_sharded(directory, TORCH_INDEX, _load_torch_bin, names)
    present = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    raise CheckpointFormatError(
        f"{directory}: no Hugging Face weights (expected one of {list(WEIGHT_FILES)}; "
        f"found {present})"
    )


def read_hf(directory, *, strict=True, task_module=None):
    """Reads a Hugging Face BERT directory into the canonical weight dict.

    Example:

    >>> config, weights = read_hf("all-MiniLM-L6-v2")  # doctest: +SKIP
    >>> config.num_layers, weights["bert/embeddings/word_embeddings"].shape  # doctest: +SKIP
    (6, (30522, 384))

    Args:
        directory: a directory with `config.json` and `model.safetensors`,
            a sharded `model.safetensors.index.json`, or `pytorch_model.bin`
            (the last needs torch).
        strict: bool. If True, tensors that are neither BERT encoder weights
            nor its pretraining heads (e.g. a `classifier.*` task head) raise
            `CheckpointMismatchError`; if False they are dropped with a warning.
        task_module: the module name of a fine-tuned head the caller reads itself
            (`classifier`: `bert_keras.checkpoints.task_heads.read_hf_task_head`): its
            `.weight` / `.bias` are left out, not refused.

    Returns:
        `(BertConfig, dict[str, np.ndarray])` keyed by google-research names,
        float32, with `cls/` pretraining heads when the directory has them.
    """
    directory = os.fspath(directory)
    config_path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise CheckpointFormatError(f"{directory}: no {CONFIG_FILE} (a Hugging Face model directory has one)")
    config = BertConfig.from_hf_json(config_path)
    tensors = load_hf_tensors(directory)

    weights, unknown = {}, []
    for name, value in tensors.items():
        if _IGNORED.search(name):
            continue
        if name.removeprefix("bert.") in (_DECODER_WEIGHT, _DECODER_BIAS):
            continue  # tied, checked below
        if task_module is not None and name in (f"{task_module}.weight", f"{task_module}.bias"):
            continue
        found = hf_to_canonical_name(name)
        if found is None:
            unknown.append(name)
            continue
        canonical, transpose = found
        value = np.asarray(value, dtype=np.float32)
        weights[canonical] = np.ascontiguousarray(value.T) if transpose else value

    _check_tied_decoder(directory, tensors, weights, unknown)
    reject_or_drop_unused(directory, unknown, strict=strict, what="tensor(s)")
    if not weights:
        raise CheckpointMismatchError(
            f"{directory}: no BERT weights found (first names: {sorted(tensors)[:5]})"
        )
    return config, weights


def _check_tied_decoder(directory, tensors, weights, unknown):
    """Validates `cls.predictions.decoder.*` against what they are tied to.

    BERT's masked-LM output layer reuses the word embeddings, so the canonical
    dict has no decoder matrix. A file whose decoder differs (untied) cannot be
    represented: that is reported as an unknown tensor rather than silently lost.
    """
    for prefix in ("", "bert."):
        decoder = tensors.get(prefix + _DECODER_WEIGHT)
        if decoder is not None:
            embeddings = weights.get("bert/embeddings/word_embeddings")
            if embeddings is None or not np.array_equal(np.asarray(decoder, np.float32), embeddings):
                unknown.append(f"{prefix}{_DECODER_WEIGHT} (not tied to the word embeddings)")
        bias = tensors.get(prefix + _DECODER_BIAS)
        if bias is not None:
            bias = np.asarray(bias, dtype=np.float32)
            current = weights.setdefault("cls/predictions/output_bias", bias)
            if not np.array_equal(current, bias):
                unknown.append(f"{prefix}{_DECODER_BIAS} (differs from cls.predictions.bias)")


# ---- writing ------------------------------------------------------------


def write_hf(directory, config, canonical, vocab_file=None, *, stage_files=None, task_head=None):
    """Writes a Hugging Face BERT directory: `config.json` + `model.safetensors`.

    Without `cls/` heads the names are `BertModel`'s (no prefix); with them,
    `BertForPreTraining`'s (`bert.` prefix, `cls.*`), which `BertModel` loads
    too. The directory is assembled beside the target and moved into place.

    Example:

    >>> write_hf("my-bert", config, weights, vocab_file="vocab.txt")  # doctest: +SKIP
    >>> transformers.BertModel.from_pretrained("my-bert")  # doctest: +SKIP

    Args:
        directory: target directory (created; existing files of the same
            names are replaced, and the weight files and `tokenizer.json` of the
            model they replace are removed; other files are left alone).
        config: `BertConfig`.
        canonical: dict of canonical name -> array.
        vocab_file: optional WordPiece vocabulary, copied as `vocab.txt`.
        task_head: optional `(architecture, {HF tensor name: array}, {config field: value})` of a
            fine-tuned head (`bert_keras.checkpoints.task_heads.hf_task_head`): written with the
            encoder under `bert.` as that `transformers` class (`BertForSequenceClassification`, ...).
        stage_files: optional `callable(staging directory)` that writes more files (the tokenizer's)
            to be committed with the weights: a directory never holds new weights beside old or
            missing tokenizer files.

    Returns:
        The directory written.
    """
    from safetensors.numpy import save_file

    has_mlm = any(name.startswith("cls/predictions/") for name in canonical)
    has_nsp = any(name.startswith("cls/seq_relationship/") for name in canonical)
    if task_head is not None and (has_mlm or has_nsp):
        raise CheckpointMismatchError("a Hugging Face directory holds pretraining heads or a task head, not both")
    prefix = "bert." if (has_mlm or has_nsp or task_head is not None) else ""
    tensors = {}
    for name, value in sorted(canonical.items()):
        hf_name, transpose = canonical_to_hf_name(name)
        value = np.asarray(value, dtype=np.float32)
        if not hf_name.startswith("cls."):
            hf_name = prefix + hf_name
        tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value)

    hf_config = config.to_hf_dict()
    if has_mlm and has_nsp:
        hf_config["architectures"] = ["BertForPreTraining"]
    elif has_mlm:
        hf_config["architectures"] = ["BertForMaskedLM"]
    if task_head is not None:
        architecture, head_tensors, fields = task_head
        hf_config.update(fields, architectures=[architecture])
        tensors.update({name: np.ascontiguousarray(np.asarray(value, dtype=np.float32))
                        for name, value in head_tensors.items()})

    commit = atomic_directory(directory)
    with commit as staging:
        # "format": "pt" is what transformers expects in safetensors metadata.
        save_file(tensors, os.path.join(staging, SAFETENSORS_FILE), metadata={"format": "pt"})
        with open(os.path.join(staging, CONFIG_FILE), "w", encoding="utf-8") as f:
            json.dump(hf_config, f, indent=2, sort_keys=True)
            f.write("\n")
        if vocab_file is not None:
            shutil.copyfile(vocab_file, os.path.join(staging, VOCAB_FILE))
        if stage_files is not None:
            stage_files(staging)
        commit.remove = _superseded_files(directory, staging)
    return os.fspath(directory)


def superseded_weight_files(directory):
    """The weight files of another model a new `model.safetensors` in `directory` replaces (names):
    `pytorch_model.bin`, the sharded indexes and the shards they name."""
    names = {TORCH_FILE, SAFETENSORS_INDEX, TORCH_INDEX}
    for index in (SAFETENSORS_INDEX, TORCH_INDEX):
        try:
            with open(os.path.join(directory, index), encoding="utf-8") as f:
                weight_map = json.load(f).get("weight_map", {})
            names |= {shard for shard in weight_map.values() if isinstance(shard, str) and "/" not in shard}
        except (OSError, ValueError, AttributeError):
            pass
    return sorted(names)


def _superseded_files(directory, staging):
    """The files of a model `directory` held before that the files staged for it replace: other
    weight files (transformers would load `pytorch_model.bin` or shards of another model beside
    the new `model.safetensors` in some versions, and they waste the space), and with a new
    `vocab.txt` the `tokenizer.json` of the old vocabulary (transformers' `AutoTokenizer` reads
    it before `vocab.txt`). Other files stay."""
    if not os.path.isdir(directory):
        return []
    present = set(os.listdir(directory))
    superseded = set(superseded_weight_files(directory))
    if os.path.isfile(os.path.join(staging, VOCAB_FILE)):
        superseded.add(TOKENIZER_JSON)
    return sorted((superseded & present) - set(os.listdir(staging)))


def sentence_max_seq_length(directory):
    """The `max_seq_length` of a sentence-transformers model directory (its
    `sentence_bert_config.json`: the tokens, [CLS] and [SEP] included, that
    `SentenceTransformer.encode` reads of a text), or None without that file or key.

    Raises:
        CheckpointFormatError: the file is not JSON, or the value is not a whole number >= 3.
    """
    path = os.path.join(directory, SENTENCE_CONFIG)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f).get("max_seq_length")
    except (ValueError, AttributeError) as error:
        raise CheckpointFormatError(f"{path}: not a JSON object ({error})") from None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 3:
        raise CheckpointFormatError(f"{path}: max_seq_length {value!r} is not a whole number of at least 3")
    return value


def vocabulary_from_tokenizer_json(directory):
    """The vocab.txt of an HF directory that holds its vocabulary in `tokenizer.json` only, or None.

    transformers 5 saves a BERT tokenizer as `tokenizer.json` + `tokenizer_config.json`, without
    `vocab.txt`. Its WordPiece vocabulary (token -> id) is written once as a vocab.txt into the
    user cache (`pipelines.user_cache`, keyed by the file's content; a temporary directory when
    the cache cannot be written), with the directory's rules beside it as `tokenizer_config.json`
    (`do_lower_case` / `strip_accents` of its own config, else of the `BertNormalizer`).

    Tokens added to the tokenizer (`"added_tokens"` past the WordPiece vocabulary, e.g. by
    `tokenizer.add_tokens`, with embedding rows of their own) are the vocabulary's last lines, at
    their ids; a warning lists them: they are matched as word pieces, where transformers also finds
    them inside words and across punctuation (`"[NEW]"`), so a text holding them can tokenize
    differently.

    Returns:
        The path of that vocab.txt; None when the directory has no `tokenizer.json`, or one whose
        model is not WordPiece.

    Raises:
        CheckpointFormatError: `tokenizer.json` is not JSON, its ids are not 0..n-1 once each, or
            an added token has an id of another token, or leaves a gap.
    """
    from pipelines.tokenizer.tokenizer_config import read_tokenizer_settings

    path = os.path.join(directory, TOKENIZER_JSON)
    if not os.path.isfile(path):
        return None
    data, spec = _json_file(path)
    model = spec.get("model") if isinstance(spec, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
        return None
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
    if [i for _, i in by_id] != list(range(len(by_id))):
        raise CheckpointFormatError(f"{path}: the WordPiece vocabulary's ids are not 0..{len(by_id) - 1}, "
                                    "each once")
    tokens = [token for token, _ in by_id]
    tokens += _added_tokens(path, spec.get("added_tokens"), tokens)
    settings = read_tokenizer_settings(os.path.join(directory, VOCAB_FILE))  # the directory's tokenizer_config.json
    normalizer = spec.get("normalizer") if isinstance(spec.get("normalizer"), dict) else {}
    if normalizer.get("type") == "BertNormalizer":
        settings.setdefault("lowercase", normalizer.get("lowercase", True))
        if normalizer.get("strip_accents") is not None:
            settings.setdefault("strip_accents", normalizer["strip_accents"])
    # Keyed by the rules too: two directories may share a tokenizer.json and differ in their config
    # (and by the layout: "2" holds the added tokens, which the first one left out).
    return _cached_vocabulary(b"2" + data, tokens, settings)


def _json_file(path):
    """`(bytes, parsed)` of a JSON file of a checkpoint; a file that is no JSON is named."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data, json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointFormatError(f"{path}: not JSON ({error})") from None


def vocabulary_with_added_tokens(directory):
    """The vocab.txt of an HF directory whose `vocab.txt` lacks the tokens of its `added_tokens.json`
    (transformers 4's layout after `tokenizer.add_tokens`), or None when it has no such tokens.

    Those tokens have ids past `vocab.txt`'s lines (and embedding rows of their own): without them a
    text holding `"[NEW]"` read `[UNK]` pieces where transformers reads its id. As for `tokenizer.json`
    (`vocabulary_from_tokenizer_json`), they become the vocabulary's last lines, at their ids, in a
    copy written once into the user cache with the directory's rules, and a warning lists them.

    Raises:
        CheckpointFormatError: `added_tokens.json` is not a JSON object of token -> id, or an id is of
            another token of `vocab.txt`, or leaves a gap.
    """
    from pipelines.tokenizer.tokenizer_config import read_tokenizer_settings, resolve_tokenizer_settings
    from pipelines.tokenizer.vocab import load_vocabulary

    path = os.path.join(directory, ADDED_TOKENS_FILE)
    vocab_file = os.path.join(directory, VOCAB_FILE)
    if not (os.path.isfile(path) and os.path.isfile(vocab_file)):
        return None
    data, added = _json_file(path)
    if not isinstance(added, dict):
        raise CheckpointFormatError(f'{path}: not a JSON object of {{"token": id}}')
    with open(vocab_file, "rb") as f:
        vocabulary_data = f.read()
    # As the tokenizer reads it: str.splitlines also ends a line at U+2028, \x85, \f, ..., so a token
    # holding one was two, and the added tokens' ids and the copy's lines shifted from there.
    tokens = load_vocabulary(vocab_file)
    entries = [{"content": token, "id": index} for token, index in added.items()]
    beyond = _added_tokens(path, entries, tokens)
    if not beyond:
        return None
    settings = read_tokenizer_settings(vocab_file)
    if "lowercase" not in settings:  # the copy records what the directory's vocab.txt reads as
        resolved = resolve_tokenizer_settings(vocab_file)
        settings["lowercase"] = resolved["lowercase"]
        if resolved["strip_accents"] is not None:  # a Korean vocabulary of syllables keeps its accents
            settings["strip_accents"] = resolved["strip_accents"]
    return _cached_vocabulary(b"added_tokens.json" + data + vocabulary_data, tokens + beyond, settings)


def checkpoint_added_tokens(directory):
    """The tokens an HF directory's tokenizer adds (`tokenizer.add_tokens`, `additional_special_tokens`,
    and the special tokens, which transformers finds whole too), with their flags, for
    `pipelines.BertTokenizer(added_tokens=...)`: `tokenizer.json`'s `"added_tokens"`, else
    `tokenizer_config.json`'s `"added_tokens_decoder"`, else `added_tokens.json`'s tokens (HF's
    `add_tokens` defaults); [] when it records none.

    Raises:
        CheckpointFormatError: the file is not JSON, or its entries are not of the form transformers
            writes (the file is named).
    """
    path = os.path.join(directory, TOKENIZER_JSON)
    if os.path.isfile(path):
        _, spec = _json_file(path)
        entries = spec.get("added_tokens") if isinstance(spec, dict) else None
        if entries is not None:
            if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("content"), str)
                                                        for e in entries):
                raise CheckpointFormatError(f'{path}: "added_tokens" is not a list of {{"id": int, "content": str}}')
            return [dict(e) for e in sorted(entries, key=lambda e: e.get("id", 0))]
    decoder = added_tokens_decoder(os.path.join(directory, "tokenizer_config.json"), None)
    if decoder is not None:
        return decoder
    path = os.path.join(directory, ADDED_TOKENS_FILE)
    if os.path.isfile(path):
        _, added = _json_file(path)
        if not isinstance(added, dict):
            raise CheckpointFormatError(f'{path}: not a JSON object of {{"token": id}}')
        return sorted(added, key=lambda token: added[token] if isinstance(added[token], int) else 0)
    return []


def added_tokens_decoder(path, default=()):
    """The `"added_tokens_decoder"` entries of the `tokenizer_config.json` at `path`, in id order
    (dicts of `content` and flags); `list(default)` when there is no such file or field (None: None).
    `pipelines.tokenizer.tokenizer_config.added_tokens_decoder`, a bad file a `CheckpointFormatError`.

    Raises:
        CheckpointFormatError: the file is not JSON, or the field is not of the form transformers writes.
    """
    from pipelines.tokenizer import tokenizer_config

    try:
        return tokenizer_config.added_tokens_decoder(path, default)
    except tokenizer_config.TokenizerSettingsError as error:
        raise CheckpointFormatError(str(error)) from None


@contextlib.contextmanager
def added_tokens_matched_whole():
    """Silences `_added_tokens`' warning that a directory's added tokens are read as word pieces, for a
    caller that reads them whole (`BertTokenizer(added_tokens=find_added_tokens(spec))`)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"(?s).*added token\(s\) .* matched as word pieces")
        yield


def _cached_vocabulary(key, tokens, settings):
    """`tokens` as a vocab.txt with `settings` (`lowercase`, `strip_accents`, `pre_tokenizer`,
    `max_input_chars_per_word`, `unicode_normalization`: all that `read_tokenizer_settings` reads) beside
    it, written once into the user cache under a name from `key` and the settings (a temporary directory
    when the cache cannot be written). Returns its path."""
    import hashlib
    import tempfile

    from pipelines.tokenizer.tokenizer_config import write_tokenizer_settings
    from pipelines.tokenizer.vocab import write_vocabulary
    from pipelines.user_cache import cache_root

    # A copy written before the Unicode normalization was kept has the same settings in its name but not
    # in its file: a recorded one gets a name of its own.
    kept = b"unicode_normalization kept" if settings.get("unicode_normalization") else b""
    name = hashlib.sha256(key + json.dumps(settings, sort_keys=True).encode() + kept).hexdigest()[:20]
    for root in (os.path.join(cache_root(), "hf_vocabularies"), None):
        try:
            folder = os.path.join(root, name) if root else tempfile.mkdtemp(prefix="bert_keras_vocab_")
            vocab_file = os.path.join(folder, VOCAB_FILE)
            if not os.path.isfile(vocab_file):
                write_tokenizer_settings(vocab_file, lowercase=settings.get("lowercase", True),
                                         strip_accents=settings.get("strip_accents"),
                                         pre_tokenizer=settings.get("pre_tokenizer"),
                                         max_input_chars_per_word=settings.get("max_input_chars_per_word"),
                                         unicode_normalization=settings.get("unicode_normalization"))
                write_vocabulary(tokens, vocab_file)  # last: its presence means done
            return vocab_file
        except OSError:
            if root is None:
                raise
    return None


def _added_tokens(path, entries, vocabulary):
    """The tokens of `tokenizer.json`'s `"added_tokens"` past `vocabulary` (its WordPiece tokens),
    in id order; they must continue its ids with no gap. Those inside it must be its own token."""
    import warnings

    if entries is None:
        return []
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get("content"), str) and type(e.get("id")) is int for e in entries):
        raise CheckpointFormatError(f'{path}: "added_tokens" is not a list of {{"id": int, "content": str}}')
    beyond = {}
    for entry in entries:
        token, index = entry["content"], entry["id"]
        if 0 <= index < len(vocabulary):
            if vocabulary[index] != token:
                raise CheckpointFormatError(
                    f'{path}: added token {token!r} has id {index}, which the WordPiece vocabulary gives to '
                    f"{vocabulary[index]!r}")
        elif beyond.setdefault(index, token) != token:
            raise CheckpointFormatError(f"{path}: added tokens {beyond[index]!r} and {token!r} share id {index}")
    ids = sorted(beyond)
    if ids != list(range(len(vocabulary), len(vocabulary) + len(ids))):
        raise CheckpointFormatError(
            f"{path}: the added tokens' ids {ids[:8]} do not continue the WordPiece vocabulary's "
            f"(0..{len(vocabulary) - 1}) without a gap")
    added = [beyond[i] for i in ids]
    if added:
        warnings.warn(
            f"{path}: {len(added)} added token(s) {added[:8]}{' ...' if len(added) > 8 else ''} are the "
            f"vocabulary's ids {ids[0]}..{ids[-1]}, matched as word pieces: transformers also finds them inside "
            "words and across punctuation, so a text holding them may tokenize differently (to match them as "
            "it does: load_tokenizer(spec, added_tokens=find_added_tokens(spec)))", stacklevel=3)
    return added
