"""The API server's serving certificate: a generated cluster CA and a server certificate it signs.

kubectl sends bearer tokens only over TLS, so a kemu cluster with users
(``kemu up --tls``) serves HTTPS. As kubeadm does (``/etc/kubernetes/pki``
``ca.crt``/``apiserver.crt``), kemu makes a self-signed CA ("kubernetes"
common name, 10 years) and an API server certificate signed by it (1 year)
whose subject alternative names cover the names clients use (``localhost``,
``kubernetes``, ``kubernetes.default.svc``, the loopback addresses and the
bind address). The kubeconfig carries the CA as
``certificate-authority-data``, so clients verify the server. The files are
made once per directory and reused (several replicas or workers share them).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY = "ca.crt", "ca.key", "apiserver.crt", "apiserver.key"
_DNS_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
              "kubernetes.default.svc.cluster.local")


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _sans(hosts: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in _DNS_NAMES]
    ips = {"127.0.0.1", "::1"}
    for h in hosts:
        try:
            ips.add(str(ipaddress.ip_address(h)))
        except ValueError:
            if h and h not in _DNS_NAMES:
                names.append(x509.DNSName(h))
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in sorted(ips)]
    return names


def ensure_certificates(directory: Path, hosts: list[str]) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) in ``directory``, created when missing."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_path, cert_path, key_path = directory / CA_CERT, directory / SERVER_CERT, directory / SERVER_KEY
    if ca_path.exists() and cert_path.exists() and key_path.exists():
        return ca_path, cert_path, key_path
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.SubjectAlternativeName(_sans(hosts)), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    _write(directory / CA_KEY, _key_pem(ca_key))
    _write(key_path, _key_pem(key))
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    _write(ca_path, ca.public_bytes(serialization.Encoding.PEM))  # last: its presence means the set is complete
    return ca_path, cert_path, key_path
