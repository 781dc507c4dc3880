"""A TF Serving deployment kit: every file, built in memory, then written atomically.

    deploy/
      README_DEPLOY.md
      docker-compose.yml
      config/models.config  config/batching_parameters.txt  config/monitoring.config
      k8s/configmap.yaml  k8s/models-pvc.yaml  k8s/deployment.yaml  k8s/service.yaml  k8s/hpa.yaml

Example:

>>> from serving.deploy import DeployKitOptions, build_deploy_kit, write_deploy_kit
>>> options = DeployKitOptions(base_path="models", models=["sentiment:latest=2"],
...                            labels=["sentiment:stable=1"], output="deploy")
>>> kit = build_deploy_kit(options)          # checks models/sentiment on disk
>>> sorted(kit.files)[:2]
['README_DEPLOY.md', 'config/batching_parameters.txt']
>>> written = write_deploy_kit(kit, "deploy")
"""

import dataclasses
import os

from pipelines.atomic_writes import atomic_directory
from pipelines.output_paths import OutputExistsError, check_output_names
from serving.deploy.batching_config import cpu_batching, format_batching_parameters, GPU_BATCHING
from serving.deploy.compose import format_compose
from serving.deploy.kubernetes import KubernetesOptions, format_kubernetes
from serving.deploy.model_specs import parse_label, parse_model_spec, resolve_models
from serving.deploy.monitoring_config import format_monitoring_config
from serving.deploy.readme import format_readme
from serving.deploy.server_settings import (
    BATCHING_PARAMETERS, DEFAULT_TF_SERVING_VERSION, MODELS_CONFIG, MODELS_DIR, MONITORING_CONFIG,
    ServerSettings,
)
from serving.server.model_config import format_models_config


@dataclasses.dataclass
class DeployKitOptions:
    """Inputs of `build_deploy_kit` (the `bert-keras deploy-kit` arguments).

    Args:
        base_path: host directory with one directory per model.
        models: `NAME[:POLICY]` specs (see serving/deploy/model_specs.py).
        labels: `NAME:LABEL=VERSION` version labels.
        output: the kit directory (used to mount base_path relative to docker-compose.yml).
        gpu: target a GPU server.
        version: tensorflow/serving image version.
        kubernetes: `KubernetesOptions`.
    """

    base_path: str
    models: list
    labels: list = dataclasses.field(default_factory=list)
    output: str = "deploy"
    gpu: bool = False
    version: str = DEFAULT_TF_SERVING_VERSION
    kubernetes: KubernetesOptions = dataclasses.field(default_factory=KubernetesOptions)


@dataclasses.dataclass
class DeployKit:
    """The built kit.

    Args:
        files: {relative path: text}.
        models: the served `ModelSource`s.
        warnings: non-fatal problems (no version yet, labels of unserved versions).
    """

    files: dict
    models: list
    warnings: list
    examples: dict = dataclasses.field(default_factory=dict)

    def report(self, written, output_dir):
        """What `bert-keras deploy-kit` prints once `written` (the paths) are in `output_dir`: what each
        model serves and its labels, the files, then the commands to run (`serving.next_steps`)."""
        from serving.next_steps import deploy_kit_steps

        lines = []
        for model in self.models:
            labels = ", ".join(f"{k} -> {v}" for k, v in model.labels.items())
            lines.append(f"model {model.name}: serves {model.describe_versions()}"
                         + (f"; labels {labels}" if labels else ""))
        lines += [f"wrote {len(written)} files to {output_dir}:", *(f"  {path}" for path in written)]
        first = self.models[0].name
        return "\n".join([*lines, deploy_kit_steps(output_dir, first, self.examples.get(first, ('"your text"',))[0])])


def _cpu_count(quantity):
    """Whole CPUs of a Kubernetes quantity ("4", "2500m") for thread counts."""
    text = str(quantity).strip()
    value = float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    return max(1, int(value))


def build_deploy_kit(options):
    """Validates the models against disk and renders every file of the kit."""
    if not options.models:
        raise ValueError("give at least one --model")
    specs = [parse_model_spec(text) for text in options.models]
    labels = [parse_label(text) for text in options.labels]
    models, warnings = resolve_models(specs, labels, options.base_path, container_base=MODELS_DIR)
    warnings += _model_card_warnings(specs, os.path.abspath(options.base_path), options.version)

    names = tuple(m.name for m in models)
    has_labels = any(m.labels for m in models)
    limit_cpus = _cpu_count(options.kubernetes.cpu_limit)
    compose_settings = ServerSettings(
        model_names=names, version=options.version, gpu=options.gpu, has_labels=has_labels,
    )
    k8s_settings = dataclasses.replace(compose_settings, cpus=None if options.gpu else limit_cpus)

    batching = GPU_BATCHING if options.gpu else cpu_batching(limit_cpus)
    config_files = {
        MODELS_CONFIG: format_models_config(models),
        BATCHING_PARAMETERS: format_batching_parameters(gpu=options.gpu, settings=batching),
        MONITORING_CONFIG: format_monitoring_config(),
    }
    output = os.path.abspath(options.output)
    base = os.path.abspath(options.base_path)
    models_mount = os.path.relpath(base, output)
    if not models_mount.startswith("."):
        models_mount = "./" + models_mount  # Compose treats "models:/x" as a named volume

    files = {f"config/{name}": text for name, text in config_files.items()}
    files["docker-compose.yml"] = format_compose(compose_settings, models_mount=models_mount)
    for name, text in format_kubernetes(k8s_settings, options.kubernetes, config_files).items():
        files[f"k8s/{name}"] = text
    examples = _query_examples(models, base)
    files["README_DEPLOY.md"] = format_readme(
        models, compose_settings, models_mount=models_mount,
        kubernetes_name=options.kubernetes.name, warnings=warnings, examples=examples,
    )
    return DeployKit(files=dict(sorted(files.items())), models=models, warnings=warnings, examples=examples)


def _model_card_warnings(specs, base, version):
    """What the model cards of the served versions say the kit cannot do for them: a version
    op-audited for another tensorflow/serving release than the kit's image `version` runs
    (`bert-keras export --release`: an op or kernel it uses may be missing there, and the server
    then fails to load it), and one whose clients must split the text with a morpheme analyzer
    (a server answers raw text without an error, but as other words)."""
    from serving.deploy.model_specs import inspect_model_dir, served_versions
    from serving.model_card import card_pre_tokenizer, read_model_card

    release = ".".join(str(version).split(".")[:2])
    audited_release = release[:1].isdigit()  # latest, nightly: no release to compare with
    warnings = []
    for spec in specs:
        path = os.path.join(base, spec.name)
        try:
            on_disk = inspect_model_dir(path).versions
        except (OSError, ValueError):
            continue
        for served in served_versions(spec, on_disk):
            try:
                card = read_model_card(os.path.join(path, str(served)))
                audited = (card.get("op_audit") or {}).get("tf_serving_release")
                pre_tokenizer = card_pre_tokenizer(card)
            except (OSError, ValueError, AttributeError):  # no card: another exporter's SavedModel
                continue
            if pre_tokenizer:
                warnings.append(f"{spec.name}/{served} reads text split by {pre_tokenizer} at morpheme boundaries "
                                "(its model card's pre_tokenizer), which no server runs: its clients split the text "
                                f"(bert-keras query --pre-tokenizer {pre_tokenizer}, serving.text_requests."
                                "split_morphemes); raw text, as the curl examples send it, is answered as other words")
            if audited_release and isinstance(audited, str) and audited and audited != release:
                warnings.append(f"{spec.name}/{served} was exported for tensorflow/serving {audited} (its model card's "
                                f"op audit); this kit runs tensorflow/serving:{version}, which may lack an op it "
                                f"uses: give --serving-version {audited}.0, or export it again with --release {release}")
    return warnings


def _query_examples(models, base):
    """`{model name: (query arguments, REST instance)}` of a request each model answers, from the
    model card of its highest version on disk under `base` (`serving.next_steps.version_dir_example`)."""
    from serving.deploy.model_specs import inspect_model_dir
    from serving.next_steps import version_dir_example

    examples = {}
    for model in models:
        path = os.path.join(base, model.name)
        try:
            versions = inspect_model_dir(path).versions
        except (OSError, ValueError):
            versions = ()
        examples[model.name] = version_dir_example(os.path.join(path, str(versions[-1])) if versions else None)
    return examples


# The output directory already holds kit files and overwriting was not asked for.
KitExistsError = OutputExistsError


def write_deploy_kit(kit, output, overwrite=False):
    """Writes every file of `kit` under `output` atomically; returns the written paths.

    The files are staged in a sibling directory and moved in (one rename, or one
    `os.replace` per file when `output` exists), so a server polling models.config
    never reads a half-written file. Other files in `output` are left alone.
    """
    output = os.fspath(output)
    check_output_names(output, list(kit.files), overwrite=overwrite)  # KitExistsError
    with atomic_directory(output) as staging:
        for relative, text in kit.files.items():
            path = os.path.join(staging, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
    return [os.path.join(output, relative) for relative in kit.files]
