"""baselines/pytorch/pytorch_models.py: the workloads of workloads/scalar.h, workloads/models.h and
workloads/gradbench_tensor.h, written the way a PyTorch user writes them: functions of 0-dim
double tensors for the scalar graphs, nn.Modules with torch.optim for the models.

Same numbers in: weights and batches come from the splitmix64 streams of workloads/data.h,
reproduced here exactly and drawn in the order the C++ ParamList draws them. Nothing here is
metadata: names, sizes, ranges, tolerances, known answers and check steps live in
workloads/registry.h, and bench_run tells baselines/pytorch/pytorch_bench.py (the driver) what to run.

To add a workload: a function (scalar graph) or an nn.Module and a make_<name>(size, corpus) that
returns a Setup (model), and one line in WORKLOADS at the end.
"""
import math
from dataclasses import dataclass
from typing import List

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

K_BATCHES = 16  # workloads/models.h kBatches: prepared batches a run cycles through


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
    """A file's bytes mapped to 0..vocab_size-1, the vocabulary being the byte values present."""

    def __init__(self, path):
        with open(path, "rb") as f:
            data = np.frombuffer(f.read(), dtype=np.uint8)
        present = np.zeros(256, dtype=bool)
        present[data] = True
        self.path, self.vocab_size = path, int(present.sum())
        self.tokens = (np.cumsum(present) - 1)[data].astype(np.int64)


def sample_batch(corpus, rng, batch, context):
    """`batch` windows of `context` tokens at random offsets, and the token after each position."""
    windows = len(corpus.tokens) - context
    ids, targets = [], []
    for _ in range(batch):
        at = rng.below(windows)
        ids.append(corpus.tokens[at:at + context])
        targets.append(corpus.tokens[at + 1:at + context + 1])
    return np.concatenate(ids), np.concatenate(targets)


# ---- data parallel (workloads/data.h Shard): rank r of N keeps rows [rG/N, (r+1)G/N) of every
# global batch of G rows; G is the batch (strong scaling) or the batch times N (weak: each rank
# keeps a whole batch). One process keeps the whole batch. Set by the driver before any make_.

SHARD = dict(rank=0, ranks=1, weak=False)


def global_rows(batch):
    return batch * SHARD["ranks"] if SHARD["weak"] else batch


def shard_rows(t, batch):
    """This rank's rows of t, whose first global_rows(batch) rows (of any shape) are the batch's."""
    g = global_rows(batch)
    rows = g // SHARD["ranks"]
    first = SHARD["rank"] * rows
    return t.reshape(g, -1)[first:first + rows].reshape((rows,) + tuple(t.shape[1:]))


# How each parameter starts, as workloads/models.h's ParamList makes it.
@dataclass
class Uniform:
    bound: float  # uniform in [-bound, bound)


@dataclass
class LinearDefault:
    """nn.Linear's default, Kaiming-uniform with a=sqrt(5): uniform with bound 1/sqrt(fan_in)."""


@dataclass
class Constant:
    value: float


def init_parameters(rng, specs):
    """Sets each (parameter, init) in order, drawing from rng as ParamList does in C++. Returns the
    parameters in that order: the order of the check's gradient norms."""
    with torch.no_grad():
        for p, init in specs:
            if isinstance(init, Constant):
                p.fill_(init.value)
            else:
                bound = 1 / math.sqrt(p.shape[1]) if isinstance(init, LinearDefault) else init.bound
                p.copy_(torch.from_numpy(uniform_init(rng, p.numel(), bound)).view(p.shape))
    return [p for p, _ in specs]


# ---- scalar graphs (workloads/scalar.h), on 0-dim double tensors with requires_grad ----

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


@dataclass
class ScalarGraph:
    fn: object          # the graph, a function of the parameters (and the size, when sized)
    initial: list       # the parameters' values, in the order of the C++ Run's param() calls
    sized: bool = False


# ---- models (workloads/models.h), as torch.nn modules ----

@dataclass
class Setup:
    model: nn.Module
    batches: list       # K_BATCHES tuples of the model's forward arguments
    optimizer: object
    parameters: list    # in ParamList's creation order
    update_only: bool = False  # workloads/optimizer.h: the timed step is optimizer.step() alone
    gradient_only: bool = False  # workloads/gradbench_tensor.h: a gradient, no update


class CharMlp(nn.Module):
    """Bengio et al. 2003 as in makemore part 2: 16 characters x 64-dim embedding, tanh hidden
    layer, logits, mean cross-entropy over 64 examples."""
    CONTEXT, EMBED, BATCH = 16, 64, 64

    def __init__(self, vocab, hidden):
        super().__init__()
        self.table = nn.Embedding(vocab, self.EMBED)
        self.hidden = nn.Linear(self.CONTEXT * self.EMBED, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, ids, targets):
        x = self.table(ids).view(-1, self.CONTEXT * self.EMBED)  # (B, 16*64)
        logits = self.out(torch.tanh(self.hidden(x)))                     # (B, V)
        return F.cross_entropy(logits, targets)


def make_char_mlp(hidden, corpus):
    rng = SplitMix64(0x5EED0001)
    model = CharMlp(corpus.vocab_size, hidden)
    params = init_parameters(rng, [
        (model.table.weight, Uniform(1.0)), (model.hidden.weight, LinearDefault()),
        (model.hidden.bias, Constant(0.0)), (model.out.weight, LinearDefault()),
        (model.out.bias, Constant(0.0))])
    batches = []
    c, b = CharMlp.CONTEXT, CharMlp.BATCH
    g = global_rows(b)
    for _ in range(K_BATCHES):
        ids, targets = sample_batch(corpus, rng, g, c)
        after = targets.reshape(g, c)[:, c - 1]  # the character after each window
        ids = torch.from_numpy(ids).view(g, c)
        batches.append((shard_rows(ids, b).reshape(-1),
                        shard_rows(torch.from_numpy(np.ascontiguousarray(after)), b)))
    return Setup(model, batches, torch.optim.SGD(model.parameters(), lr=0.1), params)


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
    """nanoGPT's decoder: token and position embeddings, pre-layernorm blocks, final layernorm,
    linear head without bias, mean cross-entropy over every position."""

    def __init__(self, vocab, layers, heads, channels, context):
        super().__init__()
        self.wte = nn.Embedding(vocab, channels)
        self.wpe = nn.Embedding(context, channels)
        self.h = nn.ModuleList([Block(channels, heads, context) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(channels)
        self.lm_head = nn.Linear(channels, vocab, bias=False)
        self.register_buffer("positions", torch.arange(context))

    def forward(self, ids, targets):
        B, T = ids.shape
        x = self.wte(ids) + self.wpe(self.positions[:T])
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


def make_gpt(layers, heads, channels, context):
    def make(batch, corpus):
        rng = SplitMix64(0x5EED0002)
        model = Gpt(corpus.vocab_size, layers, heads, channels, context)
        embed = Uniform(0.02 * math.sqrt(3.0))  # uniform with nanoGPT's std 0.02
        specs = [(model.wte.weight, embed), (model.wpe.weight, embed)]
        for b in model.h:  # GptModel's order: ln1, qkv, proj, ln2, fc, out
            specs += [(b.ln_1.weight, Constant(1.0)), (b.ln_1.bias, Constant(0.0)),
                      (b.attn.c_attn.weight, LinearDefault()), (b.attn.c_attn.bias, Constant(0.0)),
                      (b.attn.c_proj.weight, LinearDefault()), (b.attn.c_proj.bias, Constant(0.0)),
                      (b.ln_2.weight, Constant(1.0)), (b.ln_2.bias, Constant(0.0)),
                      (b.c_fc.weight, LinearDefault()), (b.c_fc.bias, Constant(0.0)),
                      (b.c_out.weight, LinearDefault()), (b.c_out.bias, Constant(0.0))]
        specs += [(model.ln_f.weight, Constant(1.0)), (model.ln_f.bias, Constant(0.0)),
                  (model.lm_head.weight, LinearDefault())]
        params = init_parameters(rng, specs)
        batches = []
        g = global_rows(batch)
        for _ in range(K_BATCHES):
            ids, targets = sample_batch(corpus, rng, g, context)
            batches.append((shard_rows(torch.from_numpy(ids).view(g, context), batch),
                            shard_rows(torch.from_numpy(targets).view(g, context), batch)))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                      weight_decay=0.01)
        return Setup(model, batches, optimizer, params)
    return make


class MlpWidth(nn.Module):
    """A 2-layer MLP on synthetic data: 64 x width -> width (ReLU) -> 10 classes."""
    BATCH, CLASSES = 64, 10

    def __init__(self, width):
        super().__init__()
        self.hidden = nn.Linear(width, width)
        self.out = nn.Linear(width, self.CLASSES)

    def forward(self, x, targets):
        return F.cross_entropy(self.out(torch.relu(self.hidden(x))), targets)


def make_mlp_width(width, corpus):
    rng = SplitMix64(0x5EED0003)
    model = MlpWidth(width)
    params = init_parameters(rng, [
        (model.hidden.weight, LinearDefault()), (model.hidden.bias, Constant(0.0)),
        (model.out.weight, LinearDefault()), (model.out.bias, Constant(0.0))])
    batches = []
    g = global_rows(MlpWidth.BATCH)
    for _ in range(K_BATCHES):
        x = torch.from_numpy(uniform_init(rng, g * width, 1.0)).view(g, width)
        t = torch.tensor([rng.below(MlpWidth.CLASSES) for _ in range(g)])
        batches.append((shard_rows(x, MlpWidth.BATCH), shard_rows(t, MlpWidth.BATCH)))
    return Setup(model, batches, torch.optim.SGD(model.parameters(), lr=0.1), params)


class AdamWUpdate(nn.Module):
    """workloads/optimizer.h: 10 parameters of (N/1000, 100), each the logits of a mean
    cross-entropy; the loss is their sum."""
    TENSORS, COLS = 10, 100

    def __init__(self, rows):
        super().__init__()
        self.tensors = nn.ParameterList(
            [nn.Parameter(torch.empty(rows, self.COLS)) for _ in range(self.TENSORS)])

    def forward(self, *targets):
        return sum(F.cross_entropy(p, t) for p, t in zip(self.tensors, targets))


def make_adamw(params, corpus):
    rng = SplitMix64(0x5EED0009)
    rows = max(1, params // 1000)
    model = AdamWUpdate(rows)
    targets = []
    for p in model.tensors:  # each tensor's values, then its targets, as the C++ Model draws them
        init_parameters(rng, [(p, Uniform(1.0))])
        targets.append(torch.tensor([rng.below(AdamWUpdate.COLS) for _ in range(rows)]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                  weight_decay=0.01, foreach=True)  # the multi-tensor kernels
    return Setup(model, [tuple(targets)] * K_BATCHES, optimizer, list(model.tensors),
                 update_only=True)


RNN_COLUMNS = 256  # workloads/recurrent.h kRnnColumns: step t reads input column t mod this


class CharRnn(nn.Module):
    """workloads/recurrent.h: a tanh RNN over a sequence of `length` characters, cross-entropy
    summed over the steps. forward is store-all (autograd keeps every state); checkpointed is
    what a PyTorch user writes to save memory: torch.utils.checkpoint over segments of about
    sqrt(n) steps, each segment's activations recomputed during backward (use_reentrant=False, as
    its docs recommend, so the first segment's state needs no requires_grad). Both are plain
    loops that torch.jit.script can compile (trace would unroll n steps)."""

    def __init__(self, vocab, hidden, batch, length):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.w_h = nn.Linear(hidden, hidden)
        self.w_y = nn.Linear(hidden, vocab)
        self.batch, self.hidden, self.length = batch, hidden, length
        self.segment = max(1, round(math.sqrt(length)))
        self.columns = RNN_COLUMNS  # an attribute: TorchScript reads no module globals

    def cell(self, h, ids_t):
        return torch.tanh(self.embed(ids_t) + self.w_h(h))  # (B, H)

    def step_loss(self, h, targets_t):
        return F.cross_entropy(self.w_y(h), targets_t)

    def run_steps(self, h, first: int, last: int, ids, targets):
        """Steps [first, last) from state h: the last state and the sum of their losses."""
        total = torch.zeros(())
        for t in range(first, last):
            h = self.cell(h, ids[t % self.columns])
            total = total + self.step_loss(h, targets[t % self.columns])
        return h, total

    def forward(self, ids, targets):  # ids, targets (RNN_COLUMNS, B)
        h = torch.zeros(self.batch, self.hidden)
        return self.run_steps(h, 0, self.length, ids, targets)[1]

    @torch.jit.ignore
    def checkpointed(self, ids, targets):
        h = torch.zeros(self.batch, self.hidden)
        total = torch.zeros(())
        for first in range(0, self.length, self.segment):
            last = min(self.length, first + self.segment)
            h, part = torch.utils.checkpoint.checkpoint(self.run_steps, h, first, last, ids, targets,
                                                        use_reentrant=False)
            total = total + part
        return total


def make_char_rnn(hidden, batch):
    def make(length, corpus):
        rng = SplitMix64(0x5EED0004)
        model = CharRnn(corpus.vocab_size, hidden, batch, length)
        params = init_parameters(rng, [
            (model.embed.weight, Uniform(1.0)), (model.w_h.weight, LinearDefault()),
            (model.w_h.bias, Constant(0.0)), (model.w_y.weight, LinearDefault()),
            (model.w_y.bias, Constant(0.0))])
        ids, targets = sample_batch(corpus, rng, batch, RNN_COLUMNS)
        columns = (torch.from_numpy(ids).view(batch, RNN_COLUMNS).t().contiguous(),
                   torch.from_numpy(targets).view(batch, RNN_COLUMNS).t().contiguous())
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                      weight_decay=0.01)
        return Setup(model, [columns] * K_BATCHES, optimizer, params)  # one sequence, every step
    make.recurrent = True
    return make


# ---- GradBench's lstm and gmm as tensor code (workloads/gradbench_tensor.h) ----
# The evals' inputs (workloads/gradbench.h: seeded doubles of GradBench's shapes), rounded to
# float32 once; the same function as the C++ tensor forms, in PyTorch's ops. The timed step is a
# gradient: zero_grad, the loss, backward; no update.

EVAL_SEED = 31337  # workloads/gradbench.h kEvalSeed
LSTM_LAYERS = 2
DEFAULT_CORPUS = "/usr/share/dict/words"  # workloads/data.h kDefaultCorpus: lstm reads it always


def eval_normals(rng, n):
    """workloads/gradbench.h normal_doubles: 12 uniforms summed in order, less 6."""
    u = rng.uniform_block(12 * n).reshape(n, 12)
    total = np.zeros(n)
    for j in range(12):
        total += u[:, j]
    return total - 6


def f32(values, *shape):
    return torch.from_numpy(np.asarray(values, dtype=np.float64).astype(np.float32)).view(*shape)


class LstmTensor(nn.Module):
    """ADBench's D-LSTM, 2 layers of diagonal cells over the corpus's first `chars` bytes, each
    byte its bits; the loss the mean log-likelihood of the next character's bits."""

    def __init__(self, chars):
        super().__init__()
        with open(DEFAULT_CORPUS, "rb") as f:
            text = np.frombuffer(f.read(chars), dtype=np.uint8)
        bits = math.ceil(math.log2(max(1, int(text.max()))))
        rng = SplitMix64(EVAL_SEED + 2)
        b, layers = bits, LSTM_LAYERS
        self.main = nn.Parameter(f32(rng.uniform_block(2 * layers * 4 * b), 2 * layers, 4 * b))
        self.extra = nn.Parameter(f32(rng.uniform_block(3 * b), 3, b))
        self.register_buffer("state", f32(rng.uniform_block(2 * layers * b), 2 * layers, b))
        sequence = ((text[:, None] >> np.arange(b - 1, -1, -1)) & 1).astype(np.float64)
        self.register_buffer("sequence", f32(sequence, chars, b))
        self.register_buffer("ones", self.sequence.sum(1))  # how many bits of each are 1
        self.chars, self.bits, self.layers = chars, b, layers

    # TorchScript: scripted, so that the loop over characters stays a loop (a trace unrolls it
    # into a graph of 40 ops a character, which its executor took minutes to optimise).
    scripted_loop = True

    def forward(self):
        b, layers = self.bits, self.layers
        w: List[List[torch.Tensor]] = []  # per layer: the 4 gates' weights, then their biases
        hidden: List[torch.Tensor] = []
        cell: List[torch.Tensor] = []
        for l in range(layers):
            parts: List[torch.Tensor] = []
            for r in range(2):
                for g in range(4):
                    parts.append(self.main[2 * l + r, g * b:(g + 1) * b])
            w.append(parts)
            hidden.append(self.state[2 * l])
            cell.append(self.state[2 * l + 1])
        in_weight, out_weight, out_bias = self.extra[0], self.extra[1], self.extra[2]
        total = torch.zeros(())
        for t in range(self.chars - 1):
            x = self.sequence[t] * in_weight
            for l in range(layers):
                inp = x if l == 0 else hidden[l - 1]
                g = w[l]
                forget = torch.sigmoid(inp * g[0] + g[4])
                ingate = torch.sigmoid(hidden[l] * g[1] + g[5])
                outgate = torch.sigmoid(inp * g[2] + g[6])
                change = torch.tanh(hidden[l] * g[3] + g[7])
                cell[l] = cell[l] * forget + ingate * change
                hidden[l] = outgate * torch.tanh(cell[l])
            ypred = hidden[layers - 1] * out_weight + out_bias
            lse = torch.log(torch.exp(ypred).sum() + 2)
            total = total + ((ypred * self.sequence[t + 1]).sum() - lse * self.ones[t + 1])
        return total * (-1.0 / ((self.chars - 1) * b))


class GmmTensor(nn.Module):
    """A Gaussian mixture's log-likelihood with a Wishart prior (ADBench's GMM): every point
    against every component as one product, X W^T - (Q_c mu_c) with each Q_c a block of W."""

    def __init__(self, d, k, n=1000, m=0, gamma=1.0):
        super().__init__()
        rng = SplitMix64(EVAL_SEED + 3)
        lsz = d * (d - 1) // 2
        self.register_buffer("x", f32(eval_normals(rng, n * d), n, d))
        self.alpha = nn.Parameter(f32(eval_normals(rng, k), k))
        self.mu = nn.Parameter(f32(rng.uniform_block(k * d), k, d))
        self.q = nn.Parameter(f32(eval_normals(rng, k * d), k, d))
        self.l = nn.Parameter(f32(eval_normals(rng, k * lsz), k, max(lsz, 1)))
        c, j, i = np.meshgrid(np.arange(k), np.arange(d), np.arange(d), indexing="ij")
        at = i * (2 * d - i - 1) // 2 + (j - i - 1)  # l lists Q's lower part column by column
        self.register_buffer("diagonal_index", torch.from_numpy((c * d + j).ravel()))
        self.register_buffer("lower_index", torch.from_numpy(np.where(i < j, c * lsz + at, 0).ravel()))
        self.register_buffer("mean_index", torch.from_numpy((c * d + i).ravel()))
        self.register_buffer("diagonal_mask", f32((i == j).ravel(), k * d, d))
        self.register_buffer("lower_mask", f32((i < j).ravel(), k * d, d))
        wn = d + m + 1
        log_gamma_d = 0.25 * d * (d - 1) * math.log(math.pi)
        for jj in range(1, d + 1):
            log_gamma_d += math.lgamma(0.5 * wn + 0.5 * (1 - jj))
        wishart = wn * d * (math.log(gamma) - 0.5 * math.log(2)) - log_gamma_d
        constant = -n * d * 0.5 * math.log(2 * math.pi) + k * wishart
        self.constant = float(np.float32(constant))
        self.prior_scale, self.m = float(np.float32(0.5 * gamma * gamma)), float(m)
        self.d, self.k, self.n = d, k, n

    def forward(self):
        d, k, n, kd = self.d, self.k, self.n, self.k * self.d
        qdiag = torch.exp(self.q)
        w = (qdiag.reshape(-1)[self.diagonal_index].view(kd, d) * self.diagonal_mask
             + self.l.reshape(-1)[self.lower_index].view(kd, d) * self.lower_mask)
        q_mu = (w * self.mu.reshape(-1)[self.mean_index].view(kd, d)).sum(1)
        centered = F.linear(self.x, w, -q_mu)                              # (n, k d)
        sqnorms = (centered * centered).view(n * k, d).sum(1).view(n, k)
        main = sqnorms * -0.5 + (self.alpha + self.q.sum(1))              # (n, k)
        err = torch.logsumexp(main, 1).sum() + torch.logsumexp(self.alpha, 0) * -n
        frobenius = (qdiag * qdiag).sum() + (self.l * self.l).sum()
        prior = frobenius * self.prior_scale + self.q.sum() * -self.m
        return err - prior + self.constant


def make_eval(model_of):
    def make(size, corpus):
        model = model_of(size)
        params = list(model.parameters())
        # zero_grad needs an optimizer; no step takes it (lr 0 all the same)
        return Setup(model, [()] * K_BATCHES, torch.optim.SGD(params, lr=0.0), params,
                     gradient_only=True)
    return make


# The workloads by their registry names: a ScalarGraph, or a model's make(size, corpus).
# Workloads of the registry with no Python version yet, and why: each is reported skipped with
# this reason, never dropped.
NOT_WRITTEN = {
    **{name: "not written for Python yet: PyTorch's way is tensor code, not 0-dim tensors"
       for name in ("lse", "llsq", "lstm", "gmm_d2", "gmm_d10", "ode", "det")},
}

# The rows of a batch that data parallel shards, for the models that have one (workloads/models.h's
# batch_rows); None: the workload cannot be sharded.
def batch_rows(workload, size):
    return {"char_mlp": CharMlp.BATCH, "mlp_width": MlpWidth.BATCH, "mini_gpt": size,
            "mini_gpt_wide": size}.get(workload)


WORKLOADS = {
    "empty": ScalarGraph(None, []),
    "tiny_graph": ScalarGraph(tiny_graph, [-41.0, 2.0]),
    "small_graph": ScalarGraph(small_graph, [-4.0, 2.0]),
    "scalar_chain": ScalarGraph(scalar_chain, [0.5, 0.9, 0.1], sized=True),
    "char_mlp": make_char_mlp,
    "mini_gpt": make_gpt(layers=6, heads=6, channels=24, context=8),
    "mini_gpt_wide": make_gpt(layers=4, heads=4, channels=128, context=64),
    "mlp_width": make_mlp_width,
    "char_rnn": make_char_rnn(hidden=64, batch=8),
    "char_rnn_wide": make_char_rnn(hidden=512, batch=32),
    "adamw": make_adamw,
    "lstm_tensor": make_eval(LstmTensor),
    "gmm_d2_tensor": make_eval(lambda k: GmmTensor(2, k)),
    "gmm_d10_tensor": make_eval(lambda k: GmmTensor(10, k)),
}
