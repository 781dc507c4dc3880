"""Session fixtures for the serving tests: tiny fine-tuned directories and their exports.

Reusable by every serving test (export, op audit, server, clients):

* `finetuned_dir(kind)` -> path of a directory in the layout `bert-keras finetune`
  writes, for `kind` in `export_fixtures.EXPORT_KINDS` (classification = a text-pair
  task with labels neg/neutral/pos, regression, ner, squad v2.0, multiple_choice);
  for `"embedding"` the path of a `.keras` encoder spec (what `--init` takes).
  Tiny random models, built without training: see `export_fixtures.py`.
* `exported_model(kind)` -> `(base_path, model_name, version)`: the kind exported
  once per session with `serving.exporter.export_saved_model` (tf_text tokenizer,
  no portability check, embeddings normalized), i.e.
  `<base_path>/<model_name>/<version>/` is a SavedModel with the signatures of
  `serving/signatures/`. Model names are the kinds with "-" for "_".

Example:

    def test_my_server(exported_model):
        base_path, name, version = exported_model("classification")
        loaded = tf.saved_model.load(os.path.join(base_path, name, str(version)))
"""

import pytest

import export_fixtures


@pytest.fixture(scope="session")
def finetuned_dir(tmp_path_factory):
    """Factory: `finetuned_dir(kind)` -> a tiny finetune output directory (cached per session)."""
    cache = {}

    def make(kind):
        if kind not in cache:
            directory = str(tmp_path_factory.mktemp(f"finetuned-{kind}"))
            cache[kind] = (export_fixtures.make_encoder_spec(directory) if kind == "embedding"
                           else export_fixtures.make_finetuned_dir(kind, directory))
        return cache[kind]

    return make


@pytest.fixture(scope="session")
def exported_model(finetuned_dir, tmp_path_factory):
    """Factory: `exported_model(kind)` -> `(base_path, model_name, version)` (cached per session)."""
    from serving.exporter import export_saved_model

    base_path = str(tmp_path_factory.mktemp("exported"))
    cache = {}

    def export(kind):
        if kind not in cache:
            result = export_saved_model(finetuned_dir(kind), base_path, kind.replace("_", "-"),
                                        check=False, progress=None, **export_fixtures.export_options(kind))
            cache[kind] = (base_path, kind.replace("_", "-"), result.version)
        return cache[kind]

    return export
