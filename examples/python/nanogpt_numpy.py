"""A tabfleet GPT checkpoint's forward pass in numpy, to score it away from the server.

The model is packages/nn's GPT, which is nanoGPT's (karpathy/nanoGPT, model.py, bias=True): token and
position embeddings, pre-norm blocks of causal multi-head attention and a 4x MLP with GELU in its tanh
form, a final layer norm (eps 1e-5), and a head tied to the token embedding (not stored). Linear
weights are [out, in] as in PyTorch. Computed in float64, so the volunteers' float32 loss should agree
to about 1e-4.
"""
from __future__ import annotations

import numpy as np

EPS = 1e-5


def layer_count(params: dict) -> int:
    n = 0
    while f"transformer.h.{n}.ln_1.weight" in params:
        n += 1
    return n


def _layer_norm(x: np.ndarray, params: dict, name: str) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * params[f"{name}.weight"] + params[f"{name}.bias"]


def _linear(x: np.ndarray, params: dict, name: str) -> np.ndarray:
    return x @ params[f"{name}.weight"].T + params[f"{name}.bias"]


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def _attention(h: np.ndarray, params: dict, name: str, heads: int) -> np.ndarray:
    B, T, W = h.shape
    D = W // heads
    q, k, v = np.split(_linear(h, params, f"{name}.c_attn"), 3, axis=-1)
    # [B, T, W] → [B, heads, T, D]: c_attn's q, k and v columns are head-major, as nanoGPT's view and transpose.
    q, k, v = (t.reshape(B, T, heads, D).transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D)
    scores = np.where(np.tril(np.ones((T, T), dtype=bool)), scores, -np.inf)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    y = (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, W)
    return _linear(y, params, f"{name}.c_proj")


def gpt_logits(params: dict, ids: np.ndarray, heads: int) -> np.ndarray:
    """ids: int [B, T] with T at most the context → logits [B, T, vocab]."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    wte, wpe = p["transformer.wte.weight"], p["transformer.wpe.weight"]
    T = ids.shape[1]
    if T > wpe.shape[0]:
        raise ValueError(f"sequence of {T} tokens exceeds the context {wpe.shape[0]}")
    x = wte[ids] + wpe[:T]
    for i in range(layer_count(p)):
        b = f"transformer.h.{i}"
        x = x + _attention(_layer_norm(x, p, f"{b}.ln_1"), p, f"{b}.attn", heads)
        x = x + _linear(_gelu(_linear(_layer_norm(x, p, f"{b}.ln_2"), p, f"{b}.mlp.c_fc")), p, f"{b}.mlp.c_proj")
    return _layer_norm(x, p, "transformer.ln_f") @ wte.T


def evaluate(params: dict, heads: int, x: np.ndarray, y: np.ndarray, batch: int = 16) -> tuple[float, float]:
    """Mean cross-entropy (nats per token) and next-token accuracy over windows x → targets y, both [n, T]."""
    loss_sum, correct = 0.0, 0
    for i in range(0, len(x), batch):
        logits = gpt_logits(params, x[i:i + batch], heads)
        top = logits.max(-1, keepdims=True)
        log_z = top[..., 0] + np.log(np.exp(logits - top).sum(-1))
        target = np.take_along_axis(logits, y[i:i + batch][..., None], -1)[..., 0]
        loss_sum += float((log_z - target).sum())
        correct += int((logits.argmax(-1) == y[i:i + batch]).sum())
    return loss_sum / y.size, correct / y.size


def generate(params: dict, heads: int, prompt: list[int], tokens: int, temperature: float = 0.8, seed: int = 0) -> list[int]:
    """`tokens` ids sampled after `prompt` at `temperature` (0: greedy), the window sliding at the context."""
    context = params["transformer.wpe.weight"].shape[0]
    rng = np.random.default_rng(seed)
    ids = list(prompt)
    for _ in range(tokens):
        logits = gpt_logits(params, np.array([ids[-context:]]), heads)[0, -1]
        if temperature <= 0:
            ids.append(int(logits.argmax()))
            continue
        p = np.exp((logits - logits.max()) / temperature)
        ids.append(int(rng.choice(len(p), p=p / p.sum())))
    return ids[len(prompt):]
