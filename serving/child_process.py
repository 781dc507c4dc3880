"""The fresh Python processes the export's checks run (`op_registry`, `portability`).

A check's child is started with `subprocess.run`; when the exporting process is killed
(SIGKILL: no `finally` runs, no signal reaches the child), the child would go on alone for up
to its timeout, holding memory and CPU. `WITH_PARENT` is the first code of each child's script:
a daemon thread ends the child within half a second of its parent's death (the parent's pid,
passed in the environment, is no longer its parent: it was re-parented).
"""

import os

PARENT_VARIABLE = "BERT_KERAS_PARENT_PID"

WITH_PARENT = r"""
import os as _os, threading as _threading, time as _time
def _end_with_parent(parent=int(_os.environ.get("BERT_KERAS_PARENT_PID", _os.getppid()))):
    while _os.getppid() == parent:
        _time.sleep(0.5)
    _os._exit(70)
_threading.Thread(target=_end_with_parent, daemon=True).start()
"""


def child_environment(environment=None):
    """`environment` (default `os.environ`) plus this process's pid, for `WITH_PARENT`."""
    env = dict(os.environ if environment is None else environment)
    env[PARENT_VARIABLE] = str(os.getpid())
    return env
