"""Train the demo model and its MTP head jointly with PyTorch (a CUDA GPU, or slowly a CPU).

Writes to OUT: the weights in mlx-vlm's key layout (float32 safetensors shards,
each under 16 MiB), text_config.json, reference.npz (PyTorch logits on fixed
token ids, for the parity check in ``training.export``) and train_log.txt.

    python -m training.train --tokenizer demo_model/specchat-demo --out OUT --minutes 8
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import multiprocessing as mp
import random
import time
from pathlib import Path

import numpy as np

from demo_model.architecture import DEMO_CONTEXT, text_config

from . import corpus

# The longest conversation trained on, which is also the context the checkpoint declares.
MAX_LEN = DEMO_CONTEXT
# The MTP head's loss share per recursive draft step (a block of size k drafts k-1 steps); its
# gradient also reaches the body, teaching it to look ahead.
MTP_WEIGHTS = "0.5,0.3,0.3"
SHARD_BYTES = 15 * 2**20


def encode_pieces(tok, pieces: list[tuple[str, bool]]) -> tuple[list[int], list[int]]:
    """Token ids and a 0/1 loss mask for a chat's pieces, each encoded on its own as specchat encodes them.

    A chat longer than MAX_LEN is cut after the last reply that fits; one whose first reply does not fit
    gives no ids.
    """
    ids: list[int] = []
    mask: list[int] = []
    kept = 0
    for encoding, (_, trained) in zip(tok.encode_batch([t for t, _ in pieces], add_special_tokens=False), pieces):
        if len(ids) + len(encoding.ids) > MAX_LEN:
            break
        ids.extend(encoding.ids)
        mask.extend([int(trained)] * len(encoding.ids))
        if trained:
            kept = len(ids)
    return ids[:kept], mask[:kept]


def encode_chunk(job: tuple[str, int, int, bool],
                 tools_share: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token ids, lengths and loss masks (flat, one per token) of ``count`` samples drawn with ``seed``, a
    ``tools_share`` of them chats with the built-in tools offered."""
    from tokenizers import Tokenizer

    tokenizer_file, seed, count, augment = job
    tok = Tokenizer.from_file(tokenizer_file)
    ids, lengths, masks = [], [], []
    for pieces in corpus.training_samples(seed, count, augment, tools_share):
        row, mask = encode_pieces(tok, pieces)
        if row:
            ids.extend(row)
            masks.extend(mask)
            lengths.append(len(row))
    return np.array(ids, np.int32), np.array(lengths, np.int32), np.array(masks, np.uint8)


def build_data(tokenizer_file: str, samples: int, seed: int, workers: int, augment: bool, tools_share: float = 0.0):
    chunk = 5_000
    jobs = [(tokenizer_file, seed * 1_000_003 + i, chunk, augment) for i in range(math.ceil(samples / chunk))]
    with mp.Pool(workers) as pool:
        parts = pool.map(functools.partial(encode_chunk, tools_share=tools_share), jobs)
    ids = np.concatenate([p[0] for p in parts])
    lengths = np.concatenate([p[1] for p in parts])
    masks = np.concatenate([p[2] for p in parts])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return ids, starts, lengths, masks


def batches(data, tokens_per_batch: int, seed: int):
    """Endless batches of similar-length samples, right-padded; yields (ids, loss mask)."""
    ids, starts, lengths, masks = data
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(len(lengths))
        for mega in np.array_split(order, max(1, len(order) // 20_000)):
            mega = mega[np.argsort(lengths[mega], kind="stable")]
            sorted_lengths = lengths[mega].astype(np.int64)
            groups, i = [], 0
            while i < len(mega):
                # Sorted ascending, so a group's padded size is its row count times its last length.
                cost = (np.arange(i, len(mega)) - i + 1) * sorted_lengths[i:]
                rows = max(1, int(np.searchsorted(cost, tokens_per_batch, side="right")))
                groups.append(mega[i : i + rows])
                i += rows
            rng.shuffle(groups)
            for group in groups:
                width = int(lengths[group].max())
                x = np.zeros((len(group), width), np.int64)
                mask = np.zeros((len(group), width), np.float32)
                for r, j in enumerate(group):
                    n = lengths[j]
                    x[r, :n] = ids[starts[j] : starts[j] + n]
                    mask[r, :n] = masks[starts[j] : starts[j] + n]
                yield x, mask


def reference_ids(tokenizer_file: str) -> np.ndarray:
    """Fixed held-out conversations for the parity check (same length, one row each)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer_file)
    rows = []
    for prompt, completion in corpus.samples(424242, 50):
        row = tok.encode(prompt + completion, add_special_tokens=False).ids
        if len(row) >= 96:
            rows.append(row[:96])
        if len(rows) == 4:
            break
    return np.array(rows, np.int64)


def grown(state: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """``state`` for a model of ``shapes`` whose vocabulary is larger (a tokenizer with tokens added): each
    embedding gains rows for the new tokens, set to its mean row, which training then moves."""
    out = {}
    for key, value in state.items():
        wanted = tuple(shapes.get(key, value.shape))
        if value.ndim == 2 and wanted[0] > value.shape[0] and wanted[1:] == value.shape[1:]:
            mean = value.astype(np.float32).mean(axis=0, keepdims=True).astype(value.dtype)
            value = np.concatenate([value, np.repeat(mean, wanted[0] - value.shape[0], axis=0)])
        out[key] = value
    return out


def save_weights(model, out: Path) -> list[str]:
    from safetensors.numpy import save_file

    state = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}
    shards, current, size = [], {}, 0
    for key in sorted(state):
        if current and size + state[key].nbytes > SHARD_BYTES:
            shards.append(current)
            current, size = {}, 0
        current[key] = state[key]
        size += state[key].nbytes
    shards.append(current)
    names = []
    for i, shard in enumerate(shards):
        name = f"weights-{i:02d}.safetensors"
        save_file(shard, str(out / name))
        names.append(name)
    return names


def main() -> None:
    import torch
    import torch.nn.functional as F
    from tokenizers import Tokenizer

    from .torch_qwen import Qwen35WithMTP

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", required=True, help="folder with tokenizer.json")
    parser.add_argument("--out", required=True)
    parser.add_argument("--minutes", type=float, default=8.0, help="training time (data building excluded)")
    parser.add_argument("--samples", type=int, default=1_200_000)
    parser.add_argument("--tokens-per-batch", type=int, default=131_072)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup", type=int, default=100, help="steps of linear learning-rate warm-up")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mtp-weights", default=MTP_WEIGHTS,
                        help="MTP loss weight per recursive draft step, comma-separated (one value: one step)")
    parser.add_argument("--augment", action="store_true", help="add chat-style question variants to the corpus")
    parser.add_argument("--tools-share", type=float, default=0.0,
                        help="share of chats with the built-in tools offered (training/tools_corpus.py; needs the "
                             "app's flask and pydantic importable)")
    parser.add_argument("--init", help="continue from a previous --out folder or an exported checkpoint")
    parser.add_argument("--workers", type=int, default=max(1, mp.cpu_count() - 1))
    args = parser.parse_args()

    mtp_weights = [float(w) for w in args.mtp_weights.split(",")]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log_file = (out / "train_log.txt").open("w")

    def log(msg: str) -> None:
        print(msg, flush=True)
        log_file.write(msg + "\n")
        log_file.flush()

    tokenizer_file = str(Path(args.tokenizer) / "tokenizer.json")
    config = text_config(Tokenizer.from_file(tokenizer_file).get_vocab_size(), max_position_embeddings=MAX_LEN)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    # cuDNN's attention builds a plan for every new batch shape (about a second each), and the length-grouped
    # batches change shape nearly every step; the flash and memory-efficient kernels need no plan.
    torch.backends.cuda.enable_cudnn_sdp(False)

    t0 = time.time()
    data = build_data(tokenizer_file, args.samples, args.seed, args.workers, args.augment, args.tools_share)
    log(f"data: {len(data[2])} samples, {int(data[2].sum())} tokens, {int(data[3].sum())} trained tokens, "
        f"longest {int(data[2].max())}, built in {time.time() - t0:.1f}s")

    model = Qwen35WithMTP(config)
    if args.init:
        from safetensors.numpy import load_file

        init = Path(args.init)
        state = {}
        for shard in sorted(init.glob("weights-*.safetensors")) or [init / "model.safetensors"]:
            state.update(load_file(str(shard)))
        # An exported checkpoint also holds the unused vision stub; the rest is this model's state.
        state = {k: v for k, v in state.items() if not k.startswith("vision_tower.")}
        shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        model.load_state_dict({k: torch.from_numpy(v) for k, v in grown(state, shapes).items()})
        log(f"initialised from {args.init}")
    model = model.to(device)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.2f}M parameters on {device} "
        f"({torch.cuda.get_device_name() if device == 'cuda' else 'cpu'})")
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95), fused=device == "cuda",
    )
    budget = args.minutes * 60
    step, start, seen = 0, time.time(), 0
    for x_np, m_np in batches(data, args.tokens_per_batch, args.seed):
        elapsed = time.time() - start
        if elapsed >= budget:
            break
        frac = elapsed / budget
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        for group in opt.param_groups:
            group["lr"] = lr
        x = torch.from_numpy(x_np).to(device, non_blocking=True)
        m = torch.from_numpy(m_np).to(device, non_blocking=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
            logits, mtp_logits = model(x, len(mtp_weights))

        def masked_ce(pred, ahead):
            """Loss of predicting token t+ahead at position t, over the reply's tokens."""
            target, mask = x[:, ahead:], m[:, ahead:]
            ce = F.cross_entropy(pred[:, : target.shape[1]].float().flatten(0, 1), target.flatten(), reduction="none")
            return (ce * mask.flatten()).sum() / mask.sum().clamp(min=1)

        main = masked_ce(logits, 1)
        mtp = [masked_ce(pred, j + 2) for j, pred in enumerate(mtp_logits)]
        loss = main + sum(w * l for w, l in zip(mtp_weights, mtp))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        seen += x.numel()
        if step % 50 == 0:
            log(f"step {step} t={elapsed:.0f}s lr={lr:.2e} loss={main.item():.4f} mtp={'/'.join(f'{l.item():.4f}' for l in mtp)} "
                f"tok/s={seen / max(elapsed, 1e-6):.0f}")
        step += 1
    log(f"trained {step} steps, {seen} tokens (padding included) in {time.time() - start:.0f}s")

    model.eval()
    # The reference logits are compared with MLX's float32 maths: no TF32 from here on.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    names = save_weights(model, out)
    (out / "text_config.json").write_text(json.dumps(config, indent=2))
    ref = reference_ids(tokenizer_file)
    with torch.no_grad():
        logits, mtp_logits = model(torch.from_numpy(ref).to(device))
    np.savez(out / "reference.npz", ids=ref, logits=logits.cpu().numpy(), mtp_logits=mtp_logits[0].cpu().numpy())
    log(f"saved {names}, text_config.json, reference.npz; total {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
