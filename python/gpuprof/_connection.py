"""How the client reaches gpuprofd, with the CLI's settings and precedence
(client/invocation.cc): arguments win, then $GPUPROF_TARGET / $GPUPROF_TOKEN, then the config
file ($GPUPROF_CONFIG, else $XDG_CONFIG_HOME/gpuprof/config.textproto, else
~/.config/gpuprof/config.textproto), then 127.0.0.1:7070.

The daemon identifies the caller itself (docs/security.md): from the kernel on the unix socket
and on loopback TCP, from the client certificate or the bearer token over TLS. A bearer token
is sent only over TLS. The local user name travels as `gpuprof-user` metadata, which only a
daemon started with --allow_insecure_tcp believes."""

from __future__ import annotations

import dataclasses
import getpass
import os
from typing import List, Optional, Tuple

import grpc
from google.protobuf import text_format

from gpuprof._stubs import access_pb2

DEFAULT_TARGET = "127.0.0.1:7070"
# As the CLI's kMaxReceiveMessageBytes: a sweep page or a long result fits.
MAX_RECEIVE_MESSAGE_BYTES = 64 << 20


@dataclasses.dataclass(frozen=True)
class ConnectionOptions:
    target: str
    # PEM file paths; tls_ca set means TLS.
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    # The bearer token itself (never printed).
    token: str = dataclasses.field(default="", repr=False)
    # Sent as gpuprof-user metadata.
    claimed_user: str = ""

    @property
    def tls(self) -> bool:
        return bool(self.tls_ca)


def default_config_path() -> str:
    if os.environ.get("GPUPROF_CONFIG"):
        return os.environ["GPUPROF_CONFIG"]
    if os.environ.get("XDG_CONFIG_HOME"):
        return os.path.join(os.environ["XDG_CONFIG_HOME"], "gpuprof", "config.textproto")
    return os.path.join(os.path.expanduser("~"), ".config", "gpuprof", "config.textproto")


def load_config(path: str) -> access_pb2.ClientConfig:
    """An absent file is an empty config; one that does not parse is a ValueError."""
    config = access_pb2.ClientConfig()
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        return config
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as error:
        raise ValueError(
            f"config file {path}: {error} (fields: target, tls_ca, tls_cert, tls_key, token_file)"
        ) from None
    return config


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as error:
        raise ValueError(f"{what}: cannot read {path} ({error.strerror})") from None


def _check_header_value(source: str, value: str, show_value: bool) -> None:
    # gRPC headers carry printable ASCII only; anything else would fail every call.
    for offset, character in enumerate(value):
        if not " " <= character <= "~":
            shown = f' "{value}"' if show_value else ""
            raise ValueError(
                f"{source}{shown}: {character!r} at offset {offset} cannot be sent; it travels in "
                "a gRPC header, which carries printable ASCII only"
            )


def resolve(
    target: Optional[str] = None,
    *,
    tls_ca: Optional[str] = None,
    tls_cert: Optional[str] = None,
    tls_key: Optional[str] = None,
    token: Optional[str] = None,
    token_file: Optional[str] = None,
    user: Optional[str] = None,
    config_path: Optional[str] = None,
) -> ConnectionOptions:
    """The connection the CLI would make with the same flags, environment and config file."""
    config = load_config(config_path or default_config_path())
    resolved_target = (
        target or os.environ.get("GPUPROF_TARGET") or config.target or DEFAULT_TARGET
    )
    if token is not None and token_file is not None:
        raise ValueError("give token or token_file, not both")
    token_source = "token"
    if token is None:
        if token_file is None and not os.environ.get("GPUPROF_TOKEN") and config.token_file:
            token_file = config.token_file
        if token_file is not None:
            token_source = f"token_file {token_file}"
            token = _read(token_file, "token_file").decode("utf-8", "replace").strip()
            if not token:
                raise ValueError(f"token_file: {token_file} is empty")
        else:
            token_source = "$GPUPROF_TOKEN"
            token = os.environ.get("GPUPROF_TOKEN", "")
    options = ConnectionOptions(
        target=resolved_target,
        tls_ca=tls_ca if tls_ca is not None else config.tls_ca,
        tls_cert=tls_cert if tls_cert is not None else config.tls_cert,
        tls_key=tls_key if tls_key is not None else config.tls_key,
        token=token,
        claimed_user=user if user is not None else getpass.getuser(),
    )
    _check_header_value("user", options.claimed_user, show_value=True)
    _check_header_value(token_source, options.token, show_value=False)
    if options.token and not options.tls:
        raise ValueError(
            "a bearer token is sent only over TLS (give tls_ca); in plaintext anyone on the path "
            "could read and reuse it"
        )
    if bool(options.tls_cert) != bool(options.tls_key):
        raise ValueError("tls_cert and tls_key go together")
    if options.tls_cert and not options.tls:
        raise ValueError("tls_cert: give tls_ca too (the CA that signed the daemon's certificate)")
    return options


def channel_arguments() -> List[Tuple[str, int]]:
    return [("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES)]


def credentials(options: ConnectionOptions) -> Optional[grpc.ChannelCredentials]:
    """TLS credentials with the token as call credentials, or None for plaintext."""
    if not options.tls:
        return None
    ssl = grpc.ssl_channel_credentials(
        root_certificates=_read(options.tls_ca, "tls_ca"),
        private_key=_read(options.tls_key, "tls_key") if options.tls_key else None,
        certificate_chain=_read(options.tls_cert, "tls_cert") if options.tls_cert else None,
    )
    if not options.token:
        return ssl
    # Call credentials only ever travel on a secure channel.
    return grpc.composite_channel_credentials(
        ssl, grpc.access_token_call_credentials(options.token)
    )


def call_metadata(options: ConnectionOptions) -> Tuple[Tuple[str, str], ...]:
    return (("gpuprof-user", options.claimed_user),) if options.claimed_user else ()


def open_channel(options: ConnectionOptions) -> grpc.Channel:
    creds = credentials(options)
    if creds is None:
        return grpc.insecure_channel(options.target, options=channel_arguments())
    return grpc.secure_channel(options.target, creds, options=channel_arguments())


class Connected:
    """Where and as whom a client connects, resolved once: what gpuprof.Client and
    gpuprof.aio.AsyncClient share. Each opens its own kind of channel in _open_channel()."""

    def __init__(
        self,
        target: Optional[str] = None,
        *,
        tls_ca: Optional[str] = None,
        tls_cert: Optional[str] = None,
        tls_key: Optional[str] = None,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        user: Optional[str] = None,
        config: Optional[str] = None,
        timeout: Optional[float] = 60.0,
    ) -> None:
        self.options = resolve(
            target,
            tls_ca=tls_ca,
            tls_cert=tls_cert,
            tls_key=tls_key,
            token=token,
            token_file=token_file,
            user=user,
            config_path=config,
        )
        self.timeout = timeout
        self._metadata = call_metadata(self.options)
        self._open_channel()

    def _open_channel(self) -> None:
        raise NotImplementedError

    @property
    def target(self) -> str:
        return self.options.target
