"""A small client for a tabfleet server's researcher API, on `requests` alone.

The routes are docs/protocol.md's "HTTP API": every call carries `Authorization: Bearer <token>`
(the server accepts no token in a URL), and an error comes back as `{"error": {"code", "message"}}`,
raised here as `TabfleetError` with the server's code and message.

    client = Client("http://127.0.0.1:3000", token)
    upload = client.upload_text("corpus.txt")
    job = client.submit_job({... "dataset": "text-upload", "upload": upload["id"] ...})
    job = client.wait(job["id"], on_progress=print)
    data, sync = client.checkpoint(job["id"])
    tensors, metadata = load_tensors(data)
"""
from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Callable

import requests

ENDED_STATES = ("done", "stopped", "failed")
CHECKPOINT_SYNC_HEADER = "x-tabfleet-sync"
# protocol's safetensors.ts refuses a longer header; so does this reader.
MAX_SAFETENSORS_HEADER = 16 * 1024 * 1024


class TabfleetError(Exception):
    """An answer the server refused (its HTTP status, error code and message), or no answer at all."""

    def __init__(self, status: int | None, code: str, message: str):
        super().__init__(f"{code}: {message}" if status is None else f"HTTP {status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


class Client:
    def __init__(self, server: str, token: str, timeout: float = 120.0, retries: int = 5):
        self.server = server.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        """One call, with the server's error raised. Reads are sent again after a dropped connection,
        and any call after a 429 or 503 once its Retry-After has passed (nothing was done then)."""
        for attempt in range(1, self.retries + 1):
            try:
                res = self.session.request(method, self.server + path, timeout=self.timeout, **kwargs)
            except requests.RequestException as e:
                if method != "GET" or attempt == self.retries:
                    raise TabfleetError(None, "unreachable", f"{method} {self.server}{path}: {e}") from e
                time.sleep(0.2 * attempt)
                continue
            if res.status_code in (429, 503) and attempt < self.retries:
                time.sleep(_seconds(res.headers.get("Retry-After"), 1.0))
                continue
            if res.status_code >= 400:
                raise _error_of(res, method, path)
            return res
        raise AssertionError("unreachable")

    def get_json(self, path: str) -> dict:
        return self.request("GET", path).json()

    def upload_text(self, text: str | bytes | Path, name: str | None = None) -> dict:
        """POST /api/datasets?kind=text: a UTF-8 text (paragraphs between blank lines) → the dataset."""
        if isinstance(text, Path):
            name, body = name or text.name, text.read_bytes()
        else:
            body = text.encode("utf-8") if isinstance(text, str) else text
        params = {"kind": "text", "name": name or "uploaded text"}
        res = self.request("POST", "/api/datasets", params=params, data=body, headers={"Content-Type": "text/plain; charset=utf-8"})
        return res.json()["dataset"]

    def submit_job(self, spec: dict) -> dict:
        """POST /api/jobs: a job spec (protocol's jobSpecSchema) → the job, defaults filled in."""
        return self.request("POST", "/api/jobs", json=spec).json()["job"]

    def job(self, job_id: str) -> dict:
        return self.get_json(f"/api/jobs/{job_id}")["job"]

    def metrics(self, job_id: str) -> list[dict]:
        """Every metric point: a sync's training loss (accuracy None), or an evaluation (accuracy set, loss on validation)."""
        return self.get_json(f"/api/jobs/{job_id}/metrics")["points"]

    def stop_job(self, job_id: str) -> dict:
        return self.request("POST", f"/api/jobs/{job_id}/stop").json()["job"]

    def wait(self, job_id: str, poll: float = 2.0, on_progress: Callable[[dict, list[dict]], None] | None = None) -> dict:
        """Polls the job until it ends; `on_progress(job, new_points)` after each poll. Returns the ended job."""
        seen: set[tuple[int, bool]] = set()
        while True:
            job = self.job(job_id)
            points = self.metrics(job_id)
            new = [p for p in points if (p["seq"], p["accuracy"] is not None) not in seen]
            seen.update((p["seq"], p["accuracy"] is not None) for p in new)
            if on_progress:
                on_progress(job, new)
            if job["state"] in ENDED_STATES:
                return job
            time.sleep(poll)

    def checkpoint(self, job_id: str) -> tuple[bytes, int]:
        """GET /api/jobs/:id/checkpoint: the latest checkpoint's bytes (safetensors) and the sync it holds."""
        res = self.request("GET", f"/api/jobs/{job_id}/checkpoint")
        return res.content, int(res.headers[CHECKPOINT_SYNC_HEADER])

    def text_validation(self, upload_id: str, tokenizer: str, context: int) -> bytes:
        """The validation windows every evaluator of a job on this upload reads (safetensors: x, y I32 [n, context])."""
        params = {"tokenizer": tokenizer, "context": str(context)}
        return self.request("GET", f"/datasets/uploads/{upload_id}/validation", params=params).content


def _seconds(value: str | None, default: float) -> float:
    try:
        return max(0.0, float(value)) if value is not None else default
    except ValueError:
        return default


def _error_of(res: requests.Response, method: str, path: str) -> TabfleetError:
    try:
        err = res.json()["error"]
        return TabfleetError(res.status_code, str(err["code"]), str(err["message"]))
    except (ValueError, KeyError, TypeError):
        return TabfleetError(res.status_code, "http_error", f"{method} {path}: {res.text[:200] or res.reason}")


# safetensors: an 8-byte little-endian header length n, n bytes of JSON, then the tensors' bytes.
DTYPES = {"F32": ("f", 4), "F64": ("d", 8), "I32": ("i", 4), "I64": ("q", 8), "U8": ("B", 1), "I8": ("b", 1), "F16": ("e", 2)}


def parse_safetensors(data: bytes) -> tuple[dict[str, dict], dict[str, str]]:
    """The header's tensors (name → dtype, shape, and a memoryview of its bytes) and its metadata.
    Standard library only, checked as protocol's decoder checks: header bounds, dtypes, offsets."""
    if len(data) < 8:
        raise ValueError(f"not safetensors: {len(data)} bytes")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_SAFETENSORS_HEADER or 8 + n > len(data):
        raise ValueError(f"safetensors header of {n} bytes does not fit the file of {len(data)}")
    header = json.loads(bytes(data[8:8 + n]).decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("safetensors header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    body = memoryview(data)[8 + n:]
    tensors = {}
    for name, t in header.items():
        dtype, shape, (begin, end) = t["dtype"], t["shape"], t["data_offsets"]
        if dtype not in DTYPES:
            raise ValueError(f"{name}: unknown dtype {dtype}")
        count = 1
        for d in shape:
            count *= d
        if not (0 <= begin <= end <= len(body)) or end - begin != count * DTYPES[dtype][1]:
            raise ValueError(f"{name}: offsets {begin}..{end} do not hold {dtype} {shape} within {len(body)} bytes")
        tensors[name] = {"dtype": dtype, "shape": list(shape), "data": body[begin:end]}
    return tensors, metadata


def load_tensors(data: bytes) -> tuple[dict, dict[str, str]]:
    """A checkpoint's tensors as numpy arrays (by the `safetensors` package when installed) and its metadata."""
    import numpy as np

    _, metadata = parse_safetensors(data)
    try:
        from safetensors.numpy import load
    except ImportError:
        tensors, _ = parse_safetensors(data)
        return {name: np.frombuffer(t["data"], dtype="<" + DTYPES[t["dtype"]][0]).reshape(t["shape"]) for name, t in tensors.items()}, metadata
    return load(bytes(data)), metadata
