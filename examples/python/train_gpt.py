#!/usr/bin/env python3
"""Train a small GPT on your own text with a tabfleet server's volunteers, then score the checkpoint here.

    TABFLEET_SERVER=http://127.0.0.1:8080 TABFLEET_TOKEN=... python3 train_gpt.py corpus.txt
    python3 train_gpt.py --job job-0123456789   # score a GPT job on an uploaded text (waits for its end)

Uploads the text (POST /api/datasets), submits a GPT job on it with the bytes tokenizer (so no BPE is
needed here), prints its progress until it ends, downloads the checkpoint (safetensors) and checks its
SHA-256 against the server's, then runs the GPT forward in numpy on the validation windows the job's
evaluators read and compares that loss with the one the server recorded for the checkpoint's sync.
Without numpy it prints each tensor's shape and norm instead.

Exit codes: 0 done and scored; 1 the server refused a call (its code and message are printed) or could
not be reached; 2 bad arguments; 3 the job ended without finishing (stopped or failed); 4 the
checkpoint's digest differs from the server's; 5 the numpy loss differs from the server's by more
than --tolerance.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from array import array
from pathlib import Path

from tabfleet_client import Client, TabfleetError, load_tensors, parse_safetensors

TOKENIZER = "bytes"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("text", type=Path, nargs="?", help="a UTF-8 text file, paragraphs between blank lines (at least 4 KiB)")
    p.add_argument("--job", help="score this job (a GPT on an uploaded text) instead of training a new one")
    p.add_argument("--server", default=os.environ.get("TABFLEET_SERVER"), help="server URL (default $TABFLEET_SERVER)")
    p.add_argument("--token", default=os.environ.get("TABFLEET_TOKEN"), help="researcher token (default $TABFLEET_TOKEN)")
    p.add_argument("--name", help="the job's name (default: the text file's)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--context", type=int, default=32)
    p.add_argument("--strategy", choices=["ddp", "localsgd", "diloco"], default="diloco")
    p.add_argument("--H", type=int, default=8, help="local steps between syncs (ddp: 1)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=48, help="optimizer steps per volunteer")
    p.add_argument("--workers", type=int, default=2, help="volunteers the job waits for and holds")
    p.add_argument("--eval-every", type=int, default=16, help="evaluate on validation every this many steps")
    p.add_argument("--out", type=Path, help="where to save the checkpoint (default <job>-sync<N>.safetensors)")
    p.add_argument("--poll", type=float, default=2.0, help="seconds between progress polls")
    p.add_argument("--prompt", default="The ", help="text the trained model continues (48 bytes)")
    p.add_argument("--temperature", type=float, default=0.8, help="of the continuation's sampling (0: greedy)")
    p.add_argument("--tolerance", type=float, default=1e-4, help="largest |numpy loss - server loss| accepted (nats)")
    p.add_argument("--json", action="store_true", help="progress on stderr, one JSON summary on stdout")
    args = p.parse_args(argv)
    if not args.server or not args.token:
        p.error("give --server and --token (or set TABFLEET_SERVER and TABFLEET_TOKEN)")
    if (args.text is None) == (args.job is None):
        p.error("give a text file to train on, or --job ID to score")
    if args.text is not None and not args.text.is_file():
        p.error(f"{args.text}: no such file")
    return args


def job_spec(args: argparse.Namespace, upload_id: str) -> dict:
    return {
        "name": args.name or args.text.stem,
        "preset": "gpt",
        "gpt": {"layers": args.layers, "heads": args.heads, "width": args.width, "context": args.context},
        "dataset": "text-upload",
        "upload": upload_id,
        "tokenizer": TOKENIZER,
        "strategy": args.strategy,
        "H": args.H,
        "hyperparameters": {"lr": args.lr, "batchSize": args.batch_size},
        "minWorkers": args.workers,
        "maxWorkers": args.workers,
        "targetSteps": args.steps,
        "evalEverySteps": args.eval_every,
    }


def progress_printer(log, target: int):
    started = time.monotonic()

    def show(job: dict, new_points: list[dict]) -> None:
        for p in sorted(new_points, key=lambda p: (p["seq"], p["accuracy"] is not None)):
            if p["accuracy"] is None and p["loss"] is not None:
                log(f"  sync {p['seq']:>4}  step {p['step']:>6}/{target}  training loss {p['loss']:.4f}  ({p['workers']} volunteers)")
            elif p["accuracy"] is not None:
                loss = "n/a" if p["loss"] is None else f"{p['loss']:.4f}"
                log(f"  sync {p['seq']:>4}  step {p['step']:>6}/{target}  validation loss {loss}  accuracy {p['accuracy']:.3f}")
        bar = "#" * int(20 * min(1.0, job["step"] / target))
        log(f"[{time.monotonic() - started:6.1f}s] {job['state']:<8} [{bar:<20}] step {job['step']}/{target}  sync {job['seq']}  volunteers {job['workers']}")

    return show


def norms_without_numpy(data: bytes) -> dict[str, dict]:
    """Each F32 tensor's shape and L2 norm, standard library only."""
    out = {}
    for name, t in parse_safetensors(data)[0].items():
        if t["dtype"] == "F32":
            values = array("f", bytes(t["data"]))
            if sys.byteorder == "big":
                values.byteswap()
            out[name] = {"shape": t["shape"], "norm": math.sqrt(math.fsum(v * v for v in values))}
    return out


def score_with_numpy(client: Client, job: dict, data: bytes, sync: int, points: list[dict], args, log) -> dict:
    import numpy as np
    from nanogpt_numpy import evaluate, generate, layer_count

    spec = job["spec"]
    tensors, _ = load_tensors(data)
    params = {k: v for k, v in tensors.items() if k.startswith("transformer.")}  # not the strategies' shared state
    log(f"model: {layer_count(params)} layers, {sum(v.size for v in params.values()):,} parameters")
    for name, v in params.items():
        log(f"  {name:<34} {str(list(v.shape)):<12} norm {float(np.linalg.norm(v.astype(np.float64))):.4f}")
    windows, _ = load_tensors(client.text_validation(spec["upload"], spec["tokenizer"], spec["gpt"]["context"]))
    x, y = windows["x"].astype(np.int64), windows["y"].astype(np.int64)
    loss, accuracy = evaluate(params, spec["gpt"]["heads"], x, y)
    server = next((p for p in points if p["seq"] == sync and p["accuracy"] is not None), None)
    log(f"validation ({x.shape[0]} windows of {x.shape[1]} tokens): numpy loss {loss:.4f} nats/byte, accuracy {accuracy:.3f}")
    result = {"loss": loss, "accuracy": accuracy, "windows": int(x.shape[0]), "serverLoss": None, "serverAccuracy": None}
    if server is not None and server["loss"] is not None:
        result.update(serverLoss=server["loss"], serverAccuracy=server["accuracy"])
        log(f"  the server's evaluators at sync {sync}: loss {server['loss']:.4f}, accuracy {server['accuracy']:.3f}"
            f"  (|difference| {abs(loss - server['loss']):.2e})")
    else:
        log(f"  the server recorded no validation loss for sync {sync}")
    prompt = list(args.prompt.encode("utf-8"))
    sample = bytes(generate(params, spec["gpt"]["heads"], prompt, 48, args.temperature)).decode("utf-8", errors="replace")
    log(f"sample: {args.prompt + sample!r}")
    result["sample"] = args.prompt + sample
    return result


def run(args: argparse.Namespace) -> int:
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    client = Client(args.server, args.token)
    if args.job:
        job = client.job(args.job)
        spec = job["spec"]
        if spec["preset"] != "gpt" or spec["dataset"] != "text-upload" or spec["tokenizer"] != TOKENIZER:
            print(f"error: job {job['id']} is a {spec['preset']} on {spec['dataset']} ({spec.get('tokenizer')}): "
                  f"this script scores GPTs on uploaded text, {TOKENIZER} tokens", file=sys.stderr, flush=True)
            return finish(args, {"jobId": job["id"]}, 2)
    else:
        upload = client.upload_text(args.text)
        log(f"uploaded {args.text.name} as {upload['id']}: {upload['bytes']:,} bytes, "
            f"{upload['records']['train']} training and {upload['records']['validation']} validation paragraphs")
        job = client.submit_job(job_spec(args, upload["id"]))
        g = job["spec"]["gpt"]
        log(f"submitted job {job['id']}: GPT {g['layers']}x{g['width']} ({g['heads']} heads, context {g['context']}), {TOKENIZER} tokens, "
            f"{job['spec']['strategy']} H={job['spec']['H']}, {args.steps} steps on {args.workers} volunteers")
    target = job["spec"].get("targetSteps") or args.steps
    job = client.wait(job["id"], poll=args.poll, on_progress=progress_printer(log, target))
    summary = {"jobId": job["id"], "state": job["state"], "endReason": job.get("endReason"), "seq": job["seq"], "step": job["step"]}
    if job["state"] != "done":
        log(f"job {job['id']} ended {job['state']}: {job.get('endReason') or 'no reason given'}")
        return finish(args, summary, 3)
    log(f"job {job['id']} done at sync {job['seq']}, step {job['step']}")

    data, sync = client.checkpoint(job["id"])
    digest = hashlib.sha256(data).hexdigest()
    out = args.out or Path(f"{job['id']}-sync{sync}.safetensors")
    out.write_bytes(data)
    expected = (job.get("latestCheckpoint") or {}).get("sha256") if (job.get("latestCheckpoint") or {}).get("seq") == sync else None
    summary["checkpoint"] = {"sync": sync, "bytes": len(data), "sha256": digest, "serverSha256": expected, "path": str(out)}
    log(f"checkpoint of sync {sync}: {len(data):,} bytes in {out}, sha256 {digest}")
    if expected != digest:
        log(f"the server's sha256 for sync {sync} is {expected}: the download is not the checkpoint it stored")
        return finish(args, summary, 4)
    log("  equal to the server's sha256")

    points = client.metrics(job["id"])
    try:
        import numpy  # noqa: F401
    except ImportError:
        norms = norms_without_numpy(data)
        log("numpy is not installed: no forward pass here; each tensor's shape and norm instead")
        for name, t in norms.items():
            log(f"  {name:<34} {str(t['shape']):<12} norm {t['norm']:.4f}")
        summary["norms"] = norms
        return finish(args, summary, 0)
    summary["score"] = score = score_with_numpy(client, job, data, sync, points, args, log)
    if score["serverLoss"] is not None and abs(score["loss"] - score["serverLoss"]) > args.tolerance:
        log(f"the numpy loss differs from the server's by more than {args.tolerance}")
        return finish(args, summary, 5)
    return finish(args, summary, 0)


def finish(args: argparse.Namespace, summary: dict, code: int) -> int:
    if args.json:
        print(json.dumps({**summary, "exitCode": code}), flush=True)
    return code


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except TabfleetError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        if args.json:
            print(json.dumps({"error": {"status": e.status, "code": e.code, "message": e.message}, "exitCode": 1}), flush=True)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
