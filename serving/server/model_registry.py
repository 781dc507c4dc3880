"""Which model versions are loaded, and routing requests to them while versions come and go.

For each `ModelSource` the registry polls `base_path` for version directories (names TF Serving
reads as an int64, `version_files.version_of_name`: "1", "007", "0", "-2"; holding saved_model.pb),
applies the version policy, and:

- loads a new version with `tf.saved_model.load` in this process (TF-Text ops registered
  first when tensorflow_text is installed), reads its SignatureDefs from saved_model.pb, runs
  the warmup callback (the engine replays assets.extra/tf_serving_warmup_requests), and only
  then routes requests to it: a request never waits for, or fails on, a loading version;
- keeps a version that dropped out of the policy until its in-flight requests finish
  (each request holds a reference from `acquire` to `release`), then unloads it. Hot swap
  therefore fails no request;
- loads only version directories that are complete and no longer being written
  (`version_files.readiness`: a non-atomic `cp -r` is waited for, not loaded half-written;
  an export's manifest, `serving.export_manifest`, is checked file by file, checksums
  included, before the load), and fails a load whose files changed while it ran;
- reloads a served version whose files change after it was loaded (a lookup table built
  from `assets/labels.txt` would not see the change): the old graph serves until the new
  one is AVAILABLE, and keeps serving if the changed files do not load;
- retries a failed load as TF Serving does (`LoadRetryOptions`: --max_num_load_retries 5,
  --load_retry_interval_micros 60 s); while a retry is pending the version is LOADING with
  the last error in its status, after the last one it is END with the real error code and
  message (at once for a failure the same files repeat, `NotRetriedLoadError`: a warmup
  record over batching's max_batch_size). A failed version is retried afresh when its files
  change. The policy counts only loadable versions: with `latest {num_versions: 1}`, a broken
  version 3 leaves version 2 serving instead of taking the model down.

Every transition is logged, one line each: loading, available, failed (retrying in ...),
unloading, unloaded.

States follow TF Serving's ModelVersionStatus: START, LOADING, AVAILABLE, UNLOADING, END.

Example:
    >>> registry = ModelRegistry([ModelSource("tiny", "/models/tiny")], poll_interval_s=0)  # doctest: +SKIP
    >>> registry.start()                                                                      # doctest: +SKIP
    >>> servable = registry.acquire("tiny")            # the latest AVAILABLE version         # doctest: +SKIP
    >>> try:                                                                                  # doctest: +SKIP
    ...     fn = servable.functions["serving_default"]
    ... finally:
    ...     servable.release()
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import struct
import threading
import time
from typing import Callable, Sequence

from serving.server.errors import NotRetriedLoadError, ServingError, from_tf_error
from serving.server.model_config import ModelSource
from serving.server.servable import AVAILABLE, END, LOADING, START, UNLOADING, ServableVersion
from serving.server.signatures import read_signatures
from serving.export_manifest import ABSENT, COMPLETE, check_manifest
from serving.server.version_files import MAX_VERSION, readiness, snapshot, version_of_name
from serving.server.window_cost import QuestionContextCost, WindowCost

__all__ = ["ModelRegistry", "LoadRetryOptions", "ServableVersion", "START", "LOADING", "AVAILABLE", "UNLOADING", "END"]

log = logging.getLogger(__name__)



_tf_text_lock = threading.Lock()
_tf_text_imported = False


def _register_tf_text_ops():
    """Import tensorflow_text once (if installed) so SavedModels using its ops load."""
    global _tf_text_imported
    with _tf_text_lock:
        if not _tf_text_imported:
            try:
                import tensorflow_text  # noqa: F401  (registers the TF-Text kernels)
            except ImportError:
                log.info("tensorflow_text is not installed; SavedModels using TF-Text ops will fail to load")
            _tf_text_imported = True


def no_version_reason(base, entries, name="model"):
    """Why `base` (the base path of model `name`, holding `entries`) has no version to load, with the fix for
    the usual mistakes: a version directory or a fine-tuned model (not exported) named as the base
    path, the directory of several models, an export whose directory is not a version number.

    TF Serving answers only "No versions of servable ... found under base path"; the path named
    one level too high or too low, or an unexported model, is what is behind it almost every time.
    """
    def holds_export(path):
        return os.path.isfile(os.path.join(path, "saved_model.pb"))

    if holds_export(base):  # the base path names a version itself
        return (f"{base} is itself a version directory (it holds saved_model.pb): the base path is "
                f"the directory of the numbered versions, {os.path.dirname(os.path.normpath(base))}")
    from bert_keras.finetuned_model import is_finetuned_directory  # no TensorFlow, no Keras

    if is_finetuned_directory(base):
        # Exported under the served name, its base path's name is that name (serve's default)
        export = os.path.join("exports", name)
        return (f"{base} is a fine-tuned model (task.json), not an export; export it and serve the export: "
                f"bert-keras export --model {shlex.quote(base)} --base-path exports --model-name {shlex.quote(name)} "
                f"&& bert-keras serve --model-base-path {shlex.quote(export)} (with a --model-config-file: "
                f"base_path {export!r} there)")
    children = [entry for entry in sorted(entries) if os.path.isdir(os.path.join(base, entry))]
    unnumbered = [entry for entry in children if holds_export(os.path.join(base, entry))]
    if unnumbered:
        return (f"{os.path.join(base, unnumbered[0])} holds a saved_model.pb, but a version directory is named "
                f"by its version number: rename it {os.path.join(base, '1')} (TF Serving serves "
                "<base path>/<version>/saved_model.pb)")
    models = [entry for entry in children
              if any(version_of_name(child) is not None and holds_export(os.path.join(base, entry, child))
                     for child in _listed(os.path.join(base, entry)))]
    if models:
        return (f"{base} holds models, not versions ({', '.join(models[:5])}): the base path of one is "
                f"{os.path.join(base, models[0])} (several: a --model-config-file listing each)")
    return f"no complete version directory with a saved_model.pb under {base}"


def _listed(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


@dataclasses.dataclass(frozen=True)
class LoadRetryOptions:
    """TF Serving's load retry flags.

    Args:
        max_num_load_retries: Retries after a failed load (--max-num-load-retries; TF Serving's
            default 5). 0: a failed load is final until the version's files change.
        load_retry_interval_s: Seconds between attempts (--load-retry-interval-micros / 1e6;
            TF Serving's default 60 s).
    """

    max_num_load_retries: int = 5
    load_retry_interval_s: float = 60.0

    def __post_init__(self):
        if self.max_num_load_retries < 0 or self.load_retry_interval_s < 0:
            raise ValueError(f"LoadRetryOptions must not be negative: {self}")


def _one_line(text, limit=300):
    """A message as one log line (TF's load errors span several)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_DAMAGED = (IndexError, EOFError, struct.error, OverflowError)


def _load_error(exc, path) -> ServingError:
    """The canonical code and message of a failed load (never UNKNOWN for a known cause)."""
    where = f"loading {path}"
    if isinstance(exc, ServingError):
        return ServingError(exc.code, f"{where}: {exc.message}")
    if hasattr(exc, "error_code"):  # tf.errors.OpError
        return from_tf_error(exc, where)
    if isinstance(exc, FileNotFoundError):
        return ServingError("NOT_FOUND", f"{where}: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))
    if isinstance(exc, PermissionError):
        return ServingError("PERMISSION_DENIED", f"{where}: {exc.strerror or exc}: {exc.filename or ''}")
    if isinstance(exc, OSError):
        return ServingError("UNAVAILABLE", f"{where}: {exc.strerror or exc}")
    if isinstance(exc, (ValueError, TypeError, KeyError)) or type(exc).__name__ == "DecodeError":
        return ServingError("DATA_LOSS", f"{where}: not a loadable SavedModel: {exc}")
    if isinstance(exc, _DAMAGED):
        # What TF's Python readers raise on a file cut short or overwritten ("IndexError: Read less
        # bytes than requested" from a truncated variables.data shard): the version is damaged.
        return ServingError("DATA_LOSS", f"{where}: the version directory is damaged (a file is truncated or "
                                         f"corrupt; copy the version again): {type(exc).__name__}: {exc}")
    if isinstance(exc, MemoryError):
        return ServingError("RESOURCE_EXHAUSTED", f"{where}: out of memory while loading")
    return ServingError("UNKNOWN", f"{where}: {type(exc).__name__}: {exc}")


class _FilesChanged(Exception):
    """A version's files changed while it loaded: what was loaded may mix old and new files."""


class _Model:
    def __init__(self, source: ModelSource):
        self.source = source
        self.lock = threading.Lock()  # guards versions / available
        self.poll_lock = threading.Lock()  # one poll at a time (thread + explicit poll)
        self.versions: dict = {}  # every tracked version, failed and unloaded ones included
        self.available: dict = {}  # routing table: replaced (never mutated) under `lock`
        self.error = None  # base path problem, for messages
        self.ignored = set()  # directory names already reported as not a version (logged once each)
        self.waiting = {}  # version -> why it is not ready yet (logged once per version)
        self.reload_failed = {}  # version -> fingerprint of changed files that did not load (not retried)


class ModelRegistry:
    """Loads, routes and unloads versions of several models.

    Args:
        sources: The models to serve.
        warmup: Called with each newly loaded `ServableVersion` before it becomes AVAILABLE;
            an exception fails the load.
        poll_interval_s: Seconds between file-system polls (<= 0: load once at start, no polling,
            no retries).
        load_retries: How often and how far apart failed loads are retried.
    """

    def __init__(
        self,
        sources: Sequence[ModelSource],
        *,
        warmup: Callable[[ServableVersion], None] | None = None,
        poll_interval_s: float = 1.0,
        load_retries: LoadRetryOptions = LoadRetryOptions(),
    ):
        names = [s.name for s in sources]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"model names must be unique; repeated: {duplicates}")
        self._models = {s.name: _Model(s) for s in sources}
        self._warmup = warmup
        self._poll_interval_s = poll_interval_s
        self._retries = load_retries
        self._stop = threading.Event()
        self._threads = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Load every model's policy versions now, then poll in background threads."""
        for name in self._models:
            self.poll(name)
        if self._poll_interval_s > 0:
            for name in self._models:
                thread = threading.Thread(target=self._poll_loop, args=(name,), name=f"poll-{name}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop polling (a load in progress finishes first, up to `timeout_s`)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads = []

    def unload_all(self, timeout_s: float = 30.0) -> None:
        """Unload every version (after in-flight requests finish, up to `timeout_s` each)."""
        for model in self._models.values():
            # A poll still loading a big version must not hang shutdown: give up on that model.
            if not model.poll_lock.acquire(timeout=max(timeout_s, 0.001)):
                log.warning("model %r is still loading; not unloaded", model.source.name)
                continue
            try:
                for servable in list(model.available.values()):
                    self._unload(model, servable, timeout_s)
            finally:
                model.poll_lock.release()

    def _poll_loop(self, name):
        model = self._models[name]
        while True:
            wait = self._poll_interval_s
            with model.lock:
                pending = [s.retry_at for s in model.versions.values() if s.retry_at is not None]
            if pending:  # a retry due before the next poll runs on time
                wait = max(0.0, min(wait, min(pending) - time.monotonic()))
            if self._stop.wait(wait):
                return
            try:
                self.poll(name)
            except Exception:  # a poll must never kill the thread
                log.exception("polling model %r failed", name)

    # ------------------------------------------------------------------ polling

    def _list_versions(self, model: _Model) -> dict:
        base = model.source.base_path
        try:
            entries = os.listdir(base)
        except FileNotFoundError:
            model.error = f"base_path {base} does not exist"
            return {}
        except OSError as exc:
            model.error = f"cannot list base_path {base}: {exc.strerror}"
            return {}
        found = {}
        with model.lock:
            known = {v: s.state for v, s in model.versions.items()}
        # Two names of one version ("01", "1", " 1"): TF Serving's file_system_storage_path_source lists the
        # children sorted (a std::set). For the latest and specific policies it indexes them by version
        # (IndexChildrenByVersion), so the last name sorted wins; for `all` (AspireAllVersions) it aspires
        # every child, and the manager refuses the second of one version (BasicManager: "This servable is
        # already being managed"), so the first name sorted is loaded.
        names = {}
        first_wins = model.source.version_policy == "all"
        for entry in sorted(entries):
            version = self._version_of(model, entry)
            if version is None:
                continue
            if version in names:
                loaded, ignored = (names[version], entry) if first_wins else (entry, names[version])
                if (model.source.name, version) not in model.ignored:
                    model.ignored.add((model.source.name, version))
                    log.warning("model %r: directories %r and %r under %s are both version %d: %r is loaded, "
                                "%r ignored", model.source.name, names[version], entry, base, version, loaded,
                                ignored)
                names[version] = loaded
                continue
            names[version] = entry
        for version in [v for v in model.waiting if v not in names]:  # removed while it was being written
            model.waiting.pop(version)
        for version, entry in names.items():
            path = os.path.join(base, entry)
            if known.get(version) in (AVAILABLE, UNLOADING):
                found[version] = path
                continue
            ready, why_not = readiness(path)
            if ready:
                found[version] = path
                model.waiting.pop(version, None)
            elif version not in model.waiting:
                model.waiting[version] = why_not
                log.info("model %r version %d: waiting for its files (%s)", model.source.name, version, why_not)
        if found:
            model.error = None
        elif not model.waiting:  # a version still being written is waited for, not diagnosed
            model.error = no_version_reason(base, entries, model.source.name)
        else:
            model.error = f"no complete version directory with a saved_model.pb under {base}"
        return found

    @staticmethod
    def _version_of(model: _Model, entry: str):
        """The version a directory name stands for (`version_of_name`: TF Serving's safe_strto64, so "0"
        and "-1" are versions too), or None.

        `str.isdigit()` also accepts "²" (which int() refuses) and "９" (which int() reads as 9):
        such names are not versions. They are logged once, since they look like one.
        """
        version = version_of_name(entry)
        if version is not None:
            return version
        if entry.isdigit() and entry not in model.ignored:  # temp dirs, hidden files, assets: silently
            model.ignored.add(entry)
            log.warning("model %r: ignoring %r under %s: version directories are named with ASCII digits 0-9, "
                        "at most %d (int64)", model.source.name, entry, model.source.base_path, MAX_VERSION)
        return None

    @staticmethod
    def _check_specific_versions(model: _Model, on_disk: dict) -> None:
        """A `specific` policy's versions that are not under the base path: said in the model's error (what a
        request for it answers) and logged once, as TF Serving's AspireSpecificVersions logs "Version N of
        servable X, which was requested to be served as a 'specific' version ..., was not found in the file
        system" (a version still being copied is waited for, not reported)."""
        source = model.source
        if source.version_policy != "specific":
            return
        missing = sorted(set(source.versions) - set(on_disk) - set(model.waiting))
        if not missing:
            return
        model.error = (f"version(s) {missing} of its specific version policy not found under {source.base_path} "
                       f"(versions there: {sorted(on_disk)})")
        if ("specific", tuple(missing)) not in model.ignored:
            model.ignored.add(("specific", tuple(missing)))
            log.warning("model %r: %s", source.name, model.error)

    def _aspired(self, source: ModelSource, on_disk: dict, failed: set) -> set:
        loadable = sorted((v for v in on_disk if v not in failed), reverse=True)
        if source.version_policy == "latest":
            return set(loadable[: source.num_versions])
        if source.version_policy == "all":
            return set(loadable)
        return set(source.versions) & set(loadable)

    def poll(self, name: str) -> None:
        """One poll of model `name`: load versions entering the policy, unload those leaving it."""
        model = self._models[name]
        with model.poll_lock:
            on_disk = self._list_versions(model)
            self._check_specific_versions(model, on_disk)
            with model.lock:
                for version, servable in list(model.versions.items()):
                    if servable.state != END:
                        continue
                    if version not in on_disk or (
                        servable.error is not None and snapshot(on_disk[version]) != servable.fingerprint
                    ):
                        # gone from disk, or failed and its files were replaced since: forget
                        # it (a replaced version is retried below)
                        del model.versions[version]
            # Loading may fail, which changes what the policy picks (the next older version):
            # repeat until every aspired version is loaded or failed.
            while True:
                now = time.monotonic()
                versions = model.versions
                blocked = {  # failed for good, or waiting for a retry
                    v for v, s in versions.items()
                    if s.error is not None and (s.state == END or (s.retry_at is not None and s.retry_at > now))
                }
                aspired = self._aspired(model.source, on_disk, blocked)
                to_load = sorted(
                    (v for v in aspired if v not in versions or versions[v].state == END or versions[v].retry_at),
                    reverse=True,
                )
                if not to_load or self._stop.is_set():
                    break
                for version in to_load:  # newest first: it serves as soon as it is ready
                    self._load(model, version, on_disk[version], versions.get(version))
            for version, servable in list(model.available.items()):
                if version not in aspired:
                    self._unload(model, servable)
                elif not self._stop.is_set():
                    self._reload_if_changed(model, servable)

    def _load(self, model: _Model, version: int, path: str, previous: ServableVersion | None = None) -> None:
        servable = ServableVersion(model.source.name, version, path)
        if previous is not None and previous.retry_at is not None:
            servable.attempts = previous.attempts  # a retry continues the count
        with model.lock:
            model.versions[version] = servable
        servable.state = LOADING
        log.info("model %r version %d: loading from %s%s", model.source.name, version, path,
                 f" (retry {servable.attempts} of {self._retries.max_num_load_retries})" if servable.attempts else "")
        try:
            self._read_version(servable)
        except _FilesChanged as exc:
            # Not a failure of the version: poll forgets it (its fingerprint differs now) and loads
            # it again once its files are whole.
            servable.error = ServingError("UNAVAILABLE", f"loading {path}: {exc}")
            servable.drop()
            servable.state = END
            log.warning("model %r version %d: %s; loading it again once they settle", model.source.name, version, exc)
            return
        except Exception as exc:
            servable.error = _load_error(exc, path)
            servable.drop()
            servable.attempts += 1
            retries = self._retries
            if servable.attempts <= retries.max_num_load_retries and self._poll_interval_s > 0 \
                    and not self._stop.is_set() and not isinstance(exc, NotRetriedLoadError):
                servable.retry_at = time.monotonic() + retries.load_retry_interval_s
                log.warning("model %r version %d: failed to load (%s: %s); retrying in %g s (%d of %d)",
                            model.source.name, version, servable.error.code, _one_line(servable.error.message),
                            retries.load_retry_interval_s, servable.attempts, retries.max_num_load_retries)
            else:
                servable.state = END
                log.error("model %r version %d: failed to load (%s: %s)", model.source.name, version,
                          servable.error.code, _one_line(servable.error.message))
            return
        with model.lock:
            servable.state = AVAILABLE
            model.available = {**model.available, version: servable}
        log.info("model %r version %d: available", model.source.name, version)

    def _read_version(self, servable: ServableVersion) -> None:
        """Loads `servable` from its files, checked against its export manifest (a `ServingError`
        when damaged), warmed up, and `_FilesChanged` when they changed while it loaded."""
        import tensorflow as tf

        path = servable.path
        manifest = check_manifest(path, checksums=True)
        if manifest.state not in (COMPLETE, ABSENT):
            raise ServingError("DATA_LOSS", f"loading {path}: the version's files are not those its export "
                                            f"manifest lists ({manifest.problem}): copy the version again")
        _register_tf_text_ops()
        servable.signatures, servable.signature_def_map = read_signatures(path)
        servable.loaded = tf.saved_model.load(path)
        servable.functions = dict(servable.loaded.signatures.items())
        servable.window_cost = (WindowCost.of_loaded(servable.loaded, path)
                                or QuestionContextCost.of_loaded(servable.loaded, path))
        if self._warmup is not None:
            self._warmup(servable)
        if snapshot(path) != servable.fingerprint:
            raise _FilesChanged("its files changed while it loaded")

    def _reload_if_changed(self, model: _Model, servable: ServableVersion) -> None:
        """Loads a served version again when its files changed since it was loaded; the old graph
        serves until the new one is AVAILABLE, and stays when the changed files do not load."""
        files = snapshot(servable.path)
        if not files or files == servable.fingerprint or model.reload_failed.get(servable.version) == files:
            return
        if not readiness(servable.path)[0]:
            return  # still being written: look again at the next poll
        name, version = model.source.name, servable.version
        log.warning("model %r version %d: its files changed after it was loaded; loading it again", name, version)
        replacement = ServableVersion(name, version, servable.path)
        replacement.state = LOADING
        try:
            self._read_version(replacement)
        except Exception as exc:
            replacement.drop()
            model.reload_failed[version] = replacement.fingerprint
            error = _load_error(exc, servable.path) if not isinstance(exc, _FilesChanged) else exc
            log.error("model %r version %d: the changed files did not load (%s); the version loaded before "
                      "keeps serving", name, version, _one_line(str(getattr(error, "message", error))))
            return
        with model.lock:
            replacement.state = AVAILABLE
            model.versions[version] = replacement
            model.available = {**model.available, version: replacement}
        model.reload_failed.pop(version, None)
        log.info("model %r version %d: available (reloaded)", name, version)
        self._retire(servable)

    def _retire(self, servable: ServableVersion, timeout_s: float | None = None) -> None:
        """Unloads a servable already off the routing table once its requests finish."""
        if not servable.close_and_wait(timeout_s):
            log.warning("model %r version %d unloaded with %d request(s) still running",
                        servable.model_name, servable.version, servable.in_flight)
        servable.drop()
        servable.state = END

    def _unload(self, model: _Model, servable: ServableVersion, timeout_s: float | None = None) -> None:
        with model.lock:
            # Off the routing table first: new requests pick another version, and a request
            # that read the old table retries when try_acquire refuses.
            model.available = {v: s for v, s in model.available.items() if s is not servable}
            servable.state = UNLOADING
        log.info("model %r version %d: unloading", model.source.name, servable.version)
        self._retire(servable, timeout_s)
        log.info("model %r version %d: unloaded", model.source.name, servable.version)

    # ------------------------------------------------------------------ routing

    def model_names(self) -> list:
        return list(self._models)

    def _model(self, name: str) -> _Model:
        model = self._models.get(name)
        if model is None:
            # Never list the served models: a 404 must not tell a stranger what else is here.
            raise ServingError("NOT_FOUND", f"model '{name[:200]}' not found")
        return model

    def source(self, name: str) -> ModelSource:
        return self._model(name).source

    def acquire(self, name: str, version: int | None = None, label: str | None = None) -> ServableVersion:
        """The version a request names (default: the highest AVAILABLE), with a reference held.

        The caller must call `.release()` on the result when the request is done.

        Raises:
            ServingError: NOT_FOUND for an unknown model / version (listing what exists),
                INVALID_ARGUMENT for an unknown label (TF Serving's "Unrecognized servable
                version label"), UNAVAILABLE for a version that is still loading.
        """
        model = self._model(name)
        if version is not None and label is not None:
            raise ServingError("INVALID_ARGUMENT", "set either version or version_label in model_spec, not both")
        while True:
            available = model.available
            if label is not None:  # "" too: a label no model has (as TF Serving)
                labels = model.source.labels
                if label not in labels:
                    raise ServingError(
                        "INVALID_ARGUMENT",
                        f"Unrecognized servable version label: {label[:200]} (model '{name}'; labels: "
                        f"{dict(sorted(labels.items())) or 'none'})",
                    )
                wanted = labels[label]
            elif version is not None:
                wanted = int(version)
            elif available:
                wanted = max(available)
            else:
                raise self._no_version_error(model, None)
            servable = available.get(wanted)
            if servable is None:
                raise self._no_version_error(model, wanted, label)
            if servable.try_acquire():
                return servable
            # Unloading began after we read the routing table: read the new one.

    def _no_version_error(self, model: _Model, wanted, label=None) -> ServingError:
        name = model.source.name
        available = sorted(model.available)
        with model.lock:  # the poll thread may be adding or removing versions
            versions = dict(model.versions)
        tracked = versions.get(wanted) if wanted is not None else None
        what = f"version {wanted}" + (f" (label '{label}')" if label else "") + f" of model '{name}'"
        if wanted is None:
            loading = sorted(v for v, s in versions.items() if s.state in (START, LOADING))
            if loading:
                return ServingError("UNAVAILABLE", f"model '{name}' has no available version yet; loading: {loading}")
            failed = {v: s.error.message for v, s in versions.items() if s.error is not None}
            reason = model.error or (f"versions failed to load: {failed}" if failed else "no versions loaded")
            return ServingError("NOT_FOUND", f"model '{name}' has no available version: {reason}")
        if tracked is not None and tracked.state in (START, LOADING):
            return ServingError("UNAVAILABLE", f"{what} is still loading; available versions: {available}")
        if tracked is not None and tracked.error is not None:
            return ServingError(
                "NOT_FOUND", f"{what} failed to load ({tracked.error.message}); available versions: {available}"
            )
        return ServingError("NOT_FOUND", f"{what} not found; available versions: {available}")

    # ------------------------------------------------------------------ status

    def is_ready(self) -> bool:
        """True when every model has at least one AVAILABLE version."""
        return all(model.available for model in self._models.values())

    def status(self, name: str, version: int | None = None) -> list:
        """[ServableVersion] of model `name` (one, for `version`), newest first.

        Raises:
            ServingError: NOT_FOUND for an unknown model, a model without versions, or an
                untracked version.
        """
        model = self._model(name)
        with model.lock:
            versions = dict(model.versions)
        if version is not None:
            if int(version) not in versions:
                raise ServingError(
                    "NOT_FOUND",
                    f"version {version} of model '{name}' not found; versions: {sorted(versions)}",
                )
            return [versions[int(version)]]
        if not versions:
            raise ServingError(
                "NOT_FOUND", f"could not find any versions of model '{name}': {model.error or 'none loaded yet'}"
            )
        return [versions[v] for v in sorted(versions, reverse=True)]
