"""Which op types a Python process has registered, read in a clean subprocess.

TensorFlow registers ops as its shared libraries load, and `import tensorflow_text`
adds its own. Listing them in a fresh interpreter keeps the answer independent
of whatever the calling process happened to import: the "core" list comes from a
process that imported only `tensorflow`, the "TF-Text" list is the difference a
second process sees after `import tensorflow_text`.

Example:

>>> from serving.op_registry import registered_ops
>>> core = registered_ops()                         # frozenset of op type names
>>> with_text = registered_ops(with_tf_text=True)
>>> sorted(with_text - core)[:2]
['CaseFoldUTF8', 'ConstrainedSequence']
"""

import json
import subprocess
import sys

# Run in the child. `op_def_registry` in TF 2.20 can only look ops up by name,
# so the full list comes from the C API (TF_GetAllOpList), the list the runtime
# itself consults; `dir(tf.raw_ops)` is the fallback, which misses the ops
# without a Python wrapper (`_Send`, `_Arg`, ...).
_CHILD = r"""
import json, sys
import tensorflow as tf
if sys.argv[1] == "1":
    import tensorflow_text  # noqa: F401  (registers its ops)
try:
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as c_api
    buffer = c_api.TF_GetAllOpList()
    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(c_api.TF_GetBuffer(buffer))
    names = [op.name for op in op_list.op]
    source = "TF_GetAllOpList"
except Exception:
    names = [name for name in dir(tf.raw_ops) if not name.startswith("__")]
    source = "tf.raw_ops"
versions = {"tensorflow": tf.__version__}
if sys.argv[1] == "1":
    versions["tensorflow_text"] = tensorflow_text.__version__
print(json.dumps({"ops": sorted(set(names)), "source": source, "versions": versions}))
"""


class RegistryListingError(RuntimeError):
    """The child interpreter could not list the ops (TensorFlow missing or broken)."""


def registry_listing(with_tf_text=False, python=None, timeout_s=300):
    """Returns {"ops": [...], "source": str, "versions": {...}} from a fresh interpreter.

    Args:
        with_tf_text: also `import tensorflow_text` before listing.
        python: the interpreter to run (default: this one).
        timeout_s: give up after this many seconds.
    """
    from serving.child_process import WITH_PARENT, child_environment

    env = child_environment()
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    completed = subprocess.run(
        [python or sys.executable, "-c", WITH_PARENT + _CHILD, "1" if with_tf_text else "0"],
        capture_output=True, text=True, env=env, timeout=timeout_s,
    )
    if completed.returncode != 0:
        raise RegistryListingError(
            f"listing the registered ops failed (exit {completed.returncode}):\n"
            f"{completed.stderr.strip()[-2000:]}"
        )
    # TensorFlow may print warnings on stdout before our JSON line.
    last_line = completed.stdout.strip().splitlines()[-1]
    return json.loads(last_line)


def registered_ops(with_tf_text=False, python=None):
    """Op type names registered after `import tensorflow` (and TF-Text if asked)."""
    return frozenset(registry_listing(with_tf_text=with_tf_text, python=python)["ops"])
