"""What keeps the Kubernetes API endpoint private: its TLS certificates, the bearer tokens it accepts,
what each token may do, and the kubeconfig that hands a token to kubectl.

Certificates: a self-signed CA and a server certificate it signs, with the endpoint's hosts as subject
alternative names, made once in a directory and reused while they are valid. Tokens: kube-apiserver's
`--token-auth-file` CSV (`token,user,uid,"group1,group2"`); the groups grant the role: `system:masters` and
`podway:read-write` may do anything, `podway:read-only` may get, list and watch."""

from __future__ import annotations

import base64
import csv
import datetime
import hmac
import io
import ipaddress
import os
import secrets
import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_LIFETIME: Final = datetime.timedelta(days=3650)
SERVER_LIFETIME: Final = datetime.timedelta(days=825)
RENEW_BEFORE: Final = datetime.timedelta(days=30)
"""A certificate this close to expiry is made anew rather than reused."""

ADMIN_GROUP: Final = "system:masters"
READ_WRITE_GROUP: Final = "podway:read-write"
READ_ONLY_GROUP: Final = "podway:read-only"
READ_VERBS: Final = frozenset({"get", "list", "watch"})
TOKENS_FILE: Final = "tokens.csv"


@dataclass(frozen=True, slots=True)
class Paths:
    """Where the CA and the server's certificate and key are."""

    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path


# ---------------------------------------------------------------- certificates


def _write_private(path: Path, data: bytes) -> None:
    """Write a file only its owner may read (keys, tokens, kubeconfigs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    os.chmod(path, 0o600)  # O_CREAT's mode does not apply to a file that already existed


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _san(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return x509.SubjectAlternativeName(names)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public: ec.EllipticCurvePublicKey,
    *,
    ca: bool,
    lifetime: datetime.timedelta,
    now: datetime.datetime,
) -> x509.CertificateBuilder:
    """What the CA's and the server's certificates share: validity (from five minutes back, for clocks a
    little behind), the basic constraints and key usage of a CA or of a leaf, the subject key id."""
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
    )


def _new_ca(now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "podway-ca")])
    builder = _builder(name, name, key.public_key(), ca=True, lifetime=CA_LIFETIME, now=now)
    return builder.sign(key, hashes.SHA256()), key


def _new_server(
    ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, hosts: Sequence[str], now: datetime.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "podway-apiserver")])
    builder = (
        _builder(subject, ca.subject, key.public_key(), ca=False, lifetime=SERVER_LIFETIME, now=now)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(_san(hosts), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    return builder.sign(ca_key, hashes.SHA256()), key


def _load_pair(cert_path: Path, key_path: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    """A certificate and its EC key from disk, or None when either is missing or unreadable."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        return None
    return cert, key


def _fresh(cert: x509.Certificate, now: datetime.datetime) -> bool:
    return cert.not_valid_before_utc <= now and cert.not_valid_after_utc - RENEW_BEFORE > now


def _serves(cert: x509.Certificate, ca: x509.Certificate, hosts: Sequence[str]) -> bool:
    """Whether a server certificate was signed by `ca` and names every host."""
    try:
        cert.verify_directly_issued_by(ca)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False
    wanted = set(_san(hosts))
    return wanted <= set(names)


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def ensure_ca_and_server_cert(
    directory: Path | str, hosts: Sequence[str] = ("127.0.0.1", "localhost")
) -> Paths:
    """The CA and server certificate in `directory`, made when missing, expiring, or (for the server's)
    not covering `hosts`; keys are written mode 0600."""
    root = Path(directory)
    paths = Paths(root / "ca.crt", root / "ca.key", root / "server.crt", root / "server.key")
    now = datetime.datetime.now(datetime.UTC)
    ca_pair = _load_pair(paths.ca_cert, paths.ca_key)
    if ca_pair is None or not _fresh(ca_pair[0], now):
        ca_pair = _new_ca(now)
        _write_private(paths.ca_key, _key_pem(ca_pair[1]))
        paths.ca_cert.write_bytes(_pem(ca_pair[0]))
    server_pair = _load_pair(paths.server_cert, paths.server_key)
    if (
        server_pair is None
        or not _fresh(server_pair[0], now)
        or not _serves(server_pair[0], ca_pair[0], hosts)
    ):
        server_pair = _new_server(ca_pair[0], ca_pair[1], hosts, now)
        _write_private(paths.server_key, _key_pem(server_pair[1]))
        paths.server_cert.write_bytes(_pem(server_pair[0]))
    return paths


def server_ssl_context(paths: Paths) -> ssl.SSLContext:
    """The TLS context the endpoint serves with."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(paths.server_cert, paths.server_key)
    return context


# ---------------------------------------------------------------- tokens


@dataclass(frozen=True, slots=True)
class User:
    """Who a token authenticates as."""

    name: str
    uid: str
    groups: tuple[str, ...] = ()


def authorize(user: User, verb: str) -> bool:
    """Whether `user` may perform `verb` (a Kubernetes verb: get, list, watch, create, update, patch,
    delete, deletecollection)."""
    if ADMIN_GROUP in user.groups or READ_WRITE_GROUP in user.groups:
        return True
    return READ_ONLY_GROUP in user.groups and verb in READ_VERBS


class Tokens:
    """The bearer tokens the endpoint accepts, from a token-auth CSV file."""

    def __init__(self, users: dict[str, User]) -> None:
        self._users = users

    def __len__(self) -> int:
        return len(self._users)

    @classmethod
    def parse(cls, text: str) -> Tokens:
        """Rows `token,user,uid[,"group1,group2"]`; blank lines and `#` comments are skipped. A row
        with fewer than three columns raises ValueError naming its line."""
        users: dict[str, User] = {}
        for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                continue
            if len(row) < 3 or not row[0].strip():
                raise ValueError(f"token file line {number}: expected token,user,uid[,groups]")
            groups = (
                tuple(group.strip() for group in row[3].split(",") if group.strip()) if len(row) > 3 else ()
            )
            users[row[0].strip()] = User(row[1].strip(), row[2].strip(), groups)
        return cls(users)

    @classmethod
    def load(cls, path: Path | str) -> Tokens:
        return cls.parse(Path(path).read_text())

    def authenticate(self, authorization: str | None) -> User | None:
        """The user an `Authorization: Bearer <token>` header names, or None (answered with 401)."""
        if not authorization:
            return None
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        found = None
        for known, user in self._users.items():
            # Compare against every token in constant time, so timing tells nothing about any of them.
            if hmac.compare_digest(known.encode(), token.encode()):
                found = user
        return found

    def first_writer(self) -> tuple[str, User] | None:
        """The token and user of the first row whose groups may write (the kubeconfig's), if any."""
        return next(((token, user) for token, user in self._users.items() if authorize(user, "create")), None)

    def token_of(self, name: str) -> str | None:
        """The token of the user called `name`, if any."""
        return next((token for token, user in self._users.items() if user.name == name), None)


def _csv_row(token: str, user: User) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([token, user.name, user.uid, ",".join(user.groups)])
    return buffer.getvalue()


ADMIN: Final = User("podway-admin", "podway-admin", (ADMIN_GROUP, READ_WRITE_GROUP))
VIEWER: Final = User("viewer", "viewer", (READ_ONLY_GROUP,))


def generate_default_tokens(directory: Path | str) -> Path:
    """A tokens file with an admin (read-write) and a viewer (read-only) token, each random, mode 0600.
    An existing file is kept, so the tokens handed out before stay valid."""
    path = Path(directory) / TOKENS_FILE
    if path.exists():
        return path
    rows = "".join(_csv_row(secrets.token_urlsafe(32), user) for user in (ADMIN, VIEWER))
    _write_private(path, rows.encode())
    return path


# ---------------------------------------------------------------- kubeconfig


def write_kubeconfig(
    path: Path | str,
    server_url: str,
    ca_path: Path | str | None,
    token: str,
    user: str = "podway-admin",
    context: str = "podway",
) -> Path:
    """A kubeconfig (mode 0600) whose current context reaches `server_url` with `token`, trusting the CA
    at `ca_path` (embedded as certificate-authority-data; none for a server on plain HTTP)."""
    cluster: dict[str, str] = {"server": server_url}
    if ca_path is not None:
        cluster["certificate-authority-data"] = base64.b64encode(Path(ca_path).read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": context, "context": {"cluster": context, "user": user, "namespace": "default"}}
        ],
        "current-context": context,
        "preferences": {},
    }
    target = Path(path)
    _write_private(target, yaml.safe_dump(config, sort_keys=False).encode())
    return target
