"""bert_keras's Keras classes known to `keras.models.load_model` after a bare `import bert_keras`.

Keras finds a saved custom class by its registered name (`"bert_keras>BertEncoder"`) in its
registry, which `@keras.saving.register_keras_serializable` fills when the class's module is
imported; Keras never imports a non-Keras module itself. `import bert_keras` imports no model
module (nor TensorFlow), so `keras.models.load_model("encoder.keras")` answered "Could not
locate class 'BertEncoder'". Importing every model module once Keras loads would cost about a
second to every process that imports Keras.

Instead, as soon as Keras is loaded (now, or when it is imported later), each registered name
that is not registered yet gets a stand-in whose `from_config` imports the class's module (its
decorator then replaces the stand-in with the class) and builds the real object.
`tests/bert_keras/test_keras_registry.py` keeps `REGISTERED` equal to what the decorators register.
"""

import contextlib
import importlib
import sys

from pipelines.tensorflow_import import WrappingFinder

# Registered name -> the module whose import registers it.
REGISTERED = {
    "bert_keras.tasks>Pretrainer": "bert_keras.tasks.pretrainer",
    "bert_keras>BM25Weights": "bert_keras.models.bm25_weights",
    "bert_keras>BertAdamW": "bert_keras.training.optimizer",
    "bert_keras>BertClassifier": "bert_keras.models.classifier",
    "bert_keras>BertEmbedder": "bert_keras.models.embedder",
    "bert_keras>BertEmbeddings": "bert_keras.layers.embeddings",
    "bert_keras>BertEncoder": "bert_keras.encoder",
    "bert_keras>BertMultipleChoice": "bert_keras.models.multiple_choice",
    "bert_keras>BertPretrainer": "bert_keras.models.pretrainer",
    "bert_keras>BertSelfAttention": "bert_keras.layers.attention",
    "bert_keras>BertSpanQA": "bert_keras.models.span_qa",
    "bert_keras>BertTokenClassifier": "bert_keras.models.token_classifier",
    "bert_keras>BertTransformerBlock": "bert_keras.layers.transformer_block",
    "bert_keras>BertTruncatedNormal": "bert_keras.layers.initialization",
    "bert_keras>ConfusionMatrixMetric": "bert_keras.metrics.compiled",
    "bert_keras>Dropout": "bert_keras.layers.dropout",
    "bert_keras>Embedder": "bert_keras.tasks.embedder",
    "bert_keras>F1Score": "bert_keras.metrics.compiled",
    "bert_keras>FlattenChoices": "bert_keras.layers.choice_flattening",
    "bert_keras>LabelledTokenAccuracy": "bert_keras.losses.labelled_positions",
    "bert_keras>LayerNormalization": "bert_keras.layers.layer_normalization",
    "bert_keras>MaskedLMHead": "bert_keras.layers.masked_lm_head",
    "bert_keras>MaskedSparseCategoricalCrossentropy": "bert_keras.losses.masked_sparse_categorical_crossentropy",
    "bert_keras>MatthewsCorrelation": "bert_keras.metrics.compiled",
    "bert_keras>MultipleChoice": "bert_keras.tasks.multiple_choice",
    "bert_keras>MultipleChoicePreprocessor": "bert_keras.tasks.preprocessor",
    "bert_keras>NextSentenceHead": "bert_keras.layers.next_sentence_head",
    "bert_keras>ReplicaConsistentLossScaleOptimizer": "bert_keras.loss_scaling",
    "bert_keras>ScalarMix": "bert_keras.models.embedder",
    "bert_keras>ScoreMeanSquaredError": "bert_keras.losses.score_squared_error",
    "bert_keras>SpanHead": "bert_keras.layers.span_head",
    "bert_keras>SpanQA": "bert_keras.tasks.span_qa",
    "bert_keras>SpanQAPreprocessor": "bert_keras.tasks.preprocessor",
    "bert_keras>TextClassifier": "bert_keras.tasks.text_classifier",
    "bert_keras>TextPreprocessor": "bert_keras.tasks.preprocessor",
    "bert_keras>TokenClassifier": "bert_keras.tasks.token_classifier",
    "bert_keras>TokenClassifierPreprocessor": "bert_keras.tasks.preprocessor",
    "bert_keras>WarmupLinearDecay": "bert_keras.training.optimizer",
    "bert_keras>WindowRelevance": "bert_keras.models.window_relevance",
}


def register_when_keras_loads():
    """Registers the stand-ins now if Keras is loaded, else when it is first imported; idempotent."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "saving"):
        _register_stand_ins()
    elif not any(isinstance(finder, _KerasLoadFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _KerasLoadFinder())


def _stand_in(registered_name, module_name):
    class_name = registered_name.split(">", 1)[1]

    def from_config(cls, config, *args, **kwargs):
        real = getattr(importlib.import_module(module_name), class_name)
        return real.from_config(config, *args, **kwargs)

    return type(f"Deferred{class_name}", (), {
        "__doc__": f"Stands for {module_name}.{class_name} until that module is imported.",
        "from_config": classmethod(from_config),
    })


def _register_stand_ins():
    import keras

    registry = keras.saving.get_custom_objects()
    for registered_name, module_name in REGISTERED.items():
        registry.setdefault(registered_name, _stand_in(registered_name, module_name))


class _KerasLoadFinder(WrappingFinder):
    """Wraps Keras' loader so that the stand-ins are registered right after Keras loads; it
    stays in `sys.meta_path` until then (a `find_spec` that does not load Keras leaves it)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "keras":
            return None
        return self.wrapped_spec(fullname, self._registering_after)

    @contextlib.contextmanager
    def _registering_after(self):
        yield
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        _register_stand_ins()
