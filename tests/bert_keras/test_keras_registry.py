"""`keras.models.load_model` after a bare `import bert_keras` (bert_keras/keras_registry.py)."""

import importlib
import os
import pkgutil
import subprocess
import sys

import pytest


def test_registered_table_is_what_the_decorators_register():
    import keras

    import bert_keras

    for module in pkgutil.walk_packages(bert_keras.__path__, "bert_keras."):
        if not module.name.startswith(("bert_keras.cli", "bert_keras.visualization", "bert_keras.examples")):
            importlib.import_module(module.name)
    registered = {name: cls.__module__ for name, cls in keras.saving.get_custom_objects().items()
                  if name.startswith("bert_keras") and ">" in name}
    from bert_keras.keras_registry import REGISTERED

    assert registered == REGISTERED


@pytest.mark.slow  # two fresh processes load Keras
def test_load_model_after_a_bare_import_in_either_order(tmp_path, tiny_config):
    from bert_keras.encoder import BertEncoder
    from bert_keras.models import BertClassifier

    encoder = BertEncoder(tiny_config)
    encoder.save(tmp_path / "encoder.keras")
    BertClassifier(encoder, num_classes=3).save(tmp_path / "classifier.keras")
    load = ("; import keras\nfor name in ('encoder.keras', 'classifier.keras'):\n"
            f"    m = keras.models.load_model(os.path.join({str(tmp_path)!r}, name))\n"
            "    print(type(m).__module__ + '.' + type(m).__name__)")
    for imports in ("import os, keras, bert_keras", "import os, bert_keras, keras"):
        result = subprocess.run([sys.executable, "-c", imports + load], capture_output=True, text=True,
                                env=dict(os.environ), timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.split() == ["bert_keras.encoder.BertEncoder",
                                         "bert_keras.models.classifier.BertClassifier"]


def test_a_bare_import_still_loads_no_tensorflow():
    result = subprocess.run([sys.executable, "-c", "import sys, bert_keras; "
                             "print('keras' in sys.modules, 'tensorflow' in sys.modules)"],
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["False", "False"]
