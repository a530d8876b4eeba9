"""PyTorch's side of pytorch_interop.sh. It loads a trainctl checkpoint into
torch.nn.Sequential with load_state_dict(strict=True), and the AdamW state into
torch.optim.AdamW. It trains the same unshuffled steps, then compares the weights with
trainctl's later checkpoint and the validation loss with trainctl's metrics."""
import argparse
import json

import h5py
import torch


def load(path):
    with h5py.File(path, "r") as f:
        model = {name: torch.from_numpy(f["model"][name][:]) for name in f["model"]}
        state = {name: {s: torch.from_numpy(f["optimizer"][name][s][:]) for s in f["optimizer"][name]}
                 for name in f["optimizer"]}
        return model, state, int(f.attrs["step"]), int(f.attrs["optimizer_step"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--start", required=True)
    p.add_argument("--end", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--val", required=True)
    p.add_argument("--val-loss", type=float, required=True)
    p.add_argument("--widths", type=int, nargs="+", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--weight-decay", type=float, required=True)
    p.add_argument("--grad-clip", type=float, required=True)
    a = p.parse_args()
    torch.set_num_threads(1)

    layers = []
    for i in range(len(a.widths) - 1):
        layers.append(torch.nn.Linear(a.widths[i], a.widths[i + 1]))
        if i + 2 < len(a.widths):
            layers.append(torch.nn.GELU())
    model = torch.nn.Sequential(*layers)
    weights, optimizer_state, start_step, optimizer_step = load(a.start)
    model.load_state_dict(weights, strict=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=a.weight_decay)
    for name, parameter in model.named_parameters():
        optimizer.state[parameter] = {"step": torch.tensor(float(optimizer_step)), **optimizer_state[name]}

    with h5py.File(a.train, "r") as f:
        x, y = torch.from_numpy(f["x"][:]), torch.from_numpy(f["y"][:]).long()
    end_weights, _, end_step, _ = load(a.end)
    for step in range(start_step, end_step):  # shuffle = false: step s trains on samples s*G ... s*G+G-1
        batch = slice(step * a.batch, (step + 1) * a.batch)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        optimizer.step()

    worst = max(((model.state_dict()[n] - w).abs().max() / w.abs().max()).item() for n, w in end_weights.items())
    with h5py.File(a.val, "r") as f:
        vx, vy = torch.from_numpy(f["x"][:]), torch.from_numpy(f["y"][:]).long()
    model.load_state_dict(end_weights, strict=True)
    with torch.no_grad():
        val_loss = torch.nn.functional.cross_entropy(model(vx), vy).item()
    print(json.dumps({"steps": end_step - start_step, "worst_weight_relative_difference": worst,
                      "val_loss_torch": val_loss, "val_loss_trainctl": a.val_loss}))
    assert worst < 1e-4, f"weights after {end_step - start_step} steps differ by {worst:.3g} (relative)"
    assert abs(val_loss - a.val_loss) <= 1e-5 * abs(a.val_loss), "validation losses differ"


if __name__ == "__main__":
    main()
