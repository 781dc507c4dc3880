"""Which models a deployment kit serves: `NAME[:POLICY]` specs, version labels, and disk checks.

A spec names a model directory under the base path and how many of its versions
TF Serving keeps loaded:

    sentiment                 latest version only (TF Serving's default)
    sentiment:latest=2        the two highest versions
    sentiment:all             every version directory
    sentiment:specific=1,3    exactly versions 1 and 3 (pinning; rollbacks)

Labels (`sentiment:stable=1`, `sentiment:canary=3`) let clients ask for a label
instead of a number; a label must name a version the policy serves.

Example:

>>> spec = parse_model_spec("sentiment:specific=1,3")
>>> spec.version_policy, spec.versions
('specific', (1, 3))
>>> parse_label("sentiment:canary=3")
('sentiment', 'canary', 3)
>>> report = inspect_model_dir("models/sentiment")       # ModelDirReport: versions on disk
"""

import dataclasses
import os
import re

from serving.server.model_config import ModelSource
from serving.server.version_files import MAX_VERSION, is_version_name, version_of_name

_POLICY_RE = re.compile(r"^(latest|all|specific)(?:=(.*))?$")
_LABEL_RE = re.compile(r"^([^:=\s]+):([A-Za-z_][A-Za-z0-9_\-]*)=(-?[0-9]+)$")  # ASCII digits: no "９"


class ModelSpecError(ValueError):
    """A `--model-name` / `--label` argument or a model directory that cannot be served."""


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One `--model-name` argument, parsed.

    Args:
        name: model name (also the directory under the base path).
        version_policy: "latest", "all" or "specific".
        num_versions: for "latest".
        versions: for "specific".
    """

    name: str
    version_policy: str = "latest"
    num_versions: int = 1
    versions: tuple = ()

    def describe(self):
        if self.version_policy == "latest":
            return "latest version" if self.num_versions == 1 else f"latest {self.num_versions} versions"
        if self.version_policy == "all":
            return "all versions"
        return "versions " + ", ".join(map(str, self.versions))


def parse_model_spec(text):
    """`NAME[:POLICY]` -> `ModelSpec` (see the module doc for POLICY)."""
    name, _, policy = str(text).partition(":")
    name, policy = name.strip(), policy.strip()
    if not name:
        raise ModelSpecError(f"--model-name {text!r}: the model name is empty")
    if not policy:
        return ModelSpec(name)
    match = _POLICY_RE.match(policy)
    if not match:
        raise ModelSpecError(
            f"--model-name {text!r}: unknown version policy {policy!r}; use latest, latest=N, all or "
            f"specific=V1,V2"
        )
    kind, value = match.group(1), match.group(2)
    if kind == "all":
        if value is not None:
            raise ModelSpecError(f"--model-name {text!r}: 'all' takes no value")
        return ModelSpec(name, "all")
    if kind == "latest":
        if value is None:
            return ModelSpec(name)
        if not is_version_name(value) or int(value) < 1:
            raise ModelSpecError(f"--model-name {text!r}: latest=N needs a positive integer N, got {value!r}")
        return ModelSpec(name, "latest", num_versions=int(value))
    parts = [p.strip() for p in (value or "").split(",") if p.strip()]
    if not parts or not all(is_version_name(p) for p in parts):  # any version the server reads, 0 included
        raise ModelSpecError(
            f"--model-name {text!r}: specific= needs version numbers (ASCII digits, int64) separated by commas, "
            f"got {value!r}"
        )
    return ModelSpec(name, "specific", versions=tuple(sorted({version_of_name(p) for p in parts})))


def parse_label(text):
    """`NAME:LABEL=VERSION` -> (name, label, version)."""
    match = _LABEL_RE.match(str(text).strip())
    if not match:
        raise ModelSpecError(
            f"--label {text!r}: expected MODEL:LABEL=VERSION, e.g. sentiment:canary=2 (labels start "
            f"with a letter: a number would read as a version)"
        )
    version = version_of_name(match.group(3))
    if version is None:  # models.config's value is an int64: TF Serving would not read the file
        raise ModelSpecError(f"--label {text!r}: version {match.group(3)} is past int64 (at most {MAX_VERSION})")
    return match.group(1), match.group(2), version


@dataclasses.dataclass(frozen=True)
class ModelDirReport:
    """What `inspect_model_dir` found.

    Args:
        path: the model directory on this machine.
        versions: integer version directories, ascending.
        incomplete: versions without saved_model.pb (TF Serving fails to load them).
    """

    path: str
    versions: tuple
    incomplete: tuple


def inspect_model_dir(path, version_policy="latest"):
    """Lists the version directories of one model; raises `ModelSpecError` when unusable.

    A directory that holds `saved_model.pb` itself is a version directory given by
    mistake, and other non-numeric sub-directories ("v1", "1.0") are names TF
    Serving ignores: both are errors, because the server would silently serve
    nothing. An empty directory is fine (versions may arrive later). Names are read as
    the server reads them (`version_of_name`): `1` and `01` are one version, whose
    directory is the last name in sorted order (`1`), as the server loads it; under
    `version_policy` "all" the first (`01`): TF Serving aspires every name there and its
    manager refuses the second of one version.
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise ModelSpecError(f"model directory {path} does not exist")
    if os.path.exists(os.path.join(path, "saved_model.pb")):
        raise ModelSpecError(
            f"{path} is a SavedModel itself; TF Serving expects {path}/<version>/saved_model.pb. "
            f"Move it into a numbered directory (e.g. {os.path.join(path, '1')})."
        )
    names, ignored = {}, []  # {version: its directory name}
    for entry in sorted(os.listdir(path)):  # "1" after "01": the last name of a version is loaded, as the server
        full = os.path.join(path, entry)
        if not os.path.isdir(full) or entry.startswith("."):
            continue  # stray files and hidden staging directories of atomic writers
        version = version_of_name(entry)
        if version is not None:
            if version not in names or version_policy != "all":
                names[version] = entry
        else:
            ignored.append(entry)
    versions = sorted(names)
    if ignored and not versions:
        raise ModelSpecError(
            f"{path} has no integer version directories (found {', '.join(ignored)}); TF Serving "
            f"only loads directories named by an integer, e.g. {os.path.join(path, '1')}"
        )
    incomplete = tuple(
        v for v in versions if not os.path.exists(os.path.join(path, names[v], "saved_model.pb"))
    )
    return ModelDirReport(path=path, versions=tuple(versions), incomplete=incomplete)


def served_versions(spec, on_disk):
    """The versions of `on_disk` that `spec`'s policy would load today."""
    if spec.version_policy == "all":
        return tuple(on_disk)
    if spec.version_policy == "latest":
        return tuple(sorted(on_disk)[-spec.num_versions:]) if on_disk else ()
    return tuple(v for v in spec.versions if v in on_disk)


def resolve_models(specs, labels, base_path, container_base="/models"):
    """Checks specs and labels against `base_path`; returns (ModelSource list, warnings).

    Args:
        specs: `ModelSpec`s, in order.
        labels: (name, label, version) tuples.
        base_path: the host directory holding one directory per model.
        container_base: where that directory is mounted inside the server container.
    """
    names = [spec.name for spec in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ModelSpecError(f"--model-name given twice for {', '.join(duplicates)}")
    if not os.path.isdir(base_path):
        raise ModelSpecError(f"--base-path {base_path} is not a directory")
    by_model = {name: {} for name in names}
    for name, label, version in labels:
        if name not in by_model:
            raise ModelSpecError(f"--label {name}:{label}={version}: no --model-name {name}")
        if label in by_model[name]:
            raise ModelSpecError(f"--label {name}:{label} given twice")
        by_model[name][label] = version

    sources, warnings = [], []
    for spec in specs:
        report = inspect_model_dir(os.path.join(base_path, spec.name), spec.version_policy)
        if not report.versions:
            warnings.append(
                f"{report.path} has no version yet: tensorflow_model_server does not finish starting "
                f"(no ports open) until {spec.name}/<version>/saved_model.pb exists; export one first"
            )
        for version in report.incomplete:
            warnings.append(f"{report.path}/{version} has no saved_model.pb; TF Serving will fail to load it")
        if spec.version_policy == "specific":
            missing = [v for v in spec.versions if v not in report.versions]
            if missing:
                warnings.append(f"{spec.name}: versions {missing} are not in {report.path} yet")
        serving_now = served_versions(spec, report.versions)
        for label, version in by_model[spec.name].items():
            if spec.version_policy == "specific" and version not in spec.versions:
                raise ModelSpecError(
                    f"--label {spec.name}:{label}={version}: the policy serves only versions "
                    f"{list(spec.versions)}; a label must point at a served version"
                )
            if report.versions and version not in serving_now:
                warnings.append(
                    f"{spec.name}: label {label!r} -> version {version}, which the policy "
                    f"({spec.describe()}) does not serve with the versions on disk {list(report.versions)}"
                )
        try:
            sources.append(ModelSource(
                name=spec.name,
                base_path=f"{container_base.rstrip('/')}/{spec.name}",
                version_policy=spec.version_policy,
                num_versions=spec.num_versions,
                versions=spec.versions,
                labels=by_model[spec.name],
            ))
        except ValueError as error:
            raise ModelSpecError(str(error)) from None
    return sources, warnings
