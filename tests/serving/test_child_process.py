"""A check's child process ends with its parent (serving.child_process)."""

import os
import signal
import subprocess
import sys
import time

from serving.child_process import WITH_PARENT

_PARENT = r"""
import subprocess, sys
from serving.child_process import WITH_PARENT, child_environment
child = subprocess.Popen([sys.executable, "-c", WITH_PARENT + "import time; time.sleep(120)"],
                         env=child_environment())
print(child.pid, flush=True)
child.wait()
"""


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie (ended, not yet reaped) counts as ended
        return f.read().split(") ")[-1][0] != "Z"


def test_a_child_ends_when_its_parent_is_killed():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": root})
    child = int(parent.stdout.readline())
    time.sleep(0.5)
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 60  # a safety net: the child checks its parent every 0.5 s
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the child ran on after its parent was killed"


def test_a_child_runs_to_its_end_while_its_parent_lives():
    done = subprocess.run([sys.executable, "-c", WITH_PARENT + "import time; time.sleep(1.2); print('done')"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "done"
