"""Sign an artifact the way cosign does, written from cosign's public format only (no code of
the operator's): an ECDSA P-256 key, the simple-signing payload, and the `.sig` manifest
(`sha256-<hex>.sig` beside the artifact, one layer of the payload with its base64 DER
signature in the `dev.cosignproject.cosign/signature` annotation), pushed over the registry's
plain HTTP API. For host/tests/trust.rs.

    cosign_sign.py keygen KEYDIR                       writes KEYDIR/py.key and KEYDIR/py.pub
    cosign_sign.py sign KEYDIR REGISTRY REPO DIGEST [--tamper] [--at OTHER_DIGEST]
    cosign_sign.py sign-blob KEYDIR FILE               writes FILE.sig, as `cosign sign-blob --key`

--tamper: the payload is changed after it was signed. --at: the signature (made for DIGEST) is
stored as OTHER_DIGEST's, as if copied there.
"""

import base64
import hashlib
import json
import sys
import urllib.request

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec


def request(method, url, data=None, content_type=None):
    req = urllib.request.Request(url, data=data, method=method)
    if content_type:
        req.add_header("Content-Type", content_type)
    with urllib.request.urlopen(req) as answer:
        return answer.headers


def put_blob(base, repo, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    location = request("POST", f"{base}/v2/{repo}/blobs/uploads/")["Location"]
    if location.startswith("/"):
        location = base + location
    sep = "&" if "?" in location else "?"
    request("PUT", f"{location}{sep}digest={digest}", data, "application/octet-stream")
    return {"digest": digest, "size": len(data)}


def main():
    if sys.argv[1] == "keygen":
        key = ec.generate_private_key(ec.SECP256R1())
        keydir = sys.argv[2]
        with open(f"{keydir}/py.key", "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        with open(f"{keydir}/py.pub", "wb") as f:
            f.write(key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        return
    if sys.argv[1] == "sign-blob":
        # cosign sign-blob: ECDSA-SHA256 over the file's bytes, base64 DER.
        _, _, keydir, path = sys.argv
        with open(f"{keydir}/py.key", "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
        with open(path, "rb") as f:
            blob = f.read()
        with open(f"{path}.sig", "w") as f:
            f.write(base64.b64encode(key.sign(blob, ec.ECDSA(hashes.SHA256()))).decode())
        return
    _, _, keydir, registry, repo, digest, *flags = sys.argv
    with open(f"{keydir}/py.key", "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    payload = json.dumps(
        {
            "critical": {
                "identity": {"docker-reference": f"{registry}/{repo}"},
                "image": {"docker-manifest-digest": digest},
                "type": "cosign container image signature",
            },
            "optional": None,
        },
        separators=(",", ":"),
    ).encode()
    signature = base64.b64encode(key.sign(payload, ec.ECDSA(hashes.SHA256()))).decode()
    if "--tamper" in flags:
        payload = payload.replace(b'"optional":null', b'"optional":{"tampered":"yes"}')
    at = flags[flags.index("--at") + 1] if "--at" in flags else digest
    base = f"http://{registry}"
    layer = put_blob(base, repo, payload)
    config = put_blob(base, repo, json.dumps({"architecture": "", "os": "", "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]}, "config": {}}).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
        "layers": [
            {
                "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
                **layer,
                "annotations": {"dev.cosignproject.cosign/signature": signature},
            }
        ],
    }
    tag = "sha256-" + at.split(":", 1)[1] + ".sig"
    request("PUT", f"{base}/v2/{repo}/manifests/{tag}", json.dumps(manifest).encode(), "application/vnd.oci.image.manifest.v1+json")


if __name__ == "__main__":
    main()
