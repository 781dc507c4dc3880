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
