"""Atomic writes: a reader (a person, a polling server, a rerun) never sees half a file or directory.

Every file the project writes goes through here. The rules, once:

- The data goes to a temporary name **in the target's directory** (a rename is only atomic
  within one file system), is flushed and `fsync`ed, then renamed over the target with
  `os.replace`; the directory is fsynced too, so the rename survives a power cut.
- The result gets the permissions `open()` would give under the current umask (`mkstemp` and
  `mkdtemp` create 0600 / 0700 entries, which a TF Serving process running as another user
  cannot read).
- On any exception the temporary entry is removed and the target is left as it was.
- Every staged entry (a temporary file, a staging directory, a replaced directory moved aside)
  carries its owner in its name: pid, process start time and a host id (`owner_tag`). A run
  killed with SIGKILL cannot clean up, so the next write in the same directory removes the
  entries whose owner is gone (`remove_stale_staging`); a live run's, or another host's, stay.
- Updating an existing directory (`atomic_directory` without `replace`) stages the new files in
  a hidden directory inside it, then writes a commit manifest, then renames each file into
  place. A run killed before the manifest leaves the old files; one killed after it leaves a
  manifest that the next `atomic_directory` or `remove_stale_staging` on that directory finishes,
  so the directory ends up holding all the new files (or keeps all the old ones).
- Paths with a scheme (`gs://...`, any `tf.io.gfile` file system) are written to a temporary
  object and renamed with `tf.io.gfile.rename(overwrite=True)`, the closest thing object stores
  offer.

>>> import os, tempfile
>>> from pipelines.atomic_writes import atomic_directory, write_json, write_text
>>> root = tempfile.mkdtemp()
>>> path = write_text(os.path.join(root, "labels.txt"), "neg\\npos\\n")
>>> open(path).read().split()
['neg', 'pos']
>>> _ = write_json(os.path.join(root, "results.json"), {"accuracy": 0.9})
>>> with atomic_directory(os.path.join(root, "model")) as staging:
...     _ = write_text(os.path.join(staging, "config.json"), "{}")
>>> sorted(os.listdir(os.path.join(root, "model")))
['config.json']
>>> sorted(name for name in os.listdir(root) if name.startswith("."))  # nothing left behind
[]
"""

import contextlib
import errno
import hashlib
import json
import os
import posixpath
import re
import shutil
import socket
import tempfile

# `...-o<pid>.<start>.<host>-<random>[.suffix]`: the owner part of every staged name.
_OWNED_NAME = re.compile(r"-o(\d+)\.(\d+)\.([0-9a-f]{8})-[A-Za-z0-9_]+(\.[A-Za-z0-9]+)*$")
_REPLACED_PREFIX = ".replaced-"
_MERGE_PREFIX = ".update.tmp-"
COMMIT_MANIFEST = ".commit.json"


def current_umask():
    """The process umask (read without changing it for longer than one call)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def is_remote(path):
    """True for `scheme://...` paths, which go through `tf.io.gfile`."""
    return "://" in os.fspath(path)


def variables_nbytes(variables):
    """Bytes of the values of `variables` (anything with `shape` and `dtype`: Keras or TF variables,
    arrays): about what saving them writes."""
    import numpy as np

    total = 0
    for variable in variables:
        dtype = getattr(variable.dtype, "as_numpy_dtype", variable.dtype)  # a tf.DType, or a name / numpy dtype
        total += int(np.prod(tuple(variable.shape), dtype=np.int64)) * np.dtype(dtype).itemsize
    return total


def model_nbytes(model, *, optimizer=True):
    """Bytes of a Keras model's weights and (`optimizer`) its optimizer's state: about what
    `save` / `save_weights` / a checkpoint of it writes."""
    variables = list(model.weights)
    if optimizer and getattr(model, "optimizer", None) is not None:
        variables += list(getattr(model.optimizer, "variables", []))
    return variables_nbytes(variables)


def check_free_space(directory, needed, what):
    """Raises `OSError(ENOSPC)` naming `directory` when it has less room than `needed` bytes
    (plus 1% and 1 MiB for the format) for `what` (e.g. "the model's weights").

    Checked before a write that would fail part way: HDF5, for one, does not recover from a
    full disk (its later calls fail, and its objects can crash the process as they are
    freed). Remote paths are not checked.
    """
    if not needed or is_remote(directory):
        return
    want = int(needed * 1.01) + (1 << 20)
    directory = os.path.abspath(os.fspath(directory))
    existing = directory
    while not os.path.isdir(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)  # what is not made yet goes on its parent's file system
    free = shutil.disk_usage(existing).free
    if free < want:
        raise OSError(errno.ENOSPC, f"not enough space in {directory} for {what}: it needs about "
                                    f"{_megabytes(want)}, {_megabytes(free)} is free. Free some space (or "
                                    "choose another directory) and run the same command again")


# The errors of a write that did not fit: the disk, the quota, or the file size limit.
_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _megabytes(count):
    return f"{count / 1e6:,.0f} MB" if count >= 1e6 else f"{count / 1e6:.1f} MB"


@contextlib.contextmanager
def atomic_file(path, mode="w", *, encoding="utf-8", newline=None):
    """Opens a temporary file beside `path`; on a clean exit it becomes `path`.

    Args:
        path: str or PathLike. The destination; its directory is created if needed.
        mode: "w" (text) or "wb" (binary).
        encoding: text encoding for mode "w".
        newline: passed to `open` for mode "w" (`""` for the csv module).

    Yields:
        A writable file object. Everything written is fsynced before the rename.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out", "notes.txt")
    >>> with atomic_file(path) as f:
    ...     _ = f.write("hello\\n")
    >>> open(path).read()
    'hello\\n'
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file: mode must be 'w' or 'wb', not {mode!r}")
    path = os.fspath(path)
    text_options = {"encoding": encoding, "newline": newline} if mode == "w" else {}
    if is_remote(path):
        import tensorflow as tf

        directory = posixpath.dirname(path)
        tf.io.gfile.makedirs(directory)
        temporary = posixpath.join(directory, f".{posixpath.basename(path)}.tmp-{os.getpid()}")
        try:
            with tf.io.gfile.GFile(temporary, mode) as f:
                yield f
            tf.io.gfile.rename(temporary, path, overwrite=True)
        except BaseException:
            if tf.io.gfile.exists(temporary):
                tf.io.gfile.remove(temporary)
            raise
        return
    with staged_path(path) as temporary:
        with open(temporary, mode, **text_options) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())


@contextlib.contextmanager
def staged_path(path, *, suffix=None, size=None, what=None):
    """Yields a temporary path beside `path` for a library that writes by name; then renames it.

    For writers that take a file name rather than a file object (`model.save`,
    `tf.io.TFRecordWriter`, `np.save`): they write the yielded name, and on a clean exit
    it is fsynced, given umask permissions and renamed to `path`. `suffix` ends the
    temporary name (default: the extension of `path`). `size`: the bytes the writer will
    write, if known: refused up front (`check_free_space`, naming `what`) when they do not fit.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "data.bin")
    >>> with staged_path(path) as temporary:
    ...     _ = open(temporary, "wb").write(b"\\x00\\x01")
    >>> os.path.getsize(path)
    2
    """
    path = os.path.abspath(os.fspath(path))
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    remove_stale_staging(directory)
    check_free_space(directory, size, what or os.path.basename(path))
    if suffix is None:  # some writers dispatch on the extension (".keras"); Keras weights need ".weights.h5"
        suffix = os.path.splitext(path)[1]
    handle, temporary = tempfile.mkstemp(
        dir=directory, prefix=f".{os.path.basename(path)}.tmp-{owner_tag()}-", suffix=suffix)
    os.close(handle)
    try:
        yield temporary
        fsync_file(temporary)
        os.chmod(temporary, 0o666 & ~current_umask())
        os.replace(temporary, path)
        fsync_directory(directory)
    except OSError as error:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        if error.filename is not None:
            raise
        # A writer's error without the file ("[Errno 27] File too large", numpy's "8448
        # requested and 2528 written"): say which file, and that nothing of it was kept.
        reason = error.strerror or str(error)
        advice = "; free some space and run the same command again" if error.errno in _NO_ROOM else ""
        message = f"writing {path}: {reason} (nothing was written{advice})"
        raise (OSError(error.errno, message) if error.errno is not None else OSError(message)) from error
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def write_bytes(path, data):
    """Writes `data` to `path` atomically; returns `path`."""
    with atomic_file(path, "wb") as f:
        f.write(data)
    return os.fspath(path)


def write_text(path, text, *, encoding="utf-8"):
    """Writes `text` to `path` atomically; returns `path`."""
    with atomic_file(path, "w", encoding=encoding) as f:
        f.write(text)
    return os.fspath(path)


def write_json(path, content, *, indent=2, sort_keys=False, default=None, ensure_ascii=True):
    """Writes `content` as JSON (with a final newline) to `path` atomically; returns `path`."""
    text = json.dumps(content, indent=indent, sort_keys=sort_keys, default=default,
                      ensure_ascii=ensure_ascii)
    return write_text(path, text + "\n")


@contextlib.contextmanager
def atomic_tfrecord_writer(path, temporary_path):
    """A `tf.io.TFRecordWriter` on `temporary_path`, renamed to `path` when the block completes.

    Any filesystem TensorFlow reads (local, `gs://`). The file is fsynced (local) before the
    rename, so `path` is always whole; on any failure, a full disk or an interrupt, the
    temporary file is removed (if it can be) and `path` is left as it was. Name the temporary
    file per writer (`path.tmp-<unique>`): retried and speculative writers then never share one.
    """
    import tensorflow as tf

    try:
        with tf.io.TFRecordWriter(temporary_path) as writer:
            yield writer
        fsync_file(temporary_path)
        tf.io.gfile.rename(temporary_path, path, overwrite=True)
    except BaseException:
        try:
            tf.io.gfile.remove(temporary_path)
        except Exception:  # never read: readers look for the final name only
            pass
        raise


@contextlib.contextmanager
def scratch_directory(prefix):
    """A private temporary directory (mode 0700, under the system's temp directory) that a killed
    run does not leave behind for good: its name records its owner, and the next
    `scratch_directory` removes those whose run died (SIGKILL, OOM) before it could.

    >>> with scratch_directory("bert-keras-doc-") as scratch:
    ...     os.path.isdir(scratch)
    True
    >>> os.path.exists(scratch)
    False
    """
    parent = tempfile.gettempdir()
    remove_stale_staging(parent)
    path = tempfile.mkdtemp(dir=parent, prefix=f".{prefix}{owner_tag()}-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def make_staging_directory(parent, prefix):
    """An empty hidden directory in `parent` (created if needed) with the mode `mkdir` would give.

    Its name is `prefix` + `owner_tag()` + a random part. Staged entries in `parent` left by
    runs that died first are removed first (`remove_stale_staging`).

    Args:
        parent: the directory to create it in (the target's, so that a rename is atomic).
        prefix: the start of its name, e.g. `".export-3-"`; should start with "." and end with "-".
    """
    os.makedirs(parent, exist_ok=True)
    remove_stale_staging(parent)
    staging = tempfile.mkdtemp(dir=parent, prefix=f"{prefix}{owner_tag()}-")
    os.chmod(staging, 0o777 & ~current_umask())
    return staging


# -- owners of staged entries: a killed run's are removed by the next run ----------------------


def owner_tag(pid=None):
    """`o<pid>.<start>.<host>`: who owns a staged entry, written into its name.

    `start` is the process start time (clock ticks since boot, from `/proc`; 0 where there
    is none), so that a recycled pid does not keep a dead run's entry alive; `host` is 8 hex
    digits of the host name, so that a run on another machine sharing the directory is never
    judged by this machine's process table.
    """
    pid = os.getpid() if pid is None else pid
    return f"o{pid}.{_start_time(pid)}.{_host_id()}"


def running_owner(tag):
    """The pid of the live process of this host that `tag` (an `owner_tag`) names, else None.

    None also for another host's tag (nothing here can tell whether it runs) and for a
    recycled pid (another start time).
    """
    match = re.fullmatch(r"o(\d+)\.(\d+)\.([0-9a-f]{8})", tag.strip())
    if not match or match.group(3) != _host_id():
        return None
    pid, start = int(match.group(1)), int(match.group(2))
    return pid if _runs_here(pid, start) else None


def claim_owner(path):
    """Makes this process the owner that the file `path` records; returns None, or the pid of
    the live process of this host that owns it already (nothing is changed then).

    The file holds an `owner_tag`. Reading it, judging its owner and writing ours happen under
    an exclusive `flock` of the file's directory, so of processes of this host claiming at once
    exactly one gets it, also when they take over the file of an owner that is gone (killed, or
    another boot). One of another host is taken over too, as nothing here can tell whether it
    runs (see `running_owner`).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "run.owner")
    >>> claim_owner(path) is None, claim_owner(path) is None  # this process, twice
    (True, True)
    >>> release_owner(path); os.path.exists(path)
    False
    """
    tag = owner_tag()
    with _directory_locked(os.path.dirname(os.path.abspath(path))):
        try:
            with open(path, encoding="utf-8") as f:
                held = f.read().strip()
        except FileNotFoundError:
            held = None
        if held == tag:
            return None
        if held is not None:
            pid = running_owner(held)
            if pid is not None:
                return pid
        write_text(path, tag + "\n")  # atomic: a reader sees the old tag or ours, never half
        return None


@contextlib.contextmanager
def _directory_locked(directory):
    """An exclusive `flock` of `directory` for the block (released by the kernel if the process
    dies); a no-op where there is no `fcntl`."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    handle = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def release_owner(path):
    """Removes `path` if this process owns it (`claim_owner`); another owner's file stays."""
    try:
        with open(path, encoding="utf-8") as f:
            held = f.read().strip()
    except FileNotFoundError:
        return
    if held == owner_tag():
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def staging_owner_is_gone(name):
    """True when `name` is a staged entry of a run on this host that no longer runs.

    Names without an owner part (not ours, or written before owners were recorded) and
    entries of other hosts are never "gone": nothing can tell, so they are left alone.
    """
    match = _OWNED_NAME.search(name)
    return name.startswith(".") and bool(match) and owner_is_gone(
        f"o{match.group(1)}.{match.group(2)}.{match.group(3)}")


def owner_is_gone(tag):
    """True when `tag` (an `owner_tag`) names a process of this host that no longer runs.

    Another host's tag, or text that is no tag, is never "gone": nothing here can tell, so
    what it names is left alone.

    >>> owner_is_gone(owner_tag()), owner_is_gone("o1.2.zz"), owner_is_gone("1234")
    (False, False, False)
    """
    match = re.fullmatch(r"o(\d+)\.(\d+)\.([0-9a-f]{8})", tag)
    if not match or match.group(3) != _host_id():
        return False
    return not _runs_here(int(match.group(1)), int(match.group(2)))


def _runs_here(pid, start):
    """Whether process `pid`, started at `start` (0: unknown), still runs on this host."""
    return process_is_running(pid) and (start == 0 or _start_time(pid) in (0, start))


def is_staging_name(name):
    """True for the names this module gives staged entries (any owner, alive or not)."""
    return name.startswith(".") and bool(_OWNED_NAME.search(name))


def remove_stale_staging(parent):
    """Removes the staged entries in `parent` whose owner run is gone; returns their paths.

    Temporary files and staging directories are deleted. A directory an interrupted
    `install_directory` moved aside (`.replaced-NAME-...`) is deleted when `NAME` exists
    again, and renamed back to `NAME` when the run died before the new one got there.
    An update of `parent` itself (`atomic_directory` on an existing directory) that wrote its
    commit manifest is finished: its remaining files are renamed into place and the files it
    replaces are removed; one without a manifest is deleted, leaving the old files.
    """
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    removed = []
    for name in names:
        if not staging_owner_is_gone(name):
            continue
        path = os.path.join(parent, name)
        if name.startswith(_MERGE_PREFIX) and os.path.isfile(os.path.join(path, COMMIT_MANIFEST)):
            _finish_update(path, parent)
        elif name.startswith(_REPLACED_PREFIX):
            target = os.path.join(parent, _OWNED_NAME.sub("", name[len(_REPLACED_PREFIX):]))
            if not os.path.exists(target):
                with contextlib.suppress(OSError):
                    os.rename(path, target)  # the only complete copy: put it back
                continue
        _remove(path)
        removed.append(path)
    return removed


def _finish_update(staging, target):
    with open(os.path.join(staging, COMMIT_MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    _move_tree(staging, target, skip=(COMMIT_MANIFEST,))
    for name in manifest.get("remove", []):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(target, name))
    fsync_directory(target)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _host_id():
    return hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:8]


def _start_time(pid):
    """Start time of `pid` in clock ticks since boot (field 22 of /proc/PID/stat); 0 when unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def process_is_running(pid):
    """True when `pid` is a live process of this machine (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class atomic_directory:  # noqa: N801 (used as a context manager, like open())
    """Context manager: yields a staging directory, then moves its files into `target`.

    Args:
        target: str or PathLike. The directory to create or update.
        replace: False (default): if `target` exists, each staged file replaces its
            namesake and unrelated files stay (an update, below).
            True: an existing `target` is replaced as a whole (moved aside, the staging
            directory renamed in, the old one deleted), so no file of the old one survives.
        remove: names of files in an existing `target` to delete with the update (files
            the previous version had and this one does not write), e.g. `["labels.txt"]`.

    If `target` does not exist the staging directory (beside it) is renamed to it in one
    step. An update stages inside `target` (the same file system, even for "."), writes a
    commit manifest once every staged file is fsynced, then renames the files one by one
    and removes `remove`: a run killed before the manifest leaves the old files, one killed
    after it is finished by the next write in `target` (`remove_stale_staging`); one interrupted
    there by an exception (Ctrl-C) finishes the renames before the exception goes on. On an
    exception in the block nothing is moved and the staging directory is deleted.
    """

    def __init__(self, target, *, replace=False, remove=()):
        self.target = os.path.abspath(os.fspath(target))
        self.replace = replace
        self.remove = [os.fspath(name) for name in remove]

    def __enter__(self):
        if os.path.exists(self.target) and not os.path.isdir(self.target):
            raise NotADirectoryError(f"{self.target}: exists and is not a directory")
        self.update = os.path.isdir(self.target) and not self.replace
        if self.update:
            self.staging = make_staging_directory(self.target, _MERGE_PREFIX)
        else:
            self.staging = make_staging_directory(os.path.dirname(self.target),
                                                  f".{os.path.basename(self.target)}.tmp-")
        return self.staging

    def __exit__(self, exc_type, exc, tb):
        keep = False
        try:
            if exc_type is None:
                make_readable(self.staging)
                fsync_tree(self.staging)
                if self.update:
                    # The commit point: from here on the update is finished, by us or the next run.
                    write_json(os.path.join(self.staging, COMMIT_MANIFEST), {"remove": self.remove})
                    try:
                        _finish_update(self.staging, self.target)
                    except BaseException:
                        # interrupted part way (Ctrl-C during the renames): the target holds some new
                        # files beside old ones. Finish, then let the interrupt go on; if even that
                        # fails, the staged files stay for the next write in the target.
                        keep = True
                        _finish_update(self.staging, self.target)
                        keep = False
                        raise
                elif not os.path.exists(self.target):
                    os.rename(self.staging, self.target)
                else:
                    install_directory(self.staging, self.target, overwrite=True)
                fsync_directory(os.path.dirname(self.target))
        finally:
            if not keep:
                shutil.rmtree(self.staging, ignore_errors=True)
        return False


def install_directory(staging, target, *, overwrite=False):
    """Renames the complete directory `staging` to `target`.

    With `overwrite`, an existing `target` is renamed aside first and deleted only after the
    new one is in place (and put back if that rename fails), so `target` always holds a
    complete directory. Without it an existing `target` raises `FileExistsError`.
    """
    if not os.path.exists(target):
        try:
            os.rename(staging, target)
            fsync_directory(os.path.dirname(os.path.abspath(target)))
            return
        except OSError:
            if not os.path.exists(target):
                raise
            # Another writer won the race for this name: fall through.
    if not overwrite:
        raise FileExistsError(f"{target} already exists")
    if not os.path.isdir(target) or os.path.islink(target):
        raise FileExistsError(f"{target} exists and is not a directory: it is not replaced by one")
    aside = tempfile.mkdtemp(prefix=f"{_REPLACED_PREFIX}{os.path.basename(target)}-{owner_tag()}-",
                             dir=os.path.dirname(os.path.abspath(target)))
    os.rmdir(aside)  # only its unique name is wanted
    os.rename(target, aside)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(aside, target)
        raise
    fsync_directory(os.path.dirname(os.path.abspath(target)))
    shutil.rmtree(aside, ignore_errors=True)


def make_readable(root):
    """Gives the files under `root` the read bits `open()` would (some writers, safetensors'
    among them, create 0600 files that a TF Serving or web server of another user cannot read)."""
    readable = 0o444 & ~current_umask()
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            mode = os.stat(path).st_mode & 0o7777
            if mode | readable != mode:
                os.chmod(path, mode | readable)


def fsync_tree(root):
    """fsyncs every file and directory under `root` (before renaming it into place)."""
    for directory, _, files in os.walk(root):
        for name in files:
            fsync_file(os.path.join(directory, name))
        fsync_directory(directory)


def fsync_file(path):
    """Flushes a written local file to disk before it is renamed (object stores: nothing to do)."""
    if is_remote(path):
        return
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def fsync_directory(path):
    """fsyncs the directory `path` itself, so that the renames into it survive a power cut."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:  # platforms that cannot open directories
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _move_tree(source, target, *, skip=()):
    """Renames every file under `source` to the same place under `target` (`skip`: top-level names)."""
    for root, _, files in os.walk(source):
        relative = os.path.relpath(root, source)
        destination = os.path.normpath(os.path.join(target, relative))
        os.makedirs(destination, exist_ok=True)
        for name in files:
            if relative == "." and name in skip:
                continue
            os.replace(os.path.join(root, name), os.path.join(destination, name))
