#!/usr/bin/env bash
# PyTorch reads trainctl checkpoints as its own. The weights load into torch.nn.Sequential
# with load_state_dict(strict=True), and they give trainctl's validation loss. PyTorch,
# continuing from a checkpoint with torch.optim.AdamW and clip_grad_norm_, reaches trainctl's
# next checkpoint, so the gradients, the optimizer and the clipping mean the same thing.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch, h5py' 2>/dev/null || { echo "SKIP: python3-torch or python3-h5py missing"; exit 77; }
make_data
write_config peer.toml peer model.hidden='[48, 24]' model.activation='"gelu"' data.val='"data/val.h5"' \
  data.shuffle=false train.micro_batch=64 train.steps=12 train.lr=3e-3 train.weight_decay=0.05 \
  train.grad_clip=0.5 checkpoint.every_steps=4
"$TRAINCTL" run peer.toml >/dev/null
/usr/bin/python3 "$(dirname "$0")/pytorch_peer.py" --start "$(checkpoint_of runs/peer 4)" \
  --end "$(checkpoint_of runs/peer 12)" --train data/train.h5 --val data/val.h5 \
  --val-loss "$(last_metric runs/peer val_loss)" --widths 32 48 24 4 --batch 64 --lr 3e-3 \
  --weight-decay 0.05 --grad-clip 0.5
echo "PASS"
