"""baselines/pytorch/pytorch_ranks.py: PyTorch's data parallel for pytorch_bench.py --ranks=N:
this process as one rank of DistributedDataParallel over Gloo under torchrun (its environment:
RANK, WORLD_SIZE, MASTER_ADDR), each rank a shard of every batch (pytorch_models.SHARD), the
check's losses averaged over the ranks, and what rank 0 reports of every rank (bench_ranks's
counters). One process without --ranks is the only rank, and nothing here changes it.
"""
import os
import sys

import torch

import pytorch_models as models


def ranks_refusal(flags):
    """--ranks=N: started by torchrun as N processes, eager, every instance a batch to shard;
    else why not, in one line (the driver says it and exits 2)."""
    n = flags["ranks"]
    started = int(os.environ.get("WORLD_SIZE", "1"))
    if started != n:
        none = " (or none: run it under torchrun --standalone --nproc_per_node=N)"
        return (f"--ranks={n}: torchrun started {started} process"
                f"{'es' if started != 1 else none}")
    if flags["mode"] != "pytorch":
        return (f"--ranks={n} with --mode={flags['mode']}: DistributedDataParallel wraps the "
                f"eager module; valid: --mode=pytorch")
    if flags["take_turns"]:
        return "--take_turns: ranks wait on each other every step; not with --ranks"
    for spec in flags["instances"]:
        rows = models.batch_rows(spec["workload"], spec["size"])
        if rows is None:
            return f"--ranks={n}: {spec['workload']} has no batch to shard over ranks"
        if not flags["weak"] and rows % n:
            return (f"--ranks={n}: {spec['workload']} {spec['size']}: a batch of {rows} rows "
                    f"does not split evenly into {n} ranks (--scaling=weak keeps each rank's "
                    f"batch whole)")
    return None


class Ranks:
    """This process as one rank of DDP over Gloo (flags["ranks"] > 1), or the only one."""

    def __init__(self, flags):
        self.n = flags["ranks"]
        self.rank = int(os.environ.get("RANK", "0")) if self.n > 1 else 0
        self.checking = bool(flags["check_out"])
        self.progress = 0  # 2 N + 1 in timed step N, 2 N between steps with N done
        if self.n > 1:
            import signal
            import torch.distributed as dist
            self.dist = dist
            # The runner's at a timeout (harness/driver/rank_progress.h): where this rank is.
            # Python runs it only between bytecodes, so a rank blocked in Gloo stays silent.
            signal.signal(signal.SIGUSR1, lambda *_: print(self.where(), file=sys.stderr,
                                                            flush=True))
            dist.init_process_group("gloo")
            models.SHARD.update(rank=self.rank, ranks=self.n, weak=flags["weak"])

    def where(self):
        p = self.progress
        return (f"rank {self.rank}: in timed step {p // 2}" if p % 2 else
                f"rank {self.rank}: between timed steps, {p // 2} done")

    def wrap(self, model):
        if self.n == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel
        # Gloo broadcasts no bool tensor ("Invalid scalar type" from DDP's first sync of the
        # buffers): the GPTs' causal masks are constants every rank makes alike, so DDP leaves them.
        DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
            model, [n for n, b in model.named_buffers() if b.dtype == torch.bool])
        return DistributedDataParallel(model)

    def mean(self, x):
        """x averaged over the ranks, in a check (the timed steps exchange no loss)."""
        if self.n == 1 or not self.checking:
            return x
        t = torch.tensor([x], dtype=torch.float64)
        self.dist.all_reduce(t)
        return t.item() / self.n

    def report(self, peak_rss_bytes, step_seconds):
        """Every rank's peak RSS and the slowest rank's step: bench_ranks's counters."""
        each = [torch.zeros(2, dtype=torch.float64) for _ in range(self.n)]
        self.dist.all_gather(each, torch.tensor([peak_rss_bytes, step_seconds],
                                                dtype=torch.float64))
        out = {f"peak_rss_bytes_rank_{r}": t[0].item() for r, t in enumerate(each)}
        out["peak_rss_bytes_most_of_ranks"] = max(t[0].item() for t in each)
        out["step_seconds_slowest_rank"] = max(t[1].item() for t in each)
        return out

    def end(self):
        if self.n > 1:
            self.dist.destroy_process_group()
