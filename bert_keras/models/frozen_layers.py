"""Which layers of a model are frozen, in a form its config can carry across save and load.

Keras' config of a layer built in its parent's `__init__` (a head's encoder, an encoder's
blocks) does not carry that layer's `trainable`, and a functional model rebuilt from a config
that says `trainable=False` holds False without passing it to its sublayers. So without this
record a frozen encoder (or block) would come back from a `.keras` file or a saved task
trainable, and the next `fit` would train it. `EncoderHead` and the tasks save `frozen_layers`
in their configs and apply `freeze_layers` when they are rebuilt.
"""

import keras


def frozen_layers(model):
    """The layers of `model` (itself included) set `trainable = False` under a trainable parent,
    as paths of child keys (`[]`: `model`; `["head", "encoder", "transformer_layer_0"]`)."""
    frozen = []

    def visit(layer, path):
        if not layer.trainable:
            frozen.append(path)
            return  # its sublayers follow it
        for key, child in _child_layers(layer).items():
            visit(child, [*path, key])

    visit(model, [])
    return frozen


def freeze_layers(model, paths):
    """Sets `trainable = False` on the layers `frozen_layers` recorded (and so on theirs)."""
    for path in paths:
        layer = model
        for key in path:
            children = _child_layers(layer)
            if key not in children:
                raise ValueError(f"frozen layer {'/'.join(path)}: no layer {key!r} in {layer.name} (the saved "
                                 "task's layers differ from this version's)")
            layer = children[key]
        # The setter itself: TensorFlow's `AutoTrackable.__setattr__` skips an assignment of the
        # value an attribute already holds, and a functional model built with trainable=False
        # (its own config) holds False without having passed it to its sublayers.
        keras.layers.Layer.trainable.fset(layer, False)


def _child_layers(layer):
    """`{key: sublayer}` of the layers `layer` tracks directly: the attribute that holds one, else
    its name (a functional model's layers, named in its config), the same in every build of it."""
    tracked = {id(child): child for child in layer._flatten_layers(include_self=False, recursive=False)}
    keys = {id(value): name for name, value in vars(layer).items()
            if id(value) in tracked and not name.startswith("_")}
    return {keys.get(id(child), child.name): child for child in tracked.values()}
