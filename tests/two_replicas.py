"""One training script run on one device and on two replicas (`MirroredStrategy` over two
logical CPUs), in a fresh process: the logical devices must be set before TensorFlow starts.

A script defines `train(strategy) -> (loss history, start weights, end weights)`; `compare`
appends the two runs and returns what the tests assert: the histories, how far training moved
the first weight, and the largest weight difference between the runs.
"""

import json
import os
import subprocess
import sys
import textwrap

_PROLOGUE = """
import json
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import numpy as np
"""

_EPILOGUE = """
one, start, end_one = train(tf.distribute.get_strategy())
two, _, end_two = train(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
print("RESULT", json.dumps({"one": one, "two": two, "moved": float(np.abs(end_one[0] - start[0]).max()),
                            "diff": max(float(np.abs(a - b).max()) for a, b in zip(end_one, end_two))}))
"""


def compare(script):
    """`{"one": losses, "two": losses, "moved": float, "diff": float}` of `script`'s `train`."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run([sys.executable, "-c", _PROLOGUE + textwrap.dedent(script) + _EPILOGUE],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": root})
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, run.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])
