"""The PyTorch workloads of ``resize_overhead.py`` and the floor of each.

Each workload is an ordinary script of its framework, nothing in it knows of the sidecar: a
``torchrun`` DDP loop that saves {model, optimizer, step} on SIGTERM and resumes from it, a
Lightning ``Trainer.fit`` and a Hugging Face ``Trainer.train``. They train an MLP (a tiny BERT
for the Hugging Face Trainer) on fixed synthetic data for as long as they are let.

The floor of each is what any restart on new devices has to do at least, in one fresh Python
process (for a DDP job: one rank, as its ranks do it side by side): import torch and the
framework, build the model and its optimizer, and load the checkpoint the resize wrote. It
leaves out the rendezvous of the ranks and the first step, which a resize also pays.
"""

from __future__ import annotations

from dataclasses import dataclass

TORCHRUN = '''
"""Benchmark workload: DDP as torchrun runs it; saves on SIGTERM, resumes from its checkpoint."""
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

N, FEATURES, BATCH, WIDTH = 8192, 64, 32, 256


def build_model():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(FEATURES, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 1)
    )
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def main(out):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, FEATURES, generator=g)
    y = x @ torch.randn(FEATURES, 1, generator=g)
    data = TensorDataset(x, y)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler)
    net, opt = build_model()
    model = DistributedDataParallel(net)
    ckpt, step = os.path.join(out, "ckpt.pt"), 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = state["step"]
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    while True:
        epoch, skip = divmod(step, len(loader))
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(loader):
            if i < skip:
                continue
            if stopping:
                if rank == 0:
                    state = {"model": net.state_dict(), "optimizer": opt.state_dict(), "step": step}
                    torch.save(state, ckpt + ".tmp")
                    os.replace(ckpt + ".tmp", ckpt)
                sys.exit(0)
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1


if __name__ == "__main__":
    main(sys.argv[1])
'''

LIGHTNING = '''
"""Benchmark workload: an MLP as a LightningModule; an ordinary Lightning script."""
import sys

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

N, FEATURES, BATCH, WIDTH = 8192, 64, 64, 256


class Regression(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(FEATURES, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(),
            nn.Linear(WIDTH, 1),
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


if __name__ == "__main__":
    pl.seed_everything(7)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, FEATURES, generator=g)
    y = x @ torch.randn(FEATURES, 1, generator=g)
    trainer = pl.Trainer(
        max_epochs=10000, devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=sys.argv[1],
    )
    trainer.fit(Regression(), DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=True))
'''

TRANSFORMERS = '''
"""Benchmark workload: a small BERT classifier; an ordinary Hugging Face Trainer script."""
import sys

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

N, SEQ, BATCH = 4096, 16, 16


def config():
    return BertConfig(
        vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=SEQ, num_labels=2,
    )


class Data(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(1, 1000, (N, SEQ), generator=g)
        self.labels = (self.ids[:, 0] > 500).long()

    def __len__(self):
        return N

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


if __name__ == "__main__":
    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir=sys.argv[1], per_device_train_batch_size=BATCH, num_train_epochs=10000,
        learning_rate=1e-3, seed=7, report_to=[], save_strategy="no", disable_tqdm=True,
        logging_strategy="no", dataloader_num_workers=0,
    )
    Trainer(model=BertForSequenceClassification(config()), args=args, train_dataset=Data()).train()
'''

# argv: workload folder, module name, the checkpoint (a file or a folder); prints "restored"
_FLOOR_HEAD = """
import sys
sys.path.insert(0, sys.argv[1])
"""

TORCHRUN_FLOOR = (
    _FLOOR_HEAD
    + """
import torch
w = __import__(sys.argv[2])
model, opt = w.build_model()
state = torch.load(sys.argv[3])
model.load_state_dict(state["model"])
opt.load_state_dict(state["optimizer"])
print("restored", flush=True)
"""
)

LIGHTNING_FLOOR = (
    _FLOOR_HEAD
    + """
import torch
import lightning.pytorch as pl
w = __import__(sys.argv[2])
model = w.Regression()
opt = model.configure_optimizers()
state = torch.load(sys.argv[3] + "/lightning.ckpt", weights_only=False)
model.load_state_dict(state["state_dict"])
opt.load_state_dict(state["optimizer_states"][0])
print("restored", flush=True)
"""
)

TRANSFORMERS_FLOOR = (
    _FLOOR_HEAD
    + """
import torch
import transformers
w = __import__(sys.argv[2])
model = transformers.BertForSequenceClassification.from_pretrained(sys.argv[3])
args = transformers.TrainingArguments(output_dir=sys.argv[1] + "/floor", report_to=[])
opt = transformers.Trainer(model=model, args=args).create_optimizer()  # the Trainer's groups
opt.load_state_dict(torch.load(sys.argv[3] + "/optimizer.pt"))
print("restored", flush=True)
"""
)


@dataclass(frozen=True)
class Workload:
    framework: str  # the --frameworks name and the sidecar's --framework
    label: str
    source: str
    floor: str
    own_checkpoint: bool  # the script saves its own (in its output folder), not the adapter


WORKLOADS = {
    w.framework: w
    for w in (
        Workload("torchrun", "torchrun (DDP)", TORCHRUN, TORCHRUN_FLOOR, True),
        Workload("lightning", "Lightning", LIGHTNING, LIGHTNING_FLOOR, False),
        Workload("transformers", "HF Trainer", TRANSFORMERS, TRANSFORMERS_FLOOR, False),
    )
}
