"""Task families: the one registry every layer asks about a kind of fine-tuned model.

A family (classification, NER, SQuAD-style QA, multiple choice, embeddings) is one
registered `Family`: its kind names (what `task.json` records), settings with their
defaults, whether it needs label names and which head attribute counts them, its
default packed length, and where its pieces live in the layers above — the task class
(`bert_keras.tasks`, layer 5) and the serving signatures (`serving.signatures`, layer 4),
named by module path so that this module (layer 2) imports nothing above it. Each layer
resolves only its own piece (`resolve`).

Loading a directory, exporting it, its model card and sample requests, and the CLI all
dispatch through `family(kind)`; no if-chain on a kind name lives outside a family's
own modules. Adding a family: `register(Family(...))` below, its task class, its
signature module, its dataset reader if new, and tests (`docs/python-api.md`).

Example:

>>> family("ner").needs_labels, family("ner").task_class
(True, 'bert_keras.tasks.token_classifier:TokenClassifier')
>>> family("squad").default_settings["stride"], family("squad").default_seq_length
(128, 384)
>>> family("squad").current_settings({"doc_stride": 64})  # a setting's earlier name reads as today's
{'stride': 64}
>>> SquadSettings().max_query_length, family("squad").settings is SquadSettings
(64, True)
>>> KINDS
('classification', 'regression', 'ner', 'squad', 'multiple_choice', 'embedding')
>>> family("summarization")
Traceback (most recent call last):
...
bert_keras.families.UnknownFamilyError: unknown task kind 'summarization'; one of classification, regression, ner, squad, multiple_choice, embedding
"""

import dataclasses
import importlib
import types
import typing
from typing import Callable, Mapping, Optional, Tuple


class UnknownFamilyError(ValueError):
    """A kind no family registered (a typo in `task.json`, or a newer library's kind)."""


class RenamedSettingError(ValueError):
    """A setting given under both its name and its earlier name (`Family.earlier_names`), with
    different values; the message names both."""


# -- each family's settings: one frozen record, its fields' types and defaults in one place ---------
# (what `task.json` records under "settings"; `from_pretrained` takes them as keyword arguments).


@dataclasses.dataclass(frozen=True)
class ClassificationSettings:
    """A classification or regression model's settings.

    Args:
        text_pair: the model reads `(text, text_b)` pairs.
        max_length: word pieces of a long text read, in overlapping windows (None: one window).
        stride: word pieces between the starts of two windows (None: half a window).
        window_aggregation: a long text's scores from its windows' logits: "mean" (the field's
            rule), "max" (per class) or "evidence" (the windows that read like the training texts).
        window_training: `fit` trains every window on its text's label ("windows", Hugging Face's
            overflowing windows) or each text on its windows' aggregated score ("texts").
    """

    text_pair: bool = False
    max_length: Optional[int] = None
    stride: Optional[int] = None
    window_aggregation: str = "mean"
    window_training: str = "windows"


# How a word's tag comes from its pieces: the first piece's (the only rule the heads and exports read).
NER_AGGREGATIONS = ("first",)


@dataclasses.dataclass(frozen=True)
class NerSettings:
    """A token classification (NER) model's settings.

    Args:
        aggregation: how a word's tag comes from its pieces: "first" (its first piece's, as
            BERT's CoNLL-2003 recipe and HF's `aggregation_strategy="first"`).
        max_length, stride: long texts in windows, as `ClassificationSettings`'.
    """

    aggregation: str = "first"
    max_length: Optional[int] = None
    stride: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class SquadSettings:
    """A SQuAD-style question answering model's settings (google-research `run_squad.py`'s defaults).

    Args:
        version_2: SQuAD v2.0 (questions may have no answer).
        stride: word pieces between the starts of two context windows (`pipelines.windowing`'s
            stride, as the other families'; `run_squad.py` calls it `doc_stride`, the name this
            setting had before: `Family.earlier_names`). Hugging Face `run_qa.py`'s `doc_stride`
            is the windows' overlap instead: its N is `stride = window - N` here.
        max_query_length: word pieces of a question read.
        max_answer_length: word pieces of an answer at most.
        n_best_size: start and end candidates kept per window.
        null_score_diff_threshold: v2.0's no-answer threshold (None: 0.0 until set or tuned).
        max_windows: context windows a SavedModel export reads per question.
        evaluation_metric: the official script `score` uses: "squad" (SQuAD's) or "korquad"
            (KorQuAD 1.0's, character F1).
    """

    version_2: bool = False
    stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    n_best_size: int = 20
    null_score_diff_threshold: Optional[float] = None
    max_windows: int = 16
    evaluation_metric: str = "squad"


@dataclasses.dataclass(frozen=True)
class MultipleChoiceSettings:
    """A multiple choice (SWAG) model's settings: `num_choices` endings scored per context."""

    num_choices: int = 4


@dataclasses.dataclass(frozen=True)
class EmbeddingSettings:
    """A sentence embedder's settings.

    Args:
        pooling: "mean", "cls", "max", "pooled", "concat_last4", "sum_last4", "weighted" or "bm25".
        normalize: L2-normalize the vectors.
        pooling_layer: the encoder state pooled (-1: the last block; bert-as-service's
            `-pooling_layer`).
        max_length, stride: long texts in windows, as `ClassificationSettings`'.
    """

    pooling: str = "mean"
    normalize: bool = False
    pooling_layer: int = -1
    max_length: Optional[int] = None
    stride: Optional[int] = None


def setting_type(settings, name):
    """`(python types, words)` a value of the setting `name` of the record class `settings` may have
    (None always means the default); e.g. `(int,), "an integer"`."""
    annotation = {field.name: field.type for field in dataclasses.fields(settings)}[name]
    if isinstance(annotation, str):
        annotation = typing.get_type_hints(settings)[name]
    arguments = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = arguments[0] if arguments else annotation
    return {bool: ((bool,), "true or false"), int: ((int,), "an integer"), str: ((str,), "a string"),
            float: ((int, float), "a number")}[base]


@dataclasses.dataclass(frozen=True)
class HfHead:
    """A head's `transformers` twin: the `BertFor...` class computing the same outputs.

    Args:
        architecture: the `transformers` class (`config.json`'s `architectures`).
        layer: the Keras head model's attribute holding the head's `kernel` `[H, K]` and `bias`.
        module: the torch module name of that layer (`classifier`, `qa_outputs`).
        problem_type: `config.json`'s `problem_type`, or None.
        tf1_scope: the name google-research's fine-tuning script gives this head in a TF1 checkpoint
            (`{tf1_scope}_weights` `[outputs, hidden]`, `{tf1_scope}_bias`): run_classifier.py's
            `output`, run_squad.py's `cls/squad/output`; None when no script writes it.
    """

    architecture: str
    layer: str
    module: str
    problem_type: Optional[str] = None
    tf1_scope: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Family:
    """What the layers ask of one kind of fine-tuned model.

    Args:
        kind: the name `task.json` records.
        settings: the frozen record class of the kind's settings (its fields: names, types and
            defaults; a saved value must have its field's type).
        needs_labels: a model of this kind has label names (class / tag names).
        label_count_attribute: the head's attribute holding its number of
            classes, checked against the label names (None: not counted).
        task_class: `"module:Class"` of its `bert_keras.tasks` class.
        signatures: module path of its `serving.signatures` module.
        default_seq_length: packed length when none is given.
        description: one line, for listings.
        check: `check(seq_length, settings)` -> what is wrong with these settings at this
            packed length (a message), or None; `FinetunedModel` asks it of every record.
        requests: its requests and answers for clients (`serving.requests.*`, no TensorFlow):
            the input and output names, how texts become a request, how an answer reads.
        dataset_predictions: `"module:function"` that writes a model's predictions of a whole
            dataset file in that dataset's format (`bert-keras predict --data`), or None:
            `function(task, path, directory, *, batch_size, overwrite, path_flag, directory_flag,
            **decoding)` checks its files (`pipelines.output_paths`; errors led by the flags that
            named `path` and `directory`) before predicting and returns `(summary line,
            {name: path}, scored)` (`scored`: `bert-keras evaluate` can score the file).
        earlier_names: `(earlier name, name now)` pairs of settings that were renamed: a
            `task.json`, settings dict, `.keras` config or `from_pretrained` call that still
            uses the earlier name reads as today's (`current_settings`).
        hf_head: `HfHead`, the `transformers` class that computes this head's outputs
            (`bert-keras convert DIR hf:OUT` writes it), or None (no head weights).
    """

    kind: str
    settings: type
    needs_labels: bool
    label_count_attribute: Optional[str]
    task_class: str
    signatures: str
    default_seq_length: int = 128
    description: str = ""
    check: Optional[Callable[[int, Mapping], Optional[str]]] = None
    earlier_names: Tuple[Tuple[str, str], ...] = ()
    requests: Optional[str] = None
    dataset_predictions: Optional[str] = None
    hf_head: Optional[HfHead] = None

    @property
    def default_settings(self):
        """The settings' defaults, `{name: value}` (read-only)."""
        return types.MappingProxyType(dataclasses.asdict(self.settings()))

    def current_settings(self, settings=None):
        """`settings` (a new dict) with each setting given under an earlier name (`earlier_names`)
        under its name now: the one place an earlier name is read. An earlier name given None
        is dropped (None means the default).

        Raises:
            RenamedSettingError: both names given, with different values.
        """
        current = dict(settings or {})
        for earlier, now in self.earlier_names:
            if earlier not in current:
                continue
            value = current.pop(earlier)
            given = current.get(now)
            if value is None:
                continue
            if given is not None and given != value:
                raise RenamedSettingError(f"{now}={given!r} and {earlier}={value!r}: {earlier} is the earlier "
                                          f"name of {now} (one setting); give one of them")
            current[now] = value
        return current

    def settings_with_defaults(self, settings=None):
        """`settings` completed with this kind's defaults (a new dict), earlier names read as
        today's (`current_settings`)."""
        return {**self.default_settings, **self.current_settings(settings)}


_REGISTRY = {}


def register(entry):
    """Adds a `Family`; a kind registered twice is a programming error."""
    if entry.kind in _REGISTRY:
        raise ValueError(f"task kind {entry.kind!r} is registered twice")
    _REGISTRY[entry.kind] = entry
    return entry


def family(kind):
    """The `Family` of `kind`; `UnknownFamilyError` names the known kinds."""
    try:
        return _REGISTRY[kind]
    except (KeyError, TypeError):
        raise UnknownFamilyError(f"unknown task kind {kind!r}; one of {', '.join(_REGISTRY)}") from None


def _families_of(task_class):
    return [entry for entry in _REGISTRY.values() if entry.task_class.rpartition(":")[2] == task_class.__name__]


def reads_windows(task_class):
    """Whether the tasks of `task_class` read long texts in windows (their kinds have `max_length`)."""
    return any("max_length" in entry.default_settings for entry in _families_of(task_class))


def has_setting(task_class, name):
    """Whether `name` is a setting of the kinds of `task_class` (e.g. SpanQA's `stride`)."""
    return any(name in entry.default_settings for entry in _families_of(task_class))


def current_options(task_class, options):
    """`options` (settings by keyword, `from_pretrained`'s) with the earlier names of its kinds'
    settings read as today's (`Family.current_settings`); `RenamedSettingError` for both names."""
    for entry in _families_of(task_class):
        options = entry.current_settings(options)
    return options


def resolve(path):
    """The object a `"module:attribute"` (or module) path names: the layer that owns it calls this."""
    module, _, attribute = path.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


def _pairs_read_whole(seq_length, settings):
    """A text pair is packed into one window (the longer text cut first): windows are single texts'.
    Checked here too, not only where a head is built: continuing a fine-tuned pair model
    (`from_pretrained(directory, max_length=...)`) sets them on its record."""
    windows = [name for name in ("max_length", "stride") if settings.get(name) is not None]
    if settings.get("text_pair") and windows:
        return (f"{windows[0]}: a text pair is read as one window of seq_length (the longer text cut first), "
                "never in windows; max_length / stride read long single texts")
    return None


_TEXT_CLASSIFIER = "bert_keras.tasks.text_classifier:TextClassifier"
register(Family("classification", ClassificationSettings, needs_labels=True, check=_pairs_read_whole,
                label_count_attribute="num_classes", task_class=_TEXT_CLASSIFIER,
                signatures="serving.signatures.classification", requests="serving.requests.classification",
                description="sentence or sentence-pair classification (GLUE, your CSV)",
                hf_head=HfHead("BertForSequenceClassification", "classifier", "classifier",
                               "single_label_classification", tf1_scope="output")))
register(Family("regression", ClassificationSettings, needs_labels=False, check=_pairs_read_whole,
                label_count_attribute=None,
                task_class=_TEXT_CLASSIFIER, signatures="serving.signatures.classification",
                requests="serving.requests.classification",
                description="sentence or sentence-pair regression (STS-B)",
                hf_head=HfHead("BertForSequenceClassification", "classifier", "classifier", "regression",
                               tf1_scope="output")))
def _ner_aggregation(seq_length, settings):
    """The tagging rule must be one the heads and exports read."""
    if settings["aggregation"] not in NER_AGGREGATIONS:
        return f"aggregation {settings['aggregation']!r}: one of {', '.join(map(repr, NER_AGGREGATIONS))}"
    return None


register(Family("ner", NerSettings, needs_labels=True, check=_ner_aggregation,
                label_count_attribute="num_classes",
                task_class="bert_keras.tasks.token_classifier:TokenClassifier",
                signatures="serving.signatures.token_classification", requests="serving.requests.token_classification",
                description="word tagging, entities with character offsets (CoNLL-2003)",
                hf_head=HfHead("BertForTokenClassification", "token_classifier", "classifier")))


# The official scripts a SQuAD-style model's `evaluate` can score answers with
# (`bert_keras.metrics.squad`, `bert_keras.metrics.korquad`).
EVALUATION_METRICS = ("squad", "korquad")


def _squad_windows_fit(seq_length, settings):
    """A window must hold [CLS] question [SEP] at least one context token [SEP]; the metric must exist."""
    if seq_length <= settings["max_query_length"] + 3:
        return (f"seq_length {seq_length} must exceed max_query_length + 3 "
                f"({settings['max_query_length'] + 3}): a window holds [CLS], the question (up to "
                f"max_query_length {settings['max_query_length']} pieces), [SEP], context and [SEP]; use a "
                f"seq_length of at least {settings['max_query_length'] + 4} (bert-keras: --seq-length), "
                "or a smaller max_query_length (--max-query-length)")
    if settings["max_windows"] < 1:
        return f"max_windows {settings['max_windows']} must be at least 1"
    metric = settings["evaluation_metric"]
    if metric not in EVALUATION_METRICS:
        return f"evaluation_metric {metric!r}: one of {', '.join(map(repr, EVALUATION_METRICS))}"
    if metric == "korquad" and settings["version_2"]:
        return ("evaluation_metric 'korquad' scores KorQuAD 1.0, which has no unanswerable questions: "
                "it needs version_2=False")
    return None


register(Family("squad", SquadSettings, needs_labels=False, label_count_attribute=None, default_seq_length=384,
                task_class="bert_keras.tasks.span_qa:SpanQA", signatures="serving.signatures.span_qa",
                requests="serving.requests.span_qa",
                dataset_predictions="bert_keras.tasks.named_datasets:write_squad_predictions",
                description="extractive question answering (SQuAD v1.1 / v2.0, KorQuAD 1.0)",
                check=_squad_windows_fit,
                hf_head=HfHead("BertForQuestionAnswering", "span_head", "qa_outputs", tf1_scope="cls/squad/output"),
                # run_squad.py's name of the window step, this setting's name until it took the other
                # families' (models and configs saved before still say it)
                earlier_names=(("doc_stride", "stride"),)))
register(Family("multiple_choice", MultipleChoiceSettings, needs_labels=False, label_count_attribute=None,
                task_class="bert_keras.tasks.multiple_choice:MultipleChoice",
                signatures="serving.signatures.multiple_choice", requests="serving.requests.multiple_choice",
                dataset_predictions="bert_keras.tasks.named_datasets:write_swag_predictions",
                description="pick the ending of a context (SWAG)",
                hf_head=HfHead("BertForMultipleChoice", "choice_scorer", "classifier")))
register(Family("embedding", EmbeddingSettings, needs_labels=False,
                label_count_attribute=None, task_class="bert_keras.tasks.embedder:Embedder",
                signatures="serving.signatures.embedding", requests="serving.requests.embedding",
                description="sentence vectors"))

KINDS = tuple(_REGISTRY)
