"""Task models built on `BertEncoder` (the backbone): pretraining, fine-tuning heads, embeddings."""

from bert_keras.models.classifier import BertClassifier
from bert_keras.models.embedder import BertEmbedder
from bert_keras.models.finetuning import compile_for_finetuning
from bert_keras.models.multiple_choice import BertMultipleChoice
from bert_keras.models.pretrainer import BertPretrainer
from bert_keras.models.span_qa import BertSpanQA
from bert_keras.models.token_classifier import BertTokenClassifier


def _register_legacy_names():
    """Keras' legacy `.h5` loader looks classes up by their bare name (`"BertClassifier"`), not
    the registered `"bert_keras>BertClassifier"`: add those names, so that `load_model("x.h5")`
    reads what `save("x.h5")` wrote once bert_keras is imported, as `.keras` files do.

    Names Keras' own layers have (`Dropout`, `LayerNormalization`) are left out: Keras reads
    the registry before its own layers, so every plain Keras `.h5` model a user loads would get
    bert_keras's subclasses instead of the layers it was saved with. Inside a bert_keras model
    those layers carry their registered name, which Keras' functional loader reads."""
    import keras

    registry = keras.saving.get_custom_objects()
    for name, cls in list(registry.items()):
        if name.startswith("bert_keras>"):
            bare = name[len("bert_keras>"):]
            if not hasattr(keras.layers, bare):
                registry.setdefault(bare, cls)


_register_legacy_names()

__all__ = [
    "BertClassifier",
    "BertEmbedder",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanQA",
    "BertTokenClassifier",
    "compile_for_finetuning",
]
