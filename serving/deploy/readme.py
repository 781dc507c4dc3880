"""README_DEPLOY.md of a deployment kit: what each file is and the commands to run.

Example:

>>> from serving.server.model_config import ModelSource
>>> from serving.deploy.server_settings import ServerSettings
>>> text = format_readme([ModelSource("sentiment", "/models/sentiment")],
...                      ServerSettings(model_names=("sentiment",)), models_mount="../models")
>>> text.startswith("# TF Serving deployment kit")
True
"""


def _policy(model):
    if model.version_policy == "latest":
        return "latest version" if model.num_versions == 1 else f"latest {model.num_versions} versions"
    if model.version_policy == "all":
        return "all versions"
    return "versions " + ", ".join(map(str, model.versions))


def format_readme(models, settings, models_mount, kubernetes_name="bert-serving", warnings=(), examples=None):
    """The README_DEPLOY.md text.

    Args:
        models: the served `ModelSource`s (container base paths).
        settings: `ServerSettings`.
        models_mount: the host model base path as docker-compose.yml mounts it.
        kubernetes_name: the app name of the k8s manifests.
        warnings: problems found while writing the kit (listed at the top).
        examples: `{model name: (bert-keras query arguments, REST instance)}` of a request each
            model answers (`serving.next_steps.version_dir_example`); a model without one: a text.
    """
    import json
    import shlex

    def example(name):
        return (examples or {}).get(name) or ('"a great movie"', "a great movie")

    first = models[0].name
    query, instance = example(first)
    predict_body = shlex.quote(json.dumps({"instances": [instance]}))
    grpc, rest = settings.grpc_port, settings.rest_port
    rows = "\n".join(
        f"| `{m.name}` | `{m.base_path}` | {_policy(m)} | "
        + (", ".join(f"`{k}` → {v}" for k, v in m.labels.items()) or "–")
        + " |"
        for m in models
    )
    labelled = next((m for m in models if m.labels), None)
    label_example = (
        f"bert-keras query --model-name {labelled.name} --label {next(iter(labelled.labels))} {example(labelled.name)[0]}\n"
        if labelled else ""
    )
    warning_block = (
        "\n**Warnings when this kit was written:**\n\n" + "\n".join(f"- {w}" for w in warnings) + "\n"
        if warnings else ""
    )
    gpu_note = (
        "The kit targets a GPU (`-gpu` image, NVIDIA Container Toolkit / device plugin needed).\n"
        if settings.gpu else
        "The kit targets CPUs; rerun `bert-keras deploy-kit ... --gpu` for a GPU server.\n"
    )
    # A GPU kit's pods set no thread pools (`ServerSettings.cpus` is None there): say what each does.
    threads_note = (
        "- CPU threads: TensorFlow uses every core it sees, in the pods as under Docker (a GPU kit\n"
        "  sets no thread pools)."
        if settings.gpu else
        "- CPU threads: the Kubernetes pods pass `--tensorflow_intra_op_parallelism` matching their CPU\n"
        "  limit; under Docker, TensorFlow uses every core of the host."
    )
    return f"""# TF Serving deployment kit

Written by `bert-keras deploy-kit` for the official **`{settings.image}`** image.
{gpu_note}{warning_block}
## Models

| model | path in the container | versions served | labels |
|---|---|---|---|
{rows}

On the host the model base path is `{models_mount}` (relative to this directory): one
directory per model, one integer directory per version (`{first}/1/saved_model.pb`). A new
version appears by exporting into a new number; the server notices within
{settings.file_system_poll_wait_seconds} s, loads it, replays its warmup requests, then switches.

## Files

| file | what it is |
|---|---|
| `config/models.config` | which models and versions to serve, version labels (ModelServerConfig text proto; re-read every {settings.model_config_poll_wait_seconds} s) |
| `config/batching_parameters.txt` | server-side batching of concurrent requests, each value explained (BatchingParameters) |
| `config/monitoring.config` | Prometheus metrics at `http://HOST:{rest}{settings.metrics_path}` |
| `docker-compose.yml` | one container: ports {grpc} (gRPC) and {rest} (REST), models and config mounted read-only, healthcheck |
| `k8s/configmap.yaml` | the three config files for Kubernetes |
| `k8s/models-pvc.yaml` | a read-only volume claim for the model base path |
| `k8s/deployment.yaml` | the server pods: resources, readiness (every model AVAILABLE), liveness, start-up probe |
| `k8s/service.yaml` | in-cluster address `{kubernetes_name}:{grpc}` (gRPC) / `{kubernetes_name}:{rest}` (REST) |
| `k8s/hpa.yaml` | autoscaling on CPU utilisation |

## Before deploying: the op audit

`tensorflow_model_server` links its own, older copy of the TF-Text ops; a SavedModel that
loads in Python can fail there with `Op type not registered`. `bert-keras export` audits
every export against the op set of TF Serving {settings.version.rsplit('.', 1)[0]}; to audit one again:

```bash
python -m serving.op_audit {models_mount}/{first}/1 --strict
```

If it reports a TF-Text op, export with the core-op tokenizer (`--tokenizer core`): same ids
and offsets, stock TensorFlow ops only.

## Docker Compose

```bash
docker compose up -d
docker compose ps                      # (healthy) once every model is AVAILABLE
curl http://localhost:{rest}/v1/models/{first}             # version states
curl http://localhost:{rest}/v1/models/{first}/metadata    # signatures
curl -X POST http://localhost:{rest}/v1/models/{first}:predict \\
     -d {predict_body}
bert-keras query --model-name {first} {query}       # gRPC on localhost:{grpc}
{label_example}docker compose logs -f                 # load errors
docker compose down
```

## Kubernetes

```bash
kubectl apply -f k8s/
kubectl rollout status deployment/{kubernetes_name}
kubectl port-forward service/{kubernetes_name} {grpc}:{grpc} {rest}:{rest}
bert-keras query --model-name {first} {query}
```

Copy the model base path into the `{kubernetes_name}-models` volume first (see the comments in
`k8s/models-pvc.yaml`), or bake the models into an image. To change versions or labels, edit
`config/models.config`, regenerate (`bert-keras deploy-kit ...`) or edit `k8s/configmap.yaml`,
and `kubectl apply -f k8s/configmap.yaml`: the pods re-read it without a restart.

## Tuning

- `config/batching_parameters.txt`: start there; `batch_timeout_micros` is the latency you add at
  low load, `max_batch_size` caps the rows per request.
{threads_note}
- Canary: serve two versions (`:specific=1,2`), label them (`--label {first}:stable=1
  --label {first}:canary=2`), send a share of traffic with `--label canary`, then move the
  `stable` label.
"""
