#!/usr/bin/python3
"""baselines/pytorch_bench.py: PyTorch from Python as two backends, `pytorch` (eager) and
`torchscript` (torch.jit), speaking the same protocol as the C++ backend binaries.

It takes the flags harness/backend_main.h takes (--benchmark_filter, --benchmark_list_tests,
--benchmark_out, --benchmark_repetitions, --benchmark_min_time, --check_out, --workloads, --sizes,
--threads, --data) plus --mode=pytorch|torchscript, and writes Google Benchmark's JSON schema, so
bench_run, the summary table and plots/ need no special case. The workloads mirror
workloads/scalar.h and workloads/models.h in idiomatic PyTorch (nn.Module, torch.optim); weights
and batches come from the same splitmix64 streams (workloads/data.h), reproduced here exactly.

Not here: a general Google Benchmark clone. Its timing loop is: set up (untimed), WARMUP_STEPS
steps (untimed: TorchScript's profiling executor records and optimises the graph over its first
runs, which PyTorch's docs say to exclude; eager mode gets the same for symmetry), then steps back
to back until --benchmark_min_time seconds have passed; one such run per repetition.

    /usr/bin/python3 baselines/pytorch_bench.py --mode=pytorch --benchmark_filter=tiny_graph
Tests: harness/tests/ (the runner on every backend) and the cross-backend check in `make test`.
"""
import os
import sys


def _threads_from(argv):
    for a in argv:
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


# Thread pools are sized when torch and OpenBLAS load: fix them before the import.
_THREADS = _threads_from(sys.argv)
if _THREADS.isdigit():
    os.environ["OMP_NUM_THREADS"] = _THREADS
    os.environ["OPENBLAS_NUM_THREADS"] = _THREADS

import datetime  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

K_BATCHES = 16  # workloads/models.h: prepared batches a run cycles through
WARMUP_STEPS = 3
DEFAULT_DATA = "/usr/share/dict/words"


def usage_error(what):
    print(f"error: {what}", file=sys.stderr)
    sys.exit(2)


# ---- same numbers in (workloads/data.h) ----

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


class SplitMix64:
    """Steele, Lea, Flood 2014. The i-th output depends only on seed + i*GOLDEN, so blocks of draws
    are computed with numpy at once, in the same order as the C++ generator's calls."""

    def __init__(self, seed):
        self.state = seed & MASK

    @staticmethod
    def _mix(z):  # numpy uint64 arrays wrap modulo 2^64, as C++'s uint64_t does
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))

    def uniform_block(self, n):
        steps = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(GOLDEN)
        with np.errstate(over="ignore"):
            z = self._mix(np.uint64(self.state) + steps)
        self.state = (self.state + n * GOLDEN) & MASK
        return (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53  # [0, 1)

    def below(self, n):
        return int(self.uniform_block(1)[0] * n)


def uniform_init(rng, n, bound):
    """n float32 uniform in [-bound, bound): computed in double, rounded once, as in C++."""
    return ((2 * rng.uniform_block(n) - 1) * bound).astype(np.float32)


class Corpus:
    def __init__(self, path, min_bytes):
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError:
            raise ValueError(f"--data={path}: cannot open it")
        if not raw:
            raise ValueError(f"--data={path}: the file is empty")
        if len(raw) < min_bytes:
            raise ValueError(f"--data={path}: has {len(raw)} bytes; the selected workloads need "
                             f"at least {min_bytes} (context length + 1)")
        data = np.frombuffer(raw, dtype=np.uint8)
        present = np.zeros(256, dtype=bool)
        present[data] = True
        id_of = np.cumsum(present) - 1
        self.path, self.vocab_size = path, int(present.sum())
        self.tokens = id_of[data].astype(np.int64)


def sample_batch(corpus, rng, batch, context):
    windows = len(corpus.tokens) - context
    ids, targets = [], []
    for _ in range(batch):
        at = rng.below(windows)
        ids.append(corpus.tokens[at:at + context])
        targets.append(corpus.tokens[at + 1:at + context + 1])
    return np.concatenate(ids), np.concatenate(targets)


# ---- scalar workloads (workloads/scalar.h): 0-dim double tensors, as with libtorch ----

def tiny_graph(a, b):
    c = a + b
    d = a * b + b ** 3.0
    e = c - d
    f = e ** 2.0
    return f / 2.0


def small_graph(a, b):
    c = a + b
    d = a * b + b ** 3.0
    c = c + (c + 1.0)
    c = c + (1.0 + c + (-a))
    d = d + (d * 2.0 + torch.relu(b + a))
    d = d + (3.0 * d + torch.relu(b - a))
    e = c - d
    f = e ** 2.0
    g = f / 2.0
    g = g + 10.0 / f
    return g


def scalar_chain(x0, w, b, nodes: int):
    x = x0
    for i in range(nodes):
        r = i % 3
        if r == 0:
            x = x * w
        elif r == 1:
            x = x + b
        else:
            x = torch.tanh(x)
    return x


class ScalarRun:
    """Build, forward, backward, read the gradients, set them to none: the C++ step."""

    def __init__(self, fn, values, extra=()):
        self.params = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
        self.fn, self.extra = fn, extra

    def step(self):
        root = self.fn(*self.params, *self.extra)
        root.backward()
        grads = [p.grad.item() if p.grad is not None else 0.0 for p in self.params]
        for p in self.params:
            p.grad = None
        return root.item(), grads


# ---- models (workloads/models.h), as torch.nn modules ----

class CharMlp(nn.Module):
    CONTEXT, EMBED, BATCH = 16, 64, 64

    def __init__(self, vocab, hidden, rng):
        super().__init__()
        self.table = nn.Embedding(vocab, self.EMBED)
        self.hidden = nn.Linear(self.CONTEXT * self.EMBED, hidden)
        self.out = nn.Linear(hidden, vocab)
        draws = [(self.table.weight, 1.0), (self.hidden.weight, None), (self.hidden.bias, 0),
                 (self.out.weight, None), (self.out.bias, 0)]
        self.ordered = fill(rng, draws)

    def forward(self, ids, targets):
        x = self.table(ids).view(self.BATCH, self.CONTEXT * self.EMBED)  # (B, 16*64)
        logits = self.out(torch.tanh(self.hidden(x)))                     # (B, V)
        return F.cross_entropy(logits, targets)


class CausalSelfAttention(nn.Module):
    def __init__(self, channels, heads, context):
        super().__init__()
        self.c_attn = nn.Linear(channels, 3 * channels)
        self.c_proj = nn.Linear(channels, channels)
        self.heads, self.head_size = heads, channels // heads
        self.scale = 1.0 / math.sqrt(self.head_size)  # a constant, also under torch.jit.trace
        self.register_buffer("mask", torch.ones(context, context, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = self.head_size
        q = q.view(B, T, self.heads, hs).transpose(1, 2)  # (B, H, T, hs)
        k = k.view(B, T, self.heads, hs).transpose(1, 2)
        v = v.view(B, T, self.heads, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = F.softmax(att.masked_fill(self.mask[:T, :T], float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, channels, heads, context):
        super().__init__()
        self.ln_1 = nn.LayerNorm(channels)
        self.attn = CausalSelfAttention(channels, heads, context)
        self.ln_2 = nn.LayerNorm(channels)
        self.c_fc = nn.Linear(channels, 4 * channels)
        self.c_out = nn.Linear(4 * channels, channels)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_out(torch.relu(self.c_fc(self.ln_2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab, layers, heads, channels, context, rng):
        super().__init__()
        self.wte = nn.Embedding(vocab, channels)
        self.wpe = nn.Embedding(context, channels)
        self.h = nn.ModuleList([Block(channels, heads, context) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(channels)
        self.lm_head = nn.Linear(channels, vocab, bias=False)
        embed = 0.02 * math.sqrt(3.0)
        draws = [(self.wte.weight, embed), (self.wpe.weight, embed)]
        for b in self.h:  # GptModel's order: ln1, qkv, proj, ln2, fc, out
            draws += [(b.ln_1.weight, 1), (b.ln_1.bias, 0), (b.attn.c_attn.weight, None),
                      (b.attn.c_attn.bias, 0), (b.attn.c_proj.weight, None), (b.attn.c_proj.bias, 0),
                      (b.ln_2.weight, 1), (b.ln_2.bias, 0), (b.c_fc.weight, None), (b.c_fc.bias, 0),
                      (b.c_out.weight, None), (b.c_out.bias, 0)]
        draws += [(self.ln_f.weight, 1), (self.ln_f.bias, 0), (self.lm_head.weight, None)]
        self.ordered = fill(rng, draws)
        self.register_buffer("positions", torch.arange(context))

    def forward(self, ids, targets):
        B, T = ids.shape
        x = self.wte(ids) + self.wpe(self.positions[:T])
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


class MlpWidth(nn.Module):
    BATCH, CLASSES = 64, 10

    def __init__(self, width, rng):
        super().__init__()
        self.hidden = nn.Linear(width, width)
        self.out = nn.Linear(width, self.CLASSES)
        self.ordered = fill(rng, [(self.hidden.weight, None), (self.hidden.bias, 0),
                                  (self.out.weight, None), (self.out.bias, 0)])

    def forward(self, x, targets):
        return F.cross_entropy(self.out(torch.relu(self.hidden(x))), targets)


def fill(rng, draws):
    """Sets each parameter as ParamList does in C++, in the same order: a float bound draws
    uniform(-bound, bound); None is nn.Linear's bound 1/sqrt(in); an int is a constant (0 or 1).
    Returns the parameters in that order (the order of the check's gradient norms)."""
    with torch.no_grad():
        for p, how in draws:
            if isinstance(how, int):
                p.fill_(float(how))
            else:
                bound = 1 / math.sqrt(p.shape[1]) if how is None else how
                p.copy_(torch.from_numpy(uniform_init(rng, p.numel(), bound)).view(p.shape))
    return [p for p, _ in draws]


class TrainingRun:
    """workloads/models.h TrainingRun: zero_grad, loss, backward, optimizer step, read the loss."""

    def __init__(self, model, batches, optimizer, mode):
        self.model, self.batches, self.optimizer, self.next = model, batches, optimizer, 0
        self.loss_fn = model
        if mode == "torchscript":  # trace the loss computation once; it shares the parameters
            self.loss_fn = torch.jit.trace(model, batches[0], check_trace=False)

    def loss(self, i):
        return self.loss_fn(*self.batches[i % K_BATCHES])

    def step(self):
        self.optimizer.zero_grad()
        loss = self.loss(self.next)
        self.next += 1
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def check_values(self, steps):
        self.optimizer.zero_grad()
        loss = self.loss(self.next)
        self.next += 1
        loss.backward()
        out = [loss.item()]
        out += [p.grad.double().pow(2).sum().sqrt().item() for p in self.model.ordered]
        self.optimizer.step()
        return out + [self.step() for _ in range(1, steps)]


def make_char_mlp(hidden, corpus, mode):
    rng = SplitMix64(0x5EED0001)
    model = CharMlp(corpus.vocab_size, hidden, rng)
    batches = []
    c, b = CharMlp.CONTEXT, CharMlp.BATCH
    for _ in range(K_BATCHES):
        ids, targets = sample_batch(corpus, rng, b, c)
        nxt = targets.reshape(b, c)[:, c - 1]
        batches.append((torch.from_numpy(ids), torch.from_numpy(np.ascontiguousarray(nxt))))
    return TrainingRun(model, batches, torch.optim.SGD(model.parameters(), lr=0.1), mode)


def make_gpt(config):
    layers, heads, channels, context = config

    def make(batch, corpus, mode):
        rng = SplitMix64(0x5EED0002)
        model = Gpt(corpus.vocab_size, layers, heads, channels, context, rng)
        batches = []
        for _ in range(K_BATCHES):
            ids, targets = sample_batch(corpus, rng, batch, context)
            batches.append((torch.from_numpy(ids).view(batch, context),
                            torch.from_numpy(targets).view(batch, context)))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                      weight_decay=0.01)
        return TrainingRun(model, batches, optimizer, mode)
    return make


def make_mlp_width(width, corpus, mode):
    rng = SplitMix64(0x5EED0003)
    model = MlpWidth(width, rng)
    batches = []
    for _ in range(K_BATCHES):
        x = torch.from_numpy(uniform_init(rng, MlpWidth.BATCH * width, 1.0)).view(MlpWidth.BATCH, width)
        t = torch.tensor([rng.below(MlpWidth.CLASSES) for _ in range(MlpWidth.BATCH)])
        batches.append((x, t))
    return TrainingRun(model, batches, torch.optim.SGD(model.parameters(), lr=0.1), mode)


# ---- the registry: names, sizes and tolerances as in workloads/registry.h ----

def scalar(fn, values, known=None, size_key="", sizes=(0,), size_range=(0, 0)):
    return dict(kind="scalar", phase="grad", fn=fn, values=values, known=known,
                size_key=size_key, sizes=sizes, size_range=size_range, tolerance=(1e-9, 1.0))


def model(make, size_key, sizes, size_range, context, needs_corpus=True, check_steps=10):
    return dict(kind="model", phase="step", make=make, size_key=size_key, sizes=sizes,
                size_range=size_range, context=context, needs_corpus=needs_corpus,
                check_steps=check_steps, tolerance=(2e-3, 1e-12), known=None)


WORKLOADS = {
    "empty": scalar(None, []),
    "tiny_graph": scalar(tiny_graph, [-41.0, 2.0], known=(612.5, [-35.0, 1050.0], 1e-9)),
    "small_graph": scalar(small_graph, [-4.0, 2.0],
                          known=(24.7041, [138.8338, 645.5773], 5e-5)),
    "scalar_chain": scalar(scalar_chain, [0.5, 0.9, 0.1], size_key="nodes",
                           sizes=(10, 100, 1000, 10000, 100000), size_range=(1, 10_000_000)),
    "char_mlp": model(make_char_mlp, "hidden", (64, 256, 1024), (1, 16384), CharMlp.CONTEXT),
    "mini_gpt": model(make_gpt((6, 6, 24, 8)), "batch", (1, 8, 32, 64), (1, 4096), 8,
                      check_steps=50),
    "mini_gpt_wide": model(make_gpt((4, 4, 128, 64)), "batch", (1, 8, 32), (1, 4096), 64),
    "mlp_width": model(make_mlp_width, "width", (16, 32, 64, 128, 256, 512, 1024, 2048),
                       (1, 8192), 1, needs_corpus=False),
}


class Instance:
    def __init__(self, workload, size, backend, threads):
        spec = WORKLOADS[workload]
        self.workload, self.size, self.spec = workload, size, spec
        keys = ([f"{spec['size_key']}:{size}"] if spec["size_key"] else []) + [f"threads:{threads}"]
        self.name = "/".join([spec["phase"], workload, backend] + keys)
        self.instance = "/".join([spec["phase"], workload] + keys[:-1])

    def build(self, mode, corpus):
        """The instance set up for `mode` (untimed): a ScalarRun, a TrainingRun, or None for
        the empty step."""
        s = self.spec
        if s["kind"] == "model":
            return s["make"](self.size, corpus, mode)
        if s["fn"] is None:
            return None
        fn, extra = s["fn"], ((self.size,) if s["size_key"] else ())
        if mode == "torchscript":
            fn = torch.jit.script(fn)
        return ScalarRun(fn, s["values"], extra)


def run_step(run):
    if run is None:  # empty
        return 0.0
    out = run.step()
    return out[0] if isinstance(out, tuple) else out


# ---- flags (harness/backend_main.h's, same messages) ----

def parse_flags(argv):
    flags = dict(mode="pytorch", filter="", list=False, out=None, out_format="json",
                 repetitions=1, min_time=0.5, check_out=None, workloads=[], sizes={},
                 threads=1, data=DEFAULT_DATA)

    def whole(flag, text):
        if not re.fullmatch(r"-?[0-9]+", text):
            usage_error(f"{flag}: '{text}' is not a whole number")
        return int(text)

    for arg in argv[1:]:
        key, _, value = arg.partition("=")
        if key == "--mode" and value in ("pytorch", "torchscript"):
            flags["mode"] = value
        elif key == "--benchmark_filter":
            flags["filter"] = value
        elif key == "--benchmark_list_tests":
            flags["list"] = value in ("true", "1", "")
        elif key == "--benchmark_out":
            flags["out"] = value
        elif key == "--benchmark_out_format":
            flags["out_format"] = value
        elif key == "--benchmark_repetitions":
            flags["repetitions"] = max(1, whole(key, value))
        elif key == "--benchmark_min_time":
            flags["min_time"] = float(value)
        elif key in ("--benchmark_display_aggregates_only", "--benchmark_report_aggregates_only"):
            pass
        elif key == "--check_out":
            flags["check_out"] = value
        elif key == "--workloads":
            for w in value.split(","):
                if w not in WORKLOADS:
                    usage_error(f"unknown workload '{w}'; valid: {', '.join(WORKLOADS)}")
                flags["workloads"].append(w)
        elif key == "--sizes":
            size_key, eq, values = value.partition("=")
            if not eq:
                usage_error(f"--sizes='{value}': expected KEY=N,N,... (e.g. nodes=10,1000)")
            flags["sizes"][size_key] = [whole("--sizes", v) for v in values.split(",")]
        elif key == "--threads":
            flags["threads"] = whole(key, value)
            if not 1 <= flags["threads"] <= (os.cpu_count() or 1):
                usage_error(f"--threads={value}: this backend runs 1 to {os.cpu_count()} threads")
        elif key == "--data":
            flags["data"] = value
        else:
            usage_error(f"unrecognized argument '{arg}'")
    keys = [s["size_key"] for s in WORKLOADS.values() if s["size_key"]]
    for size_key, values in flags["sizes"].items():
        sized = [(n, s) for n, s in WORKLOADS.items() if s["size_key"] == size_key]
        if not sized:
            usage_error(f"--sizes: no workload is sized by '{size_key}'; size keys: "
                        f"{', '.join(dict.fromkeys(keys))}")
        for name, s in sized:
            for v in values:
                if not s["size_range"][0] <= v <= s["size_range"][1]:
                    usage_error(f"--sizes: {size_key}={v} is out of range for {name} "
                                f"({s['size_range'][0]} to {s['size_range'][1]})")
    return flags


def name_filter(pattern):
    """Google Benchmark 1.7.1's semantics: a leading '-' negates; '', 'all', '.' match all."""
    if pattern in ("", "all", "."):
        return lambda name: True
    negate = pattern.startswith("-")
    try:
        regex = re.compile(pattern[1:] if negate else pattern)
    except re.error:
        usage_error(f"filter '{pattern}' is not a valid regular expression")
    return lambda name: bool(regex.search(name)) != negate


def instances(flags):
    out = []
    for w, s in WORKLOADS.items():
        if flags["workloads"] and w not in flags["workloads"]:
            continue
        sizes = flags["sizes"].get(s["size_key"], s["sizes"]) if s["size_key"] else s["sizes"]
        out += [Instance(w, n, flags["mode"], flags["threads"]) for n in sizes]
    return out


# ---- measuring ----

def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return -1


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def context(flags, corpus):
    mhz = 0.0
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("cpu MHz"):
                mhz = float(line.split(":")[1])
                break
    blas = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    mode = "eager" if flags["mode"] == "pytorch" else \
        "torch.jit.script (scalar graphs) / torch.jit.trace (models)"
    ctx = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host_name": socket.gethostname(), "executable": os.path.abspath(sys.argv[0]),
        "num_cpus": os.cpu_count(), "mhz_per_cpu": int(mhz), "cpu_scaling_enabled": False,
        "caches": [], "load_avg": list(os.getloadavg()), "library_build_type": "release",
        "backend": flags["mode"],
        "backend_version": f"PyTorch {torch.__version__} (Debian python3-torch), {mode}",
        "threads": str(flags["threads"]),
        "compiler": f"CPython {platform.python_version()} (/usr/bin/python3)",
        "cxx_flags": "n/a (Python; PyTorch as Debian built it)", "cpu_model": cpu_model(),
        "git_sha": os.environ.get("BACKPROP_BENCH_GIT_SHA", "unknown (not run by bench_run)"),
        "blas": blas, "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "?"),
        "intra_op_threads": str(torch.get_num_threads()),
    }
    if corpus is not None:
        ctx["data"] = f"{corpus.path} ({len(corpus.tokens)} bytes, vocabulary {corpus.vocab_size})"
    return ctx


def benchmark(inst, flags, corpus):
    """One run per repetition, Google Benchmark style; returns its JSON entries."""
    runs = []
    for rep in range(flags["repetitions"]):
        reset_peak_rss()
        run = inst.build(flags["mode"], corpus)
        for _ in range(WARMUP_STEPS):
            run_step(run)
        iterations, start_real, start_cpu = 0, time.perf_counter(), time.process_time()
        while True:
            run_step(run)
            iterations += 1
            elapsed = time.perf_counter() - start_real
            if elapsed >= flags["min_time"]:
                break
        cpu = time.process_time() - start_cpu
        runs.append(dict(name=inst.name, family_index=0, per_family_instance_index=0,
                         run_name=inst.name, run_type="iteration",
                         repetitions=flags["repetitions"], repetition_index=rep, threads=1,
                         iterations=iterations, real_time=elapsed / iterations * 1e6,
                         cpu_time=cpu / iterations * 1e6, time_unit="us",
                         peak_rss_bytes=float(status_bytes("VmHWM"))))
        if inst.spec["kind"] == "scalar" and inst.spec["size_key"]:  # SetItemsProcessed: nodes/s
            runs[-1]["items_per_second"] = inst.size * iterations / elapsed
        print(f"{inst.name:<50} {runs[-1]['real_time']:>12.3f} us {iterations:>10}", flush=True)
        del run
    if len(runs) > 1:  # Google Benchmark's aggregates, over the repetitions only
        repetitions = list(runs)
        for agg, f, unit in [("mean", statistics.mean, "time"),
                             ("median", statistics.median, "time"),
                             ("stddev", statistics.stdev, "time"),
                             ("cv", lambda v: statistics.stdev(v) / statistics.mean(v),
                              "percentage")]:
            runs.append(aggregate(inst, repetitions, agg, f, unit))
    return runs


def aggregate(inst, runs, name, f, unit):
    out = dict(name=f"{inst.name}_{name}", family_index=0, per_family_instance_index=0,
               run_name=inst.name, run_type="aggregate", repetitions=len(runs), threads=1,
               aggregate_name=name, aggregate_unit=unit, iterations=len(runs), time_unit="us")
    for field in ("real_time", "cpu_time", "peak_rss_bytes", "items_per_second"):
        if field in runs[0]:
            out[field] = f([r[field] for r in runs])
    return out


def check(inst, flags, corpus):
    """The record harness/backend_main.h's check_instance writes."""
    fault = os.environ.get("BACKPROP_BENCH_FAULT", "")
    wrong = fault.startswith("wrong:") and re.search(fault[6:], inst.name)
    head = dict(name=inst.name, instance=inst.instance)
    try:
        spec = inst.spec
        rel, floor = spec["tolerance"]
        if spec["kind"] == "model":
            run = inst.build(flags["mode"], corpus)
            v = run.check_values(spec["check_steps"])
            v[0] += 1.0 if wrong else 0.0
            n_params = len(run.model.ordered)
            return dict(head, status="ok", value=v[0], grads=v[1:], repeat_max_diff=0,
                        known_answer=None, tolerance=dict(rel=rel, floor=floor),
                        losses=[v[0]] + v[1 + n_params:])
        run = inst.build(flags["mode"], corpus)
        (v1, g1), (v2, g2) = (run.step(), run.step()) if run else ((0.0, []), (0.0, []))
        v2 += 1.0 if wrong else 0.0
        repeat = max([abs(v1 - v2 + (1.0 if wrong else 0.0))] +
                     [abs(a - b) for a, b in zip(g1, g2)])
        known = None
        if spec["known"]:
            value, grads, tol = spec["known"]
            diff = max([abs(v2 - value)] + [abs(a - b) for a, b in zip(g2, grads)])
            known = dict(max_diff=diff, tolerance=tol)
        return dict(head, status="ok", value=v2, grads=g2, repeat_max_diff=repeat,
                    known_answer=known, tolerance=dict(rel=rel, floor=floor))
    except Exception as e:  # a backend that cannot run an instance says why
        return dict(head, status="failed", message=f"{type(e).__name__}: {e}")


def main(argv):
    flags = parse_flags(argv)
    torch.set_num_threads(flags["threads"])
    torch.set_num_interop_threads(1)
    matches = name_filter(flags["filter"])
    selected = [i for i in instances(flags) if matches(i.name)]
    need = max([i.spec["context"] + 1 for i in selected
                if i.spec["kind"] == "model" and i.spec["needs_corpus"]], default=0)
    corpus = None
    if need:
        try:
            corpus = Corpus(flags["data"], need)
        except ValueError as e:
            usage_error(str(e))
    if flags["list"]:  # after the corpus check, as the C++ binaries do
        print("\n".join(i.name for i in selected))
        return 0
    ctx = context(flags, corpus)
    fault = os.environ.get("BACKPROP_BENCH_FAULT", "")
    if flags["check_out"]:
        with open(flags["check_out"], "w") as f:
            results = []
            for inst in selected:
                if fault.startswith("check-crash:") and re.search(fault[12:], inst.name):
                    os.abort()
                results.append(check(inst, flags, corpus))
            json.dump(dict(context=ctx, results=results), f, indent=1)
        return 0
    benchmarks = []
    for inst in selected:
        if fault.startswith("crash:") and re.search(fault[6:], inst.name):
            os.abort()
        if fault.startswith("hang:") and re.search(fault[5:], inst.name):
            while True:
                time.sleep(1)
        benchmarks += benchmark(inst, flags, corpus)
        if flags["out"]:  # rewritten after each benchmark: a crash keeps what was measured
            with open(flags["out"], "w") as f:
                json.dump(dict(context=ctx, benchmarks=benchmarks), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
