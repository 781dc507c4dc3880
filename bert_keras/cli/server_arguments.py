"""What `query` and `loadtest` share: the server connection flags and client, and request
inputs built from `--text` / `--question` / ... flags for a signature; `serve`'s flags, one per
field of `serving.server.options.ServerOptions`."""

from pipelines.command_options import add_field_options, add_option, model_version, positive_float
from bert_keras.cli.main import CommandError


def add_connection_arguments(parser):
    """--address/--model-name/--rest/--signature/--version/--label/--tls-ca/--timeout (shared with loadtest)."""
    parser.add_argument("--address", default=None,
                        help="server host:port (default 127.0.0.1:8500, or 127.0.0.1:8501 with --rest)")
    add_option(parser, "--model-name", "--model", dest="model", required=True, metavar="NAME",
               help="model name on the server")
    parser.add_argument("--rest", action="store_true", help="use the REST API instead of gRPC")
    parser.add_argument("--signature", default="serving_default", help="signature (default serving_default)")
    version = parser.add_mutually_exclusive_group()
    version.add_argument("--version", type=model_version,
                         help="ask for this model version (a negative one over gRPC only: TF Serving's REST paths "
                              "take digits)")
    version.add_argument("--label", metavar="LABEL", help="ask for this version label (e.g. stable)")
    parser.add_argument("--tls-ca", metavar="PEM", help="CA certificate of a TLS server (turns TLS on)")
    parser.add_argument("--server-name", metavar="HOST", help="host name on the server's certificate")
    parser.add_argument("--timeout", type=positive_float, default=30.0, help="seconds per request (default 30)")


def add_input_arguments(parser):
    """The flags the families' requests read besides the texts (`query_flags`: --text-b, --question,
    ...), each repeatable, and --pre-tokenizer (shared with loadtest)."""
    from pipelines.tokenizer.morphemes import PRE_TOKENIZERS
    from serving.text_requests import query_flags

    for flag, metavar, help_text in query_flags():
        parser.add_argument(flag, action="append", default=[], metavar=metavar, help=help_text)
    parser.add_argument("--pre-tokenizer", choices=sorted(PRE_TOKENIZERS), default=None,
                        help="split every text at morpheme boundaries with this analyzer before sending it, "
                             "as a model whose vocabulary holds morphemes as words needs (its model card's "
                             "tokenization.pre_tokenizer, `bert-keras vocab --pre-tokenizer kiwi`); answer "
                             "spans are given in the raw text")


def make_client(args):
    """A ServingClient and its signature for the connection arguments; CommandError when the server cannot be reached."""
    from serving.client import CertificateError, ServerConnectionError, connect

    try:
        return connect(args.address, args.model, rest=args.rest, signature_name=args.signature,
                       version=args.version, version_label=args.label, timeout=args.timeout,
                       root_certificates=args.tls_ca, server_name=args.server_name)
    except OSError as error:  # reading the certificate (the server's errors are ServerConnectionErrors)
        raise CommandError(f"--tls-ca {args.tls_ca}: {error.strerror or error}") from None
    except CertificateError as error:
        raise CommandError(f"--tls-ca {error}") from None
    except (ValueError, ServerConnectionError) as error:
        raise CommandError(str(error)) from None


def build_inputs(signature_inputs, args, texts=None, sources=None, signature_outputs=None):
    """The signature's inputs from the command line (`serving.text_requests.request_inputs`): the
    TEXT arguments, or `texts` with their `sources` (`given_texts`: an error names the argument, or
    the --input file and line); `signature_outputs` tell the family apart where inputs do not."""
    from serving.text_requests import flag_name, query_flags, request_inputs

    if texts is None:
        texts = getattr(args, "texts", None) or []
        sources = [f"TEXT argument {number}" for number in range(1, len(texts) + 1)]
    return request_inputs(signature_inputs, texts, sources=sources, signature_outputs=signature_outputs,
                          **{flag_name(flag): getattr(args, flag_name(flag)) for flag, _, _ in query_flags()})


def add_server_options(parser):
    """One flag per `ServerOptions` field (`rest_max_threads` -> `--rest-max-threads`), in its help group."""
    from serving.server.options import ServerOptions  # no TensorFlow: --help stays fast

    add_field_options(parser, ServerOptions)
