"""Loading TensorFlow and Keras without the cycle collector's pauses.

Importing TensorFlow and Keras creates a few hundred thousand Python objects (modules,
functions, op wrappers, API tables). While they load, Python's cycle collector runs full
collections over all of them, six in a fresh process, and again later as models are built:
about 0.7 s of a fresh process's first prediction (`benchmarks/bench_startup.py`), for objects
that live as long as the process. So the first import of either runs with the collector
paused, then moves every object alive at that point to the permanent generation
(`gc.freeze()`, what forking servers do), which later collections skip.

The cost: an object alive at that moment that later becomes part of an unreachable reference
cycle is not collected (acyclic garbage is freed as always). Importing `bert_keras` or
`pipelines` installs this (`pause_collector_while_loading`); nothing happens when TensorFlow
and Keras are already loaded. Set `BERT_KERAS_GC_FREEZE=0` in the environment to leave the
collector alone.

Example:

>>> import sys
>>> from pipelines import tensorflow_import
>>> tensorflow_import.pause_collector_while_loading()  # before `import keras` / `tensorflow`
>>> import keras  # loads with the collector paused, then freezes what exists
>>> "keras" in sys.modules
True
"""

import contextlib
import gc
import importlib.abc
import importlib.util
import os
import sys

# Top-level packages whose first import pauses the collector (each imports the other's parts).
HEAVY_PACKAGES = ("tensorflow", "keras")

_paused_depth = 0  # nested heavy imports in progress (keras imports tensorflow)


def pause_collector_while_loading():
    """Installs the one-shot import hook (see the module docstring); idempotent."""
    if os.environ.get("BERT_KERAS_GC_FREEZE", "1") == "0":
        return
    if all(name in sys.modules for name in HEAVY_PACKAGES):
        return
    if any(isinstance(finder, _PausedLoadFinder) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _PausedLoadFinder())


class WrappingFinder(importlib.abc.MetaPathFinder):
    """An import hook that wraps the loader the other finders give for a module: `wrapped_spec`
    asks them (this finder stands aside while it asks) and runs the loader inside `around()`."""

    def __init__(self):
        self._finding = False

    def wrapped_spec(self, fullname, around):
        """The other finders' spec for `fullname`, its loader wrapped in `around` (None: not found;
        also while this finder is asking them itself)."""
        spec = self.others_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = LoaderAround(spec.loader, around)
        return spec

    def others_spec(self, fullname):
        """The other finders' spec for `fullname` as they give it (None: not found; also while
        this finder is asking them itself)."""
        if self._finding:
            return None
        self._finding = True
        try:
            return importlib.util.find_spec(fullname)
        finally:
            self._finding = False


class _PausedLoadFinder(WrappingFinder):
    """Wraps the loader the other finders give for a heavy package (TensorFlow's quiet load
    included), until both packages are loaded."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in HEAVY_PACKAGES or self._finding:
            return None
        if all(name in sys.modules or name == fullname for name in HEAVY_PACKAGES):
            sys.meta_path.remove(self)  # the last one: nothing left to wrap
        return self.wrapped_spec(fullname, _collector_paused)


def defer_pyplot_while_keras_loads():
    """Installs the one-shot hook that lets Keras' import leave `matplotlib.pyplot` (and
    `matplotlib.patches`) unloaded until used; idempotent, and nothing happens when Keras is already loaded.

    Keras imports `matplotlib.pyplot` and `matplotlib.patches` as it loads (for
    `keras.visualization`'s galleries), whenever matplotlib is installed: about 0.4 s of a fresh
    process (pyplot's figure, colorbar and backend modules), paid by every script that never
    draws. While Keras loads, this hook gives both a lazy loader (`importlib.util.LazyLoader`):
    the module object exists at once, its code runs on the first attribute anyone reads
    (`plt.figure`, ours or the user's), exactly as an eager import would have run it. The `matplotlib` package itself
    still loads (the import system needs its `__path__`).
    """
    if "keras" in sys.modules or any(isinstance(finder, _KerasLoadFinder) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _KerasLoadFinder())


class _KerasLoadFinder(WrappingFinder):
    """Wraps Keras' loader; while it runs, finds `LAZY_WHILE_KERAS_LOADS` with lazy loaders."""

    # Keras' `plot_image_gallery` imports pyplot, its `plot_bounding_box_gallery` patches.
    LAZY_WHILE_KERAS_LOADS = ("matplotlib.pyplot", "matplotlib.patches")

    def __init__(self):
        super().__init__()
        self._keras_loading = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "keras" and not self._keras_loading:
            return self.wrapped_spec(fullname, self._while_keras_loads)
        if fullname not in self.LAZY_WHILE_KERAS_LOADS or not self._keras_loading:
            return None
        spec = self.others_spec(fullname)
        if spec is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec

    @contextlib.contextmanager
    def _while_keras_loads(self):
        self._keras_loading = True
        try:
            yield
        finally:
            self._keras_loading = False
            if self in sys.meta_path:
                sys.meta_path.remove(self)  # one-shot: later imports of pyplot are the usual ones


class LoaderAround(importlib.abc.Loader):
    """Another loader, whose `exec_module` runs inside `around()` (a context manager factory):
    how this module and `tensorflow_logs` wrap TensorFlow's import."""

    def __init__(self, loader, around):
        self._loader = loader
        self._around = around

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        with self._around():
            self._loader.exec_module(module)

    def __getattr__(self, name):  # resource readers, is_package, ...
        return getattr(self._loader, name)


@contextlib.contextmanager
def _collector_paused():
    """The collector off for the outermost heavy import; on its success, what exists is frozen."""
    global _paused_depth
    enabled = gc.isenabled() if _paused_depth == 0 else False
    _paused_depth += 1
    gc.disable()
    loaded = False
    try:
        yield
        loaded = True
    finally:
        _paused_depth -= 1
        if _paused_depth == 0 and enabled:
            gc.enable()
            if loaded:
                gc.freeze()
