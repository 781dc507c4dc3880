"""`EncoderTask`: what every model that wraps one `BertEncoder` shares.

keras-hub calls this a Task: a backbone plus a head. The shared part here is
serialisation: `get_config` nests the encoder and lists the head's own
constructor arguments, and `from_config` rebuilds the encoder first, so each
task model saves and loads as `.keras` with nothing more than the names of
its arguments.
"""

import keras


class EncoderTask(keras.Model):
    """Base class of the task models (pretrainer, classifiers, span QA, embedder).

    Subclasses build a functional graph around `self.encoder` and set
    `config_fields` to the names of their constructor arguments other than
    `encoder`, `name` and `trainable`; each must also be an attribute.
    """

    config_fields = ()

    def get_config(self):
        config = {
            "encoder": keras.saving.serialize_keras_object(self.encoder),
            "name": self.name,
            "trainable": self.trainable,
        }
        config.update({field: getattr(self, field) for field in self.config_fields})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.saving.deserialize_keras_object(config["encoder"])
        return cls(**config)
