"""Tasks generated on the fly, each with a fixed vocabulary.

Shape legend: ``b`` batch, ``s`` model sequence length, ``n`` task length (symbols per instance).

* ``copy``, ``reverse``, ``sort``, ``addition``: the decoder-only sequence-to-sequence tasks of
  Kazemnejad et al. 2023, "The Impact of Positional Encoding on Length Generalization in
  Transformers", section 4 — ``BOS x SEP y EOS``, loss on ``y EOS`` only. The length ``n`` is the
  number of input symbols (digits per operand for addition, whose sum is written least
  significant digit first, the order in which a left-to-right model can carry).
* ``binary-reverse``: an encoder labels position ``i`` of a bit string with bit ``n - 1 - i``
  (the "reverse string" task of Ruoss et al. 2023, "Randomized Positional Encodings Boost Length
  Generalization of Transformers", in its encoder-only form).
* ``word-order``: "tom bit a dog" against "a dog bit tom" (and passives, "a dog was bit by tom"):
  an encoder names the agent at the ``CLS`` position. Both orders use the same words, so a model
  that sees a bag of words is at chance (0.5).
* ``text`` (``pydoc_data.topics``, shipped with Python) and ``fortunes`` (Debian's ``fortunes``
  package, when installed): byte-level language modelling; ``text-mlm`` is the masked form (15 %
  of bytes replaced by ``MASK``) for encoders (Devlin et al. 2019, section 3.1).

Every ``sample`` draws from the ``torch.Generator`` it is given and nothing else, so a batch is a
function of (seed, step) alone — what makes resumed and distributed runs repeat exactly.
"""

from __future__ import annotations

import abc
import functools
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

__all__ = ["Batch", "Task", "TASKS", "get_task", "SYMBOLS", "IGNORE"]

IGNORE = -100  # target value that the loss and the metrics skip (torch's cross_entropy default)

_WORDS = (
    "tom",
    "ann",
    "bob",
    "sue",
    "dog",
    "cat",
    "man",
    "girl",
    "bit",
    "saw",
    "met",
    "chased",
    "helped",
    "was",
    "by",
    "a",
)
SYMBOLS: tuple[str, ...] = ("<pad>", "<bos>", "<sep>", "<eos>", "<cls>", *"0123456789", "+", *_WORDS)
_ID = {token: i for i, token in enumerate(SYMBOLS)}
PAD, BOS, SEP, EOS, CLS, DIGIT0, PLUS = (_ID[t] for t in ("<pad>", "<bos>", "<sep>", "<eos>", "<cls>", "0", "+"))
_AGENTS = ("tom", "ann", "bob", "sue", "dog", "cat", "man", "girl")
_VERBS = ("bit", "saw", "met", "chased", "helped")
BYTE_VOCAB = 257  # 256 bytes and MASK
MASK = 256


@dataclass(frozen=True)
class Batch:
    inputs: Tensor  # [b, s] token ids
    targets: Tensor  # [b, s] token ids, IGNORE where nothing is predicted

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.inputs.to(device), self.targets.to(device))


class Task(abc.ABC):
    """A generator of batches at a given length ``n``; subclasses define ``sample``."""

    name: str = ""
    vocab_size: int = len(SYMBOLS)
    causal: bool = True  # the model the task is posed for: decoder (True) or encoder (False)
    kind: str = "seq2seq"  # "seq2seq" (exact match over the answer), "lm" (loss per position), "classify"
    min_length: int = 1

    @abc.abstractmethod
    def sample(self, batch: int, length: int, generator: torch.Generator) -> Batch:
        """``batch`` instances of task length ``length``, drawn with ``generator``."""

    def sequence_length(self, length: int) -> int:
        """Model positions used by an instance of task length ``length``."""
        return self.sample(1, length, torch.Generator().manual_seed(0)).inputs.shape[1]

    def check_length(self, length: int) -> int:
        if isinstance(length, bool) or not isinstance(length, int) or length < self.min_length:
            raise ValueError(f"task {self.name!r} needs an integer length >= {self.min_length}, got {length!r}")
        return length


def _digits(batch: int, n: int, generator: torch.Generator) -> Tensor:
    return torch.randint(0, 10, (batch, n), generator=generator)  # [b, n] digit values


def _seq2seq(x: Tensor, y: Tensor) -> Batch:
    """``BOS x SEP y EOS`` as inputs (all but the last) and targets (the answer ``y EOS`` only)."""
    b = x.shape[0]
    col = lambda v: torch.full((b, 1), v, dtype=torch.long)  # noqa: E731 - [b, 1]
    full = torch.cat((col(BOS), x, col(SEP), y, col(EOS)), dim=1)  # [b, n + m + 3]
    inputs, targets = full[:, :-1], full[:, 1:].clone()  # [b, s], s = n + m + 2
    targets[:, : x.shape[1] + 1] = IGNORE  # nothing to predict before SEP's successor
    return Batch(inputs, targets)


class Copy(Task):
    name = "copy"

    def sample(self, batch: int, length: int, generator: torch.Generator) -> Batch:
        x = DIGIT0 + _digits(batch, self.check_length(length), generator)  # [b, n]
        return _seq2seq(x, self.answer(x))

    def answer(self, x: Tensor) -> Tensor:
        return x


class Reverse(Copy):
    name = "reverse"

    def answer(self, x: Tensor) -> Tensor:
        return x.flip(1)


class Sort(Copy):
    name = "sort"

    def answer(self, x: Tensor) -> Tensor:
        return x.sort(dim=1).values


class Addition(Task):
    name = "addition"

    def sample(self, batch: int, length: int, generator: torch.Generator) -> Batch:
        n = self.check_length(length)
        a, c = _digits(batch, n, generator), _digits(batch, n, generator)  # [b, n], most significant first
        place = 10 ** torch.arange(n - 1, -1, -1)  # [n]; n <= 18 keeps int64 exact
        if n > 18:
            raise ValueError(f"addition supports up to 18 digits per operand, got {n}")
        total = (a * place).sum(1) + (c * place).sum(1)  # [b]
        out_place = 10 ** torch.arange(n + 1)  # [n + 1], least significant first
        y = (total[:, None] // out_place) % 10  # [b, n + 1]
        x = torch.cat((DIGIT0 + a, torch.full((batch, 1), PLUS), DIGIT0 + c), dim=1)  # [b, 2n + 1]
        return _seq2seq(x, DIGIT0 + y)


class BinaryReverse(Task):
    name = "binary-reverse"
    causal = False

    def sample(self, batch: int, length: int, generator: torch.Generator) -> Batch:
        bits = torch.randint(0, 2, (batch, self.check_length(length)), generator=generator)  # [b, n]
        return Batch(DIGIT0 + bits, DIGIT0 + bits.flip(1))


class WordOrder(Task):
    """``CLS agent verb patient`` or ``CLS patient was verb by agent``; target at CLS: the agent."""

    name = "word-order"
    causal = False
    kind = "classify"
    min_length = 3

    def sample(self, batch: int, length: int, generator: torch.Generator) -> Batch:
        self.check_length(length)
        agents = torch.tensor([_ID[w] for w in _AGENTS])
        verbs = torch.tensor([_ID[w] for w in _VERBS])
        pick = torch.rand(batch, len(_AGENTS), generator=generator).argsort(dim=1)[:, :2]  # [b, 2] distinct
        agent, patient = agents[pick[:, 0]], agents[pick[:, 1]]  # [b]
        verb = verbs[torch.randint(0, len(_VERBS), (batch,), generator=generator)]  # [b]
        passive = torch.rand(batch, generator=generator) < 0.5  # [b]
        was, by = torch.full((batch,), _ID["was"]), torch.full((batch,), _ID["by"])
        pad = torch.full((batch,), PAD)
        cls = torch.full((batch,), CLS)
        active = torch.stack((cls, agent, verb, patient, pad, pad), dim=1)  # [b, 6]
        passive_rows = torch.stack((cls, patient, was, verb, by, agent), dim=1)  # [b, 6]
        inputs = torch.where(passive[:, None], passive_rows, active)  # [b, 6]
        targets = torch.full_like(inputs, IGNORE)
        targets[:, 0] = agent
        return Batch(inputs, targets)


@functools.lru_cache(maxsize=4)
def _corpus(name: str) -> Tensor:
    """The bytes of a shipped text ``[N]`` (uint8), read once."""
    if name == "text":
        from pydoc_data.topics import topics

        data = "\n\n".join(topics[key] for key in sorted(topics)).encode("utf-8")
    else:
        folder = Path(os.environ.get("POSENC_FORTUNES", "/usr/share/games/fortunes"))
        files = (
            sorted(p for p in folder.glob("*") if p.is_file() and p.suffix not in (".dat", ".u8"))
            if folder.is_dir()
            else []
        )
        if not files:
            raise ValueError(
                f"the fortunes task needs Debian's fortunes package (apt-get install fortunes); no files in {folder}"
            )
        data = b"\n".join(p.read_bytes() for p in files)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


class Text(Task):
    """Byte-level language modelling on windows of ``n`` bytes; the last 10 % of the text is held out."""

    name = "text"
    kind = "lm"
    vocab_size = BYTE_VOCAB
    corpus = "text"

    def split(self, held_out: bool) -> Tensor:
        data = _corpus(self.corpus)
        cut = int(0.9 * len(data))
        return data[cut:] if held_out else data[:cut]

    def windows(self, batch: int, length: int, generator: torch.Generator, held_out: bool) -> Tensor:
        data = self.split(held_out)
        if length + 1 > len(data):
            raise ValueError(f"windows of {length} bytes do not fit the {len(data)}-byte text")
        starts = torch.randint(0, len(data) - length, (batch,), generator=generator)  # [b]
        index = starts[:, None] + torch.arange(length + 1)  # [b, n + 1]
        return data[index].long()  # [b, n + 1]

    def sample(self, batch: int, length: int, generator: torch.Generator, held_out: bool = False) -> Batch:
        w = self.windows(batch, self.check_length(length), generator, held_out)  # [b, n + 1]
        return Batch(w[:, :-1], w[:, 1:])


class Fortunes(Text):
    name = "fortunes"
    corpus = "fortunes"


class TextMLM(Text):
    """Masked byte modelling for encoders: 15 % of the bytes become MASK and are predicted."""

    name = "text-mlm"
    causal = False

    def sample(self, batch: int, length: int, generator: torch.Generator, held_out: bool = False) -> Batch:
        w = self.windows(batch, self.check_length(length), generator, held_out)[:, :-1]  # [b, n]
        masked = torch.rand(w.shape, generator=generator) < 0.15  # [b, n]
        inputs = torch.where(masked, torch.full_like(w, MASK), w)
        targets = torch.where(masked, w, torch.full_like(w, IGNORE))
        return Batch(inputs, targets)


TASKS: dict[str, type[Task]] = {
    cls.name: cls for cls in (Copy, Reverse, Sort, Addition, BinaryReverse, WordOrder, Text, Fortunes, TextMLM)
}


def get_task(name: str) -> Task:
    """The task registered as ``name``; unknown names raise a ValueError listing the choices."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of: {', '.join(TASKS)}")
    return TASKS[name]()
