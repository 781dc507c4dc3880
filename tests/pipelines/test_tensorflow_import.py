"""The first import of TensorFlow and Keras runs with the cycle collector paused, then freezes
what exists (`pipelines.tensorflow_import`); each case is a fresh process, as a user starts one."""

import json
import subprocess
import sys

import pytest
from cli_subprocess import noise_in, user_environment

_REPORT = """
import gc, json, sys
{before}
import bert_keras.tasks
class Cycle: pass
a, b = Cycle(), Cycle(); a.other, b.other = b, a
del a, b
collected = gc.collect() if gc.isenabled() else -1
print(json.dumps({{"frozen": gc.get_freeze_count(), "enabled": gc.isenabled(), "collected": collected,
                  "hooks": [type(f).__name__ for f in sys.meta_path if "Paused" in type(f).__name__]}}))
"""


def _report(before="", **env):
    result = subprocess.run([sys.executable, "-c", _REPORT.format(before=before)], capture_output=True,
                            text=True, env={**user_environment(), **env}, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


def test_a_fresh_import_loads_tensorflow_and_keras_with_the_collector_paused_then_frozen():
    report, stderr = _report()
    assert report["frozen"] > 100_000  # TensorFlow's and Keras' objects, out of later collections
    assert report["enabled"] and report["collected"] >= 2  # the collector still frees new cycles
    assert report["hooks"] == []  # the one-shot hook is gone once both are loaded
    assert not noise_in(stderr), stderr[-2000:]  # composes with the quiet TensorFlow load


@pytest.mark.parametrize("before, env", [
    ("", {"BERT_KERAS_GC_FREEZE": "0"}),                 # the opt-out
    ("gc.disable()", {}),                                 # the user's own choice is kept
    ("import tensorflow, keras", {}),                     # already loaded: too late, nothing done
], ids=["opt-out", "collector-off", "already-loaded"])
def test_the_collector_is_left_alone(before, env):
    report, _ = _report(before, **env)
    assert report["frozen"] == 0
    assert report["enabled"] == (before != "gc.disable()")


_PYPLOT = """
import io, json, sys
{before}
import bert_keras.tasks
import keras
from keras.src.visualization import plot_image_gallery
loaded_with_keras = "matplotlib.figure" in sys.modules or "matplotlib.lines" in sys.modules
import numpy as np
keras.visualization.plot_image_gallery(np.zeros((2, 8, 8, 3), "uint8"), rows=1, cols=2)  # Keras' own use
from keras.src.visualization import plot_bounding_box_gallery
assert plot_bounding_box_gallery.patches.Patch.__name__ == "Patch"
import matplotlib.pyplot as plt
figure, axes = plt.subplots()
axes.plot([0, 1], [1, 0])
png = io.BytesIO()
figure.savefig(png, format="png")
print(json.dumps({{"loaded_with_keras": loaded_with_keras, "png": png.getvalue()[:4].hex(),
                  "same_module": plot_image_gallery.plt is plt, "backend": plt.get_backend().lower(),
                  "hooks": [type(f).__name__ for f in sys.meta_path if "Keras" in type(f).__name__]}}))
"""


@pytest.mark.parametrize("before", ["", "import matplotlib.pyplot"], ids=["deferred", "user-imported-first"])
def test_keras_import_leaves_pyplot_unloaded_until_used(before):
    """Keras imports `matplotlib.pyplot` as it loads (~0.4 s); under `bert_keras` its code runs when
    something draws, Keras' own gallery and the user's figures alike."""
    result = subprocess.run([sys.executable, "-c", _PYPLOT.format(before=before)], capture_output=True,
                            text=True, env={**user_environment(), "MPLBACKEND": "agg"}, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["loaded_with_keras"] == bool(before)  # pyplot's modules did not load with Keras
    assert report["png"] == "89504e47"  # a real PNG drawn after the deferred load
    assert report["same_module"] and report["backend"] == "agg"
    assert report["hooks"] == []  # one-shot: gone once Keras is loaded
