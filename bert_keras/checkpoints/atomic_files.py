"""Atomic writes of checkpoint directories: a reader never sees a half-written one.

Files are written into a staging directory beside the target and moved in
with `os.rename` / `os.replace`, which are atomic on one filesystem.
"""

import os
import shutil
import tempfile

from bert_keras.checkpoints.errors import CheckpointFormatError


class atomic_directory:  # noqa: N801 (used as a context manager, like open())
    """Context manager: yields a staging directory beside `target`, then moves it in.

    If `target` does not exist the staging directory is renamed to it in one
    step. If it exists, each staged file replaces its namesake (one atomic
    `os.replace` per file) and unrelated files stay. On an exception nothing
    is moved and the staging directory is deleted. Shared by the HF and
    keras-hub writers.
    """

    def __init__(self, target):
        self.target = os.path.abspath(os.fspath(target))

    def __enter__(self):
        parent = os.path.dirname(self.target)
        os.makedirs(parent, exist_ok=True)
        if os.path.exists(self.target) and not os.path.isdir(self.target):
            raise CheckpointFormatError(f"{self.target}: exists and is not a directory")
        self.staging = tempfile.mkdtemp(dir=parent, prefix=f".{os.path.basename(self.target)}.tmp-")
        return self.staging

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                if not os.path.exists(self.target):
                    os.rename(self.staging, self.target)
                else:
                    _move_tree(self.staging, self.target)
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)
        return False


def _move_tree(source, target):
    for root, _, files in os.walk(source):
        relative = os.path.relpath(root, source)
        destination = os.path.normpath(os.path.join(target, relative))
        os.makedirs(destination, exist_ok=True)
        for name in files:
            os.replace(os.path.join(root, name), os.path.join(destination, name))
