#!/usr/bin/env python3
"""The ctorch-digits job in PyTorch, for comparison: the same data
(data/digits.csv.gz), the same split (torch.manual_seed(0); randperm; 80/20),
the same CNN, initialisation order, optimizer (Adam, lr 2e-3), batch size (32),
epochs (15) and batch order (epoch e shuffles with torch.manual_seed(1 + e);
torch.randperm), on the same number of threads (1 by default).

    /usr/bin/python3 bench/train_digits_torch.py [--epochs 15] [--threads 1]
"""
import argparse
import gzip
import os
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "digits.csv.gz"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    with gzip.open(args.data, "rt") as f:
        rows = [[float(v) for v in line.split(",")] for line in f if line.strip()]
    data = torch.tensor(rows)
    X = (data[:, :64] / 16.0).float().view(-1, 1, 8, 8)
    Y = data[:, 64].long()
    n = len(rows)
    torch.manual_seed(0)
    perm = torch.randperm(n)
    ntrain = n * 8 // 10
    Xtr, Ytr = X[perm[:ntrain]], Y[perm[:ntrain]]
    Xte, Yte = X[perm[ntrain:]], Y[perm[ntrain:]]
    print(f"torch {torch.__version__}: {n} images, {ntrain} train, {n - ntrain} test, {args.threads} thread(s)")

    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(32 * 4 * 4, 10))
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    t0 = time.perf_counter()
    for e in range(args.epochs):
        model.train()
        torch.manual_seed(1 + e)
        order = torch.randperm(ntrain)
        tot, correct, seen = 0.0, 0, 0
        for i in range(0, ntrain, args.batch):
            idx = order[i:i + args.batch]
            xb, yb = Xtr[idx], Ytr[idx]
            logits = model(xb)
            loss = loss_fn(logits, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += loss.item() * len(idx)
            correct += int((logits.argmax(1) == yb).sum())
            seen += len(idx)
        model.eval()
        with torch.no_grad():
            logits = model(Xte)
            test_loss = float(loss_fn(logits, Yte))
            test_acc = float((logits.argmax(1) == Yte).float().mean())
        print(f"epoch {e + 1:2d}/{args.epochs}  train loss {tot / seen:.4f} acc {100 * correct / seen:5.1f}%  "
              f"test loss {test_loss:.4f} acc {100 * test_acc:5.1f}%")
    secs = time.perf_counter() - t0
    print(f"final test accuracy: {100 * test_acc:.2f}% after {args.epochs} epochs in {secs:.1f} s")


if __name__ == "__main__":
    main()
