"""What to run next with a served model: the `next:` / `try:` lines of `bert-keras export`,
`serve` and `deploy-kit`, and of scripts that export or serve (plain strings, no I/O).

Each query line is a request the model answers (`serving.text_requests.example_request`: a
sentence pair for a pair classifier, `--question` / `--context` for question answering, ...),
read from the served signature's inputs or the export's model card.

>>> print(deploy_kit_steps("deploy", "sentiment"))
next:
  docker compose -f deploy/docker-compose.yml up -d        # gRPC :8500, REST :8501
  bert-keras query --model-name sentiment "your text"
  kubectl apply -f deploy/k8s     # Kubernetes (see README_DEPLOY.md)
"""

import json
import os
import shlex


def export_steps(base_path, name, release, query_example, tf_text_ops=()):
    """After an export to `base_path/name`: the embedded server, a query, stock TF Serving in docker.

    Args:
        query_example: arguments of `bert-keras query` the model answers (`card_example`).
        tf_text_ops: TF-Text ops the export uses (the op audit's), which stock images may lack.
    """
    model_dir = os.path.join(base_path, name)
    lines = [
        f"\nnext: bert-keras serve --model-base-path {shlex.quote(model_dir)}      # gRPC :8500, REST :8501",
        f"      bert-keras query --model-name {shlex.quote(name)} {query_example}",
        f"  or: docker run --rm -p 8500:8500 -p 8501:8501 "
        f"-v {shlex.quote(os.path.abspath(model_dir) + ':/models/' + name)} -e {shlex.quote('MODEL_NAME=' + name)} "
        f"tensorflow/serving:{release}.0",
    ]
    if tf_text_ops:
        lines.append(f"      (this export uses TF-Text ops {', '.join(tf_text_ops)}: if a "
                     "server answers 'Op type not registered', export with --tokenizer core)")
    return "\n".join(lines)


def export_result_steps(result, base_path, name, release):
    """`export_steps` for a `serving.exporter.ExportResult`: its family's query example, its TF-Text ops."""
    query_example = card_example(result.card)[0]
    tf_text_ops = getattr(result.audit, "tf_text_ops", ()) if result.audit is not None else ()
    return export_steps(base_path, name, release, query_example, tf_text_ops)


def card_example(card):
    """`example_request` of the `serving_default` inputs an export's model card lists (a
    default text when the card has none); `--pre-tokenizer NAME` first when the card's
    `tokenization.pre_tokenizer` says the clients split the text."""
    from serving.model_card import card_pre_tokenizer
    from serving.text_requests import example_request

    card = card if isinstance(card, dict) else {}
    inputs = (card.get("signatures") or {}).get("serving_default", {}).get("inputs")
    settings = (card.get("task") or {}).get("settings")
    arguments, instance = example_request(inputs if isinstance(inputs, dict) else None,
                                          settings if isinstance(settings, dict) else None)
    pre_tokenizer = card_pre_tokenizer(card)
    if pre_tokenizer:  # morphemes as words: the client splits the text
        arguments = f"--pre-tokenizer {shlex.quote(pre_tokenizer)} {arguments}"
    return arguments, instance


def version_dir_example(version_dir, signature_inputs=None):
    """`card_example` of the model card in `version_dir`; without a readable card, the example of
    `signature_inputs` (a served signature's), else a default text."""
    from serving.model_card import read_model_card
    from serving.text_requests import example_request

    try:
        return card_example(read_model_card(version_dir))
    except (OSError, ValueError, TypeError):  # no card (another exporter's SavedModel), or no directory
        return example_request(signature_inputs)


def try_commands(server, model_name, tls_ca=None, example=None):
    """Commands that reach a started `EmbeddedServer` (query, curl, loadtest) for one of its
    models; `example`: `(query arguments, REST instance)` of a request it answers
    (`version_dir_example`; None: one text)."""
    from serving.text_requests import example_request

    arguments, instance = example or example_request(None)
    tls = f" --tls-ca {tls_ca}" if server.tls else ""
    lines = [f"  bert-keras query --address {server.grpc_address} --model-name {model_name}{tls} {arguments}"]
    if server.rest_url:
        cacert = f" --cacert {tls_ca}" if server.tls else ""
        body = shlex.quote(json.dumps({"instances": [instance]}))
        lines += [f"  curl{cacert} {server.rest_url}/v1/models/{model_name}",
                  f"  curl{cacert} -d {body} {server.rest_url}/v1/models/{model_name}:predict"]
    lines.append(f"  bert-keras loadtest --address {server.grpc_address} --model-name {model_name}{tls} "
                 f"--concurrency 8 --duration 10 {arguments}")
    return lines


def deploy_kit_steps(output_dir, model_name, query_example='"your text"'):
    """After `write_deploy_kit` into `output_dir`: docker compose, a query, kubectl.

    Each line runs from where the command ran, pasted one after the other: `cd DIR && docker
    compose up -d` left the shell in DIR, where `kubectl apply -f DIR/k8s` named no directory.
    Compose resolves the kit's relative paths against the file's directory either way.
    """
    return "\n".join([
        "next:",
        f"  docker compose -f {shlex.quote(os.path.join(output_dir, 'docker-compose.yml'))} up -d"
        "        # gRPC :8500, REST :8501",
        f"  bert-keras query --model-name {shlex.quote(model_name)} {query_example}",
        f"  kubectl apply -f {shlex.quote(os.path.join(output_dir, 'k8s'))}     # Kubernetes (see README_DEPLOY.md)",
    ])
