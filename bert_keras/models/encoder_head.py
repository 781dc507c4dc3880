"""`EncoderHead`: what every head model that wraps one `BertEncoder` shares (a head, not a task:
`bert_keras.tasks` adds the text side).

keras-hub calls this a Task: a backbone plus a head. The shared part here is
serialisation: `get_config` nests the encoder and lists the head's own
constructor arguments, and `from_config` rebuilds the encoder first, so each
task model saves and loads as `.keras` with nothing more than the names of
its arguments.
"""

import keras

from bert_keras import padding_skipping
from bert_keras.loss_scaling import LossScalingCompile
from bert_keras.models.frozen_layers import freeze_layers, frozen_layers
from bert_keras.replica_build import FirstReplicaBuild


class EncoderHead(LossScalingCompile, FirstReplicaBuild, keras.Model):
    """Base class of the task models (pretrainer, classifiers, span QA, embedder).

    Subclasses build a functional graph around `self.encoder` and set
    `config_fields` to the names of their constructor arguments other than
    `encoder`, `name` and `trainable`; each must also be an attribute.

    Inference skips padding by default, with no code here: `predict`,
    `predict_on_batch`, `evaluate` and `model(x, training=False)` call the
    encoder with `training=False`, and `BertEncoder.call` then runs its
    per-token layers on the real tokens only (unless XLA / TPU need static
    shapes). Outputs the heads read (pooled vector, real tokens) equal the
    full computation's; heads see 0 vectors at padded positions. Build the
    encoder with `inference_skip_padding=False` for the full computation.
    `use_skip_padding` below is the training-side switch.

    Under float16, `compile` adds loss scaling whose skip-or-apply choice holds on every
    replica (`loss_scaling.py`; Keras' own lets one replica's overflow turn the weights NaN).
    Under a distribution strategy, `fit` builds its compiled metrics from the first replica's share
    of the first batch (`replica_build.py`: Keras' own fails on a batch the replicas split unevenly).
    """

    config_fields = ()

    def use_skip_padding(self, skip_padding="auto"):
        """Turns the encoder's `skip_padding` on or off for training; call after `compile`.

        `"auto"`: on unless the train step compiles with XLA (`jit_compile`,
        as Keras resolved it in `compile`) or runs under a `TPUStrategy`,
        which both need static shapes. The heads never read padded
        positions, so training computes the same loss and gradients with less
        work. Returns the value set.
        """
        static_shapes = padding_skipping.train_step_needs_static_shapes(self)
        if skip_padding == "auto":
            skip_padding = not static_shapes
        elif skip_padding and static_shapes:
            raise ValueError(
                "skip_padding=True needs dynamic shapes, which XLA (jit_compile=True) and TPUs "
                "do not allow; pass skip_padding=False (or \"auto\")."
            )
        self.encoder.skip_padding = bool(skip_padding)
        return self.encoder.skip_padding

    def get_config(self):
        config = {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "name": self.name,
            "trainable": self.trainable,
            "frozen": frozen_layers(self),
        }
        config.update({field: getattr(self, field) for field in self.config_fields})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        frozen = config.pop("frozen", [])
        head = cls(**config)
        freeze_layers(head, frozen)
        return head
